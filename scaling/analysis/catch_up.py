"""The catch-up after a batch-size schedule reaches its largest batch (Wang et al. 2026, "fast
catch-up"): how many examples after the switch its loss takes to come within a tolerance of
the run that trained at that batch size all along.

Seed by seed, the schedule's run at its chosen learning rate is set against the fixed run of
the same seed at the final batch size and that batch size's chosen rate: the fixed run's
metric is interpolated linearly in log examples at each of the schedule's evaluation points
from the switch on, and the catch-up is the examples from the switch to the first point where
the two differ by at most TOLERANCE of the fixed run's value (never: not within the
schedule's budget). Its interval is over seeds (the leave-one-seed-out jackknife of the
mean, or none with one seed).
"""

from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np

from scaling.analysis import intervals

TOLERANCE = 0.01  # relative difference of the metric taken as caught up


def switch_examples(path: list[list[int]]) -> int | None:
    """The examples at which a run's batch path reaches its final batch size ([step, examples,
    batch] per change); None for a path of one batch size."""
    if len(path) < 2:
        return None
    final = path[-1][2]
    first = next(i for i, p in enumerate(path) if p[2] == final)
    return int(path[first][1]) if first > 0 else None


def _pairs(mine: list[dict], theirs: list[dict], start: int, metric: str
           ) -> Iterator[tuple[float, float, float]]:
    """(examples, mine's metric, theirs interpolated linearly in log examples) at each of
    `mine`'s rows from `start` on that `theirs` spans."""
    xs = np.array([r["examples"] for r in theirs if r.get(metric) is not None], float)
    ys = np.array([r[metric] for r in theirs if r.get(metric) is not None], float)
    keep = xs > 0
    xs, ys = np.log(xs[keep]), ys[keep]
    for row in mine:
        if row["examples"] < start or row.get(metric) is None or row["examples"] <= 0:
            continue
        at = math.log(row["examples"])
        if xs.size >= 2 and xs[0] <= at <= xs[-1]:
            yield row["examples"], row[metric], float(np.interp(at, xs, ys))


def seed_catch_up(mine: list[dict], theirs: list[dict], start: int, metric: str,
                  tolerance: float = TOLERANCE) -> float | None:
    """Examples from `start` to the first of `mine`'s rows (examples >= start) whose metric is
    within `tolerance` of `theirs` at the same examples; None when it never is (or `theirs`
    does not span it)."""
    for x, value, reference in _pairs(mine, theirs, start, metric):
        if abs(value - reference) <= tolerance * abs(reference):
            return float(x - start)
    return None


def ahead(mine: list[dict], theirs: list[dict], start: int, metric: str,
          lower_is_better: bool) -> bool:
    """Whether `mine` is better than `theirs` at every point from `start` on: a ramp that got
    more from the same examples than the large batch did has nothing to catch up."""
    sides = [(value < reference) == lower_is_better
             for _, value, reference in _pairs(mine, theirs, start, metric)]
    return bool(sides) and all(sides)


def _last(rows: list[dict], metric: str) -> float:
    """The examples of a run's last row that holds `metric` (0 without one)."""
    return max((r["examples"] for r in rows if r.get(metric) is not None), default=0)


def _why_none(paired: list[tuple[int, dict, dict, int]], per_seed: dict[str, float | None],
              final_batch: int, metric: str, lower_is_better: bool) -> str:
    """Why a schedule has no mean catch-up, seed by seed: its fixed run stopped before its
    budget (its targets read, or dominated) more than 1% before the scheduled run ended, so it
    cannot say; the scheduled run stayed ahead of the fixed one; or it never came within the
    tolerance where both ran (a fixed run that ended at its budget is read to there)."""
    parts: dict[str, list[str]] = {"stopped": [], "ahead": [], "never": []}
    for s, r, f, start in paired:
        if per_seed[str(s)] is not None:
            continue
        stopped_at = _last(f["metrics"], metric)
        at_budget = (f.get("summary") or {}).get("status") == "budget_exhausted"
        if not at_budget and stopped_at < 0.99 * _last(r["metrics"], metric):
            parts["stopped"].append(f"{s} (at {int(stopped_at):,} examples)")
        elif ahead(r["metrics"], f["metrics"], start, metric, lower_is_better):
            parts["ahead"].append(str(s))
        else:
            parts["never"].append(str(s))
    text = {"stopped": f"the fixed batch {final_batch} run stopped before its budget and before "
                       "the scheduled run came within the tolerance (train.stop_at_targets: "
                       "false trains it to the budget) at seed",
            "ahead": f"stayed ahead of the fixed batch {final_batch} run ({metric} better at "
                     "every point after the switch: nothing to catch up) at seed",
            "never": "never came within the tolerance where both ran at seed"}
    return "; ".join(f"{text[k]} {', '.join(v)}" for k, v in parts.items() if v)


def catch_up(scheduled: list[dict], fixed: list[dict], lr: float | None, final_batch: int,
             fixed_lr: float | None, metric: str, lower_is_better: bool = True
             ) -> dict[str, Any] | None:
    """A schedule's `catch_up` entry, None where its runs never change batch size.
    `scheduled`: its run records; `fixed`: the sweep's fixed-batch records."""
    mine = {r["config"]["seed"]: r for r in scheduled if r["config"]["learning_rate"] == lr}
    starts = {s: switch_examples(r["summary"].get("batch_path") or []) for s, r in mine.items()}
    if lr is None or not any(v is not None for v in starts.values()):
        return None
    entry = {"metric": metric, "tolerance": TOLERANCE, "batch_size": final_batch,
             "learning_rate": lr, "fixed_learning_rate": fixed_lr}
    theirs = {r["config"]["seed"]: r for r in fixed if r["config"]["batch_size"] == final_batch
              and r["config"]["learning_rate"] == fixed_lr}
    if fixed_lr is None or not theirs:
        return {**entry, "switch_examples": None, "examples": None, "examples_ci": None,
                "per_seed": {}, "interval": intervals.none(
                    f"no fixed run at batch {final_batch} reached the target to set it against")}
    paired = [(s, r, theirs[s], starts[s]) for s, r in sorted(mine.items())
              if s in theirs and starts[s] is not None]
    per_seed = {str(s): seed_catch_up(r["metrics"], f["metrics"], start, metric)
                for s, r, f, start in paired}
    values = [v for v in per_seed.values() if v is not None]
    both = len(values) == len(per_seed) and len(values) > 0
    mean = float(np.mean(values)) if both else None
    why = (intervals.ONE_SEED if len(per_seed) < 2 else
           _why_none(paired, per_seed, final_batch, metric, lower_is_better))
    ci, record = None, intervals.none(why)
    if both and len(values) >= 2:
        replicates = [float(np.mean(values[:i] + values[i + 1:])) for i in range(len(values))]
        ci = intervals.from_replicates(mean, replicates, "jackknife", len(values), log=False)
        ci = ci and [max(0.0, ci[0]), ci[1]]  # a catch-up is never negative: no coverage lost
        record = intervals.info("seeds", "jackknife", len(values))
    return {**entry, "switch_examples": int(np.median([starts[int(s)] for s in per_seed])) if per_seed
            else None, "examples": mean, "examples_ci": ci, "per_seed": per_seed,
            "interval": record}
