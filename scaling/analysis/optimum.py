"""The steps to a target at a batch size's optimum learning rate, read between the rates tried.

The best rate tried needs more steps than the optimum, the more so the coarser the rates and
the narrower the valley (large batches near the stability edge), so S(B) read at the best
point is biased high, most at large B, and B_crit low. Near its minimum, log steps against log
learning rate is smooth: the parabola through the best cell and its two neighbours has its
minimum value at the optimum's steps to second order (scaling.lr_curve's `Curve.optimum`, with
its curvature d^2 log steps / d (log lr)^2). `bracketed` is the curve's bracket, the test that
ends the learning-rate search: a neighbour on each side known to need at least the best's
steps. At an edge, or beside a neighbour that may be better, there is no bracket; beside a
neighbour that gives only a bound (diverged, not reached, stopped as dominated) the optimum is
bracketed but no parabola reads it. Either way the best measured point stands, saying why.

Seeds share data order across learning rates, so an interval resamples whole seeds and redoes
the choice of the best cell and the parabola on every replicate (`resampled`).
"""

from __future__ import annotations

import numpy as np

from scaling.analysis.table import LRCurve
from scaling.formatting import interval, number
from scaling.lr_curve import cell_means
from scaling.parabola import log_vertex


def entry(grid: LRCurve, best: int, measured: float) -> dict:
    """analysis.json's `optimum` of a point: the parabola's minimum where the best cell is
    bracketed by neighbours every seed reached, else the best measured point (`measured`, the
    selection's steps), with why; its interval (steps_ci, interval) is the caller's
    (scaling.analysis.points)."""
    curve = grid.curve()
    why = curve.no_bracket(best) if measured > 0 else "target met at the start"
    read = curve.optimum(best) if why is None else None
    if read is None:
        bounded = (curve.bounded_only(j) for j in (best - 1, best + 1))
        return {"learning_rate": grid.lrs[best], "steps": measured, "steps_ci": None,
                "curvature": None, "bracketed": why is None,
                "why": why or " and ".join(filter(None, bounded)) + ": no parabola"}
    lr, steps, curvature = read
    return {"learning_rate": lr, "steps": steps, "steps_ci": None, "curvature": curvature,
            "bracketed": True, "why": None}


def resampled(lrs: list[float], steps: np.ndarray, draws: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per bootstrap draw of whole seeds (rows of `draws`): the optimum's steps over one grid
    (cells x seeds `steps`), choosing the best cell afresh, and whether the parabola through
    that draw's best and its reached neighbours read it (else its value is the best cell's
    mean; NaN where no cell was reached)."""
    means = cell_means(np.asarray(steps, float)[:, draws])  # cells x draws
    filled = np.where(np.isfinite(means) & (means > 0), means, np.inf)
    best = np.argmin(filled, axis=0)
    cols = np.arange(means.shape[1])
    value = filled[best, cols]
    _, y_star, _ = log_vertex(np.asarray(lrs, float), filled.T, best)
    between = np.isfinite(y_star)
    out = np.where(between, y_star, value)
    return np.where(np.isfinite(out), out, np.nan), between


def describe(opt: dict | None) -> str:
    """An optimum for tables: '312 [300, 325] at lr 0.42' where its parabola read it, else why
    not."""
    if not opt:
        return "-"
    if not opt["bracketed"]:
        return f"no bracket: {opt['why']}"
    if opt["why"]:
        return f"{number(opt['steps'])} at lr {number(opt['learning_rate'])} ({opt['why']})"
    ci = f" {interval(opt['steps_ci'])}" if opt.get("steps_ci") else ""
    return f"{number(opt['steps'])}{ci} at lr {number(opt['learning_rate'])}"
