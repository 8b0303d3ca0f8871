"""The steps to a target at a batch size's optimum learning rate, read between the rates tried.

The best rate tried needs more steps than the optimum, the more so the coarser the rates and
the narrower the valley (large batches near the stability edge), so S(B) read at the best
point is biased high, most at large B, and B_crit low. Near its minimum, log steps against log
learning rate is smooth: the parabola through the best cell and its two neighbours has its
minimum value at the optimum's steps to second order. `vertex` reads it, with its curvature
d^2 log steps / d (log lr)^2; where the best has no neighbour reached on each side (an edge, a
rate not reached, diverged or stopped as dominated) there is no bracket, and the best measured
point stands, saying why.

Seeds share data order across learning rates, so an interval resamples whole seeds and redoes
the choice of the best cell and the parabola on every replicate (`resampled`).
"""

from __future__ import annotations

import math

import numpy as np

from scaling.parabola import log_vertex
from scaling.analysis.selection import cell_means_many
from scaling.analysis.table import LRCurve
from scaling.formatting import interval, number


def vertex(lrs: list[float], steps: list[float]) -> tuple[float, float, float]:
    """(learning rate, steps, curvature) at the minimum of the parabola in (log lr, log steps)
    through three points, the middle with the fewest steps; curvature is d^2 log steps /
    d (log lr)^2. The minimum lies between the outer points and at or below the middle one;
    three equal steps give the middle point, curvature 0."""
    lr, value, curvature = log_vertex(np.asarray(lrs, float), np.asarray(steps, float), 1)
    if np.isnan(curvature):
        return float(lrs[1]), float(steps[1]), 0.0
    return float(lr), float(value), float(curvature)


def no_bracket(grid: LRCurve, best: int) -> str | None:
    """Why the best cell has no reached neighbour on each side (None: it has)."""
    if best == 0:
        return "best at the lowest rate tried"
    if best == len(grid.lrs) - 1:
        return "best at the highest rate tried"
    means, censored = grid.means(), grid.stack("censored")
    for j in (best - 1, best + 1):
        if math.isfinite(means[j]) and means[j] > 0:
            continue
        lr = f"neighbour {grid.lrs[j]:.4g}"
        if grid.diverged[j]:
            return f"{lr} diverged"
        if np.any(np.isfinite(censored[j])):
            return f"{lr} stopped as dominated (censored)"
        return f"{lr} not reached by every seed"
    return None


def entry(grid: LRCurve, best: int, measured: float) -> dict:
    """analysis.json's `optimum` of a point: the parabola's minimum where the best cell is
    bracketed, else the best measured point (`measured`, the selection's steps), with why; its
    interval (steps_ci, interval) is the caller's (scaling.analysis.points)."""
    why = no_bracket(grid, best) if measured > 0 else "target met at the start"
    if why is not None:
        return {"learning_rate": grid.lrs[best], "steps": measured, "steps_ci": None,
                "curvature": None, "bracketed": False, "why": why}
    idx = [best - 1, best, best + 1]
    lr, steps, curvature = vertex([grid.lrs[i] for i in idx], list(grid.means()[idx]))
    return {"learning_rate": lr, "steps": steps, "steps_ci": None, "curvature": curvature,
            "bracketed": True, "why": None}


def resampled(lrs: list[float], steps: np.ndarray, draws: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per bootstrap draw of whole seeds (rows of `draws`): the optimum's steps over one grid
    (cells x seeds `steps`), choosing the best cell afresh, and whether that draw's best was
    bracketed (else its value is the best cell's mean; NaN where no cell was reached)."""
    means = cell_means_many(np.asarray(steps, float), draws)  # cells x draws
    filled = np.where(np.isfinite(means) & (means > 0), means, np.inf)
    best = np.argmin(filled, axis=0)
    cols = np.arange(means.shape[1])
    value = filled[best, cols]
    _, y_star, _ = log_vertex(np.asarray(lrs, float), filled.T, best)
    bracketed = np.isfinite(y_star)
    out = np.where(bracketed, y_star, value)
    return np.where(np.isfinite(out), out, np.nan), bracketed


def describe(opt: dict | None) -> str:
    """An optimum for tables: '312 [300, 325] at lr 0.42' where bracketed, else why not."""
    if not opt:
        return "-"
    if not opt["bracketed"]:
        return f"no bracket: {opt['why']}"
    ci = f" {interval(opt['steps_ci'])}" if opt.get("steps_ci") else ""
    return f"{number(opt['steps'])}{ci} at lr {number(opt['learning_rate'])}"
