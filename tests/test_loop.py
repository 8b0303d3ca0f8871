"""run_group (scaling.train.loop) against ground truth: the NQM's exact expected loss over a
group's steps, the runs that diverge, runs stopped at their target, identical reruns, and the
learning-rate schedule as the optimizer sees it."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.analysis.nqm_reference import expected_loss
from scaling.train.spec import RunSpec
from tests.helpers import DIGITS, NQM, config, curves, train


@pytest.mark.parametrize("draw", ["examples", "means"])
def test_nqm_mean_loss_matches_closed_form(draw):
    """Drawing B noise vectors or each group's mean directly: the same expected loss curve."""
    cfg = config(NQM, f"task.draw={draw}")
    seeds = 256
    _, records = train(cfg, [RunSpec(0.3, s) for s in range(seeds)])
    losses = curves(records, "eval_loss")
    steps = [row["step"] for row in records[0]]
    assert steps == list(range(101))
    exact = expected_loss(cfg.task.options, np.full(100, 0.3), 8)
    tolerance = 4 * losses.std(0) / np.sqrt(seeds) + 1e-5 * exact
    assert np.all(np.abs(losses.mean(0) - exact) <= tolerance)
    wrong_batch = expected_loss(cfg.task.options, np.full(100, 0.3), 16)
    assert np.any(np.abs(losses.mean(0) - wrong_batch) > tolerance), "test must be able to fail"


def test_divergence_marks_exactly_the_unstable_runs():
    # With h_max = 1, SGD on the NQM is stable iff lr < 2 (|1 - lr h| < 1 for every h).
    cfg = config(NQM, "budget.max_steps=200")
    lrs = [0.5, 1.5, 1.9, 2.5, 4.0]
    results, _ = train(cfg, [RunSpec(lr, 0) for lr in lrs])
    assert [r.status for r in results] == ["completed"] * 3 + ["diverged"] * 2
    assert all(r.steps == 200 for r in results[:3])
    assert all(r.steps < 200 for r in results[3:])


def test_targets_stop_runs_at_the_first_crossing_under_rule_first():
    cfg = config(NQM, "targets=['eval_loss<=0.5']", "reached.rule=first")
    results, records = train(cfg, [RunSpec(0.3, 0), RunSpec(0.01, 0)])
    fast, slow = results
    first = next(r["step"] for r in records[0] if r["eval_loss"] <= 0.5)
    assert fast.status == "completed" and fast.steps == first
    assert slow.status == "budget_exhausted" and slow.steps == 100


def test_same_config_twice_gives_identical_metrics():
    cfg = config(DIGITS)
    runs = [RunSpec(0.05, 0), RunSpec(0.2, 1)]
    _, first = train(cfg, runs)
    _, second = train(cfg, runs)
    for key in first[0][0]:
        np.testing.assert_array_equal(curves(first, key), curves(second, key))


def test_warmup_and_schedule_reach_the_optimizer():
    cfg = config(NQM, "schedule.name=linear", "schedule.warmup_fraction=0.1",
                 "schedule.final_fraction=0.0")
    _, records = train(cfg, [RunSpec(0.4, 0)])
    lr = curves(records, "lr")[0]
    assert lr[0] == pytest.approx(0.4)  # before any step: the peak, as set
    assert lr[1] == pytest.approx(0.4 / 10)  # first step of a 10-step warm-up
    assert lr[10] == pytest.approx(0.4)
    assert lr[100] == pytest.approx(0.0, abs=1e-7)
