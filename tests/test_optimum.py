"""The optimum between the learning rates tried (scaling.analysis.optimum): exact on a
parabola, no bracket named for each reason, every bootstrap draw redone, and an interval that
covers the truth as often as it says."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.analysis import optimum
from scaling.analysis.table import LRCurve
from scaling.lr_curve import cell_means, vertex


def curve(lrs, steps_per_seed, diverged=None, censored=None) -> LRCurve:
    """An LRCurve from per-LR lists of per-seed steps (None: not reached)."""
    as_array = lambda rows: [np.array([math.nan if v is None else v for v in r], float)
                             for r in rows]
    steps = as_array(steps_per_seed)
    nan = [np.full(len(a), math.nan) for a in steps]
    return LRCurve(lrs=list(lrs), steps=steps, examples=steps, b_simple=nan, b_noise=nan,
                   diverged=list(diverged or [False] * len(lrs)),
                   censored=as_array(censored) if censored else nan)


def test_vertex_of_an_exact_log_parabola():
    """log S = log 200 + 0.7 (log lr - log 0.13)^2 through three unevenly spaced rates."""
    lrs = [0.05, 0.11, 0.4]
    steps = [200 * math.exp(0.7 * math.log(lr / 0.13) ** 2) for lr in lrs]
    lr, s, curvature = vertex(lrs, steps)
    assert (lr, s, curvature) == (pytest.approx(0.13, rel=1e-12), pytest.approx(200.0, rel=1e-12),
                                  pytest.approx(1.4, rel=1e-12))
    flat = vertex([0.1, 0.2, 0.4], [50.0, 50.0, 50.0])
    assert flat == (pytest.approx(0.2), pytest.approx(50.0), 0.0)


def test_the_bracket_and_why_no_parabola_reads_it():
    """Best 0.4 (155 steps). A neighbour a seed never reached, one that diverged, or one whose
    censored seed puts its mean above 155 is worse whatever: bracketed, but only a bound, so
    the best point stands; a censored neighbour whose bound lies below 155 may be better."""
    lrs = [0.1, 0.2, 0.4, 0.8, 1.6]
    ok = [[300, 310], [200, 190], [150, 160], [210, 200], [400, 420]]
    assert curve(lrs, ok).curve().no_bracket(2) is None
    assert curve(lrs, ok).curve().no_bracket(0) == "best at the lowest rate tried"
    assert curve(lrs, ok).curve().no_bracket(4) == "best at the highest rate tried"
    holed = [r if i != 3 else [210, None] for i, r in enumerate(ok)]
    read = lambda **kw: optimum.entry(curve(lrs, holed, **kw), 2, 155.0)
    unreached = read()
    assert (unreached["bracketed"], unreached["steps"], unreached["curvature"]) == (True, 155.0,
                                                                                 None)
    assert unreached["why"] == "neighbour 0.8 not reached by every seed: no parabola"
    assert read(diverged=[False, False, False, True, False])["why"] == \
        "neighbour 0.8 diverged: no parabola"
    nan = [math.nan] * 2
    above = read(censored=[nan] * 3 + [[math.nan, 250.0], nan])  # bound (210 + 250) / 2 = 230
    assert above["bracketed"] and above["why"] == \
        "neighbour 0.8 stopped as dominated (censored): no parabola"
    below = read(censored=[nan] * 3 + [[math.nan, 50.0], nan])  # bound (210 + 50) / 2 = 130
    assert not below["bracketed"] and below["why"] == \
        "neighbour 0.8 may be better: its steps exceed 130, below the best's 155"


def test_the_entry_falls_back_to_the_best_measured_point():
    lrs = [0.1, 0.2, 0.4]
    edge = optimum.entry(curve(lrs, [[300], [200], [150]]), 2, 150.0)
    assert edge == {"learning_rate": 0.4, "steps": 150.0, "steps_ci": None, "curvature": None,
                    "bracketed": False, "why": "best at the highest rate tried"}
    inner = optimum.entry(curve(lrs, [[300], [200], [300]]), 1, 200.0)
    assert inner["bracketed"] and inner["steps"] < 200 and inner["learning_rate"] == \
        pytest.approx(0.2)
    assert inner["steps_ci"] is None  # the interval over seeds is the caller's


def test_each_draw_redoes_the_best_cell_and_its_parabola():
    """The vectorised draws against a plain loop: choose the best cell of the drawn seeds' means,
    then the parabola through it and its neighbours where both are reached."""
    rng = np.random.default_rng(3)
    lrs = list(np.geomspace(0.01, 1, 7))
    base = 100 * np.exp(0.5 * np.log(np.array(lrs) / 0.1) ** 2)
    steps = base[:, None] * rng.lognormal(0, 0.2, (7, 4))
    steps[4, 2] = math.nan  # a seed that missed the best's neighbour: no bracket with it
    draws = rng.integers(0, 4, (300, 4))
    values, bracketed = optimum.resampled(lrs, steps, draws)
    for k, idx in enumerate(draws):
        means = cell_means(steps[:, idx])
        best = int(np.nanargmin(means))
        inner = 0 < best < 6 and np.all(np.isfinite(means[best - 1:best + 2]))
        assert bracketed[k] == inner
        want = vertex(lrs[best - 1:best + 2], list(means[best - 1:best + 2]))[1] \
            if inner else means[best]
        assert values[k] == pytest.approx(want, rel=1e-12)
    assert bracketed.any() and not bracketed.all()


def test_the_interval_over_seeds_covers_the_truth_at_its_rate():
    """Steps = exact x (1 + seed effect shared by every rate) x small noise: the 95% interval
    of the optimum's steps covers the exact fewest steps in about 95 of 100 sweeps."""
    rng = np.random.default_rng(0)
    lrs = list(np.geomspace(0.05, 0.2, 5))
    exact = 100 * np.exp(0.8 * np.log(np.array(lrs) / 0.1) ** 2)  # fewest: 100 at 0.1
    covered, seeds = 0, 8
    for _ in range(200):
        steps = exact[:, None] * (1 + rng.normal(0, 0.05, seeds))[None, :] \
            * rng.lognormal(0, 0.005, (5, seeds))
        values, _ = optimum.resampled(lrs, steps, rng.integers(0, seeds, (400, seeds)))
        lo, hi = np.percentile(values, [2.5, 97.5])
        covered += lo <= 100 <= hi
    assert 0.85 <= covered / 200 <= 0.99  # the bootstrap runs a little narrow with 8 seeds
