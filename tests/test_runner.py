"""scaling.sweep.runner: `scaling sweep --dry-run` lists the runs, groups and plan and writes
nothing; shards together equal the whole sweep; an extended sweep trains only its new points,
an optimizer axis in one group; and the learning-rate search through the engine: a first grid
whose top lies below the optimum extends upward and brackets it, each round trains as one
group with the seeds of the first grid, the rounds are recorded, batch sizes take turns (none
waits for another's rounds) with the same results as each alone, and a sweep killed mid-round
resumes to the same results as one never interrupted."""

from __future__ import annotations

import json
import math
import signal
import time

import pytest
import yaml

from scaling import config as config_mod, store
from scaling.analysis import analyze as A
from scaling.cli.main import main
from scaling.config import ConfigError
from scaling.sweep import grid, runner
from scaling.sweep.prepare import prepare
from tests.helpers import (SWEEP, assert_same, assert_throughput, axes_config, comparable, config,
                           on_disk, scaling_process, summary_files, write_config)

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
def test_batch_sizes_take_turns_and_the_order_changes_no_result(tmp_path):
    cfg = config(LOW, "batch.sizes=[8, 16]", "learning_rate.max_rounds=2")
    done = runner.run(cfg, tmp_path / "both", quiet=True)
    first = lambda s: s["learning_rate"] in (0.05, 0.1)
    grid_16 = max(i for i, s in enumerate(done) if s["batch_size"] == 16 and first(s))
    rounds_8 = [i for i, s in enumerate(done) if s["batch_size"] == 8 and not first(s)]
    assert rounds_8 and grid_16 < min(rounds_8)  # 16's first grid did not wait for 8's rounds
    assert {r["batch_size"] for r in store.read_rounds(tmp_path / "both")} == {8, 16}
    alone = runner.run(cfg, tmp_path / "alone", batch_sizes=[8], quiet=True)
    assert_same(comparable(alone), comparable([s for s in done if s["batch_size"] == 8]))


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


def test_dry_run_prints_runs_groups_and_plan_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["sweep", write_config(tmp_path), "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert not out.exists()
    assert "steps" in text and "max_examples" in text  # the plan table
    for size, steps in ((8, 100), (16, 50)):
        assert any(line.split()[:1] == [str(size)] and str(steps) in line.split()
                   for line in text.splitlines())
    assert text.count("to do  bs") == 8 and "batch 16 group 1: 2 runs, 0 done, 2 to train" in text
    # 8 runs of 800 examples; smoothed readings may extend, nothing stops early, no search
    assert "to train: 8 runs at fixed batch sizes, 6,400 examples if each trains to its budget" \
        in text and "go on to 1.5x their budget" in text
    assert "stop early" not in text and "learning-rate search" not in text


def test_dry_run_says_what_may_cut_the_cost_and_what_the_search_adds(tmp_path, capsys):
    path = write_config(tmp_path, "train.stop_dominated=true", "learning_rate.search=true",
                        "learning_rate.max_rounds=3", "budget.reading_extension=off")
    assert main(["sweep", path, "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "6,400 examples" in text and "go on to" not in text
    assert "stop early (train.stop_dominated)" in text
    assert "the learning-rate search: up to 3 rounds per batch size in all" in text


def test_dry_run_marks_finished_runs(tmp_path, capsys):
    config_path, out = write_config(tmp_path), tmp_path / "o"
    runner.run(config(SWEEP, "batch.sizes=[8]", "learning_rate.values=[0.1]"), out, quiet=True,
               force=True)
    before = sorted(p.name for p in out.rglob("*"))
    capsys.readouterr()
    assert main(["sweep", config_path, "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "done   bs8-lr0.1-seed0" in text and "to do  bs8-lr0.5-seed0" in text
    assert "batch 8 group 0: 2 runs, 2 done, 0 to train" in text
    assert "to train: 6 runs at fixed batch sizes, 4,800 examples" in text
    assert sorted(p.name for p in out.rglob("*")) == before


@pytest.mark.slow
def test_two_shards_equal_the_unsharded_sweep(tmp_path):
    cfg = config(SWEEP)
    whole = runner.run(cfg, tmp_path / "whole", quiet=True)
    first = runner.run(cfg, tmp_path / "sharded", quiet=True, shard=(0, 2))
    second = runner.run(cfg, tmp_path / "sharded", quiet=True, shard=(1, 2))
    ids = {s["run_id"] for s in first}
    assert ids and ids.isdisjoint(s["run_id"] for s in second)
    assert len(whole) == 8 and len(first) + len(second) == 8
    assert_same(comparable(whole), comparable(first + second))
    assert_same(on_disk(tmp_path / "whole"), on_disk(tmp_path / "sharded"))
    assert runner.run(cfg, tmp_path / "sharded", quiet=True) == []
    assert assert_throughput(tmp_path / "whole") == assert_throughput(tmp_path / "sharded") == 4


@pytest.mark.slow
def test_extension_trains_only_the_new_points(tmp_path):
    out = tmp_path / "o"
    small = config(SWEEP, "batch.sizes=[8]", "learning_rate.values=[0.1]", "seeds=[0]")
    first = runner.run(small, out, quiet=True)
    stamp = {p: p.stat().st_mtime_ns for p in summary_files(out)}
    bigger = config(SWEEP, "batch.sizes=[8, 16]", "learning_rate.values=[0.1, 0.5]", "seeds=[0, 1]")
    new = runner.run(bigger, out, quiet=True)
    all_ids = {r.run_id for r in grid.expand(bigger)}
    assert {s["run_id"] for s in first} == {"bs8-lr0.1-seed0"}
    assert {s["run_id"] for s in new} == all_ids - {"bs8-lr0.1-seed0"}
    assert {p: p.stat().st_mtime_ns for p in stamp} == stamp
    assert {r["run_id"] for r in store.load(out)} == all_ids


@pytest.mark.slow
def test_a_momentum_axis_trains_in_one_group_and_extends(tmp_path):
    out = tmp_path / "o"
    first = runner.run(axes_config("optimizer.momentum=[0.0, 0.9]"), out, quiet=True)
    assert len(first) == 8 and {s["group_size"] for s in first} == {4}
    by_id = {s["run_id"]: s for s in first}
    for rid in by_id:
        momentum = json.loads((out / "runs" / rid / "config.json").read_text())["optimizer"]["momentum"]
        assert momentum == float(rid.rsplit("mom", 1)[1])
    for size in (8, 16):
        for lr in (0.1, 0.5):
            a, b = (by_id[f"bs{size}-lr{lr}-seed0-mom{m}"]["final"] for m in ("0", "0.9"))
            assert math.isfinite(a["eval_loss"]) and math.isfinite(b["eval_loss"])
            assert a["eval_loss"] != b["eval_loss"] and a["train_loss"] != b["train_loss"]
    alone = runner.run(axes_config("optimizer.momentum=0.0"), tmp_path / "scalar", batch_sizes=[8],
                       quiet=True)
    for s in alone:  # each run of the axis trains as it would in a sweep of its own value
        assert s["final"]["eval_loss"] == pytest.approx(
            by_id[s["run_id"] + "-mom0"]["final"]["eval_loss"], rel=1e-5)
    stamp = {p: p.stat().st_mtime_ns for p in summary_files(out)}
    new = runner.run(axes_config("optimizer.momentum=[0.0, 0.9, 0.5]"), out, quiet=True)
    assert sorted(s["run_id"] for s in new) == sorted(
        f"bs{b}-lr{lr}-seed0-mom0.5" for b in (8, 16) for lr in (0.1, 0.5))
    assert {p: p.stat().st_mtime_ns for p in stamp} == stamp
    assert len(store.load(out)) == 12


def test_dry_run_lists_the_axis_runs_and_a_bad_axis_fails_before_compute(tmp_path, capsys):
    path, out = write_config(tmp_path, "optimizer.name=momentum"), tmp_path / "o"
    assert main(["sweep", path, "optimizer.momentum=[0.0, 0.9]", "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert text.count("to do  bs") == 16 and "to do  bs16-lr0.5-seed1-mom0.9" in text
    assert main(["sweep", path, "optimizer.b2=[0.9, 0.99]", "--out", str(out)]) == 2
    assert "optimizer momentum does not use b2" in capsys.readouterr().err and not out.exists()


def test_a_folder_from_before_a_model_key_existed_goes_on_and_a_real_change_is_refused(tmp_path):
    """A sweep.yaml written before model.preset, positions and remat existed trained at their
    defaults: the same config goes on in that folder; a model that differs is refused."""
    cfg = config(SWEEP)
    data = config_mod.to_dict(cfg)
    for key in ("preset", "positions", "remat"):
        del data["model"][key]
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(data))
    prepare(cfg, tmp_path)
    with pytest.raises(ConfigError, match="different model"):
        prepare(config(SWEEP, "model.d_model=32"), tmp_path)
