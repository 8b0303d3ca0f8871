"""One run's metric rows: a column's value at a fractional step, and B_simple / B_noise pooled
from the raw measurements near a step (where a run crosses a target: scaling.config.targets).

The analysis (scaling.analysis) asks these of every run; the noise figure asks them too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from scaling.store.rows import Row, finite

NOISE_WINDOW = 1.25  # B_simple at a crossing pools the steps within a factor 1.25 of it


def windowed_b_simple(rows: list[Row], steps: Any) -> np.ndarray:
    """B_simple at each of `steps`: the raw per-interval averages (gns_*_interval, each over the
    steps since the previous evaluation) pooled over the intervals ending within
    step / NOISE_WINDOW .. step * NOISE_WINDOW, as tr(Sigma) / |G|^2 of the step-weighted sums.

    The window scales with the run's own length. The recorded b_simple is a moving average over
    a fixed number of steps, which in a run that crosses a target within a few dozen steps
    still remembers the first, steepest steps. Falls back to it where the intervals are missing
    or their |G|^2 sum is not positive (too few, too noisy measurements); NaN where neither is.
    """
    return _windowed(rows, steps, "gns_trace_sigma_interval", "gns_g2_interval", "b_simple", True)


def windowed_b_noise(rows: list[Row], steps: Any) -> np.ndarray:
    """B_noise at each of `steps` the same way, from the raw Hessian measurements
    (gns_trace_h_sigma_point / gns_ghg_point, one fresh batch each, equally weighted);
    falls back to the recorded moving average b_noise."""
    return _windowed(rows, steps, "gns_trace_h_sigma_point", "gns_ghg_point", "b_noise", False)


def _windowed(rows: list[Row], steps: Any, num_key: str, den_key: str, fallback: str,
              by_interval: bool) -> np.ndarray:
    """sum(num) / sum(den) over the rows within a factor NOISE_WINDOW of each step, each row
    weighted by its interval in steps (by_interval) or equally; else the `fallback` column."""
    steps = np.atleast_1d(np.asarray(steps, float))
    ema = recorded(rows, steps, fallback)
    pairs = [(row["step"], row["step"] - prev["step"] if by_interval else 1.0, row.get(num_key),
              row.get(den_key)) for prev, row in zip(rows, rows[1:])]
    pairs = [(s, n, a, b) for s, n, a, b in pairs if finite(a) and finite(b)]
    if not pairs:
        return ema
    at, n, num, den = (np.array(c, float) for c in zip(*pairs))
    num_sum = np.concatenate([[0.0], np.cumsum(num * n)])
    den_sum = np.concatenate([[0.0], np.cumsum(den * n)])
    lo = np.searchsorted(at, steps / NOISE_WINDOW, side="left")
    hi = np.searchsorted(at, steps * NOISE_WINDOW, side="right")
    top, bottom = num_sum[hi] - num_sum[lo], den_sum[hi] - den_sum[lo]
    ok = (top > 0) & (bottom > 0)
    return np.where(ok, top / np.where(ok, bottom, 1.0), ema)


def recorded(rows: list[Row], steps: Any, key: str) -> np.ndarray:
    """A recorded column (a moving average) linearly interpolated at `steps`; NaN outside the
    steps it was recorded at, or everywhere when it never was."""
    steps = np.atleast_1d(np.asarray(steps, float))
    measured = [(r["step"], r[key]) for r in rows if finite(r.get(key))]
    if not measured:
        return np.full(steps.shape, math.nan)
    return np.interp(steps, *zip(*measured), left=math.nan, right=math.nan)


def _at(series: np.ndarray) -> float | None:
    value = float(series[0])
    return None if math.isnan(value) else value


def b_simple_at(rows: list[Row], step: float) -> float | None:
    """`windowed_b_simple` at one step (a target's crossing); None where nothing was measured."""
    return _at(windowed_b_simple(rows, [step]))


def b_noise_at(rows: list[Row], step: float) -> float | None:
    """`windowed_b_noise` at one step; None where B_noise was not measured."""
    return _at(windowed_b_noise(rows, [step]))

