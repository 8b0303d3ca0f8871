"""What the sweep's figures read from analysis.json (docs/results-format.md): each target's
points and fit, B_crit as a point or a bound, each (batch size, learning rate) cell's reading
over its seeds, and the units the axes name."""

from __future__ import annotations

from typing import Any

from scaling.analysis.intervals import IDENTIFIABLE
from scaling.store.rows import positive

REACHED = ("reached", "clipped")  # readings that count as steps to the target


def unit(analysis: dict) -> str:
    return (analysis.get("sweep") or {}).get("unit") or "examples"


def batch_label(analysis: dict) -> str:
    per = "sequences" if unit(analysis) == "tokens" else "examples"
    return f"batch size ({per} per step)"


def seeds(analysis: dict) -> int:
    return len((analysis.get("sweep") or {}).get("seeds") or [])


def mean_over_seeds(analysis: dict) -> str:
    """' (mean over 3 seeds)' for an axis label, or nothing with one seed."""
    k = seeds(analysis)
    return f" (mean over {k} seeds)" if k >= 2 else ""


def points(target: dict) -> list[dict]:
    """A target's points with usable steps and examples, in batch-size order."""
    pts = [p for p in target.get("points") or [] if positive(p.get("steps"))
           and positive(p.get("examples"))]
    return sorted(pts, key=lambda p: p["batch_size"])


def fit(target: dict) -> dict | None:
    found = target.get("fit")
    ok = found and positive(found.get("s_min")) and positive(found.get("e_min"))
    return found if ok else None


def targets_with_points(analysis: dict) -> list[tuple[dict, list[dict]]]:
    """(target, its best points) for every target some batch size reached."""
    targets = [(t, points(t)) for t in analysis.get("targets") or []]
    return [(t, pts) for t, pts in targets if pts]


def lr_target(analysis: dict) -> dict | None:
    rules = analysis.get("lr_rules") or {}
    name = rules.get("target") or analysis.get("primary_target")
    return next((t for t in analysis.get("targets") or [] if t.get("name") == name), None)


def b_crit_reading(fitted: dict) -> tuple[str | None, float | None]:
    """("point", B_crit) where the batch sizes fitted pin it, ("lower"|"upper", the edge)
    where it lies beyond them, (None, None) where it is not identified at all."""
    status = fitted.get("identification") or {"identified": True}
    if status.get("identified", True) and positive(fitted.get("b_crit")):
        return "point", fitted["b_crit"]
    if status.get("bound") in ("lower", "upper") and positive(status.get("at")):
        return status["bound"], status["at"]
    return None, None


def b_crit_bar(fitted: dict, at: float) -> dict[str, Any]:
    """errorbar's keywords for an identified B_crit's interval: an end the identification
    calls open (past IDENTIFIABLE x the batch sizes fitted) cut there with an arrow, as the
    report prints it ("[443, > 40,960]"); no bar without an interval."""
    ci = fitted.get("b_crit_ci")
    if not ci or not positive(ci[0]) or not positive(ci[1]):
        return {"yerr": None}
    status = fitted.get("identification") or {}
    low, high = status.get("range") or (None, None)
    opened = status.get("ci_open") or (False, False)
    lo = low / IDENTIFIABLE if opened[0] and low else ci[0]
    hi = high * IDENTIFIABLE if opened[1] and high else ci[1]
    return {"yerr": [[max(at - lo, 0)], [max(hi - at, 0)]], "uplims": bool(opened[0]),
            "lolims": bool(opened[1])}


def _reading(run: dict, target: str) -> str:
    """A run's reading of a target; older analysis.json files lack `reading`."""
    reading = (run.get("reading") or {}).get(target)
    if reading:
        return reading
    if (run.get("steps_to_target") or {}).get(target) is not None:
        return "reached"
    if run.get("status") == "diverged":
        return "diverged"
    return "censored" if (run.get("steps_censored") or {}).get(target) is not None \
        else "not_crossed"


def _cell(runs: list[dict], target: str) -> dict[str, Any]:
    """One cell over its seeds: reached (mean steps), dominated (the mean with bounds for
    the stopped seeds: a lower bound), diverged, or not reached."""
    readings = [_reading(r, target) for r in runs]
    values = [(r.get("steps_to_target") or {}).get(target) if k in REACHED
              else (r.get("steps_censored") or {}).get(target) for r, k in zip(runs, readings)]
    if all(k in REACHED for k in readings) and None not in values:
        return {"kind": "reached", "steps": sum(values) / len(values)}
    if "diverged" in readings:
        return {"kind": "diverged", "steps": None}
    if all(k in REACHED + ("censored",) for k in readings) and None not in values:
        return {"kind": "dominated", "steps": sum(values) / len(values)}
    return {"kind": "not_reached", "steps": None}


RANK = {"reached": 0, "dominated": 1, "not_reached": 2, "diverged": 3}


def cells(analysis: dict, target: str) -> dict[tuple[int, float], dict]:
    """(batch size, learning rate) -> the cell's reading over its seeds; with optimizer
    scalars as grid axes, their best combination."""
    groups: dict[tuple, list[dict]] = {}
    for r in analysis.get("runs") or []:
        combo = tuple(sorted((r.get("hyperparameters") or {}).items()))
        groups.setdefault((r["batch_size"], r["learning_rate"], combo), []).append(r)
    out: dict[tuple[int, float], dict] = {}
    for (size, lr, _), runs in groups.items():
        cell, old = _cell(runs, target), out.get((size, lr))
        key = (RANK[cell["kind"]], cell["steps"] or 0.0)
        if old is None or key < (RANK[old["kind"]], old["steps"] or 0.0):
            out[size, lr] = cell
    return out
