"""The memory plan (scaling.sweep.memory_plan, `scaling plan --device-memory`): per-device bytes
against exact arithmetic and against what a chunk really takes, the one-line refusal before any
compute, a sweep that chooses its accumulation by train.memory_limit_gb, and bad input."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from scaling import config as config_mod
from scaling.cli.main import main
from scaling.sweep import memory_plan, runner
from scaling.sweep.memory_plan import Planner, Setting
from scaling.tasks import build_task
from scaling.train import memory
from tests.helpers import SWEEP, assert_same, comparable, config

ROOT = Path(__file__).resolve().parents[1]
GPT = {"task": {"name": "charlm", "corpus_chars": 20000, "seq_len": 16},
       "model": {"name": "gpt", "d_model": 64, "num_layers": 1, "num_heads": 4},
       "optimizer": {"name": "adam"}, "batch": {"sizes": [16]},
       "learning_rate": {"values": [0.003], "search": False}, "budget": {"max_steps": 20},
       "eval": {"every": 10, "points_per_decade": 0}, "seeds": [0], "targets": [],
       "train": {"chunk_steps": 10, "stop_dominated": False}}


def param_count(cfg) -> int:
    """N from the model's parameter tree (shapes only)."""
    params = jax.eval_shape(build_task(cfg).init, jax.random.key(0))
    return sum(math.prod(p.shape) for p in jax.tree.leaves(params))


@pytest.mark.slow
@pytest.mark.devices(8)
def test_params_and_adam_state_per_device_are_n_float32s_over_k():
    """One run per device on 8 devices: 4 N / K bytes of parameters, Adam's two moments
    8 N / K and its step count (a few scalars per run)."""
    cfg = config(GPT, "parallel.data=8")
    n = param_count(cfg)
    assert n == build_task(cfg).param_counts()["params"]  # the model's own formula agrees
    planner = Planner(cfg, int(1e12), 8)
    for k in (1, 2, 4):
        f = planner.footprint(16, Setting(1, k, 1))
        assert f.params == 4 * n // k
        assert 8 * n // k <= f.opt_state <= 8 * n // k + 64, (k, f.opt_state - 8 * n // k)
        assert f.gradients == f.params


@pytest.mark.slow
def test_the_plan_matches_the_peak_of_a_chunk_that_runs_within_25_percent(tmp_path):
    """A 14M GPT (vocabulary 256, 256 tokens, batch 16) trains one chunk on one CPU device in
    a process of its own: the process's peak resident memory beyond what it held before the
    data and state existed (experiments/memory_check.py says how it is measured) is the plan's
    estimate of that chunk within 25%."""
    out = tmp_path / "rows.json"
    env = {**os.environ, "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, str(ROOT / "experiments" / "memory_check.py"),
                           "--preset", "14m", "--context", "256", "--vocab", "256",
                           "--batch-sizes", "16", "--micro", "16", "--steps", "1",
                           "--remat", "none", "--json", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = json.loads(out.read_text())
    assert row["plan_bytes"] > 3e8  # activations dominate, not the runtime's own memory
    assert abs(row["peak_bytes"] - row["plan_bytes"]) <= 0.25 * row["plan_bytes"], row
    assert "peak/plan" in done.stdout and row["mfu"] is None  # CPU: no published peak


def write(tmp_path: Path, base: dict, *overrides: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(config_mod.to_yaml(config(base, *overrides)))
    return str(path)


@pytest.mark.parametrize("runs, shapes, sizes", [
    (1, [(10,)], [1, 2]),  # 10 splits by 2 only
    (1, [(64, 10)], [1, 2, 4, 8]),  # 64 by every divisor of 8
    (1, [(3,), (5, 7)], [1]),  # nothing splits: fsdp would shard nothing
    (2, [(10,)], [1, 2]),  # 4 devices per run group
])
def test_fsdp_sizes_are_the_divisors_that_split_some_parameter(runs, shapes, sizes):
    cfg = config(SWEEP, f"parallel.runs={runs}")
    assert memory_plan.fsdp_sizes(cfg, 8, shapes) == sizes


@pytest.mark.devices(8)
def test_a_limit_below_one_run_is_refused_where_no_larger_fsdp_splits_a_parameter():
    """The NQM's parameter (10 numbers) splits at fsdp 2, not at 4 or 8: a limit too small
    for one run is a refusal at the settings that exist, not the engine's error for fsdp 8."""
    (refused,) = memory_plan.plan(config(SWEEP, "batch.sizes=[8]", "parallel.runs=1"), 1e-9)
    assert not refused.fits and refused.footprint.setting.fsdp in (1, 2)


@pytest.mark.slow
@pytest.mark.devices(8)
def test_a_device_too_small_is_refused_in_one_line_before_any_compute(tmp_path, capsys):
    path = write(tmp_path, GPT, "parallel.data=8")
    assert main(["plan", path, "--device-memory", "0.000001"]) == 1
    out, err = capsys.readouterr()
    [line] = [x for x in err.splitlines() if x.startswith("refused")]  # beside the progress log
    assert line.startswith("refused: batch 16 of gpt needs ") and "the device has 1e-06 GB" in line
    assert "even at its smallest (accumulation 2, fsdp 8, 1 run per group)" in line
    assert "no" in out.splitlines()[-1]  # the table's row: does not fit
    assert main(["plan", path, "--device-memory", "100"]) == 0
    out, err = capsys.readouterr()
    assert "refused" not in err and out.splitlines()[-1].split()[:4] == ["16", "1", "1", "1"]


@pytest.mark.slow
def test_a_sweep_refuses_a_batch_that_fits_nowhere_before_training(tmp_path):
    with pytest.raises(config_mod.ConfigError, match=r"^train.memory_limit_gb: batch 16 of gpt"):
        runner.run(config(GPT, "train.memory_limit_gb=0.000001"), tmp_path / "o", quiet=True)
    assert not (tmp_path / "o").exists()


def _limit_between(cfg, size: int, fits: Setting, not_fits: Setting) -> float:
    """memory_limit_gb under which `fits`'s chunk fits and `not_fits`'s does not."""
    planner = Planner(cfg, int(1e12))
    low, high = (planner.footprint(size, s).total for s in (fits, not_fits))
    assert low < high
    return (low + high) / 2 / memory.SAFETY / memory.GB


@pytest.mark.slow
@pytest.mark.devices(8)
def test_a_sweep_given_a_memory_limit_accumulates_as_planned(tmp_path):
    """Batch 64 of 64-token sequences on 8 devices: a limit between the chunks at accumulation 1
    and 2 trains at 2, records it, and equals the same sweep told accumulation 2."""
    base = config(GPT, "batch.sizes=[64]", "task.seq_len=64")
    gb = _limit_between(base, 64, Setting(2, 1, 1), Setting(1, 1, 1))
    planned = runner.run(config(GPT, "batch.sizes=[64]", "task.seq_len=64",
                                f"train.memory_limit_gb={gb}"), tmp_path / "planned", quiet=True)
    told = runner.run(config(GPT, "batch.sizes=[64]", "task.seq_len=64", "batch.accumulation=2"),
                      tmp_path / "told", quiet=True)
    record = json.loads((tmp_path / "planned" / "memory_plan.json").read_text())
    assert record["fsdp"] == 1 and record["batch_sizes"]["64"]["accumulation"] == 2
    assert record["batch_sizes"]["64"]["fits"]
    [run] = planned
    run_config = json.loads((tmp_path / "planned" / "runs" / run["run_id"] / "config.json")
                            .read_text())
    assert run_config["accumulation"] == 2
    arithmetic = json.loads((tmp_path / "planned" / "arithmetic.json").read_text())
    assert arithmetic[0]["accumulation"] == 2
    assert_same(comparable(planned), comparable(told))
    assert np.isfinite(run["final"]["train_loss"])


def test_device_memory_refuses_a_scale_config_and_non_positive_sizes(capsys):
    assert main(["plan", str(ROOT / "configs" / "scale_charlm.yaml"), "--device-memory", "16"]) == 2
    assert "--device-memory: plan one cell's config at a time" in capsys.readouterr().err
    for bad in ("0", "-4", "lots"):
        assert main(["plan", str(ROOT / "configs" / "charlm.yaml"), "--device-memory", bad]) == 2
        assert (f"error: argument --device-memory: got '{bad}', expected a positive number"
                in capsys.readouterr().err)
