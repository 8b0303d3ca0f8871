"""The vertex of the parabola through a curve's best point and its two neighbours, in log-log
coordinates: how the analysis reads an optimum between grid points (the learning rate with the
fewest steps, the loss-optimal learning rate and batch size at a fixed budget).

Vectorised over any leading axes, so a bootstrap's thousand draws take one call.
"""

from __future__ import annotations

import numpy as np


def log_vertex(x: np.ndarray, y: np.ndarray, best: np.ndarray | int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x*, y*, curvature) of the parabola in (log x, log y) through points best - 1, best,
    best + 1 of the last axis (x ascending and positive, shared or shaped like y); curvature
    is d^2 log y / d (log x)^2. NaN where best is at an end, a neighbour is missing or not
    positive, or the parabola does not open upward. x* is kept within the three points."""
    y = np.asarray(y, float)
    x = np.broadcast_to(np.asarray(x, float), y.shape)
    best = np.asarray(best)
    n = y.shape[-1]
    if n < 3:
        nan = np.full(best.shape, np.nan)
        return nan, nan, nan
    index = np.clip(best, 1, n - 2)[..., None] + np.array([-1, 0, 1])
    u = np.log(np.take_along_axis(x, index, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.log(np.take_along_axis(y, index, -1))
        d1 = (v[..., 1] - v[..., 0]) / (u[..., 1] - u[..., 0])
        d2 = (v[..., 2] - v[..., 1]) / (u[..., 2] - u[..., 1])
        a = (d2 - d1) / (u[..., 2] - u[..., 0])
        ok = (best > 0) & (best < n - 1) & np.all(np.isfinite(v), axis=-1) & (a > 0)
        at = np.clip((u[..., 0] + u[..., 1]) / 2 - d1 / (2 * a), u[..., 0], u[..., 2])
        value = v[..., 0] + d1 * (at - u[..., 0]) + a * (at - u[..., 0]) * (at - u[..., 1])
    return (np.where(ok, np.exp(at), np.nan), np.where(ok, np.exp(value), np.nan),
            np.where(ok, 2 * a, np.nan))
