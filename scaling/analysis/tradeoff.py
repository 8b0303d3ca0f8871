"""The steps/examples trade-off S(B) = S_min + E_min / B (McCandlish et al. 2018): fit and regimes.

Pure numpy on (batch size, steps) points, so notebooks and the NQM reference use it directly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PERFECT_SLOPE = 0.8  # |d log S / d log B| at or above this counts as perfect scaling
PLATEAU_FALL = 0.1  # steps falling by less than this share over the rest of the grid: plateau
REGIME_DEFINITION = (
    f"perfect_scaling_until: the largest measured B such that between every pair of neighbouring "
    f"measured batch sizes up to it steps fall at least as fast as B^-{PERFECT_SLOPE} "
    f"(log-log slope <= -{PERFECT_SLOPE}; {PERFECT_SLOPE:.0%} of the ideal halving per doubling); "
    f"steps_plateau_from: the smallest measured B, below the largest, from which steps fall by "
    f"less than {PLATEAU_FALL:.0%} over the rest of the grid.")


def _residuals(theta: np.ndarray, inv_b: np.ndarray, log_s: np.ndarray,
               used: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each draw's residuals of log S and their derivatives in log S_min and log E_min, zero
    at its unused points (so a padded row fits as its used points alone)."""
    s_min, e_min = np.exp(theta[:, :1]), np.exp(theta[:, 1:])
    model = s_min + e_min * inv_b
    return ((np.log(model) - log_s) * used, s_min / model * used,
            e_min * inv_b / model * used)


def _damped_steps(r: np.ndarray, j0: np.ndarray, j1: np.ndarray,
                  damping: np.ndarray) -> np.ndarray:
    """Each draw's Levenberg-Marquardt step, its 2x2 normal equations solved in closed form
    (a 2x2 np.linalg.solve per draw and iteration was most of the analysis' time)."""
    a, b, d = np.sum(j0 * j0, axis=1), np.sum(j0 * j1, axis=1), np.sum(j1 * j1, axis=1)
    g0, g1 = -np.sum(j0 * r, axis=1), -np.sum(j1 * r, axis=1)
    a, d = a + damping * (a + 1e-12), d + damping * (d + 1e-12)
    det = a * d - b * b
    return np.clip(np.stack([(d * g0 - b * g1) / det, (a * g1 - b * g0) / det], axis=1),
                   -5.0, 5.0)


def _levenberg_marquardt(theta: np.ndarray, inv_b: np.ndarray, log_s: np.ndarray,
                         used: np.ndarray) -> np.ndarray:
    """Least squares on log S from `theta` (draws x (log S_min, log E_min)), every draw with its
    own damping, stopping where its step falls below 1e-13 or its damping passes 1e12."""
    damping = np.full(len(theta), 1e-3)
    r, j0, j1 = _residuals(theta, inv_b, log_s, used)
    cost = np.sum(r * r, axis=1)
    active = np.ones(len(theta), bool)
    for _ in range(500):
        step = _damped_steps(r, j0, j1, damping)
        r_new, k0, k1 = _residuals(theta + step, inv_b, log_s, used)
        cost_new = np.sum(r_new * r_new, axis=1)
        better = active & (cost_new < cost)
        theta = np.where(better[:, None], theta + step, theta)
        r, j0, j1 = (np.where(better[:, None], new, old)
                     for new, old in ((r_new, r), (k0, j0), (k1, j1)))
        cost = np.where(better, cost_new, cost)
        damping = np.where(better, np.maximum(damping / 10, 1e-12),
                           np.where(active, damping * 10, damping))
        active &= ~(better & (np.max(np.abs(step), axis=1) < 1e-13)) & (damping <= 1e12)
        if not active.any():
            break
    return theta


def _start(inv_b: np.ndarray, s: np.ndarray, used: np.ndarray) -> np.ndarray:
    """Each draw's starting (log S_min, log E_min): the linear fit of S on 1/B, kept positive."""
    n = used.sum(axis=1)
    mean_x, mean_s = (inv_b * used).sum(axis=1) / n, (s * used).sum(axis=1) / n
    dx = (inv_b - mean_x[:, None]) * used
    slope = np.sum(dx * (s - mean_s[:, None]), axis=1) / np.sum(dx * dx, axis=1)
    low = np.where(used, s, np.inf).min(axis=1)
    top = np.where(used, inv_b, -np.inf).max(axis=1)
    return np.log(np.stack([np.maximum(mean_s - slope * mean_x, 1e-3 * low),
                            np.maximum(slope, 1e-3 * low / top)], axis=1))


def fit_tradeoffs(batch_sizes: Any, steps: Any) -> np.ndarray:
    """(S_min, E_min) of S(B) = S_min + E_min / B for each row (a bootstrap draw), draws x 2,
    all draws fitted at once; a point with steps NaN or not positive is left out, and a row
    with fewer than 2 distinct batch sizes left is NaN.

    Levenberg-Marquardt on (log S_min, log E_min), least squares on log S, started from the
    linear fit of S on 1/B.
    """
    b, s = np.broadcast_arrays(np.asarray(batch_sizes, float), np.asarray(steps, float))
    used = np.isfinite(s) & (s > 0) & np.isfinite(b) & (b > 0)
    inv_b = np.where(used, 1.0 / np.where(used, b, 1.0), 0.0)
    s = np.where(used, s, 1.0)
    spread = np.where(used, inv_b, -np.inf).max(axis=1) > np.where(used, inv_b, np.inf).min(axis=1)
    out = np.full((len(s), 2), np.nan)
    if spread.any():
        inv_b, s, used = inv_b[spread], s[spread], used[spread].astype(float)
        out[spread] = np.exp(_levenberg_marquardt(_start(inv_b, s, used), inv_b, np.log(s), used))
    return out


def fit_tradeoff(batch_sizes: Any, steps: Any) -> tuple[float, float]:
    """(S_min, E_min) of S(B) = S_min + E_min / B, least squares on log S, both positive: the
    one-draw case of fit_tradeoffs."""
    inv_b, s = 1.0 / np.asarray(batch_sizes, float), np.asarray(steps, float)
    if len(np.unique(inv_b)) < 2 or np.any(s <= 0):
        raise ValueError("fit_tradeoff needs positive steps at 2 or more distinct batch sizes")
    s_min, e_min = fit_tradeoffs(np.asarray(batch_sizes, float)[None], s[None])[0]
    return float(s_min), float(e_min)


def percentile_interval(samples: list[float]) -> list[float] | None:
    """The 95% percentile interval of bootstrap samples, None without any."""
    return [float(v) for v in np.percentile(samples, [2.5, 97.5])] if samples else None


def regimes(batch_sizes: list[int], steps: list[float]) -> dict:
    """Perfect-scaling and plateau batch sizes of a measured steps-vs-B curve (REGIME_DEFINITION)."""
    b, s = np.log(np.asarray(batch_sizes, float)), np.log(np.asarray(steps, float))
    slopes = -np.diff(s) / np.diff(b)
    perfect = None
    for i, slope in enumerate(slopes):
        if slope < PERFECT_SLOPE:
            break
        perfect = int(batch_sizes[i + 1])
    plateau = None
    for i in range(len(steps) - 1):
        if np.exp(s[i] - s[i + 1:].min()) < 1.0 / (1.0 - PLATEAU_FALL):
            plateau = int(batch_sizes[i])
            break
    return {"perfect_scaling_until": perfect, "steps_plateau_from": plateau,
            "definition": REGIME_DEFINITION}
