"""The branches' local critical batch size interval over seeds: worked by hand, and its coverage
where the truth is known (each factor's expected loss over the reference fixed, the seeds'
losses log-normal around it with a share of their noise common to the base and its branches,
as a seed's branches start from its base's state and data)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.analysis.branching import PAIRED, local_critical_batch, local_interval

FACTORS = [1, 2, 4, 8, 16, 32]
# expected loss over the reference, per factor; tolerance 0.05
RATIOS = {
    "clear": [1, 1.01, 1.02, 1.035, 1.09, 1.2],  # truth 8: the neighbours far from 1.05
    "tight": [1, 1.01, 1.02, 1.045, 1.058, 1.2],  # truth 8: 8 and 16 both near 1.05
    "edge": [1, 1.0, 1.01, 1.03, 1.049, 1.2],  # truth 16, just within
}


def test_the_paired_interval_by_hand():
    """Reference (1.0, 1.1, 0.9), tolerance 0.05. k = 2 at the reference: differences
    (-0.05, -0.055, -0.045), mean -0.05, se 0.005 / sqrt 3, t(2) = 4.303: upper end -0.0376,
    clearly within. k = 4 at 1.06 x: differences (0.01, 0.005, 0.015), mean 0.01 +- 0.0124:
    undecided. k = 8: clearly behind. So [2, 4] x B0, around the point reading 2 x B0."""
    ref = np.array([1.0, 1.1, 0.9])
    cells = {1: {1.0: ref}, 2: {1.0: ref.copy()}, 4: {1.0: ref + 0.06},
             8: {1.0: ref + 0.3}}
    ci, how = local_interval(cells, 0.05, 10, "paired", 0, np.random.default_rng(0))
    assert ci == [20.0, 40.0]
    assert how == {"resamples": "seeds", "method": PAIRED, "level": 0.95, "replicates": 3,
                   "why": None}
    means = np.array([float(np.mean(cells[k][1.0])) for k in (1, 2, 4, 8)])
    assert local_critical_batch([1, 2, 4, 8], means, means[0], 0.05, 10) == (20, False)
    # a factor without a loss on a seed has no mean: behind, so the count stops there
    cells[4] = {1.0: np.array([1.0, math.nan, 0.9])}
    assert local_interval(cells, 0.05, 10, "paired", 0, np.random.default_rng(0))[0] == [20.0, 20.0]
    lone = {k: {1.0: v[1.0][:1]} for k, v in cells.items()}
    assert local_interval(lone, 0.05, 10, "paired", 0, None)[1]["why"].startswith("one seed")
    assert local_interval(cells, 0.05, 10, None, 0, None) == (None, {
        "resamples": "none", "method": None, "level": 0.95, "replicates": 0,
        "why": "not asked for"})


def _cells(rng: np.random.Generator, ratios: list[float], seeds: int, sigma: float,
           lrs: tuple[float, ...], rho: float = 0.5) -> dict[int, dict[float, np.ndarray]]:
    """One experiment's losses: per factor and learning-rate factor, each seed's loss
    log-normal (sigma) around its expectation, a share rho of the noise the seed's own; the
    learning-rate factor 1 is the best, 2x off costs 2%."""
    shared = rng.normal(size=seeds)
    return {k: {f: r * (1 + 0.02 * math.log2(f) ** 2) * np.exp(sigma * (
        math.sqrt(rho) * shared + math.sqrt(1 - rho) * rng.normal(size=seeds))) for f in lrs}
            for k, r in zip(FACTORS, ratios)}


def branch_coverage(method: str, case: str, sigma: float = 0.03, seeds: int = 3,
                    trials: int = 200, lrs: tuple[float, ...] = (1.0,)) -> tuple[float, float]:
    """(the share of 95% intervals over `seeds` seeds that hold the truth, their median width
    as a ratio hi / lo), the truth the reading on the expected losses."""
    ratios = RATIOS[case]
    truth, _ = local_critical_batch(FACTORS, np.array(ratios, float), 1.0, 0.05, 1)
    rng, held, widths = np.random.default_rng(0), 0, []
    for _ in range(trials):
        (lo, hi), _ = local_interval(_cells(rng, ratios, seeds, sigma, lrs), 0.05, 1, method,
                                     200, rng)
        held += lo <= truth <= hi
        widths.append(hi / lo)
    return held / trials, float(np.median(widths))


@pytest.mark.parametrize("case", sorted(RATIOS))
def test_the_paired_interval_holds_its_level_with_three_noisy_seeds(case):
    """Measured (200 experiments each, 3 seeds, 3% noise): 100%, 99% and 98.5% (clear, tight,
    edge); with a grid of three learning rates per factor 99.5%, 98.5%, 98%. Conservative and
    wide: the median interval spans 16x (hi / lo) at this noise."""
    assert branch_coverage("paired", case)[0] >= 0.95
    assert branch_coverage("paired", case, lrs=(0.5, 1.0, 2.0))[0] >= 0.95


def test_the_percentile_bootstrap_falls_short_where_a_factor_sits_near_the_tolerance():
    """What the paired interval replaced: 84% (tight) and 86.5% (edge) of 200, where the paired
    interval holds 98.5-99%; it is narrower (median hi / lo 2-4 against 16)."""
    for case in ("tight", "edge"):
        assert branch_coverage("percentile", case)[0] < 0.9
