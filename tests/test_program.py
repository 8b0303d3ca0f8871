"""The compiled group (scaling.train.program): a vmapped group trains each run as it would
alone, on one device or a mesh, with common random numbers across learning rates, and each
epoch visits every example once; each run starts from its seed's initialisation and its rows
hold its own evaluation, bit for bit; a chunk compiled ahead takes a group without targets."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling.tasks import build_task
from scaling.train.loop import run_group
from scaling.train.mesh import make_mesh, put_replicated
from scaling.train.program import GroupProgram
from scaling.train.spec import RunSpec, group_spec
from scaling.train.start import fresh
from tests.helpers import DIGITS, NQM, Collect, config, curves, train


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


@pytest.mark.devices(8)
def test_a_chunk_compiled_ahead_from_shapes_takes_a_group_without_targets():
    """Compiled ahead (the next group's, or a fresh group's while its first state compiles),
    the chunk must accept the real state: with no targets the target leaves are empty, and
    an empty leaf comes out of the first state replicated, not sharded over the runs."""
    mesh = make_mesh(2, 4, jax.devices())
    cfg = config(NQM, "targets=[]", "parallel.runs=2")
    task = build_task(cfg)
    program = GroupProgram(task, group_spec(cfg, 8, 4)[0], mesh)
    data, eval_data = put_replicated(mesh, {}), put_replicated(mesh, task.eval_arrays())
    program.compile_ahead(2, data, eval_data)
    runs = [RunSpec(0.3, 0), RunSpec(0.1, 1)]
    end = run_group(program, fresh(program, runs, data, eval_data, 2), data, eval_data, [])
    assert [r.steps for r in end.results] == [100, 100] and list(program.compile_s) == [2]


def _digits_group():
    """A digits program on one device and its data, placed."""
    cfg = config(DIGITS)
    mesh = make_mesh(1, 1, jax.devices())
    task = build_task(cfg)
    program = GroupProgram(task, group_spec(cfg, cfg.batch.sizes[0], 1)[0], mesh)
    return program, put_replicated(mesh, task.train_arrays()), put_replicated(mesh, task.eval_arrays())


def test_each_run_starts_from_its_seeds_initialisation_bit_for_bit():
    """The parameters are initialised once per seed, unbatched; every run holds exactly what
    the initialisation vmapped over the runs' split seed keys gives, and its data key."""
    program, data, eval_data = _digits_group()
    runs = [RunSpec(0.05, 3), RunSpec(0.2, 1), RunSpec(0.1, 3)]
    state = fresh(program, runs, data, eval_data, 1).state
    keys = jax.vmap(lambda s: jax.random.split(jax.random.key(s)))(jnp.array([3, 1, 3], jnp.uint32))
    vmapped = jax.jit(jax.vmap(program.task.init))(keys[:, 0])
    for got, want in zip(jax.tree.leaves(state.params), jax.tree.leaves(vmapped)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(jax.random.key_data(state.data_key), jax.random.key_data(keys[:, 1]))
    assert any(not np.array_equal(x[0], x[1]) for x in jax.tree.leaves(state.params))


def test_the_initialisation_compiles_once_per_task_across_batch_sizes():
    """Every batch size's program of one task draws its runs' first parameters from one
    compiled program; another task (of other shapes) compiles its own."""
    cfg = config(DIGITS, "batch.sizes=[8, 16]")
    mesh, task = make_mesh(1, 1, jax.devices()), build_task(cfg)
    small, large = (GroupProgram(task, group_spec(cfg, b, 1)[0], mesh) for b in (8, 16))
    assert small._first is large._first
    for program in (small, large):
        program._first(np.uint32(0))
    assert small._first._cache_size() == 1
    other = GroupProgram(build_task(config(DIGITS, "model.hidden=[8]")), group_spec(cfg, 8, 1)[0],
                         mesh)
    assert other._first is not small._first


def test_each_runs_metrics_are_its_own_evaluation():
    """On CPU the runs are evaluated one after another: the last row of every run holds, bit
    for bit, the task's evaluation of that run's final parameters alone; on an accelerator,
    where they are evaluated together, to float32 rounding (on an H200: 1 ulp)."""
    program, data, eval_data = _digits_group()
    runs = [RunSpec(0.05, 0), RunSpec(0.2, 0), RunSpec(0.5, 1)]
    collect = Collect(len(runs))
    end = run_group(program, fresh(program, runs, data, eval_data, 1), data, eval_data, [collect])
    evaluate = jax.jit(program.evaluate)
    cpu = jax.default_backend() == "cpu"
    for i, rows in enumerate(collect.records):
        alone = evaluate(jax.tree.map(lambda x: x[i], end.state.params), eval_data)
        assert rows[-1]["step"] == 60
        for key in ("eval_loss", "eval_accuracy"):
            assert rows[-1][key] == pytest.approx(float(alone[key]), rel=0 if cpu else 1e-6)


def test_a_fresh_group_evaluates_step_0_once_in_its_first_chunk():
    """The first state's program holds no evaluation: the first chunk evaluates step 0 before
    it trains (row 0 is, bit for bit on CPU, the evaluation of the first state), and no later
    chunk evaluates its first step again (every evaluated step once, chunk edges included)."""
    program, data, eval_data = _digits_group()
    runs = [RunSpec(0.05, 0), RunSpec(0.5, 1)]
    start = fresh(program, runs, data, eval_data, 1)
    first = jax.device_get(start.state.params)
    collect = Collect(len(runs))
    run_group(program, start, data, eval_data, [collect])
    evaluate = jax.jit(program.evaluate)
    tol = 0 if jax.default_backend() == "cpu" else 1e-6
    for i, rows in enumerate(collect.records):
        steps = [r["step"] for r in rows]
        assert steps[0] == 0 and steps == sorted(set(steps)) and steps[-1] == 60
        assert any(s % program.spec.chunk_steps == 0 for s in steps[1:])  # a chunk edge is read
        alone = evaluate(jax.tree.map(lambda x: x[i], first), eval_data)
        assert rows[0]["eval_loss"] == pytest.approx(float(alone["eval_loss"]), rel=tol)


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
