"""The compiled engine against ground truth: the NQM's exact loss, exact gradients, exact epochs."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling.analysis.nqm_reference import expected_loss
from scaling.config.names import HYPERPARAMS, OPTIMIZERS
from scaling.train.spec import group_spec
from scaling.tasks import build_task
from scaling.train.gradients import batch_gradient
from scaling.train.mesh import make_mesh
from scaling.train.optimizers import make_optimizer
from scaling.train.program import GroupProgram
from scaling.train.spec import GroupLayout, RunSpec, eval_steps
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


def test_vmapped_group_equals_runs_one_at_a_time():
    cfg = config(DIGITS)
    runs = [RunSpec(0.05, 0), RunSpec(0.2, 1), RunSpec(0.1, 2, momentum=0.5)]
    _, together = train(cfg, runs)
    for i, run in enumerate(runs):
        _, alone = train(cfg, [run])
        for key in ("eval_loss", "train_loss", "b_simple"):
            np.testing.assert_allclose(curves(alone, key)[0], curves(together, key)[i], rtol=2e-5)


@pytest.mark.devices(8)
def test_one_device_and_eight_devices_agree():
    # The same 8 groups on every mesh (the automatic count follows the data shards).
    cfg = config(DIGITS, "batch.sizes=[64]", "gns.groups=8")
    runs = [RunSpec(0.05, 0), RunSpec(0.2, 1), RunSpec(0.1, 2), RunSpec(0.1, 3)]
    devices = jax.devices()
    assert len(devices) == 8
    _, one = train(cfg, runs, make_mesh(1, 1, devices))
    _, data8 = train(cfg, runs, make_mesh(1, 8, devices))
    _, mixed = train(cfg, runs, make_mesh(2, 4, devices), runs_axis=2)
    for other in (data8, mixed):
        for key in ("eval_loss", "eval_accuracy", "train_loss", "gns_g2"):
            np.testing.assert_allclose(curves(other, key), curves(one, key), rtol=1e-4, atol=1e-6)


@pytest.mark.devices(8)
def test_drawn_group_means_shard_over_devices_like_whole_batches():
    """The NQM's group means (one weighted row per group) on 1 device, 8 data shards, and 2 x 4;
    with 2 groups on 8 shards the rows cannot be split, so they are replicated."""
    for groups in (8, 2):
        cfg = config(NQM, "task.draw=means", "batch.sizes=[64]", f"gns.groups={groups}")
        runs = [RunSpec(0.3, 0), RunSpec(0.1, 1)]
        devices = jax.devices()
        _, one = train(cfg, runs, make_mesh(1, 1, devices))
        _, data8 = train(cfg, runs, make_mesh(1, 8, devices))
        _, mixed = train(cfg, runs, make_mesh(2, 4, devices), runs_axis=2)
        for other in (data8, mixed):
            for key in ("eval_loss", "train_loss", "gns_g2"):
                np.testing.assert_allclose(curves(other, key), curves(one, key), rtol=1e-4,
                                           atol=1e-6)


def test_same_config_twice_gives_identical_metrics():
    cfg = config(DIGITS)
    runs = [RunSpec(0.05, 0), RunSpec(0.2, 1)]
    _, first = train(cfg, runs)
    _, second = train(cfg, runs)
    for key in first[0][0]:
        np.testing.assert_array_equal(curves(first, key), curves(second, key))


def test_common_random_numbers_across_learning_rates():
    """Runs that differ only in learning rate start from the same weights and see the same data."""
    cfg = config(DIGITS)
    _, records = train(cfg, [RunSpec(0.05, 7), RunSpec(0.2, 7)])
    assert records[0][0]["eval_loss"] == records[1][0]["eval_loss"]


@pytest.mark.parametrize("drop_last", [False, True])
def test_each_epoch_visits_every_example_once(drop_last):
    cfg = config(DIGITS, "batch.sizes=[100]", f"batch.drop_last={str(drop_last).lower()}")
    spec, arith = group_spec(cfg, 100, 1)
    n = arith.num_examples
    program = GroupProgram(build_task(cfg), spec, make_mesh(1, 1, jax.devices()))
    key = jax.random.key(3)
    data = {"index": jnp.arange(n)}
    for epoch in range(2):
        rs = SimpleNamespace(perm=program.new_perm(key, epoch), data_key=key)
        seen = []
        for step in range(epoch * spec.data.steps_per_epoch, (epoch + 1) * spec.data.steps_per_epoch):
            batch, weights = program._batch(rs, data, step, 0)
            seen += [int(i) for i, w in zip(batch["index"], weights) if w > 0]
        expected = n - n % 100 if drop_last else n
        assert len(seen) == expected and len(set(seen)) == expected
    assert arith.last_batch_size == (100 if drop_last else n % 100)


@pytest.mark.parametrize("accumulation,groups", [(1, 8), (4, 4), (2, 8), (8, 8)])
def test_micro_batched_gradient_equals_full_batch(accumulation, groups):
    cfg = config(DIGITS)
    task = build_task(cfg)
    params = task.init(jax.random.key(0))
    arrays = task.train_arrays()
    batch = {k: jnp.asarray(v[:64]) for k, v in arrays.items()}
    weights = jnp.ones(64).at[50:].set(0.0)
    full = jax.grad(lambda p: jnp.sum(task.per_example_loss(p, batch) * weights) / 50)(params)
    layout = GroupLayout.choose(64, accumulation, 1, groups)
    out = batch_gradient(task.per_example_loss, params, batch, weights, layout)
    for a, b in zip(jax.tree.leaves(out.grad), jax.tree.leaves(full)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert not bool(out.full)


def test_warmup_and_schedule_reach_the_optimizer():
    cfg = config(NQM, "schedule.name=linear", "schedule.warmup_fraction=0.1",
                 "schedule.final_fraction=0.0")
    _, records = train(cfg, [RunSpec(0.4, 0)])
    lr = curves(records, "lr")[0]
    assert lr[0] == pytest.approx(0.4)  # before any step: the peak, as set
    assert lr[1] == pytest.approx(0.4 / 10)  # first step of a 10-step warm-up
    assert lr[10] == pytest.approx(0.4)
    assert lr[100] == pytest.approx(0.0, abs=1e-7)


def test_eval_points_are_geometric_plus_cadence():
    points = eval_steps(1000, 250, 20)
    assert points[0] == 0 and points[-1] == 1000
    assert {250, 500, 750} <= set(points)
    assert len([p for p in points if 10 <= p <= 100]) >= 20


def test_every_optimizer_name_has_a_factory_taking_its_hyperparameters():
    for name in OPTIMIZERS:
        assert tuple(inspect.signature(make_optimizer(name)).parameters) == HYPERPARAMS[name]
    assert set(HYPERPARAMS) == set(OPTIMIZERS)
