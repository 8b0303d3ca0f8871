"""The schedules' ratio intervals over seeds: worked by hand, and their coverage where the
truth is known (log-normal seeds around a known ratio, the two sides independent or sharing
most of their noise, as a seed's schedule run and fixed run share its initialisation and data)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.analysis.schedules import Chosen, _against, ratio_interval

TRUTH = 1.3  # the ratio of the two sides' expected steps


def test_the_paired_jackknife_by_hand():
    # ratio 42/19; leave-one-out ratios 32/14, 30/13, 22/11; t(2) = 4.303
    mine, theirs = np.array([10.0, 12.0, 20.0]), np.array([5.0, 6.0, 8.0])
    logs = np.log([32 / 14, 30 / 13, 22 / 11])
    se = math.sqrt(2 / 3 * np.sum((logs - logs.mean()) ** 2))  # 0.09234
    expected = [42 / 19 * math.exp(-4.303 * se), 42 / 19 * math.exp(4.303 * se)]
    assert expected == pytest.approx([1.486, 3.289], abs=1e-3)
    lo, hi = ratio_interval(mine, theirs, True, "jackknife", 100, np.random.default_rng(0))
    assert [lo, hi] == pytest.approx(expected, rel=1e-9)


def _coverage(method: str, rho: float, trials: int = 1000, cv: float = 0.2) -> float:
    """The share of intervals over 3 seeds that hold TRUTH, each seed's two sides log-normal
    with correlation rho."""
    rng, held = np.random.default_rng(1), 0
    for _ in range(trials):
        shared, own = rng.normal(size=3), rng.normal(size=(2, 3))
        noise = math.sqrt(rho) * shared + math.sqrt(1 - rho) * own
        mine = TRUTH * np.exp(cv * noise[0] - cv ** 2 / 2)
        theirs = np.exp(cv * noise[1] - cv ** 2 / 2)
        lo, hi = ratio_interval(mine, theirs, True, method, 400, rng)
        held += lo <= TRUTH <= hi
    return held / trials


def test_the_jackknife_holds_its_level_with_three_seeds_correlated_or_not():
    """_coverage measures 95.5% and 94.9% (1,000 trials each); the percentile bootstrap that
    resamples each side apart holds 79.7% where the sides are independent: with 3 seeds it is
    too narrow (and 97.0% where they share most of their noise, which it ignores)."""
    assert _coverage("jackknife", 0.0) >= 0.92
    assert _coverage("jackknife", 0.9) >= 0.92
    assert _coverage("percentile", 0.0) < 0.88


def _chosen(seeds: tuple[int, ...], steps: list[float]) -> Chosen:
    values = np.array(steps)
    return Chosen(0.1, values, 8 * values, seeds)


def test_a_comparison_names_its_interval_or_says_why_there_is_none():
    rng = np.random.default_rng(0)
    mine = _chosen((0, 1, 2), [10.0, 12.0, 20.0])
    paired = _against("start", 8, mine, {8: _chosen((0, 1, 2), [5.0, 6.0, 8.0])}, "jackknife",
                      100, rng)
    assert paired["steps_ratio"] == pytest.approx(42 / 19)
    assert paired["steps_ratio_ci"] == pytest.approx([1.486, 3.289], abs=1e-3)
    assert paired["interval"] == {"resamples": "seeds", "method": "jackknife", "level": 0.95,
                                  "replicates": 3, "why": None}
    apart = _against("start", 8, mine, {8: _chosen((0, 1, 3), [5.0, 6.0, 8.0])}, "jackknife",
                     100, rng)
    assert apart["steps_ratio_ci"] is None and "different seeds" in apart["interval"]["why"]
    pct = _against("start", 8, mine, {8: _chosen((0, 1, 3), [5.0, 6.0, 8.0])}, "percentile",
                   100, rng)
    assert pct["interval"]["method"] == "percentile" and pct["interval"]["replicates"] == 100
    lone = _against("start", 8, _chosen((0,), [10.0]), {8: _chosen((0,), [5.0])}, "jackknife",
                    100, rng)
    assert lone["steps_ratio"] == 2.0 and lone["steps_ratio_ci"] is None
    assert lone["interval"]["why"].startswith("one seed")
    unasked = _against("start", 8, mine, {8: _chosen((0, 1, 2), [5.0, 6.0, 8.0])}, "jackknife",
                       0, rng)
    assert unasked["interval"]["why"] == "not asked for"
