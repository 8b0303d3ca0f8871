"""The log-log parabola through a curve's best point: exact on exact parabolas, NaN where it
does not apply, and the same vertex vectorised as one at a time."""

from __future__ import annotations

import math

import numpy as np

from scaling.analysis.optima import refine_lr
from scaling.parabola import log_vertex


def test_the_vertex_and_its_value_of_an_exact_parabola():
    x = np.geomspace(0.01, 1.0, 7)
    y = np.exp(0.7 * (np.log(x) - math.log(0.13)) ** 2 + math.log(2.5))
    best = int(np.argmin(y))
    at, value, curvature = log_vertex(x, y, best)
    assert math.isclose(at, 0.13, rel_tol=1e-12)
    assert math.isclose(value, 2.5, rel_tol=1e-12)
    assert math.isclose(curvature, 1.4, rel_tol=1e-9)  # d^2 log y / d (log x)^2 = 2 x 0.7


def test_no_vertex_at_an_edge_beside_a_gap_or_opening_downward():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    y = np.array([3.0, 2.0, 2.5, 4.0])
    assert np.isnan(log_vertex(x, y, 0)[0]) and np.isnan(log_vertex(x, y, 3)[0])
    assert np.isnan(log_vertex(x, [3.0, 2.0, np.nan, 4.0], 1)[0])
    assert np.isnan(log_vertex(x, [3.0, 2.0, -1.0, 4.0], 1)[0])
    assert np.isnan(log_vertex(x, [1.0, 2.0, 1.5, 4.0], 1)[0])  # opens downward
    assert np.isnan(log_vertex(x[:2], y[:2], 0)[0])


def test_vectorised_draws_equal_one_at_a_time_and_refine_lr():
    rng = np.random.default_rng(3)
    x = np.geomspace(1e-3, 1.0, 9)
    y = np.exp((np.log(x)[None] + 3.0 + rng.normal(0, 0.5, (50, 1))) ** 2 * 0.2
               + rng.normal(0, 0.05, (50, 9)))
    best = np.argmin(y, axis=1)
    at, value, _ = log_vertex(x, y, best)
    for k in range(50):
        one_at, one_value, _ = log_vertex(x, y[k], best[k])
        assert (np.isnan(at[k]) and np.isnan(one_at)) or math.isclose(at[k], one_at)
        assert (np.isnan(value[k]) and np.isnan(one_value)) or math.isclose(value[k], one_value)
        refined = refine_lr(x, y[k], int(best[k]))
        assert (refined is None) == bool(np.isnan(at[k]))
        if refined is not None:
            # the vertex lies within its three points, so between the best's neighbours
            assert x[best[k] - 1] <= refined <= x[best[k] + 1]
            assert math.isclose(refined, at[k])
