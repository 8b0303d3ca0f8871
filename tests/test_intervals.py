"""Intervals over seeds and identification (scaling.analysis.intervals), and how reports print
them (scaling.formatting.estimate), against values worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.analysis import intervals
from scaling.formatting import bound, count, estimate


def test_jackknife_replicates_leave_each_seed_out_once():
    draws = intervals.seed_draws(3, "jackknife", 1000, np.random.default_rng(0))
    assert draws.tolist() == [[1, 2], [0, 2], [0, 1]]
    assert intervals.seed_draws(1, "jackknife", 1000, np.random.default_rng(0)) is None
    assert intervals.seed_draws(4, "percentile", 7, np.random.default_rng(0)).shape == (7, 4)


def test_jackknife_interval_worked_by_hand():
    """Three leave-one-out values e^-0.1, e^0, e^0.1 around an estimate of 1: on the log scale
    the mean is 0, sum of squares 0.02, se = sqrt(2/3 x 0.02) = 0.11547, t(2) = 4.303."""
    ci = intervals.from_replicates(1.0, np.exp([-0.1, 0.0, 0.1]), "jackknife", 3)
    half = 4.303 * math.sqrt(2 / 3 * 0.02)
    assert ci == pytest.approx([math.exp(-half), math.exp(half)], rel=1e-9)
    # The mean of k values: the jackknife se is s / sqrt(k), the classical t interval.
    values = np.array([3.0, 5.0, 10.0])
    loo = [(values.sum() - v) / 2 for v in values]
    lo, hi = intervals.from_replicates(values.mean(), loo, "jackknife", 3, log=False)
    se = values.std(ddof=1) / math.sqrt(3)
    assert (lo, hi) == pytest.approx((values.mean() - 4.303 * se, values.mean() + 4.303 * se))


def test_jackknife_needs_every_replicate():
    assert intervals.from_replicates(1.0, [1.0, math.nan, 1.2], "jackknife", 3) is None
    assert intervals.from_replicates(1.0, [1.0, -1.0, 1.2], "jackknife", 3) is None  # log scale
    assert intervals.from_replicates(1.0, [1.0, 2.0, math.nan, 4.0], "percentile", 4) == \
        pytest.approx(list(np.percentile([1.0, 2.0, 4.0], [2.5, 97.5])))


def test_t_quantiles():
    assert intervals.t975(2) == 4.303 and intervals.t975(10) == 2.228
    assert intervals.t975(30) == 1.96


def test_identify_against_the_range_fitted():
    inside = intervals.identify(100.0, [80.0, 130.0], 16, 4096)
    assert inside["identified"] and inside["ci_open"] == [False, False]
    below = intervals.identify(3e-16, [1e-18, 3.7], 4, 256)
    assert (below["identified"], below["bound"], below["at"]) == (False, "upper", 4)
    beyond = intervals.identify(5000.0, [900.0, 6e18], 16, 4096)
    assert (beyond["bound"], beyond["at"], beyond["ci_open"]) == ("lower", 4096, [False, True])
    flat = intervals.identify(236.0, [236.0, 236.0], 16, 4096)
    assert flat["identified"] and flat["ci_zero_width"]
    assert not intervals.identify(None, None, 16, 4096)["identified"]


def test_a_value_at_the_end_of_its_search_range_is_a_bound():
    status = intervals.identify(409600.0, None, 16, 4096, "the batch sizes measured")
    intervals.at_search_bound(status, 409600.0, 0.16, 409600.0)
    assert (status["identified"], status["bound"], status["at"]) == (False, "lower", 409600.0)


@pytest.mark.parametrize("value,ci,status,text", [
    (469.0, [443.0, 499.0], intervals.identify(469.0, [443.0, 499.0], 16, 4096), "469 [443, 499]"),
    (3e-16, None, intervals.identify(3e-16, None, 4, 256), "< 4"),
    (5000.0, None, intervals.identify(5000.0, None, 16, 4096), "> 4,096"),
    (469.0, [443.0, 6e18], intervals.identify(469.0, [443.0, 6e18], 16, 4096),
     "469 [443, > 40,960]"),
    (236.0, [236.0, 236.0], intervals.identify(236.0, [236.0, 236.0], 16, 4096),
     "236 (interval degenerate)"),
    (1124.0, None, None, "1,124"),
    (2.2614, [2.2609, 2.2618], None, "2.261 [2.261, 2.262]"),  # narrower than 3 digits
    (2.26, [2.26, 2.26], None, "2.26 (interval degenerate)"),
])
def test_estimates_print_as_what_they_are(value, ci, status, text):
    assert estimate(value, ci, status) == text


def test_bound_is_none_for_an_identified_value():
    assert bound(intervals.identify(50.0, None, 16, 4096)) is None
    assert bound({"identified": False, "bound": None, "at": None}) == "not identified"


def test_describe_says_what_an_interval_resamples():
    assert intervals.describe(intervals.info("seeds", "jackknife", 3)) == \
        "95% over seeds (jackknife, 3 replicates)"
    assert intervals.describe(intervals.none(intervals.ONE_SEED)) == \
        f"no interval ({intervals.ONE_SEED})"


@pytest.mark.parametrize("value,text", [(999_999, "999,999"), (2.15e6, "2.15M"),
                                        (3.58e9, "3.58B"), (1.2e12, "1.2T"),
                                        (4.02e19, "4.02e19"), (None, "-")])
def test_counts_print_in_one_style(value, text):
    assert count(value) == text


def test_width_floor_with_three_seeds_is_t2_times_the_median_chi():
    # Wilson-Hilferty: median chi-square(2) = 2 (1 - 1/9)^3 = 1.4047; sqrt(1.4047 / 2) = 0.8381;
    # 4.303 x 0.8381 / 1.96 = 1.840
    assert intervals.width_floor(3) == pytest.approx(1.840, abs=5e-4)
    assert intervals.width_floor(3) > intervals.width_floor(5) > intervals.width_floor(30) > 0.98
