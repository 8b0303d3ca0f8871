"""The NQM sweep of tests/test_nqm_bcrit.py on the spread spectrum (h = i^-0.8, the noise over
every coordinate), a file of its own so that the test workers share the spectra's sweeps."""

from __future__ import annotations

import pytest

from tests.test_nqm_bcrit import b_crit_ratios, intervals_holding, spectrum_sweep

pytestmark = pytest.mark.optimised  # its sweeps train far longer than they compile


@pytest.fixture(scope="module")
def spread(tmp_path_factory) -> tuple[dict, list[float]]:
    return spectrum_sweep("spread", tmp_path_factory.mktemp("spread"))


@pytest.mark.slow
def test_sweep_b_crit_matches_the_exact_nqm(spread):
    """The default reading within 10% of the closed form's optimum at every target. Measured
    0.974, 0.912, 0.975 (6 seeds). Where it is weak: the large batches' optimum sits at the
    stability bound (lr ~2); the search stops at the highest stable rate within its resolution
    (1.9: 2.04 diverges) and reads 4-7% more steps there than at the bound, which pulls B_crit
    low."""
    ratios = b_crit_ratios(*spread)
    assert all(abs(r - 1) <= 0.1 for r in ratios), ratios


@pytest.mark.slow
def test_the_closed_form_is_inside_most_intervals(spread):
    """2 of the 3 bootstrap intervals hold the exact B_crit. Measured: 2 of 3 (the middle target
    misses: the interval, from the seeds alone, does not widen for the steps read high at the
    stability bound)."""
    inside = intervals_holding(*spread)
    assert sum(inside) >= 2, inside
