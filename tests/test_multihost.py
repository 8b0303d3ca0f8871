"""Several hosts, end to end (a subject across scaling.train and scaling.sweep): two processes
on localhost with jax.distributed (gloo) train the same runs as one process, with the
parameters and optimizer state whole on each device or sharded (fsdp)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import xla_flags

CONFIG = """
name: multihost
task: {name: digits}
model: {name: mlp, hidden: [32]}
optimizer: {name: momentum}
batch: {sizes: [64]}
learning_rate: {values: [0.05, 0.2]}
budget: {max_steps: 40}
eval: {every: 10, points_per_decade: 0}
train: {chunk_steps: 20}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(config: Path, out: Path, devices: int, extra_env: dict[str, str],
           *overrides: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALING_")}
    env.update(XLA_FLAGS=xla_flags(devices), JAX_PLATFORMS="cpu",
               **extra_env)
    cmd = [sys.executable, "-m", "scaling.cli", "train", str(config), *overrides, "--out", str(out),
           "--quiet"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def metrics(out: Path) -> dict[str, list[dict]]:
    runs = sorted((out / "runs").iterdir())
    assert runs
    return {r.name: [json.loads(line) for line in (r / "metrics.jsonl").read_text().splitlines()]
            for r in runs}


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize("fsdp", [1, 2])
def test_two_processes_match_one(tmp_path, fsdp):
    """fsdp 2: each process's two devices hold one run group's parameters and optimizer state
    in halves, the batch split over the other axis across the processes."""
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    per_host, sharded = fsdp, f"train.fsdp={fsdp}"
    single = launch(config, tmp_path / "one", 2 * per_host, {}, sharded)
    port = free_port()
    procs = [launch(config, tmp_path / "two", per_host, {
        "SCALING_COORDINATOR": f"127.0.0.1:{port}", "SCALING_NUM_PROCESSES": "2",
        "SCALING_PROCESS_ID": str(i)}, sharded) for i in range(2)]
    for p in [single, *procs]:
        output, _ = p.communicate(timeout=300)
        assert p.returncode == 0, output
    one, two = metrics(tmp_path / "one"), metrics(tmp_path / "two")
    assert one.keys() == two.keys()
    for run_id in one:
        assert len(one[run_id]) == len(two[run_id]) == 5
        for a, b in zip(one[run_id], two[run_id]):
            for key in ("step", "examples", "lr", "train_loss", "eval_loss", "eval_accuracy", "gns_g2"):
                nan = lambda v: np.nan if v is None else v  # JSON writes NaN as null
                np.testing.assert_allclose(nan(a[key]), nan(b[key]), rtol=1e-5, err_msg=f"{run_id} {key}")
