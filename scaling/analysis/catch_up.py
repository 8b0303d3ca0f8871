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
from typing import Any

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


def seed_catch_up(mine: list[dict], theirs: list[dict], start: int, metric: str,
                  tolerance: float = TOLERANCE) -> float | None:
    """Examples from `start` to the first of `mine`'s rows (examples >= start) whose metric is
    within `tolerance` of `theirs` at the same examples; None when it never is (or `theirs`
    does not span it)."""
    xs = np.array([r["examples"] for r in theirs if r.get(metric) is not None], float)
    ys = np.array([r[metric] for r in theirs if r.get(metric) is not None], float)
    keep = xs > 0
    xs, ys = np.log(xs[keep]), ys[keep]
    for row in mine:
        if row["examples"] < start or row.get(metric) is None or row["examples"] <= 0:
            continue
        at = math.log(row["examples"])
        if xs.size < 2 or not xs[0] <= at <= xs[-1]:
            continue
        reference = float(np.interp(at, xs, ys))
        if abs(row[metric] - reference) <= tolerance * abs(reference):
            return float(row["examples"] - start)
    return None


def _last(rows: list[dict], metric: str) -> float:
    """The examples of a run's last row that holds `metric` (0 without one)."""
    return max((r["examples"] for r in rows if r.get(metric) is not None), default=0)


def _why_none(paired: list[tuple[int, dict, dict]], per_seed: dict[str, float | None],
              final_batch: int, metric: str) -> str:
    """Why a schedule has no mean catch-up: a fixed run that stopped (its targets read) before
    the scheduled run's last evaluation cannot say whether it caught up, which is not the same
    as never catching up."""
    stopped = [(s, _last(f["metrics"], metric)) for s, r, f in paired if per_seed[str(s)] is None
               and _last(f["metrics"], metric) < _last(r["metrics"], metric)]
    if not stopped:
        return "some seed never caught up within the budget"
    return (f"not read at seed {', '.join(str(s) for s, _ in stopped)}: the fixed batch "
            f"{final_batch} run stopped at {', '.join(f'{int(n):,}' for _, n in stopped)} "
            "examples (its targets read), before the scheduled run caught up; "
            "train.stop_at_targets: false trains it to the budget")


def catch_up(scheduled: list[dict], fixed: list[dict], lr: float | None, final_batch: int,
             fixed_lr: float | None, metric: str) -> dict[str, Any] | None:
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
    paired = [(s, r, theirs[s]) for s, r in sorted(mine.items())
              if s in theirs and starts[s] is not None]
    per_seed = {str(s): seed_catch_up(r["metrics"], f["metrics"], starts[s], metric)
                for s, r, f in paired}
    values = [v for v in per_seed.values() if v is not None]
    both = len(values) == len(per_seed) and len(values) > 0
    mean = float(np.mean(values)) if both else None
    ci, record = None, intervals.none(intervals.ONE_SEED if len(per_seed) < 2 else
                                      _why_none(paired, per_seed, final_batch, metric))
    if both and len(values) >= 2:
        replicates = [float(np.mean(values[:i] + values[i + 1:])) for i in range(len(values))]
        ci = intervals.from_replicates(mean, replicates, "jackknife", len(values), log=False)
        record = intervals.info("seeds", "jackknife", len(values))
    return {**entry, "switch_examples": int(np.median([starts[int(s)] for s in per_seed])) if per_seed
            else None, "examples": mean, "examples_ci": ci, "per_seed": per_seed,
            "interval": record}
