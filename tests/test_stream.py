"""Host-streamed training data (data.placement: host) gives exactly the runs the device path
gives: the same permutations, batches, augmentation and metrics, resumed after a kill."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from scaling import config as config_mod
from scaling.cli.main import main
from scaling.config import ConfigError
from scaling.sweep import runner
from scaling.tasks import build_task
from scaling.train import stream
from scaling.train.mesh import make_mesh
from scaling.train.program import GroupProgram
from scaling.train.spec import group_spec
from scaling.sweep import session as session_mod
from tests.test_image_files import write_fixtures
from tests.helpers import (assert_same, config, kill_after_first_run, on_disk, scaling_process,
                           summary_files)

DIGITS = {
    "name": "s", "task": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]},
    "optimizer": {"name": "momentum"}, "batch": {"sizes": [64, 200]},
    "learning_rate": {"values": [0.05, 0.3], "search": False}, "seeds": [0, 3],
    "budget": {"max_epochs": 3.5},
    "eval": {"every": 5, "points_per_decade": 0}, "train": {"chunk_steps": 7},
    "targets": ["eval_accuracy>=0.8"],
}


def cfg(placement: str, *overrides: str) -> config_mod.Config:
    """DIGITS with `overrides`, its data placed at `placement`."""
    return config(DIGITS, *overrides, f"data.placement={placement}")


@pytest.mark.slow
def test_host_streaming_trains_exactly_as_the_data_on_the_device(tmp_path):
    """Two batch sizes (one leaving a partial last batch: 1,438 = 7 x 200 + 38), several epochs,
    chunks that straddle epochs, two seeds x two learning rates, runs stopping at the target
    (so groups repack) and the noise-scale groups."""
    on_device = runner.run(cfg("device"), tmp_path / "device", quiet=True)
    streamed = runner.run(cfg("host"), tmp_path / "host", quiet=True)
    assert len(on_device) == len(streamed) == 8
    assert {s["status"] for s in streamed} >= {"completed"}
    assert_same(on_disk(tmp_path / "device"), on_disk(tmp_path / "host"))


@pytest.mark.devices(8)
def test_host_streaming_on_a_mesh_of_runs_and_data_shards(tmp_path):
    overrides = ("parallel.runs=2", "batch.sizes=[64]")
    runner.run(cfg("device", *overrides), tmp_path / "device", quiet=True)
    runner.run(cfg("host", *overrides), tmp_path / "host", quiet=True)
    assert_same(on_disk(tmp_path / "device"), on_disk(tmp_path / "host"))


def test_augmented_image_batches_stream_identically(tmp_path):
    write_fixtures("mnist", tmp_path / "mnist")
    overrides = ("task.name=mnist", f"task.data_dir={tmp_path}", "task.download=false",
                 "task.crop_padding=2", "task.flip=true", "batch.sizes=[8]",
                 "budget={max_steps: 12}", "targets=[]")
    runner.run(cfg("device", *overrides), tmp_path / "device", quiet=True)
    runner.run(cfg("host", *overrides), tmp_path / "host", quiet=True)
    assert_same(on_disk(tmp_path / "device"), on_disk(tmp_path / "host"))


def test_the_stream_draws_the_device_paths_permutations():
    """Every epoch's order covers each example once; seeds differ; the chunk's batches are the
    consecutive slices of that order, and steps past the end take example 0."""
    c = cfg("host", "batch.sizes=[200]")
    task = build_task(c)
    program = GroupProgram(task, group_spec(c, 200, 1)[0], make_mesh(1, 1))
    feed = stream.HostStream(program.spec, task.train_arrays(), [3, 0, 3], program.new_perm,
                             make_mesh(1, 1))
    try:
        assert feed.seeds == [0, 3] and list(feed.slots([3, 0, 3])) == [1, 0, 1]
        spec = program.spec
        idx = feed.indices(0)
        assert idx.shape == (2, spec.chunk_steps, 200)
        epoch = np.concatenate([feed.perm(0, 0)[s * 200:(s + 1) * 200] for s in range(8)])
        assert sorted(epoch[:1438]) == list(range(1438)) and not epoch[1438:].any()
        np.testing.assert_array_equal(idx[0].reshape(-1), epoch[:idx[0].size])
        assert not np.array_equal(feed.perm(0, 0), feed.perm(1, 0))
        assert not np.array_equal(feed.perm(0, 0), feed.perm(0, 1))
        last = feed.indices(spec.last_step - 1)
        assert not last[:, 1:].any()  # past the last step (the reading extension's)
    finally:
        feed.close()


def test_a_chunk_of_streamed_batches_stays_within_its_byte_budget():
    assert stream.chunk_steps(100, 64, 3, 256) == 100
    per_step = 8192 * 3 * 32 * 32 * 3 * 4  # CIFAR-sized float32 examples, batch 8192, 3 seeds
    assert stream.chunk_steps(100, 8192, 3, 32 * 32 * 3 * 4) == stream.STREAM_BYTES // per_step
    assert stream.chunk_steps(100, 10**9, 3, 10**6) == 1


def test_host_placement_is_refused_where_it_cannot_work():
    with pytest.raises(ConfigError, match="task nqm draws its batches on the device"):
        config_mod.from_dict({"task": {"name": "nqm"}, "budget": {"max_steps": 5},
                              "learning_rate": {"values": [0.1]},
                              "data": {"placement": "host"}})
    with pytest.raises(ConfigError, match="while gns.hessian_every is set"):
        cfg("host", "gns.hessian_every=2")
    with pytest.raises(ConfigError, match="data.placement: got 'disk'"):
        cfg("disk")


def test_auto_streams_what_would_crowd_the_device():
    task = build_task(cfg("auto"))
    size = sum(a.nbytes for a in task.train_arrays().values())
    assert session_mod.placement(cfg("auto"), task) == "device"  # CPU: no limit reported
    tight = cfg("auto", f"train={{memory_limit_gb: {3 * size / 1e9}}}")
    roomy = cfg("auto", f"train={{memory_limit_gb: {5 * size / 1e9}}}")
    assert session_mod.placement(tight, task) == "host" and session_mod.placement(roomy, task) == "device"


@pytest.mark.slow
def test_a_host_streamed_sweep_killed_with_sigkill_resumes_to_the_same_results(tmp_path):
    killed = cfg("host", "batch.sizes=[32, 64]", "train.max_group_size=1", "budget.max_epochs=2")
    path = tmp_path / "c.yaml"
    path.write_text(config_mod.to_yaml(killed))
    out = tmp_path / "killed"
    finished = kill_after_first_run(
        scaling_process("sweep", str(path), "--out", str(out), "--quiet", "--no-analyze"), out)
    assert 0 < finished < 8, "the kill must land mid-sweep for this test to mean anything"
    assert main(["sweep", str(path), "--out", str(out), "--quiet", "--no-analyze"]) == 0
    runner.run(killed, tmp_path / "clean", quiet=True)
    assert len(summary_files(out)) == 8
    assert_same(on_disk(tmp_path / "clean"), on_disk(out))


def token_cfg(tmp_path, placement: str, *overrides: str) -> config_mod.Config:
    """A short token sweep over random byte tokens written to tmp_path, placed at `placement`."""
    rng = np.random.default_rng(0)
    for name, size in (("train.bin", 5000), ("eval.bin", 300)):
        rng.integers(0, 256, size).astype("<u2").tofile(tmp_path / name)
    return config({
        "name": "t", "task": {"name": "tokens", "train": str(tmp_path / "train.bin"),
                              "eval": str(tmp_path / "eval.bin"), "dtype": "uint16",
                              "vocab": 256, "context": 8},
        "model": {"name": "transformer", "d_model": 16, "num_layers": 1, "num_heads": 2},
        "optimizer": {"name": "adam"}, "batch": {"sizes": [8, 16]},
        "learning_rate": {"values": [0.003, 0.01], "search": False}, "seeds": [0, 5],
        "budget": {"max_steps": 12}, "eval": {"every": 4, "points_per_decade": 0},
        "train": {"chunk_steps": 5}, "targets": []}, *overrides, f"data.placement={placement}")


def test_token_windows_stream_from_the_host_exactly_as_drawn_on_the_device(tmp_path):
    runner.run(token_cfg(tmp_path, "device"), tmp_path / "device", quiet=True)
    runner.run(token_cfg(tmp_path, "host"), tmp_path / "host", quiet=True)
    assert_same(on_disk(tmp_path / "device"), on_disk(tmp_path / "host"))


def test_the_window_stream_gathers_the_windows_the_device_draws(tmp_path):
    c = token_cfg(tmp_path, "host")
    task = build_task(c)
    program = GroupProgram(task, group_spec(c, 8, 1)[0], make_mesh(1, 1))
    feed = stream.open_stream(program.spec, task, [5, 0], program.new_perm, make_mesh(1, 1))
    try:
        chunk = feed.get(5)
        tokens = np.asarray(task.train_arrays()["tokens"])
        for i, seed in enumerate(feed.seeds):
            data_key = jax.random.split(jax.random.key(seed))[1]
            for t in range(program.spec.chunk_steps):
                drawn = task.sample(jax.random.fold_in(data_key, 5 + t), 8, {"tokens": tokens})
                for k in ("x", "y"):
                    np.testing.assert_array_equal(np.asarray(chunk[k][i, t]), drawn[k])
    finally:
        feed.close()


def test_auto_streams_a_token_corpus_that_would_crowd_the_device(tmp_path):
    task = build_task(token_cfg(tmp_path, "auto"))
    size = task.train_arrays()["tokens"].nbytes
    tight = token_cfg(tmp_path, "auto", f"train={{memory_limit_gb: {3 * size / 1e9}}}")
    roomy = token_cfg(tmp_path, "auto", f"train={{memory_limit_gb: {5 * size / 1e9}}}")
    assert session_mod.placement(tight, task) == "host" and session_mod.placement(roomy, task) == "device"
