"""Learning-rate selection: hand-computed choices, and the winner's curse measured against truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.analysis.selection import choose, resampled_steps
from scaling.lr_curve import cell_means


def test_min_takes_the_fewest_mean_steps_of_the_cells_every_seed_reached():
    steps = np.array([[10.0, 30.0, 20.0],     # mean 20
                      [12.0, 14.0, math.nan],  # a seed missed: not a candidate
                      [18.0, 19.0, 20.0]])     # mean 19
    assert np.isnan(cell_means(steps)[1])
    choice = choose(steps, "min")
    assert (choice.best, choice.naive, choice.mean(steps)) == (2, 19.0, 19.0)
    assert choose(np.full((2, 3), math.nan), "min") is None


def test_crossfit_reads_each_held_out_seed_where_the_others_chose():
    steps = np.array([[10.0, 30.0, 26.0],
                      [20.0, 21.0, 22.0],
                      [25.0, 16.0, 29.0]])
    # Without seed 0 the means are 28, 21.5, 22.5 -> cell 1, seed 0 reads 20; without seed 1:
    # 18, 21, 27 -> cell 0, reads 30; without seed 2: 20, 20.5, 20.5 -> cell 0, reads 26.
    choice = choose(steps, "crossfit")
    assert choice.best == 1 and choice.naive == 21.0
    assert sorted(choice.pairs) == [(0, 1), (0, 2), (1, 0)]
    assert choice.mean(steps) == pytest.approx((20 + 30 + 26) / 3)
    single = choose(steps[:, :1], "crossfit")  # one seed: nothing to hold out
    assert single.pairs == ((0, 0),) and single.mean(steps[:, :1]) == 10.0


def test_crossfit_leaves_every_copy_of_a_resampled_seed_out_together():
    steps = np.array([[10.0, 30.0], [20.0, 21.0]])
    drawn = steps[:, [0, 0, 1]]  # seed 0 drawn twice
    choice = choose(drawn, "crossfit", groups=np.array([0, 0, 1]))
    # Holding out seed 0 leaves seed 1: cell 1 (21 < 30), read at both copies: 20, 20;
    # holding out seed 1 leaves seed 0: cell 0 (10), read 30.
    assert choice.mean(drawn) == pytest.approx((20 + 20 + 30) / 3)


def test_the_fewest_mean_is_biased_low_and_crossfit_is_not():
    """Eight equally good cells, three noisy seeds each: the minimum of the means is the
    expected minimum of 8 normals below the truth; cross-fitting reads held-out seeds, whose
    noise is independent of the choice, so its mean is the truth."""
    rng = np.random.default_rng(0)
    truth, sigma, trials = 100.0, 10.0, 4000
    naive, fitted = [], []
    for _ in range(trials):
        steps = truth + sigma * rng.standard_normal((8, 3))
        naive.append(choose(steps, "min").naive)
        fitted.append(choose(steps, "crossfit").mean(steps))
    expected_min = -1.4236 * sigma / math.sqrt(3)  # E[min of 8 standard normals] = -1.4236
    assert np.mean(naive) - truth == pytest.approx(expected_min, abs=0.2)
    assert abs(np.mean(fitted) - truth) < 4 * np.std(fitted) / math.sqrt(trials)


def test_resampled_steps_match_the_selection_on_each_draw():
    rng = np.random.default_rng(1)
    steps = rng.uniform(10, 20, (4, 5))
    steps[1, 2] = math.nan
    draws = rng.integers(0, 5, (30, 5))
    for how in ("min", "crossfit"):
        fast = resampled_steps(steps, how, draws)
        slow = [choose(steps[:, d], how, groups=d).mean(steps[:, d]) for d in draws]
        np.testing.assert_allclose(fast, slow)
