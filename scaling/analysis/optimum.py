"""The steps to a target at a batch size's optimum learning rate, read between the rates tried.

The best rate tried needs more steps than the optimum, the more so the coarser the rates and
the narrower the valley (large batches near the stability edge), so S(B) read at the best
point is biased high, most at large B, and B_crit low. Near its minimum, log steps against log
learning rate is smooth: the parabola through the best cell and its two neighbours has its
minimum value at the optimum's steps to second order. `vertex` reads it, with its curvature
d^2 log steps / d (log lr)^2; where the best has no neighbour reached on each side (an edge, a
rate not reached, diverged or stopped as dominated) there is no bracket, and the best measured
point stands, saying why.

Seeds share data order across learning rates, so the interval resamples whole seeds and redoes
the choice of the best cell and the parabola on every draw (`resampled`).
"""

from __future__ import annotations

import math

import numpy as np

from scaling.analysis.selection import cell_means_many
from scaling.analysis.table import LRCurve
from scaling.formatting import interval, number


def _parabola(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vertex (x, y) and second derivative of the parabola through the three rows of x, y
    (each shaped 3 x draws), the middle one lowest: a flat one gives the middle point."""
    f01 = (y[1] - y[0]) / (x[1] - x[0])
    f12 = (y[2] - y[1]) / (x[2] - x[1])
    a = (f12 - f01) / (x[2] - x[0])
    slope = f01 + a * (x[1] - x[0])  # the derivative at the middle point
    curved = a > 1e-12
    safe = np.where(curved, a, 1.0)
    x_star = np.where(curved, x[1] - slope / (2 * safe), x[1])
    y_star = np.where(curved, y[1] - slope**2 / (4 * safe), y[1])
    return x_star, y_star, 2 * np.where(curved, a, 0.0)


def vertex(lrs: list[float], steps: list[float]) -> tuple[float, float, float]:
    """(learning rate, steps, curvature) at the minimum of the parabola in (log lr, log steps)
    through three points, the middle with the fewest steps; curvature is d^2 log steps /
    d (log lr)^2. The minimum lies between the outer points and at or below the middle one."""
    x = np.log(np.asarray(lrs, float))[:, None]
    y = np.log(np.asarray(steps, float))[:, None]
    x_star, y_star, curvature = _parabola(x, y)
    return float(np.exp(x_star[0])), float(np.exp(y_star[0])), float(curvature[0])


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


def entry(grid: LRCurve, best: int, measured: float, per_draw: np.ndarray | None = None) -> dict:
    """analysis.json's `optimum` of a point: the parabola's minimum where the best cell is
    bracketed, else the best measured point (`measured`, the selection's steps), with why;
    steps_ci from `per_draw`, the estimate on each bootstrap draw (NaN: none that draw)."""
    why = no_bracket(grid, best) if measured > 0 else "target met at the start"
    kept = np.asarray([] if per_draw is None else per_draw, float)
    kept = kept[np.isfinite(kept)]
    ci = [float(v) for v in np.percentile(kept, [2.5, 97.5])] if kept.size else None
    if why is not None:
        return {"learning_rate": grid.lrs[best], "steps": measured, "steps_ci": ci,
                "curvature": None, "bracketed": False, "why": why}
    idx = [best - 1, best, best + 1]
    lr, steps, curvature = vertex([grid.lrs[i] for i in idx], list(grid.means()[idx]))
    return {"learning_rate": lr, "steps": steps, "steps_ci": ci, "curvature": curvature,
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
    inner = (best > 0) & (best < len(lrs) - 1)
    lo, hi = np.clip(best - 1, 0, None), np.clip(best + 1, None, len(lrs) - 1)
    y = np.log(np.stack([filled[lo, cols], value, filled[hi, cols]]))
    bracketed = inner & np.all(np.isfinite(y), axis=0)
    x = np.log(np.asarray(lrs, float))[np.stack([lo, best, hi])]
    x = np.where(bracketed, x, x[1] + np.array([[-1.0], [0.0], [1.0]]))  # no division by 0
    _, y_star, _ = _parabola(x, np.where(bracketed, y, 0.0))
    out = np.where(bracketed, np.exp(y_star), value)
    return np.where(np.isfinite(out), out, np.nan), bracketed


def describe(opt: dict | None) -> str:
    """An optimum for tables: '312 [300, 325] at lr 0.42' where bracketed, else why not."""
    if not opt:
        return "-"
    if not opt["bracketed"]:
        return f"no bracket: {opt['why']}"
    ci = f" {interval(opt['steps_ci'])}" if opt.get("steps_ci") else ""
    return f"{number(opt['steps'])}{ci} at lr {number(opt['learning_rate'])}"
