"""Plain helpers several test files share, imported where used (`from tests.helpers import ...`).

A config is a base dict and `section.key=value` overrides with YAML values, spelled exactly as a
user types them after a config on the command line: `config(NQM, "task.draw=means",
"batch.sizes=[64]")`. The bases: NQM and DIGITS for one group through the engine, SWEEP for a
small sweep on disk.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np
import pytest

from scaling import store
from scaling.config import Config, apply_overrides, from_dict, to_yaml
from scaling.tasks import build_task
from scaling.train.loop import run_group
from scaling.train.mesh import make_mesh, put_replicated
from scaling.train.program import GroupProgram
from scaling.train.sinks import Sink
from scaling.train.spec import RunSpec, group_spec
from scaling.train.start import fresh

# A 20-dimensional NQM, SGD at 0.3, batch 8, 100 steps, every step evaluated. Like every base
# here it trains the runs it lists (no learning-rate search, no dominated runs stopped) when a
# test sweeps it: the search has its own tests.
NQM = {
    "task": {"name": "nqm", "dim": 20}, "optimizer": {"name": "sgd"},
    "batch": {"sizes": [8]}, "learning_rate": {"values": [0.3], "search": False},
    "budget": {"max_steps": 100}, "eval": {"every": 1, "points_per_decade": 0},
    "train": {"chunk_steps": 25, "stop_dominated": False}}

# sklearn's digits, a one-layer MLP, momentum, batch 64, 60 steps.
DIGITS = {
    "task": {"name": "digits"}, "model": {"name": "mlp", "hidden": [32]},
    "optimizer": {"name": "momentum"}, "batch": {"sizes": [64]},
    "learning_rate": {"values": [0.05, 0.2], "search": False}, "budget": {"max_steps": 60},
    "eval": {"every": 10, "points_per_decade": 0},
    "train": {"chunk_steps": 16, "stop_dominated": False}}

# A sweep of 8 runs on a 10-dimensional NQM: 2 batch sizes x 2 learning rates x 2 seeds.
SWEEP = {
    "name": "t", "task": {"name": "nqm", "dim": 10}, "optimizer": {"name": "sgd"},
    "batch": {"sizes": [8, 16]}, "learning_rate": {"values": [0.1, 0.5], "search": False},
    "budget": {"max_examples": 800}, "targets": ["eval_loss<=0.3"], "seeds": [0, 1],
    "train": {"max_group_size": 2, "stop_dominated": False},
}


def config(base: dict, *overrides: str) -> Config:
    """`base` with `section.key=value` overrides (values in YAML), as the command line takes them."""
    return from_dict(apply_overrides(base, list(overrides)))


def axes_config(*optimizer: str) -> Config:
    """SWEEP with momentum and these optimizer settings (optimizer axes), one seed, one group."""
    return config(SWEEP, "optimizer.name=momentum", *optimizer, "seeds=[0]", "train={stop_dominated: false}")


def write_config(folder: Path, *overrides: str) -> str:
    """SWEEP with `overrides`, written to folder/c.yaml; its path."""
    path = folder / "c.yaml"
    path.write_text(to_yaml(config(SWEEP, *overrides)))
    return str(path)


# ---------------------------------------------------------------- one group through the engine


class Collect(Sink):
    """Every run's rows, as a group's sinks hear them."""

    def __init__(self, runs: int) -> None:
        self.records: list[list[dict]] = [[] for _ in range(runs)]

    def rows(self, records, wall_s, running) -> None:
        for mine, rows in zip(self.records, records):
            mine.extend(rows)


def train_program(cfg: Config, runs: list[RunSpec], mesh=None, runs_axis: int = 1, *,
                  before: Callable[[GroupProgram, Any, Any], None] | None = None):
    """Train one group of `runs` at the config's first batch size; (results, per-run metric
    rows, the GroupProgram with its per-width compile records). `before(program, data,
    eval_data)` is called before the group starts (to compile a width ahead, say)."""
    mesh = mesh or make_mesh(1, 1, jax.devices())
    spec, _ = group_spec(cfg, cfg.batch.sizes[0], mesh.shape["data"] * mesh.shape["fsdp"])
    task = build_task(cfg)
    program = GroupProgram(task, spec, mesh)
    collect = Collect(len(runs))
    data = put_replicated(mesh, task.train_arrays() or {})
    eval_data = put_replicated(mesh, task.eval_arrays())
    if before is not None:
        before(program, data, eval_data)
    end = run_group(program, fresh(program, runs, data, eval_data, runs_axis), data, eval_data,
                    [collect])
    return end.results, collect.records, program


def train(cfg: Config, runs: list[RunSpec], mesh=None, runs_axis: int = 1):
    """`train_program` without the program: (results, per-run metric rows)."""
    results, records, _ = train_program(cfg, runs, mesh, runs_axis)
    return results, records


def curves(records: list[list[dict]], key: str = "eval_loss") -> np.ndarray:
    """One metric of every run's rows: an array of runs x rows."""
    return np.array([[row[key] for row in rows] for rows in records])


# ---------------------------------------------------------------- sweeps and their run files

TIMING = {"wall_s", "compile_s", "group_size"}


def _flat(value, prefix=""):
    if isinstance(value, dict):
        return {k2: v2 for k, v in value.items() for k2, v2 in _flat(v, f"{prefix}{k}.").items()}
    return {prefix.rstrip("."): value}


def comparable(summaries) -> dict[str, dict]:
    """Summaries by run id without timing fields (final.wall_s and throughput included)."""
    return {s["run_id"]: {k: v for k, v in _flat(s).items()
                          if k.split(".")[-1] not in TIMING and not k.startswith("throughput")}
            for s in summaries}


def assert_same(a: dict[str, dict], b: dict[str, dict]) -> None:
    """Same runs, same discrete fields, floats to float32 tolerance (vmap width may differ);
    NaN (an undefined noise scale, in summaries still in memory) equals NaN."""
    assert a.keys() == b.keys()
    for rid in a:
        assert a[rid].keys() == b[rid].keys(), rid
        for key, value in a[rid].items():
            if isinstance(value, float):
                assert b[rid][key] == pytest.approx(value, rel=1e-5, abs=1e-7, nan_ok=True), (rid, key)
            else:
                assert b[rid][key] == value, (rid, key)


def on_disk(out: Path) -> dict[str, dict]:
    """The comparable summaries of a sweep folder."""
    return comparable([r["summary"] for r in store.load(out)])


def assert_throughput(out: Path, resumed: bool = False) -> int:
    """The throughput invariants on every group of a finished sweep folder (a group's runs
    share its figures): training seconds > 0, examples per second x training seconds = the
    examples it trained (with `resumed` False: the sum of its runs' examples), MFU in (0, 1]
    where known, and compile-ahead seconds not negative. The number of groups checked."""
    groups: dict[str, list[dict]] = {}
    for record in store.load(out):
        speed = record["summary"].get("throughput")
        if speed is not None:
            groups.setdefault(json.dumps(speed, sort_keys=True), []).append(record["summary"])
    for key, summaries in groups.items():
        speed = summaries[0]["throughput"]
        assert len(summaries) <= summaries[0]["group_size"], key
        assert speed["train_s"] > 0, key
        assert speed["examples_per_s"] * speed["train_s"] == pytest.approx(speed["examples"],
                                                                           rel=1e-9), key
        if not resumed:
            assert speed["examples"] == sum(s["examples"] for s in summaries), key
        assert speed["mfu"] is None or 0 < speed["mfu"] <= 1, key
        assert speed["compile_ahead_s"] >= 0, key
    return len(groups)


# ---------------------------------------------------------------- the CLI as a process


def xla_flags(devices: int) -> str:
    """This run's XLA flags (tests/conftest.py sets them) with `devices` simulated CPU devices,
    for a process started with a device count of its own."""
    kept = [f for f in os.environ.get("XLA_FLAGS", "").split()
            if not f.startswith("--xla_force_host_platform_device_count")]
    return " ".join([f"--xla_force_host_platform_device_count={devices}", *kept])


def scaling_process(*args: str) -> subprocess.Popen:
    """`scaling ARGS` started as a process of its own, its output captured as text."""
    return subprocess.Popen([sys.executable, "-m", "scaling.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def summary_files(out: Path) -> list[Path]:
    """The summary.json files of a sweep folder: one per finished run."""
    return list(out.glob("runs/*/summary.json"))


def kill_after_first_run(proc: subprocess.Popen, out: Path) -> int:
    """SIGKILL a sweep once its first run has finished; the number of runs finished by then."""
    deadline = time.monotonic() + 120
    while not summary_files(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return len(summary_files(out))
