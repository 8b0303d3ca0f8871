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


def _tradeoff_residuals(theta: np.ndarray, inv_b: np.ndarray,
                        log_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s_min, e_min = np.exp(theta)
    model = s_min + e_min * inv_b
    jac = np.stack([s_min / model, e_min * inv_b / model], axis=1)
    return np.log(model) - log_s, jac


def fit_tradeoff(batch_sizes: Any, steps: Any) -> tuple[float, float]:
    """(S_min, E_min) of S(B) = S_min + E_min / B, least squares on log S, both positive.

    Levenberg-Marquardt on (log S_min, log E_min), started from the linear fit of S on 1/B.
    """
    inv_b, s = 1.0 / np.asarray(batch_sizes, float), np.asarray(steps, float)
    if len(np.unique(inv_b)) < 2 or np.any(s <= 0):
        raise ValueError("fit_tradeoff needs positive steps at 2 or more distinct batch sizes")
    slope, intercept = np.polyfit(inv_b, s, 1)
    theta = np.log([max(intercept, 1e-3 * s.min()), max(slope, 1e-3 * s.min() / inv_b.max())])
    log_s, damping = np.log(s), 1e-3
    r, jac = _tradeoff_residuals(theta, inv_b, log_s)
    cost = r @ r
    for _ in range(500):
        jtj = jac.T @ jac
        step = np.linalg.solve(jtj + damping * np.diag(np.diag(jtj) + 1e-12), -jac.T @ r)
        step = np.clip(step, -5.0, 5.0)
        r_new, jac_new = _tradeoff_residuals(theta + step, inv_b, log_s)
        if r_new @ r_new < cost:
            theta, r, jac, cost = theta + step, r_new, jac_new, r_new @ r_new
            damping = max(damping / 10, 1e-12)
            if np.max(np.abs(step)) < 1e-13:
                break
        else:
            damping *= 10
            if damping > 1e12:
                break
    return float(np.exp(theta[0])), float(np.exp(theta[1]))


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
