"""Runs as the analysis reads them: one entry per run with its steps, examples and noise scales
at each target, and per batch size the learning-rate curves (LRCurve) those entries make.

Each run's steps to a target are read one of these ways (`reading` per target, READINGS):
reached under the sweep's rule; clipped (the rule's window cut at the run's end, where the
budget left no room for it and no reading extension ran: read, and flagged); unconfirmed
(crossed, but the window did not close within the run: not counted); censored (stopped as
dominated before reaching it: more than `steps_censored`, never a plain number); not_crossed;
diverged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from scaling.analysis.curves import recorded, windowed_b_noise, windowed_b_simple
from scaling.config import AXES
from scaling.config.targets import (FIRST, Reach, crossing_in, on_examples, parse_target, series,
                                    step_at_examples, undecided_bound)
from scaling.lr_curve import Curve, cell_means
from scaling.store import examples_at

READINGS = ("reached", "clipped", "unconfirmed", "censored", "not_crossed", "diverged")
WINDOWED = ("sustained", "smoothed")  # the rules that read past the crossing


@dataclass
class LRCurve:
    """One batch size at one target and one combination of the optimizer scalars that are grid
    axes: per grid LR (ascending), the per-seed values, seeds aligned across every grid of the
    batch size (NaN: not reached, or no such run)."""

    lrs: list[float] = field(default_factory=list)
    steps: list[np.ndarray] = field(default_factory=list)
    examples: list[np.ndarray] = field(default_factory=list)
    b_simple: list[np.ndarray] = field(default_factory=list)
    b_noise: list[np.ndarray] = field(default_factory=list)
    b_simple_precond: list[np.ndarray] = field(default_factory=list)
    diverged: list[bool] = field(default_factory=list)
    hyperparameters: dict[str, float] = field(default_factory=dict)  # list-valued axes only
    censored: list[np.ndarray] = field(default_factory=list)  # steps are more than this; NaN

    absent: list[np.ndarray] = field(default_factory=list)  # 1 where no such run
    seeds: list[int] = field(default_factory=list)  # the seed of each column, ascending

    def means(self) -> np.ndarray:
        """Mean steps over seeds per LR; NaN unless every seed reached the target."""
        return cell_means(self.stack("steps"))

    def stack(self, name: str) -> np.ndarray:
        """One of the per-LR fields as an array, LRs x seeds; a field left empty (not measured)
        reads as NaN in the shape of steps."""
        values = getattr(self, name)
        if not values and name != "steps":
            return np.full_like(self.stack("steps"), np.nan)
        return np.array(values, float).reshape(len(self.lrs), -1)

    def floors(self) -> np.ndarray:
        """Each run's lower bound of its steps, LRs x seeds: its steps where reached, its
        censored bound where stopped as dominated, NaN where there is no such run, else
        infinite (diverged, or ended without reaching it)."""
        steps, censored = self.stack("steps"), self.stack("censored")
        known = np.where(np.isfinite(steps), steps, np.where(np.isfinite(censored), censored,
                                                              np.inf))
        return np.where(self.stack("absent") > 0, np.nan, known)

    def curve(self) -> Curve:
        """The learning-rate curve the search reads too (scaling.lr_curve): cells, best, bracket."""
        return Curve.of_cells(self.lrs, list(self.stack("steps")), list(self.floors()),
                              self.diverged)

    def bounds(self) -> np.ndarray:
        """Per LR with a censored seed and every other seed reached, the curve's lower bound of
        its mean steps (censored seeds at their bound); NaN elsewhere."""
        curve = self.curve()
        return np.where(np.isfinite(curve.means) | ~np.isfinite(curve.bounds), np.nan,
                        curve.bounds)


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def varying_hyperparameters(records: list[dict]) -> list[str]:
    """Optimizer scalars (config.AXES) that take more than one value across the runs, other
    than those a rule of the optimizer set (b2_rule, weight_decay_rule: one value per batch
    size and learning rate, not a grid axis)."""
    values: dict[str, set] = {k: set() for k in AXES}
    ruled = set()
    for rec in records:
        optimizer = rec["config"].get("optimizer") or {}
        for key in AXES:
            values[key].add(optimizer.get(key))
            if optimizer.get(f"{key}_rule"):
                ruled.add(key)
    return [k for k in AXES if len(values[k]) > 1 and k not in ruled]


def drawn(rows: list[dict], column: str, kept: dict[str, tuple[np.ndarray, np.ndarray]]
          ) -> tuple[np.ndarray, np.ndarray]:
    """`column`'s series of a run's rows, drawn once into `kept`: a run is read at every
    target, by its rule and at its first crossing, from the same few columns."""
    if column not in kept:
        kept[column] = series(rows, column)
    return kept[column]


def read_steps(rows: list[dict], target: str, reach: Reach, status: str | None,
               clip: bool, kept: dict | None = None) -> tuple[float | None, str, float | None]:
    """(steps, how they were read (READINGS), the censored bound) of one run at one target.
    `clip`: read a window the run ended inside (no reading extension ran) cut at its end;
    `kept`: the run's series drawn so far (`drawn`)."""
    if status == "diverged":
        return None, "diverged", None
    parsed = parse_target(target)
    column = drawn(rows, reach.column(parsed[0]), {} if kept is None else kept)
    step = crossing_in(*column, parsed, reach)
    if step is not None:
        return step, "reached", None
    if status == "dominated":
        return None, "censored", undecided_bound(column[0], reach)
    late = crossing_in(*column, parsed, reach, clip=True) if reach.rule in WINDOWED else None
    if late is None:
        return None, "not_crossed", None
    return (late, "clipped", None) if clip else (None, "unconfirmed", None)


def read_scheduled(rows: list[dict], target: str, reach: Reach, status: str | None,
                   clip: bool) -> tuple[float | None, str, float | None, float | None]:
    """(steps, how read, censored bound in steps, examples) of a run whose batch size changes:
    read along its examples (config.targets.on_examples), the steps at the examples read."""
    x, how, bound = read_steps(on_examples(rows), target, reach, status, clip)
    return step_at_examples(rows, x), how, step_at_examples(rows, bound), x


def run_table(records: list[dict], targets: list[str], reach: Reach = FIRST,
              clip: bool = False) -> list[dict]:
    """One entry per run: identity, status and the interpolated steps/examples/noise per target
    under `reach` (how each was read, and the bound of a censored one), and the first crossing
    beside it. `clip`: see read_steps."""
    table, axes = [], varying_hyperparameters(records)
    for rec in records:
        cfg, rows, kept = rec["config"], rec["metrics"], {}
        entry = {"run_id": rec["run_id"], "batch_size": int(cfg["batch_size"]),
                 "learning_rate": float(cfg["learning_rate"]), "seed": int(cfg["seed"]),
                 "hyperparameters": {k: cfg["optimizer"][k] for k in axes},
                 "status": rec["summary"].get("status"), "steps_to_target": {},
                 "steps_censored": {}, "reading": {}, "examples_to_target": {},
                 "b_simple": {}, "b_noise": {}, "b_simple_precond": {}, "first_crossing": {}}
        for name in targets:
            if cfg.get("batch_schedule"):
                step, how, bound, examples = read_scheduled(rows, name, reach, entry["status"], clip)
            else:
                step, how, bound = read_steps(rows, name, reach, entry["status"], clip, kept)
                examples = None if step is None else examples_at(rows, step, entry["batch_size"])
            entry["steps_to_target"][name], entry["reading"][name] = step, how
            entry["steps_censored"][name] = bound
            parsed = parse_target(name)
            entry["first_crossing"][name] = (None if how == "diverged" else crossing_in(
                *drawn(rows, FIRST.column(parsed[0]), kept), parsed, FIRST))
            entry["examples_to_target"][name] = examples
        _noise_at_crossings(entry, rows)
        table.append(entry)
    return table


def _noise_at_crossings(entry: dict, rows: list[dict]) -> None:
    """B_simple, B_noise and Adam's B_simple at each target's crossing (None where not reached
    or not measured), every crossing of the run read in one pass over its rows per column.
    Adam's is its recorded moving average: no per-interval sums are recorded for it."""
    reached = {n: s for n, s in entry["steps_to_target"].items() if s is not None}
    for key, read in (("b_simple", windowed_b_simple), ("b_noise", windowed_b_noise),
                      ("b_simple_precond", lambda r, at: recorded(r, at, "b_simple_precond"))):
        values = dict(zip(reached, read(rows, list(reached.values())))) if reached else {}
        entry[key] = {n: None if math.isnan(values.get(n, math.nan)) else float(values[n])
                      for n in entry["steps_to_target"]}


def unreached_reason(table: list[dict], target: str, batch_size: int) -> str:
    """Why no learning rate of a batch size was reached by every seed: unconfirmed (some run
    crossed, but its reading window did not close within the run), dominated (some run was
    stopped as dominated before reaching it) or not_crossed."""
    how = {r["reading"][target] for r in table if r["batch_size"] == batch_size}
    return "unconfirmed" if "unconfirmed" in how else "dominated" if "censored" in how \
        else "not_crossed"


def lr_curves(table: list[dict], target: str, key: str = "steps_to_target"
              ) -> dict[int, list[LRCurve]]:
    """Per batch size, one LRCurve per combination of the optimizer scalars that are grid axes (a
    single one without such axes): the runs by learning rate, seeds aligned, for one target.
    `key` names the steps to read: steps_to_target (the sweep's rule) or first_crossing; with
    first_crossing, examples and noise scales are not read."""
    cells: dict[int, dict[tuple, dict[float, dict[int, dict]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict)))
    for run in table:
        combo = tuple(sorted(run["hyperparameters"].items()))
        cells[run["batch_size"]][combo][run["learning_rate"]][run["seed"]] = run
    out = {}
    for size, combos in sorted(cells.items()):
        seeds = sorted({s for by_lr in combos.values() for runs in by_lr.values() for s in runs})
        out[size] = [_lr_curve(by_lr, dict(combo), target, seeds, key)
                     for combo, by_lr in sorted(combos.items())]
    return out


def _lr_curve(by_lr: dict[float, dict[int, dict]], hyperparameters: dict, target: str,
          seeds: list[int], key: str) -> LRCurve:
    grid = LRCurve(hyperparameters=hyperparameters, seeds=list(seeds))
    own = key == "steps_to_target"
    for lr in sorted(by_lr):
        runs = [by_lr[lr].get(seed) for seed in seeds]
        read = lambda field, ok=True: np.array(
            [_nan(r[field][target]) if r is not None and ok else math.nan for r in runs])
        grid.lrs.append(lr)
        grid.steps.append(read(key))
        grid.examples.append(read("examples_to_target", own))
        grid.b_simple.append(read("b_simple", own))
        grid.b_noise.append(read("b_noise", own))
        grid.b_simple_precond.append(read("b_simple_precond", own))
        grid.diverged.append(any(r is not None and r["status"] == "diverged" for r in runs))
        grid.censored.append(read("steps_censored", own))
        grid.absent.append(np.array([r is None for r in runs], float))
    return grid




UNREACHED_TEXT = {
    "not_crossed": "never crossed at any learning rate within the budget",
    "unconfirmed": "crossed, but the reading could not be confirmed within the budget (its "
                   "window ran past it)",
    "dominated": "runs stopped as dominated before reaching it",
}


def unreached_lines(target: dict) -> list[str]:
    """The "not reached" lines of an analysis.json target, one per reason."""
    reasons = target.get("unreached_reasons") or {}
    by_why: dict[str, list[str]] = defaultdict(list)
    for size in target.get("unreached_batch_sizes") or []:
        by_why[reasons.get(str(size), "not_crossed")].append(str(size))
    return [f"not reached at B = {', '.join(sizes)}: {UNREACHED_TEXT[why]}"
            for why, sizes in by_why.items()]
