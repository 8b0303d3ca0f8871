"""runner.run's learning-rate search through the engine: a first grid whose top lies below
the optimum extends upward and brackets it, each round trains as one group with the seeds of
the first grid, the rounds are recorded, and a sweep killed mid-round resumes to the same
results as one never interrupted."""

from __future__ import annotations

import signal
import time

import pytest

from scaling import config as config_mod, store
from scaling.analysis import analyze as A
from scaling.cli.main import main
from scaling.sweep import runner
from tests.helpers import assert_same, config, on_disk, scaling_process

TARGET = "eval_loss<=0.1"
# On this NQM at batch 8 the fewest steps to 0.1 lie near lr 1 (2.7 diverges): a first grid of
# 0.05 and 0.1 lies below the optimum.
LOW = {"name": "t", "task": {"name": "nqm", "dim": 10}, "optimizer": {"name": "sgd"},
       "batch": {"sizes": [8]}, "learning_rate": {"values": [0.05, 0.1], "max_rounds": 6},
       "budget": {"max_examples": 4000}, "targets": [TARGET], "seeds": [0, 1],
       "eval": {"every": 2}, "train": {"chunk_steps": 10}}


@pytest.mark.slow
def test_a_grid_below_the_optimum_extends_upward_and_brackets_it(tmp_path):
    done = runner.run(config(LOW), tmp_path, quiet=True)
    rounds = store.read_rounds(tmp_path)
    assert rounds[0]["learning_rates"] == pytest.approx([0.2])  # one step up, the grid's factor
    assert [r["round"] for r in rounds] == list(range(1, len(rounds) + 1))
    for r in rounds:  # each round: its new rates x the first grid's seeds, as one group
        mine = [s for s in done if s["learning_rate"] in r["learning_rates"]]
        assert len(mine) == 2 * len(r["learning_rates"])
        assert {s["group_size"] for s in mine} == {len(mine)}
    (point,) = A.analyze(tmp_path, bootstrap=0)["targets"][0]["points"]
    assert point["best_lr"] > 0.4 and point["at_edge"] is None
    assert point["optimum"]["bracketed"]


@pytest.mark.slow
def test_a_sweep_killed_mid_round_resumes_to_the_same_results(tmp_path):
    cfg = config(LOW, "train.max_group_size=1")
    path = tmp_path / "c.yaml"
    path.write_text(config_mod.to_yaml(cfg))
    out = tmp_path / "killed"
    proc = scaling_process("sweep", str(path), "--out", str(out), "--quiet", "--no-analyze")
    deadline = time.monotonic() + 300
    while not store.read_rounds(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert store.read_rounds(out), "the kill must land once a round is recorded"
    assert main(["sweep", str(path), "--out", str(out), "--quiet", "--no-analyze"]) == 0
    runner.run(cfg, tmp_path / "clean", quiet=True)
    assert store.read_rounds(out) == store.read_rounds(tmp_path / "clean")
    assert_same(on_disk(tmp_path / "clean"), on_disk(out))
