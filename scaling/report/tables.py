"""Per-cell readings for the report and the heatmap: each (batch size, learning rate) cell's
mean steps over seeds, or why there are none (diverged, not reached, stopped as dominated:
censored, shown "> s" and never as a plain number); and the best-learning-rate tables with the
optimum between the rates tried beside the best measured point."""

from __future__ import annotations

from typing import Any

from scaling.analysis.contract import Analysis, Optimum, Run
from scaling.analysis.intervals import describe as interval_text
from scaling.analysis.optimum import describe
from scaling.analysis.sections import RuleEntry
from scaling.formatting import markdown_table, more_than, number
from scaling.store.rows import positive


def _cell(runs: list[Run], target: str) -> dict[str, Any]:
    """One cell over its seeds: steps (the mean where every seed reached), censored (a lower
    bound of the mean where the others reached and some were stopped as dominated)."""
    steps = [r["steps_to_target"].get(target) for r in runs]
    bounds = [r["steps_censored"].get(target) for r in runs]
    reached = all(positive(s) or s == 0 for s in steps) and all(s is not None for s in steps)
    known = [s if s is not None else b for s, b in zip(steps, bounds)]
    censored = not reached and any(b is not None for b in bounds) and None not in known
    return {"steps": sum(steps) / len(steps) if reached else None, "reached": reached,
            "diverged": any(r["status"] == "diverged" for r in runs),
            "censored": sum(known) / len(known) if censored else None}


def cells(analysis: Analysis, target: str) -> dict[tuple[int, float], dict]:
    """(batch size, LR) -> {'steps', 'reached', 'diverged', 'censored'} over analysis.json's
    runs; with optimizer scalars as grid axes, the cell shows their best combination."""
    groups: dict[tuple, list[Run]] = {}
    for r in analysis["runs"]:
        combo = tuple(sorted(r["hyperparameters"].items()))
        groups.setdefault((r["batch_size"], r["learning_rate"], combo), []).append(r)
    out: dict[tuple[int, float], dict] = {}
    for (size, lr, _), runs in groups.items():
        cell = _cell(runs, target)
        old = out.get((size, lr))
        better = cell["reached"] and (not old or not old["reached"] or cell["steps"] < old["steps"])
        if old is None or better:
            out[size, lr] = cell
    return out


def cell_text(cell: dict) -> str:
    """A cell for tables and the heatmap: its steps, '> s' (censored), diverged or '-'."""
    if cell["steps"] is not None:
        return number(cell["steps"])
    if cell["censored"] is not None:
        return more_than(cell["censored"])
    return "diverged" if cell["diverged"] else "not reached"


def steps_section(analysis: Analysis) -> list[str]:
    """Every cell of the primary target, one row per batch size (rates differ between batch
    sizes once a search has run)."""
    target = analysis["primary_target"]
    by_size: dict[int, list[str]] = {}
    for (size, lr), cell in sorted(cells(analysis, target).items() if target else []):
        by_size.setdefault(size, []).append(f"{lr:.4g}: {cell_text(cell)}")
    if not by_size:
        return []
    rows = [[size, "; ".join(texts)] for size, texts in sorted(by_size.items())]
    return [f"### Steps to {target} at every learning rate tried", "",
            "Mean over seeds; \"> s\": stopped as dominated before reaching the target, so "
            "more than s steps.", ""] + markdown_table(["batch", "learning rate: steps"], rows) \
        + [""]


def best_lr_section(analysis: Analysis) -> list[str]:
    """Per target, the best learning rate of each batch size, its measured steps, and the
    steps at the optimum between the rates tried (with their interval) that the fit uses."""
    lines = ["## Best learning rate per batch size", "",
             "\"at the optimum\": the minimum of a parabola in (log lr, log steps) through the "
             "best rate and its two neighbours, with its interval (named below each table); "
             "the trade-off fit uses it, or the best measured point where the best has no neighbour reached "
             "on each side.", ""]
    for t in analysis["targets"]:
        first = t["first_crossing"]["steps"]
        rows = [[p["batch_size"], p["best_lr"], p["at_edge"] or "-", p["steps"],
                 describe(p["optimum"]), _curvature(p["optimum"]), p["steps_min"],
                 first.get(str(p["batch_size"])), p["examples"],
                 f"{p['num_reached']}/{p['num_lrs']}", p["num_diverged"],
                 p["num_censored"], p["b_simple"]]
                for p in sorted(t["points"], key=lambda p: p["batch_size"])]
        lines += [f"### {t['name']}", ""]
        if rows:
            lines += markdown_table(["batch", "best LR tried", "at edge", "steps",
                                     "at the optimum", "curvature", "fewest mean steps",
                                     "first crossing", "examples", "LRs reached/tried",
                                     "diverged", "stopped", "B_simple"], rows)
            kinds = sorted({interval_text(p["optimum"]["interval"])
                            for p in t["points"] if p["optimum"]})
            lines += ["", f"Intervals at the optimum: {', '.join(kinds)}."] if kinds else []
        else:
            lines.append("No batch size reached this target.")
        lines.append("")
    return lines + steps_section(analysis)


def _curvature(opt: Optimum | None) -> str:
    return number(opt["curvature"]) if opt and opt["curvature"] is not None else "-"


def _censored_text(rule: RuleEntry, key: str) -> str:
    """A rule's `key`: a number, '> x' where it falls on runs stopped as dominated, or '-'."""
    if rule[key] is not None:
        return number(rule[key])
    if rule[f"{key}_censored"] is not None:
        return more_than(rule[f"{key}_censored"])
    return "-"


def relative_cost(rule: RuleEntry) -> str:
    """A rule's relative cost in steps (censored where it falls on a stopped run)."""
    return _censored_text(rule, "relative_cost")


def steps_text(rule: RuleEntry) -> str:
    """The steps at a rule's learning rate (censored where it falls on a stopped run)."""
    return _censored_text(rule, "steps")
