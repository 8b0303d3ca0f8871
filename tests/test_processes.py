"""Sweeps as processes of their own, end to end across the CLI, scaling.sweep and scaling.store:
a sweep killed with SIGKILL resumes to the results of one never interrupted, and two shard
processes write one folder at once."""

from __future__ import annotations

import pytest
import yaml

from scaling import config as config_mod, store
from scaling.cli.main import main
from scaling.sweep import runner
from tests.helpers import (SWEEP, assert_same, assert_throughput, config, kill_after_first_run,
                           on_disk, scaling_process, summary_files, write_config)

LONG = ("batch.sizes=[8, 16, 32, 64]", "learning_rate.values=[0.05, 0.1, 0.5]",
        "learning_rate.search=false", "train.max_group_size=1", "train.chunk_steps=10",
        "targets=['eval_loss<=0.05']")


@pytest.mark.slow
def test_a_sweep_killed_with_sigkill_resumes_to_the_same_results(tmp_path):
    config_path, out = write_config(tmp_path, *LONG), tmp_path / "killed"
    finished = kill_after_first_run(
        scaling_process("sweep", config_path, "--out", str(out), "--quiet"), out)
    assert 0 < finished < 24, "the kill must land mid-sweep for this test to mean anything"
    assert main(["sweep", config_path, "--out", str(out), "--quiet"]) == 0
    runner.run(config(SWEEP, *LONG), tmp_path / "clean", quiet=True)
    assert len(summary_files(out)) == 24
    assert_same(on_disk(tmp_path / "clean"), on_disk(out))
    assert assert_throughput(out, resumed=True) == assert_throughput(tmp_path / "clean") == 24


@pytest.mark.slow
def test_two_shard_processes_write_one_folder_at_once(tmp_path):
    config_path, out = write_config(tmp_path, *LONG), tmp_path / "o"
    procs = [scaling_process("sweep", config_path, "--out", str(out), "--quiet", "--shard",
                             f"{i}/2") for i in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    records = store.load(out)
    assert len(records) == 24 and not list(out.rglob("*.tmp"))
    written = config_mod.from_dict(yaml.safe_load((out / "sweep.yaml").read_text()))
    assert config_mod.to_dict(written) == config_mod.to_dict(config(SWEEP, *LONG))
    for r in records:
        text = (out / "runs" / r["run_id"] / "metrics.jsonl").read_text()
        assert len(r["metrics"]) == len(text.splitlines()) and r["metrics"][-1]["step"] == r["summary"]["steps"]
