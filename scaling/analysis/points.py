"""Each batch size's point at one target: its learning rate, its steps and the optimum between
the rates tried, read as the selection says (scaling.analysis.selection), and the same on any
subset of whole seeds, which every interval's replicates redo (scaling.analysis.intervals).
"""

from __future__ import annotations

import math

import numpy as np

from scaling.analysis import intervals, optimum
from scaling.analysis.optima import refine_lr
from scaling.analysis.selection import Choice, choose, resampled_steps
from scaling.analysis.table import LRCurve


def select(size_grids: list[LRCurve], how: str) -> tuple[Choice, LRCurve, int] | None:
    """The selection over every cell of a batch size: (choice over the stacked cells, the grid
    holding the best cell, that cell's LR index); None when no cell was reached by every seed."""
    labels = [(g, i) for g, grid in enumerate(size_grids) for i in range(len(grid.lrs))]
    choice = choose(stacked(size_grids, "steps"), how)
    if choice is None:
        return None
    g, i = labels[choice.best]
    return choice, size_grids[g], i


def stacked(size_grids: list[LRCurve], name: str) -> np.ndarray:
    """A field of every cell of a batch size, cells x seeds."""
    return np.concatenate([grid.stack(name) for grid in size_grids])


def num_seeds(size_grids: list[LRCurve]) -> int:
    """The seed columns of a batch size's cells."""
    return int(stacked(size_grids, "steps").shape[1])


def best_point(size: int, size_grids: list[LRCurve], how: str = "min", bootstrap: int = 0,
               rng: np.random.Generator | None = None, read_optimum: bool = True,
               method: str = intervals.DEFAULT_METHOD) -> dict | None:
    """The analysis.json point for one batch size, None when no LR reached the target.

    best_lr is the cell with the fewest mean steps; steps, examples and the noise scales are
    read as the selection `how` says; steps_min is that fewest mean and steps_crossfit the
    cross-fitted steps (None with one seed), whatever `how` is, so the winner's curse left in
    `min` can be read off. `optimum` (read_optimum): the steps at the optimum between the rates
    tried (scaling.analysis.optimum), its interval over seeds by `method` (`bootstrap` draws
    for percentile; none when bootstrap is 0).
    """
    picked = select(size_grids, how)
    if picked is None:
        return None
    choice, grid, best = picked
    means, lrs = grid.means(), np.array(grid.lrs)
    edge = "low" if best == 0 else "high" if best == len(lrs) - 1 else None
    read = lambda name: _finite_or_none(choice.mean(stacked(size_grids, name)))
    steps = stacked(size_grids, "steps")
    crossfit = choose(steps, "crossfit") if steps.shape[1] > 1 else None
    bounds = np.concatenate([g.bounds() for g in size_grids])
    point = {"batch_size": size, "best_lr": float(lrs[best]),
             "hyperparameters": grid.hyperparameters,
             "refined_lr": refine_lr(lrs, means, best), "at_edge": edge,
             "steps": read("steps"), "steps_min": choice.naive,
             "steps_crossfit": crossfit and crossfit.mean(steps), "examples": read("examples"),
             "num_lrs": len(lrs),
             "num_reached": int(np.sum(np.isfinite(means))),
             "num_diverged": int(sum(grid.diverged)),
             "num_censored": int(np.sum(np.isfinite(bounds))),
             "censored_below_best": bool(np.any(bounds < choice.naive)),
             "b_simple": read("b_simple"), "b_noise": read("b_noise"),
             "b_simple_precond": read("b_simple_precond")}
    if read_optimum:
        point["optimum"] = _optimum(size_grids, grid, best, point["steps"], how,
                                    bootstrap, rng, method)
    return point


def _optimum(size_grids: list[LRCurve], grid: LRCurve, best: int, measured: float, how: str,
             bootstrap: int, rng: np.random.Generator | None, method: str) -> dict:
    """A point's `optimum` with its interval over seeds (none with one seed or bootstrap 0)."""
    entry = optimum.entry(grid, best, measured)
    k = num_seeds(size_grids)
    draws = (intervals.seed_draws(k, method, bootstrap, rng or np.random.default_rng(0))
             if bootstrap > 0 else None)
    if draws is None:
        entry["interval"] = intervals.none(intervals.ONE_SEED if k < 2 else "not asked for")
        return entry
    entry["steps_ci"] = intervals.from_replicates(entry["steps"], draw_steps(size_grids, how, draws),
                                                  method, k)
    entry["interval"] = intervals.info("seeds", method, len(draws))
    return entry


def draw_steps(size_grids: list[LRCurve], how: str, draws: np.ndarray) -> np.ndarray:
    """A batch size's steps on each replicate's seeds (rows of `draws`): the optimum of the
    grid holding the best cell where that replicate's best is bracketed, else the selection's."""
    grid = select(size_grids, how)[1]
    values, bracketed = optimum.resampled(grid.lrs, grid.stack("steps"), draws)
    return np.where(bracketed, values, resampled_steps(stacked(size_grids, "steps"), how, draws))


def fit_steps(point: dict) -> float:
    """The steps a point contributes to the S(B) fit: its optimum's where read, else its own."""
    return point["optimum"]["steps"] if point.get("optimum") else point["steps"]


def median_positive(values: list[float | None]) -> float | None:
    """Median of the positive values, None when there are none: one batch size's estimate can be
    far off (a few noisy measurements near its crossing) without moving the summary."""
    kept = [v for v in values if v is not None and v > 0]
    return float(np.median(kept)) if kept else None


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
