"""The fixed-budget view of one cell (one model size and one budget): the final metric at each
batch size and learning rate, the loss-optimal learning rate per batch size and the
loss-optimal batch size B_opt, each read between grid points and with a bootstrap interval.

- Per batch size, the learning rate with the lowest mean final metric over seeds (a cell
  counts only when every seed finished it without diverging), refined by the parabola in
  (log lr, log metric) through it and its two neighbours (scaling.analysis.parabola, as the
  steps view refines its best learning rate); at the grid's edge, or beside a diverged
  neighbour, the grid's own best is kept and said so.
- B_opt: the same parabola in (log B, log metric) through the per-batch-size optima; the
  learning rate there is the per-batch-size optimum interpolated linearly in log B.
- Intervals: with two or more seeds, by default the leave-one-seed-out jackknife (each
  replicate leaves one seed out of every cell, since the seeds share data order and
  initialisation across learning rates, and reads every optimum again), log x +- t(k-1) se;
  with 3 seeds it held 91-94% where a percentile bootstrap of whole seeds held 72-81%
  (tests/test_budget_intervals.py, optima off the grid). `analysis.interval: percentile`
  gives the bootstrap's 2.5 and 97.5 percentiles. With one seed, each draw adds noise to
  every point, log-normal with the spread the landscape itself shows: the rms residual of log
  metric about a quadratic in log lr through each batch size's best five points (percentiles;
  94-96% on a landscape exactly quadratic there, wide where it is not). The laws across
  cells always take the bootstrap's draws (scaling.analysis.laws resamples cells and, within
  each, its seeds).

Accuracy-like metrics (higher is better) are read as their error, 1 - accuracy, and reported
back in their own terms.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from scaling.analysis import intervals
from scaling.parabola import log_vertex
from scaling.analysis.table import varying_hyperparameters
from scaling.errors import ConfigError
from scaling.lr_curve import cell_means
from scaling.store import finite

NOISE_POINTS = 2  # the noise spread is read on the best point and this many either side
INTERVAL_DEFINITIONS = {
    "seeds": "2.5 and 97.5 percentiles over bootstrap draws of whole seeds",
    "jackknife": "log x +- t(k-1) se over the k leave-one-seed-out replicates, each reading "
                 "every optimum again",
    "noise": "2.5 and 97.5 percentiles over draws that add log-normal noise to every point, "
             "its spread the rms residual of log metric about a quadratic in log lr through "
             "each batch size's best five points (one seed per point; it held 94-96% on a "
             "landscape quadratic near its optima, and errs wide where misfit counts as noise)",
}


def lower_is_better(metric: str) -> bool:
    """Losses fall as training goes well; accuracies rise."""
    return "accuracy" not in metric


def final_value(record: dict, metric: str) -> float:
    """A run's last recorded `metric`; NaN for a diverged run or one that recorded none."""
    if record["summary"].get("status") == "diverged":
        return math.nan
    values = [row[metric] for row in record["metrics"] if finite(row.get(metric))]
    return float(values[-1]) if values else math.nan


@dataclass
class BudgetCurve:
    """One batch size: per grid learning rate (ascending) the final metric of each seed, read
    so that lower is better (seeds aligned across the cell; NaN: diverged or no such run)."""

    batch_size: int
    lrs: np.ndarray
    values: np.ndarray  # learning rates x seeds
    diverged: np.ndarray  # per learning rate: some seed diverged
    hyperparameters: dict


def _check_budget(records: list[dict]) -> None:
    """Refuse runs that stopped at a target before their budget: their last value is not the
    value at the budget."""
    early = [r["run_id"] for r in records if r["summary"].get("status") != "diverged"
             and r["config"].get("total_steps") and r["summary"].get("steps") is not None
             and r["summary"]["steps"] < r["config"]["total_steps"]]
    if early:
        raise ConfigError(f"analysis.view: {len(early)} runs stopped before their budget (e.g. "
                          f"{early[0]}, at a target); the fixed-budget view reads every run at "
                          "its budget: train with analysis.view fixed_budget or both")


def budget_curves(records: list[dict], metric: str) -> list[BudgetCurve]:
    """Per batch size its learning-rate curve; with optimizer scalars as grid axes, the
    combination holding the batch size's best cell."""
    _check_budget(records)
    sign = 1.0 if lower_is_better(metric) else -1.0
    seeds = sorted({int(r["config"]["seed"]) for r in records})
    axes = varying_hyperparameters(records)
    cells: dict[tuple, dict[float, dict[int, dict]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        cfg = r["config"]
        combo = tuple((k, cfg["optimizer"][k]) for k in axes)
        cells[int(cfg["batch_size"]), combo][float(cfg["learning_rate"])][int(cfg["seed"])] = r
    by_size: dict[int, list[BudgetCurve]] = defaultdict(list)
    for (size, combo), by_lr in sorted(cells.items()):
        lrs = sorted(by_lr)
        runs = [[by_lr[lr].get(s) for s in seeds] for lr in lrs]
        values = np.array([[math.nan if r is None else final_value(r, metric) for r in row]
                           for row in runs])
        values = values if sign > 0 else 1.0 - values
        diverged = np.array([any(r is not None and r["summary"].get("status") == "diverged"
                                 for r in row) for row in runs])
        by_size[size].append(BudgetCurve(size, np.array(lrs), values, diverged, dict(combo)))
    return [min(curves, key=_curve_best) for _, curves in sorted(by_size.items())]


def _curve_best(curve: BudgetCurve) -> float:
    means = cell_means(curve.values)
    return float(np.nanmin(means)) if np.any(np.isfinite(means)) else math.inf


# ---------------------------------------------------------------- optima, every draw at once


@dataclass
class Optima:
    """Optima of k draws: per batch size (k x batch sizes) and for the cell (k)."""

    lr: np.ndarray
    value: np.ndarray
    interpolated: np.ndarray
    best: np.ndarray
    batch_size: np.ndarray
    learning_rate: np.ndarray
    loss: np.ndarray
    batch_best: np.ndarray
    batch_interpolated: np.ndarray


def _refined(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Along the last axis of y: (x at the optimum, its value, whether interpolated, the grid
    index of the best); the grid's best where the parabola does not apply; NaN where no
    point is finite."""
    filled = np.where(np.isnan(y), np.inf, y)
    best = np.argmin(filled, axis=-1)
    grid_y = np.take_along_axis(y, best[..., None], -1)[..., 0]
    at, value, _ = log_vertex(x, y, best)
    ok = np.isfinite(at)
    at = np.where(ok, at, np.where(np.isfinite(grid_y), np.asarray(x)[best], np.nan))
    return at, np.where(ok, value, grid_y), ok, best


def _lr_at(sizes: np.ndarray, lr: np.ndarray, size: np.ndarray, best: np.ndarray) -> np.ndarray:
    """Each draw's per-batch-size optimal lr, linear in log B, at its B_opt (at the best
    batch size's own where a neighbour has none)."""
    if len(sizes) < 2:
        return lr[:, 0]
    log_b = np.log(sizes)
    lo = np.clip(np.searchsorted(log_b, np.log(size), side="right") - 1, 0, len(sizes) - 2)
    t = (np.log(size) - log_b[lo]) / (log_b[lo + 1] - log_b[lo])
    rows = np.arange(len(size))
    with np.errstate(divide="ignore", invalid="ignore"):
        mixed = np.exp((1 - t) * np.log(lr[rows, lo]) + t * np.log(lr[rows, lo + 1]))
    return np.where(np.isfinite(mixed), mixed, lr[rows, best])


def optima(curves: list[BudgetCurve], means: list[np.ndarray]) -> Optima:
    """The optima of k draws; means[j] holds batch size j's mean per learning rate, k x lrs."""
    per = [_refined(c.lrs, m) for c, m in zip(curves, means)]
    lr, value, interpolated, best = (np.stack([p[i] for p in per], axis=1) for i in range(4))
    sizes = np.array([c.batch_size for c in curves], float)
    size, loss, size_ok, size_best = _refined(sizes, value)
    return Optima(lr, value, interpolated, best, size, _lr_at(sizes, lr, size, size_best), loss,
                  size_best, size_ok)


# ---------------------------------------------------------------- bootstrap draws


def interval95(samples: np.ndarray) -> list[float] | None:
    """2.5 and 97.5 percentiles of the finite samples; None when there are none."""
    ok = np.asarray(samples, float)
    ok = ok[np.isfinite(ok)]
    return [float(v) for v in np.percentile(ok, [2.5, 97.5])] if ok.size else None


def noise_sigma(curves: list[BudgetCurve]) -> float | None:
    """The rms residual of log metric about a quadratic in log lr through each batch size's
    best point and NOISE_POINTS either side, pooled; None where no batch size has 4 such."""
    squares, dof = 0.0, 0
    for c in curves:
        v = c.values[:, 0]
        if not np.any(np.isfinite(v) & (v > 0)):
            continue
        best = int(np.nanargmin(np.where(v > 0, v, np.nan)))
        near = [i for i in range(best - NOISE_POINTS, best + NOISE_POINTS + 1)
                if 0 <= i < len(v) and np.isfinite(v[i]) and v[i] > 0]
        if len(near) < 4:
            continue
        x, y = np.log(c.lrs[near]), np.log(v[near])
        residual = y - np.polyval(np.polyfit(x, y, 2), x)
        squares, dof = squares + float(residual @ residual), dof + len(near) - 3
    return math.sqrt(squares / dof) if dof else None


def seed_count(curves: list[BudgetCurve]) -> int:
    """The seeds each cell of the curves holds."""
    return curves[0].values.shape[1] if curves else 0


def jackknife_means(curves: list[BudgetCurve]) -> tuple[list[np.ndarray], dict] | None:
    """Each batch size's mean per learning rate in the k leave-one-seed-out replicates (k x
    lrs), and their `interval` record; None with fewer than 2 seeds."""
    seeds = seed_count(curves)
    left = intervals.seed_draws(seeds, "jackknife", 0, None)
    if left is None:
        return None
    return ([cell_means(c.values[:, left]).T for c in curves],
            {**intervals.info("seeds", "jackknife", seeds),
             "definition": INTERVAL_DEFINITIONS["jackknife"]})


def draw_means(curves: list[BudgetCurve], num: int, rng: np.random.Generator
               ) -> tuple[list[np.ndarray] | None, dict]:
    """Each batch size's mean per learning rate in `num` bootstrap draws (None when none can be
    drawn), and the `interval` record of how they were drawn (scaling.analysis.intervals):
    whole seeds, or with one seed the landscape's own noise."""
    seeds = seed_count(curves)
    if num <= 0 or not curves:
        return None, intervals.none("not asked for (bootstrap 0)")
    if seeds >= 2:
        draws = rng.integers(0, seeds, (num, seeds))
        means = [cell_means(c.values[:, draws]).T for c in curves]
        return means, {**intervals.info("seeds", "percentile", num),
                       "definition": INTERVAL_DEFINITIONS["seeds"]}
    sigma = noise_sigma(curves)
    if sigma is None:
        return None, intervals.none("one seed, and too few points to read the landscape's noise")
    means = []
    for c in curves:
        v = c.values[:, 0]
        noise = np.exp(sigma * rng.standard_normal((num, len(v))))
        means.append(np.where(v > 0, v * noise, v))
    return means, {**intervals.info("landscape noise", "percentile", num), "sigma_log": sigma,
                   "definition": INTERVAL_DEFINITIONS["noise"]}
