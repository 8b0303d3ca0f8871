"""End to end on the noisy quadratic model: real SGD sweeps, analysed, against the exact B_crit.

The reference takes the closed-form expected loss over a fine grid of learning rates, the
fewest steps to target per batch size, and fits S(B) the way the analysis does: the sweep
starts from an 8-rate grid, searches around each batch size's best and reads the optimum
between its rates, so it is judged against the optimum, not against its first grid.

Each spectrum's sweep has a file of its own, so the test workers share them: the
noise-dominated one here, the spread one in test_nqm_bcrit_spread.py, the preconditioned one in
test_nqm_bcrit_preconditioned.py; they import the builders and checks below.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from scaling import config as config_mod
from scaling.analysis import analyze
from scaling.analysis.nqm_reference import (closed_form_b_crit, constant_lr_expected_loss,
                                            expected_loss, optimal_steps_to_target)
from scaling.config.targets import first_crossing
from scaling.sweep import runner
from scaling.tasks.nqm import spectra

pytestmark = pytest.mark.optimised  # its sweeps train far longer than they compile

SIZES = [4, 8, 16, 32, 64, 128, 256, 512]
LRS = [float(v) for v in np.geomspace(0.1, 1.9, 8)]
# name: (task options, targets as fractions of the starting loss, seeds, step budget). With
# h = c = 1/i single runs fluctuate far below their expectation (the first crossing reads B_crit
# at about half the exact value), so the mean over 8 seeds is read; with the noise spread over
# every coordinate they do not.
SPECTRA = {
    "noise-dominated": ({"dim": 100}, (0.1, 0.05, 0.025), 8, 2000),
    "spread": ({"dim": 200, "h_power": 0.8, "c_power": 0.0, "c_scale": 0.03}, (0.1, 0.05, 0.02), 6, 1000),
}


def nqm_sweep_cfg(task: dict, targets: list[str], seeds: int, max_steps: int,
                  lrs: list[float] = LRS) -> config_mod.Config:
    """The sweep of one spectrum. train.repack: auto, since its chunks compile for far longer
    than they train, so its search rounds train at the first grid's width instead of compiling
    their own (SGD on a quadratic is linear: the rounding a width changes does not grow)."""
    return config_mod.from_dict({
        "name": "nqm-bcrit", "task": {"name": "nqm", "draw": "means", **task},
        "optimizer": {"name": "sgd"},
        "schedule": {"name": "constant"}, "batch": {"sizes": SIZES},
        "learning_rate": {"values": lrs}, "seeds": list(range(seeds)),
        "budget": {"max_steps": max_steps, "max_examples": 200 * SIZES[-1]}, "targets": targets,
        "eval": {"every": 2, "points_per_decade": 20},
        "train": {"chunk_steps": 200, "repack": "auto"},
        "parallel": {"data": 1, "runs": math.gcd(8, jax.device_count())}, "gns": {"enabled": False}})


def exact_b_crit(options, target: float, steps: int) -> float:
    """B_crit of the closed form at its fewest steps over a fine grid of rates up to the
    stability bound: the optimum that the sweep's learning-rate search reads between its rates."""
    return closed_form_b_crit(options, SIZES, target, steps)["b_crit"]


def test_closed_form_matches_the_recursion():
    options = nqm_sweep_cfg({"dim": 200, "h_power": 0.8}, [], 1, 10).task.options
    exact = expected_loss(options, np.full(50, 0.7), 8)
    assert np.allclose(constant_lr_expected_loss(options, [0.7], 8, 50)[0], exact, rtol=1e-10)


def test_optimal_steps_match_a_dense_search():
    options = nqm_sweep_cfg({"dim": 200, "h_power": 0.8}, [], 1, 10).task.options
    target = 0.1 * float(expected_loss(options, np.zeros(0), 1)[0])
    lrs = np.geomspace(0.2, 1.9, 9)
    dense = []
    for size in (4, 64):
        crossings = [first_crossing(np.arange(len(c)), c, "<=", target)
                     for c in constant_lr_expected_loss(options, lrs, size, 600)]
        dense.append(min(s for s in crossings if s is not None))
    assert optimal_steps_to_target(options, [4, 64], target, lrs, 600) == pytest.approx(dense, rel=1e-12)


def spectrum_sweep(name: str, folder, lrs: list[float] = LRS, bootstrap: int = 300,
                   **task_options) -> tuple[dict, list[float]]:
    """The analysis of `name`'s sweep from the first grid `lrs` (its task options updated by
    `task_options`) and the exact B_crit of each target."""
    task, fractions, seeds, max_steps = SPECTRA[name]
    task = {**task, **task_options}
    h, _ = spectra(nqm_sweep_cfg(task, [], 1, max_steps).task.options)
    values = [f * 0.5 * float(np.sum(h)) for f in fractions]
    cfg = nqm_sweep_cfg(task, [f"eval_loss<={v!r}" for v in values], seeds, max_steps, lrs)
    runner.run(cfg, folder, quiet=True)
    exact = [exact_b_crit(cfg.task.options, v, max_steps) for v in values]
    return analyze.analyze(folder, bootstrap=bootstrap), exact


def b_crit_ratios(result: dict, exact: list[float]) -> list[float]:
    """B_crit over the closed form's, per target; no batch size may miss a target."""
    assert result["reached"]["rule"] == "smoothed" and result["lr_selection"] == "crossfit"
    assert not any(t["unreached_batch_sizes"] for t in result["targets"])
    return [t["b_crit"] / e for t, e in zip(result["targets"], exact)]


def intervals_holding(result: dict, exact: list[float]) -> list[bool]:
    """Per target: whether the bootstrap interval holds the exact B_crit."""
    intervals = (t["b_crit_ci"] for t in result["targets"])
    return [lo <= e <= hi for (lo, hi), e in zip(intervals, exact)]


@pytest.fixture(scope="module")
def noise_dominated(tmp_path_factory) -> tuple[dict, list[float]]:
    return spectrum_sweep("noise-dominated", tmp_path_factory.mktemp("noise-dominated"))


@pytest.mark.slow
def test_sweep_b_crit_matches_the_exact_nqm(noise_dominated):
    """The default reading (smoothed, window 1.5, the cross-fitted selection, the search's
    optimum) within 10% of the closed form's optimum over a fine grid at every target, where
    reading each run at its first crossing is far off (single runs fluctuate far below their
    expectation). Measured 0.998, 0.961, 0.978 (8 seeds), the same to three figures as with the
    fewest mean steps: with 8 seeds the held-out seeds' choice is the pooled one; first crossing
    about half the exact value."""
    result, exact = noise_dominated
    ratios = b_crit_ratios(result, exact)
    assert all(abs(r - 1) <= 0.1 for r in ratios), ratios
    first = [t["first_crossing"]["b_crit"] / e for t, e in zip(result["targets"], exact)]
    assert all(r < 0.75 for r in first), first


@pytest.mark.slow
def test_the_closed_form_is_inside_most_intervals(noise_dominated):
    """2 of the 3 bootstrap intervals hold the exact B_crit. Measured: 3 of 3."""
    inside = intervals_holding(*noise_dominated)
    assert sum(inside) >= 2, inside
