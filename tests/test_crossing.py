"""Crossing curves: a target whose points keep the trade-off's order against one whose larger
batch sizes need more steps beyond their intervals; the smallest batch size reaching it and
the example-optimal one (off the grid, worked by hand), and what one seed cannot tell."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.analysis.steps_view import analyze_target
from scaling.analysis.crossing import broken_pairs, crossing, smallest
from scaling.analysis.points import best_point
from scaling.analysis.table import LRCurve
from scaling.report.crossing import crossing_lines

SIZES = [8, 16, 32, 64, 128]
LRS = [0.01, 0.02, 0.04]


def _curves(steps_at: dict[int, float], seeds: int, noise: float, seed: int = 0
            ) -> dict[int, list[LRCurve]]:
    """Per batch size one learning-rate curve whose middle rate is best: steps x (1, 1.3 at
    the other rates), each seed off by a relative `noise` (the same draw at every rate)."""
    rng = np.random.default_rng(seed)
    out = {}
    for size, steps in steps_at.items():
        jitter = 1 + noise * rng.standard_normal(seeds)
        rows = [steps * f * jitter for f in (1.3, 1.0, 1.3)]
        nan = [np.full(seeds, np.nan)] * 3
        out[size] = [LRCurve(lrs=list(LRS), steps=rows, examples=[r * size for r in rows],
                             b_simple=nan, b_noise=nan, b_simple_precond=nan,
                             diverged=[False] * 3, censored=nan)]
    return out


def _points(by_size: dict[int, list[LRCurve]]) -> list[dict]:
    rng = np.random.default_rng(0)
    return [best_point(size, g, "min", 200, rng) for size, g in by_size.items()]


def _cross(by_size, unreached=()):
    return crossing(by_size, _points(by_size), list(unreached), "min", 200,
                    np.random.default_rng(0), "jackknife")


def test_a_hyperbola_keeps_its_order_and_its_smallest_batch_is_the_example_optimal_one():
    """S = 100 (1 + 64 / B) with 2% noise over 4 seeds: examples rise with B throughout."""
    by_size = _curves({b: 100 * (1 + 64 / b) for b in SIZES}, 4, 0.02)
    got = _cross(by_size)
    assert not got["crossed"] and got["pairs"] == [] and got["why"] is None
    opt = got["example_optimal"]
    assert (opt["batch_size"], opt["at_edge"], opt["bound"]) == (8, "low", "upper")
    assert got["smallest"] == {"batch_size": 8, "interval": None, "bound": "upper",
                               "why": "the smallest batch size tried reaches the target"}


def test_steps_that_rise_beyond_their_intervals_cross_and_the_example_optimum_is_read_between():
    """Examples E(B) = 1000 exp((ln B - ln 24)^2): a parabola in (log B, log E) whose vertex
    is at 24, between the grid's 16 and 32, so the reading recovers 24 exactly from the
    noiseless means. Steps E / B fall to B = 32 (418, 74, 34) and rise after it (41 at 64, 129
    at 128), and examples fall from 8 to 16 (3,343 to 1,178): with 1% noise over 4 seeds both
    break the trade-off's order beyond the intervals."""
    examples = {b: 1000 * math.exp((math.log(b) - math.log(24)) ** 2) for b in SIZES}
    by_size = _curves({b: e / b for b, e in examples.items()}, 4, 0.0)
    noisy = _curves({b: e / b for b, e in examples.items()}, 4, 0.01)
    exact = _cross(by_size)
    assert exact["example_optimal"]["batch_size"] == pytest.approx(24, rel=1e-9)
    got = _cross(noisy)
    assert got["crossed"] and {"smaller": 8, "larger": 16, "breaks": "examples fall"} in got["pairs"]
    assert {"smaller": 64, "larger": 128, "breaks": "steps rise"} in got["pairs"]
    opt = got["example_optimal"]
    assert opt["at_edge"] is None and opt["interval"]["resamples"] == "seeds"


def test_the_example_optimums_interval_holds_the_truth_at_its_level():
    """Over 100 independent studies (4 seeds, 5% noise each, shared across rates), the
    jackknife interval of the example-optimal batch size holds 24 in 95 of 100 here (measured
    92-96% for 3, 4 and 8 seeds at 1% and 5% noise over 200 studies); at least 88 of 100 is
    within three binomial standard errors of 95%."""
    examples = {b: 1000 * math.exp((math.log(b) - math.log(24)) ** 2) for b in SIZES}
    held = 0
    for study in range(100):
        got = _cross(_curves({b: e / b for b, e in examples.items()}, 4, 0.05, seed=study))
        low, high = got["example_optimal"]["batch_size_ci"]
        held += low <= 24 <= high
    assert held >= 88


def test_one_seed_lists_what_the_estimates_break_but_tests_nothing():
    examples = {b: 1000 * math.exp((math.log(b) - math.log(24)) ** 2) for b in SIZES}
    got = _cross(_curves({b: e / b for b, e in examples.items()}, 1, 0.0))
    assert not got["crossed"] and got["pairs"] == []
    assert {"smaller": 64, "larger": 128, "breaks": "steps rise"} in got["seen"]
    assert got["example_optimal"]["batch_size_ci"] is None
    assert got["example_optimal"]["interval"]["why"].startswith("one seed")


def test_the_smallest_batch_size_reaching_a_target_lies_above_the_largest_that_does_not():
    points = [{"batch_size": b} for b in (32, 64)]
    assert smallest(points, [8, 16, 128]) == {
        "batch_size": 32, "interval": [16, 32], "bound": None,
        "why": "between the largest smaller batch size tried that does not reach the target "
               "and this one"}
    assert smallest([], [8]) is None


def test_pairs_break_only_where_both_intervals_say_so():
    small = {"batch_size": 8, "steps": 100.0, "optimum": {"steps": 100.0, "steps_ci": [90, 110]}}
    large = {"batch_size": 16, "steps": 105.0, "optimum": {"steps": 105.0, "steps_ci": [100, 112]}}
    assert broken_pairs([small, large]) == ([], [{"smaller": 8, "larger": 16,
                                                  "breaks": "steps rise"}])
    large["optimum"]["steps_ci"] = [111, 120]
    assert broken_pairs([small, large])[0] == [{"smaller": 8, "larger": 16,
                                                "breaks": "steps rise"}]


def _table(steps_at: dict[int, float], seeds: int, target: str) -> list[dict]:
    """Run rows as the analysis reads them: the middle learning rate best at every batch size."""
    rng = np.random.default_rng(1)
    rows = []
    for size, steps in steps_at.items():
        jitter = 1 + 0.01 * rng.standard_normal(seeds)
        for lr, f in zip(LRS, (1.3, 1.0, 1.3)):
            for seed in range(seeds):
                s = float(round(steps * f * jitter[seed]))
                rows.append({"run_id": f"bs{size}-lr{lr}-seed{seed}", "batch_size": size,
                             "learning_rate": lr, "seed": seed, "hyperparameters": {},
                             "status": "completed", "steps_to_target": {target: s},
                             "first_crossing": {target: s},
                             "examples_to_target": {target: s * size},
                             "b_simple": {target: None}, "b_noise": {target: None},
                             "b_simple_precond": {target: None},
                             "steps_censored": {target: None}, "reading": {target: "reached"}})
    return rows


def test_a_target_whose_curves_cross_gets_no_fit():
    target = "eval_loss<=1.0"
    examples = {b: 1000 * math.exp((math.log(b) - math.log(24)) ** 2) for b in SIZES}
    crossed = analyze_target(target, _table({b: e / b for b, e in examples.items()}, 4, target),
                             200, np.random.default_rng(0))
    assert crossed["crossing"]["crossed"] and crossed["fit"] is None and crossed["b_crit"] is None
    plain = analyze_target(target, _table({b: 100 * (1 + 64 / b) for b in SIZES}, 4, target),
                           200, np.random.default_rng(0))
    assert not plain["crossing"]["crossed"] and plain["b_crit"] == pytest.approx(64, rel=0.1)


def test_the_report_says_the_curves_cross_and_gives_the_two_batch_sizes():
    cross = {"crossed": True, "pairs": [{"smaller": 64, "larger": 128, "breaks": "steps rise"}],
             "smallest": {"batch_size": 16, "interval": [8, 16], "bound": None, "why": ""},
             "example_optimal": {"batch_size": 24.0, "batch_size_ci": [22.0, 26.5],
                                 "bound": None, "interval": {"why": None}}}
    assert crossing_lines("eval_loss<=1.0", cross) == [
        "For eval_loss<=1.0 the curves of different batch sizes cross: from batch size 64 to 128 "
        "(steps rise), beyond the intervals over seeds, so no S(B) hyperbola is fitted and "
        "B_crit is not read.",
        "The smallest batch size that reaches it lies between 8 and 16.",
        "The batch size that reaches it in the fewest examples is 24 [22, 26.5]."]
