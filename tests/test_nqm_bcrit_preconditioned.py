"""The NQM sweep of tests/test_nqm_bcrit.py preconditioned and started from a coarse grid, a file
of its own so that the test workers share the spectra's sweeps."""

from __future__ import annotations

import pytest

from tests.test_nqm_bcrit import b_crit_ratios, spectrum_sweep

pytestmark = pytest.mark.optimised  # its sweeps train far longer than they compile

# Five rates half a decade apart, below the large batches' optimum.
COARSE = [0.01, 0.0316228, 0.1, 0.316228, 1.0]


@pytest.mark.slow
def test_a_preconditioned_nqm_from_a_coarse_grid_is_within_10_percent(tmp_path):
    """Preconditioning by h^-0.5 (G. Zhang et al. 2019) on the noise-dominated spectrum, the
    sweep started from five rates half a decade apart (0.01 to 1, below the optimum at the
    large batches) and searched: B_crit within 10% of the closed form's optimum at every
    target. Measured 0.952, 0.957, 1.036 (8 seeds; 0.983, 0.951, 0.986 with 16). Where it is
    weak: preconditioned, the large batches reach the targets in 3 to 6 steps, where whole steps
    bound the reading (B = 512 reads 6.3 against the closed form's 5.8 at the hardest target);
    on the spread spectrum, whose B_crit (600-770) lies beyond the largest batch, that puts it
    at 0.80-0.87x."""
    ratios = b_crit_ratios(*spectrum_sweep("noise-dominated", tmp_path, COARSE, bootstrap=0,
                                           precondition_power=0.5))
    assert all(abs(r - 1) <= 0.1 for r in ratios), ratios
