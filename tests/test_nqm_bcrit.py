"""End to end on the noisy quadratic model: a real SGD sweep, analysed, against the exact B_crit.

The reference optimises the learning rate per batch size on the exact expected-loss curve (a fine
grid), takes steps to target from it and fits S(B) the same way the analysis does.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from scaling import analysis, config as config_mod, curves, sweep, tradeoff
from scaling.tasks.nqm import constant_lr_expected_loss, expected_loss, optimal_steps_to_target

SIZES = [4, 8, 16, 32, 64, 128, 256]
TARGET_FRACTION = 0.05  # of the starting loss
MAX_STEPS = 400


def nqm_sweep_cfg(target: float) -> config_mod.Config:
    return config_mod.from_dict({
        "name": "nqm-bcrit", "task": {"name": "nqm", "dim": 200, "h_power": 0.8, "c_power": 0, "c_scale": 0.03}, "optimizer": {"name": "sgd"},
        "schedule": {"name": "constant"}, "batch": {"sizes": SIZES},
        "learning_rate": {"min": 0.25, "max": 1.9, "num": 7}, "seeds": [0, 1, 2, 3],
        "budget": {"max_steps": MAX_STEPS}, "targets": [f"eval_loss<={target!r}"],
        "eval": {"every": 2, "points_per_decade": 0}, "train": {"chunk_steps": 100},
        "parallel": {"data": 1, "runs": math.gcd(8, jax.device_count())}, "gns": {"enabled": False}})


def exact_reference(options, target: float, steps: int) -> tuple[list[float], float]:
    """Per batch size the fewest expected steps to target over a fine LR grid, and the fit's B_crit."""
    best = optimal_steps_to_target(options, SIZES, target, np.geomspace(0.05, 1.99, 120), steps)
    s_min, e_min = tradeoff.fit_tradeoff(SIZES, best)
    return best, e_min / s_min


def test_closed_form_matches_the_recursion():
    options = nqm_sweep_cfg(1.0).task.options
    exact = expected_loss(options, np.full(50, 0.7), 8)
    assert np.allclose(constant_lr_expected_loss(options, [0.7], 8, 50)[0], exact, rtol=1e-10)


def test_optimal_steps_match_a_dense_search():
    options = nqm_sweep_cfg(1.0).task.options
    target = 0.1 * float(expected_loss(options, np.zeros(0), 1)[0])
    lrs = np.geomspace(0.2, 1.9, 9)
    dense = []
    for size in (4, 64):
        crossings = [curves.crossing_step([{"step": t, "eval_loss": v} for t, v in enumerate(c)],
                                            "eval_loss", "<=", target)
                     for c in constant_lr_expected_loss(options, lrs, size, 600)]
        dense.append(min(s for s in crossings if s is not None))
    assert optimal_steps_to_target(options, [4, 64], target, lrs, 600) == pytest.approx(dense, rel=1e-12)


@pytest.mark.slow
def test_sweep_b_crit_matches_the_exact_nqm(tmp_path):
    options = nqm_sweep_cfg(1.0).task.options
    target = TARGET_FRACTION * float(expected_loss(options, np.zeros(0), 1)[0])
    _, reference = exact_reference(options, target, MAX_STEPS)
    assert SIZES[1] < reference < SIZES[-2], "the trade-off must bend inside the grid"
    sweep.run(nqm_sweep_cfg(target), tmp_path, quiet=True)
    result = analysis.analyze(tmp_path, bootstrap=200)
    (entry,) = result["targets"]
    assert not entry["unreached_batch_sizes"]
    assert entry["b_crit"] == pytest.approx(reference, rel=0.25)
    lo, hi = entry["b_crit_ci"]
    assert lo < entry["b_crit"] < hi
