"""What the sweep's figures read from analysis.json (docs/results-format.md): each target's
points and fit, B_crit as a point or a bound, each (batch size, learning rate) cell's reading
over its seeds, and the units the axes name."""

from __future__ import annotations

from typing import Any

from scaling.analysis.contract import Analysis, Fit, Point, Run, Target
from scaling.analysis.intervals import IDENTIFIABLE
from scaling.store.rows import positive

REACHED = ("reached", "clipped")  # readings that count as steps to the target


def unit(analysis: Analysis) -> str:
    return analysis["sweep"]["unit"] or "examples"


def batch_label(analysis: Analysis) -> str:
    per = "sequences" if unit(analysis) == "tokens" else "examples"
    return f"batch size ({per} per step)"


def seeds(analysis: Analysis) -> int:
    return len(analysis["sweep"]["seeds"])


def mean_over_seeds(analysis: Analysis) -> str:
    """' (mean over 3 seeds)' for an axis label, or nothing with one seed."""
    k = seeds(analysis)
    return f" (mean over {k} seeds)" if k >= 2 else ""


def points(target: Target) -> list[Point]:
    """A target's points with usable steps and examples, in batch-size order."""
    pts = [p for p in target["points"] if positive(p["steps"]) and positive(p["examples"])]
    return sorted(pts, key=lambda p: p["batch_size"])


def fit(target: Target) -> Fit | None:
    found = target["fit"]
    ok = found and positive(found["s_min"]) and positive(found["e_min"])
    return found if ok else None


def targets_with_points(analysis: Analysis) -> list[tuple[Target, list[Point]]]:
    """(target, its best points) for every target some batch size reached."""
    targets = [(t, points(t)) for t in analysis["targets"]]
    return [(t, pts) for t, pts in targets if pts]


def lr_target(analysis: Analysis) -> Target | None:
    rules = analysis["lr_rules"]
    name = (rules and rules["target"]) or analysis["primary_target"]
    return next((t for t in analysis["targets"] if t["name"] == name), None)


def b_crit_reading(fitted: Fit) -> tuple[str | None, float | None]:
    """("point", B_crit) where the batch sizes fitted pin it, ("lower"|"upper", the edge)
    where it lies beyond them, (None, None) where it is not identified at all (a fit from
    before identifications counts as pinned)."""
    status = fitted["identification"]
    if (not status or status["identified"]) and positive(fitted["b_crit"]):
        return "point", fitted["b_crit"]
    if status and status["bound"] in ("lower", "upper") and positive(status["at"]):
        return status["bound"], status["at"]
    return None, None


def b_crit_bar(fitted: Fit, at: float) -> dict[str, Any]:
    """errorbar's keywords for an identified B_crit's interval: an end the identification
    calls open (past IDENTIFIABLE x the batch sizes fitted) cut there with an arrow, as the
    report prints it ("[443, > 40,960]"); no bar without an interval."""
    ci, status = fitted["b_crit_ci"], fitted["identification"]
    if not ci or not positive(ci[0]) or not positive(ci[1]):
        return {"yerr": None}
    low, high = (status and status["range"]) or (None, None)
    opened = (status and status["ci_open"]) or (False, False)
    lo = low / IDENTIFIABLE if opened[0] and low else ci[0]
    hi = high * IDENTIFIABLE if opened[1] and high else ci[1]
    return {"yerr": [[max(at - lo, 0)], [max(hi - at, 0)]], "uplims": bool(opened[0]),
            "lolims": bool(opened[1])}


def _reading(run: Run, target: str) -> str:
    """A run's reading of a target; older analysis.json files lack `reading` (read as empty)."""
    reading = run["reading"].get(target)
    if reading:
        return reading
    if run["steps_to_target"].get(target) is not None:
        return "reached"
    if run["status"] == "diverged":
        return "diverged"
    return "censored" if run["steps_censored"].get(target) is not None else "not_crossed"


def _cell(runs: list[Run], target: str) -> dict[str, Any]:
    """One cell over its seeds: reached (mean steps), dominated (the mean with bounds for
    the stopped seeds: a lower bound), diverged, or not reached."""
    readings = [_reading(r, target) for r in runs]
    values = [r["steps_to_target"].get(target) if k in REACHED
              else r["steps_censored"].get(target) for r, k in zip(runs, readings)]
    if all(k in REACHED for k in readings) and None not in values:
        return {"kind": "reached", "steps": sum(values) / len(values)}
    if "diverged" in readings:
        return {"kind": "diverged", "steps": None}
    if all(k in REACHED + ("censored",) for k in readings) and None not in values:
        return {"kind": "dominated", "steps": sum(values) / len(values)}
    return {"kind": "not_reached", "steps": None}


RANK = {"reached": 0, "dominated": 1, "not_reached": 2, "diverged": 3}


def cells(analysis: Analysis, target: str) -> dict[tuple[int, float], dict]:
    """(batch size, learning rate) -> the cell's reading over its seeds; with optimizer
    scalars as grid axes, their best combination."""
    groups: dict[tuple, list[Run]] = {}
    for r in analysis["runs"]:
        combo = tuple(sorted(r["hyperparameters"].items()))
        groups.setdefault((r["batch_size"], r["learning_rate"], combo), []).append(r)
    out: dict[tuple[int, float], dict] = {}
    for (size, lr, _), runs in groups.items():
        cell, old = _cell(runs, target), out.get((size, lr))
        key = (RANK[cell["kind"]], cell["steps"] or 0.0)
        if old is None or key < (RANK[old["kind"]], old["steps"] or 0.0):
            out[size, lr] = cell
    return out
