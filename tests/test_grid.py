"""Sweeps: --dry-run, shards, kill -9 and resume, extending a sweep, concurrency, tables, centred grids."""

from __future__ import annotations

import json
import math
import os
import runpy
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

from scaling import config as config_mod, store
from scaling.cli.main import main
from scaling.config import ConfigError
from scaling.formatting import duration, number, percent
from scaling.sweep import grid, progress, runner
from scaling.tasks import storage
from scaling.train.program import GroupProgram
from scaling.train.spec import RunSpec
from scaling.sweep import prepare as prepare_mod
from tests.helpers import (SWEEP, assert_same, assert_throughput, comparable, config,
                           kill_after_first_run, on_disk, scaling_process, summary_files,
                           write_config)

# ---------------------------------------------------------------- dry run


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
    assert sorted(p.name for p in out.rglob("*")) == before


# ---------------------------------------------------------------- shards


@pytest.mark.parametrize("text", ["2/2", "-1/2", "1", "a/b", "0/0", "1/2/3"])
def test_bad_shard_is_refused(tmp_path, capsys, text):
    with pytest.raises(ConfigError, match="--shard"):
        grid.parse_shard(text)
    assert main(["sweep", write_config(tmp_path), "--out", str(tmp_path / "o"),
                 f"--shard={text}"]) == 2
    assert "--shard" in capsys.readouterr().err and not (tmp_path / "o").exists()


def _unit(size: int, index: int, cost: int) -> grid.Unit:
    return grid.Unit(size, index, (), cost)


def test_partition_is_longest_processing_time_first():
    units = [_unit(8, 0, 10), _unit(16, 0, 7), _unit(32, 0, 6), _unit(64, 0, 5), _unit(64, 1, 4)]
    shards = grid.partition(units, 2)
    # LPT: 10 -> s0; 7 -> s1; 6 -> s1 (13); 5 -> s0 (15); 4 -> s1 (17)
    assert [[(u.batch_size, u.cost) for u in s] for s in shards] == \
        [[(8, 10), (64, 5)], [(16, 7), (32, 6), (64, 4)]]
    assert grid.partition(list(reversed(units)), 2) == shards
    assert grid.partition(units, 7)[5:] == [[], []]


def test_units_cost_examples_and_follow_max_group_size():
    cfg = config(SWEEP, "batch.sizes=[8, 16]", "train.max_group_size=3", "seeds=[0]")
    runs = grid.expand(cfg)
    units = grid.units(cfg, runs, {8: 800, 16: 1600})
    assert [(u.batch_size, len(u.runs), u.cost) for u in units] == [(8, 2, 1600), (16, 2, 3200)]
    cfg = config(SWEEP, "learning_rate.values=[0.1, 0.2, 0.3]", "train.max_group_size=2")
    sizes = [len(u.runs) for u in grid.units(cfg, grid.expand(cfg), {8: 1, 16: 1})]
    assert sizes == [2, 2, 2, 2, 2, 2]


def test_the_partition_ignores_finished_runs(tmp_path):
    cfg, out = config(SWEEP), tmp_path / "o"
    before = [[r.run_id for r in u.runs] for u in prepare_mod.prepare(cfg, out, shard=(1, 3)).units]
    runner.run(cfg, out, batch_sizes=[8], quiet=True, shard=(0, 3))
    assert any(store.is_done(out, r.run_id) for r in grid.expand(cfg))
    assert [[r.run_id for r in u.runs] for u in prepare_mod.prepare(cfg, out, shard=(1, 3)).units] == before


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


# ---------------------------------------------------------------- kill -9, concurrency

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
    procs = [scaling_process("sweep", config_path, "--out", str(out), "--quiet", "--shard", f"{i}/2")
             for i in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    records = store.load(out)
    assert len(records) == 24 and not list(out.rglob("*.tmp"))
    assert config_mod.to_dict(config_mod.from_dict(yaml.safe_load((out / "sweep.yaml").read_text()))) == \
        config_mod.to_dict(config(SWEEP, *LONG))
    for r in records:
        text = (out / "runs" / r["run_id"] / "metrics.jsonl").read_text()
        assert len(r["metrics"]) == len(text.splitlines()) and r["metrics"][-1]["step"] == r["summary"]["steps"]


# ---------------------------------------------------------------- extending a finished sweep


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
def test_a_folder_of_another_model_is_refused_unless_forced(tmp_path):
    out = tmp_path / "o"
    runner.run(config(SWEEP, "batch.sizes=[8]", "learning_rate.values=[0.1]", "seeds=[0]"), out,
               quiet=True)
    other = config(SWEEP, "batch.sizes=[8]", "learning_rate.values=[0.1]", "seeds=[0]",
                   "optimizer.name=momentum")
    with pytest.raises(ConfigError, match="different optimizer.*--force"):
        runner.run(other, out, quiet=True)
    with pytest.raises(ConfigError, match="different optimizer"):
        prepare_mod.prepare(other, out)
    assert [s["run_id"] for s in runner.run(other, out, quiet=True, force=True)] == []
    other = config(SWEEP, "batch.sizes=[8]", "learning_rate.values=[0.2]", "seeds=[0]",
                   "optimizer.name=momentum")
    assert [s["run_id"] for s in runner.run(other, out, quiet=True, force=True)] == ["bs8-lr0.2-seed0"]


# ---------------------------------------------------------------- pandas view


def test_frame_has_one_row_per_run_with_flattened_fields(tmp_path):
    pd = pytest.importorskip("pandas")
    out = tmp_path / "o"
    runner.run(config(SWEEP, "batch.sizes=[8]", "seeds=[0]"), out, quiet=True)
    df = store.frame(out)
    assert isinstance(df, pd.DataFrame) and len(df) == 2
    assert sorted(df["run_id"]) == ["bs8-lr0.1-seed0", "bs8-lr0.5-seed0"]
    row = df.set_index("run_id").loc["bs8-lr0.1-seed0"]
    summary = json.loads((out / "runs" / "bs8-lr0.1-seed0" / "summary.json").read_text())
    assert row["steps_to_target.eval_loss<=0.3"] == summary["steps_to_target"]["eval_loss<=0.3"]
    assert row["final.eval_loss"] == summary["final"]["eval_loss"]


def test_frame_without_pandas_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        store.frame(tmp_path)


# ---------------------------------------------------------------- tables

T = "eval_loss<=0.3"


def summary(size: int, lr: float, seed: int, steps: int | None, status: str = "completed") -> dict:
    return {"run_id": f"bs{size}-lr{lr}-seed{seed}", "batch_size": size, "learning_rate": lr,
            "seed": seed, "status": status, "steps_to_target": {T: steps},
            "examples_to_target": {T: None if steps is None else steps * size}}


def planned(size: int, lrs, seeds=(0, 1)) -> list[grid.PlannedRun]:
    return [grid.PlannedRun(f"bs{size}-lr{lr}-seed{s}", size, RunSpec(lr, s)) for lr in lrs for s in seeds]


def test_batch_rows_count_and_pick_the_best_lr_over_seeds():
    runs = planned(8, [0.1, 0.2, 0.4]) + planned(16, [0.1])
    done = [summary(8, 0.1, 0, 30), summary(8, 0.1, 1, 34), summary(8, 0.2, 0, 20),
            summary(8, 0.2, 1, None, "budget_exhausted"), summary(8, 0.4, 0, None, "diverged"),
            summary(16, 0.1, 0, 11)]
    rows = progress.batch_rows(runs, {s["run_id"]: s for s in done}, T)
    # 0.2 is faster on seed 0 but missed the target on seed 1: the best is 0.1, mean of 30 and 34
    assert rows[0] == progress.BatchRow(8, 6, 5, 1, 0, 1, 1, 0.1, 32.0, 256.0)
    assert rows[1] == progress.BatchRow(16, 2, 1, 0, 0, 0, 1, 0.1, 11.0, 176.0)


def test_progress_and_final_tables():
    rows = [progress.BatchRow(8, 6, 5, 1, 0, 1, 1, 0.1, 32.0, 256.0, 12345.0, 0.0123),
            progress.BatchRow(16, 2, 0, 0, 0, 0, 2, None, None, None)]
    text = progress.format_progress(rows, T, 3, 2, 125.0)
    lines = text.splitlines()
    assert lines[0].split() == ["batch", "runs", "done", "diverged", "left", "best", "lr", "steps",
                                "to", T]
    assert lines[1].split() == ["8", "6", "5", "1", "1", "0.1", "32"]
    assert lines[2].split() == ["16", "2", "0", "0", "2", "-", "-"]
    assert lines[3] == "groups: 3 done, 2 left; time left: about 2m05s"
    final = progress.format_final(rows, T, "/tmp/r").splitlines()
    assert final[1].split() == ["8", "0.1", "32", "256", "1", "1", "1", "12,345", "1.2%"]
    assert final[2].split() == ["16", "-", "-", "-", "0", "0", "2", "-", "-"]
    assert final[-1] == "results in /tmp/r"


def test_percentages_print_as_people_write_them():
    """Two significant figures, never an exponent: the end table once printed '1e+02%'."""
    cases = {1.0: "100%", 0.9996: "100%", 0.423: "42%", 0.0999: "10%", 0.0314: "3.1%",
             0.000123: "0.012%", 1.2e-7: "0.000012%", 0.0: "0%", 12.3: "1,200%", None: "-"}
    assert {v: percent(v) for v in cases} == cases and percent(float("nan")) == "-"
    row = progress.BatchRow(256, 3, 3, 0, 0, 0, 0.1, 23.4, 5621.0, 2.9e6, 0.9999)
    assert progress.format_final([row], T, "/tmp/r").splitlines()[1].split()[-2:] == \
        ["2,900,000", "100%"]


def test_eta_is_elapsed_per_budgeted_example_times_what_is_left():
    assert progress.eta(10.0, 400, 1200) == pytest.approx(30.0)
    assert progress.eta(10.0, 0, 1200) is None
    assert duration(None) == "unknown" and duration(3725) == "1h02m"


def test_cli_prints_the_end_table_even_when_quiet(tmp_path, capsys):
    config_path = write_config(tmp_path, "batch.sizes=[8]", "seeds=[0]")
    assert main(["sweep", config_path, "--out", str(tmp_path / "o"), "--quiet", "--no-analyze"]) == 0
    out = capsys.readouterr().out.splitlines()
    best = {s["learning_rate"]: s["steps_to_target"][T] for s in
            (r["summary"] for r in store.load(tmp_path / "o"))}
    lr = min(best, key=lambda k: best[k])
    assert out[0].split()[:3] == ["batch", "best", "lr"]
    assert out[1].split()[:3] == ["8", f"{lr:.4g}", number(best[lr], 4)]
    assert out[-1] == f"results in {tmp_path / 'o'}"


# ---------------------------------------------------------------- centred learning-rate grids

CENTERED = {"mode": "centered", "rule": "linear", "batch_ref": 8, "lr_ref": 0.5, "span": 2.0,
            "num": 3}


def test_centered_grid_spans_the_factor_either_side_of_the_rule():
    cfg = config(SWEEP, f"learning_rate={json.dumps(dict(CENTERED, num=5, span=4.0))}")
    assert grid.batch_learning_rates(cfg, 16, []) == pytest.approx([0.25, 0.5, 1.0, 2.0, 4.0])
    rounds = [{"batch_size": 16, "round": 1, "learning_rates": [0.125, 8.0]}]
    assert grid.batch_learning_rates(cfg, 16, rounds) == pytest.approx(
        [0.25, 0.5, 1.0, 2.0, 4.0, 0.125, 8.0])
    assert grid.batch_learning_rates(cfg, 8, rounds) == pytest.approx([0.125, 0.25, 0.5, 1.0, 2.0])


# ---------------------------------------------------------------- configs/


ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


def files_for(path: Path, folder: Path) -> list[str]:
    """Overrides pointing a config that reads a user's files at ones written into `folder` the
    way its header says to make them (its data are not part of the repository)."""
    task = yaml.safe_load(path.read_text())["task"]
    if task["name"] == "arrays":
        write = runpy.run_path(str(ROOT / "experiments" / "write_digits_arrays.py"))["write"]
        train, evals = write(folder)
        return [f"task.train={train}", f"task.eval={evals}"]
    if task["name"] == "tokens":
        (folder / "a.txt").write_text("some text to train on\n" * 200)
        assert main(["prepare-text", str(folder / "a.txt"), "--out", str(folder), "--quiet"]) == 0
        return [f"task.train={folder / 'train.bin'}", f"task.eval={folder / 'eval.bin'}"]
    return []


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_config_loads_and_plans(path, tmp_path):
    from scaling.config import arithmetic as plan

    cfg = config_mod.load(path, files_for(path, tmp_path))
    rows = [plan.for_config(cfg, size) for size in cfg.batch.sizes]
    assert all(r.total_steps > 0 for r in rows) and grid.expand(cfg)
    assert math.isfinite(sum(r.examples for r in rows))
    assert path.read_text().startswith("#"), "a config starts with a comment saying how to run it"


# ---------------------------------------------------------------- optimizer scalars as grid axes


def axes_cfg(*optimizer: str) -> config_mod.Config:
    """The sweep config with momentum and these optimizer settings, one seed, one group."""
    return config(SWEEP, "optimizer.name=momentum", *optimizer, "seeds=[0]", "train={}")


def test_scalar_optimizer_settings_keep_the_old_run_ids():
    # Ids computed with the code before optimizer axes existed: existing folders must resume.
    cfg = config_mod.from_dict({
        "task": {"name": "nqm", "dim": 10}, "budget": {"max_steps": 10}, "seeds": [0, 7],
        "optimizer": {"name": "momentum", "momentum": 0.95, "weight_decay": 1e-4},
        "batch": {"sizes": [8, 64]}, "learning_rate": {"values": [0.1, 1e-3 / 3]}})
    assert [r.run_id for r in grid.expand(cfg)] == [
        "bs8-lr0.1-seed0", "bs8-lr0.1-seed7", "bs8-lr0.000333333-seed0", "bs8-lr0.000333333-seed7",
        "bs64-lr0.1-seed0", "bs64-lr0.1-seed7", "bs64-lr0.000333333-seed0",
        "bs64-lr0.000333333-seed7"]
    assert {r.spec.momentum for r in grid.expand(cfg)} == {0.95}


def test_one_list_axis_multiplies_the_grid():
    cfg = axes_cfg("optimizer.momentum=[0.0, 0.9]", "optimizer.weight_decay=1e-4")
    runs = grid.expand(cfg)
    assert len(runs) == 2 * 2 * 1 * 2
    assert [r.run_id for r in runs if r.batch_size == 8] == [
        "bs8-lr0.1-seed0-mom0", "bs8-lr0.1-seed0-mom0.9", "bs8-lr0.5-seed0-mom0",
        "bs8-lr0.5-seed0-mom0.9"]
    assert all(r.spec.momentum == float(r.run_id.rsplit("mom", 1)[1]) for r in runs)
    assert {r.spec.weight_decay for r in runs} == {1e-4}
    assert [len(u.runs) for u in grid.units(cfg, runs, {8: 1, 16: 1})] == [4, 4]


def test_two_list_axes_give_every_combination():
    cfg = config(SWEEP, "optimizer.name=adamw", "optimizer.weight_decay=[0.0, 1e-4, 1e-3]",
                 "optimizer.b2=[0.99, 0.999]", "seeds=[0, 1]", "learning_rate.values=[0.1]")
    runs = grid.expand(cfg)
    assert len(runs) == 2 * 1 * 2 * 3 * 2 and len({r.run_id for r in runs}) == len(runs)
    assert [r.run_id for r in runs[:7]] == [
        "bs8-lr0.1-seed0-wd0-b20.99", "bs8-lr0.1-seed0-wd0-b20.999",
        "bs8-lr0.1-seed0-wd0.0001-b20.99", "bs8-lr0.1-seed0-wd0.0001-b20.999",
        "bs8-lr0.1-seed0-wd0.001-b20.99", "bs8-lr0.1-seed0-wd0.001-b20.999",
        "bs8-lr0.1-seed1-wd0-b20.99"]
    assert {(r.spec.weight_decay, r.spec.b2) for r in runs} == {
        (wd, b2) for wd in (0.0, 1e-4, 1e-3) for b2 in (0.99, 0.999)}


def _folder_with(tmp_path: Path, cfg: config_mod.Config) -> Path:
    out = tmp_path / "o"
    out.mkdir()
    (out / "sweep.yaml").write_text(config_mod.to_yaml(cfg))
    return out


@pytest.mark.parametrize("before, after", [
    ("[0.0, 0.9]", "[0.0, 0.5, 0.9]"),
    ("[0.0, 0.9]", "[0.5]"),
    ("0.9", "[0.0, 0.9]"),
    ("[0.0, 0.9]", "0.9"),
])
def test_a_list_axis_may_change_in_a_folder(tmp_path, before, after):
    out = _folder_with(tmp_path, axes_cfg(f"optimizer.momentum={before}"))
    prepare_mod.check_folder(axes_cfg(f"optimizer.momentum={after}"), out, force=False)


@pytest.mark.parametrize("before, after, fragments", [
    (["optimizer.momentum=0.9"], ["optimizer.momentum=0.95"],
     ["different optimizer.momentum (optimizer.momentum: 0.9 there, 0.95 here)", "--force",
      "given as lists"]),
    (["optimizer.momentum=[0.0, 0.9]"],
     ["optimizer.momentum=[0.0, 0.9, 0.5]", "optimizer.weight_decay=1e-4"],
     ["different optimizer.weight_decay (optimizer.weight_decay: 0.0 there, 0.0001 here)"]),
    (["optimizer.momentum=[0.0, 0.9]"], ["optimizer.momentum=[0.0]", "optimizer.name=nesterov"],
     ["different optimizer.name (optimizer.name: 'momentum' there, 'nesterov' here)"]),
])
def test_other_optimizer_changes_are_still_refused(tmp_path, before, after, fragments):
    out = _folder_with(tmp_path, axes_cfg(*before))
    with pytest.raises(ConfigError) as info:
        prepare_mod.check_folder(axes_cfg(*after), out, force=False)
    for fragment in fragments:
        assert fragment in str(info.value)
    prepare_mod.check_folder(axes_cfg(*after), out, force=True)


@pytest.mark.slow
def test_a_momentum_axis_trains_in_one_group_and_extends(tmp_path):
    out = tmp_path / "o"
    first = runner.run(axes_cfg("optimizer.momentum=[0.0, 0.9]"), out, quiet=True)
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
    alone = runner.run(axes_cfg("optimizer.momentum=0.0"), tmp_path / "scalar", batch_sizes=[8], quiet=True)
    for s in alone:  # each run of the axis trains as it would in a sweep of its own value
        assert s["final"]["eval_loss"] == pytest.approx(
            by_id[s["run_id"] + "-mom0"]["final"]["eval_loss"], rel=1e-5)
    stamp = {p: p.stat().st_mtime_ns for p in summary_files(out)}
    new = runner.run(axes_cfg("optimizer.momentum=[0.0, 0.9, 0.5]"), out, quiet=True)
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


# ---------------------------------------------------------------- file modes


@pytest.fixture(params=[0o022, 0o077])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_results_get_the_mode_an_ordinary_write_gives(tmp_path, umask, monkeypatch):
    """Atomic writes go through a private temporary file; the result must not stay 0o600."""
    expected = 0o666 & ~umask
    runner.run(config(SWEEP, "seeds=[0]", "batch.sizes=[8]", "learning_rate.values=[0.1]"),
               tmp_path / "out", quiet=True)
    files = [tmp_path / "out" / "sweep.yaml", *(tmp_path / "out" / "runs").glob("*/*")]
    assert len(files) == 4  # sweep.yaml, config.json, metrics.jsonl, summary.json
    assert {f.name: f.stat().st_mode & 0o777 for f in files} == {f.name: expected for f in files}
    monkeypatch.setenv("SCALING_DATA", str(tmp_path / "data"))
    storage.cached("thing", "k", lambda: {"a": np.ones(2)})
    kept = list((tmp_path / "data" / "generated").iterdir())
    assert len(kept) == 2 and all(f.stat().st_mode & 0o777 == expected for f in kept)


# ---------------------------------------------------------------- compiling ahead


def test_the_next_group_compiles_on_a_thread_while_this_one_trains(tmp_path, monkeypatch):
    """Two batch sizes, one group each: batch 16's chunk is compiled on the background thread
    and its group reuses it (one compile of each chunk, none repeated), its compile seconds
    recorded apart from the seconds the group waited for compiles."""
    compiled = []
    original = GroupProgram._compile

    def spy(self, key, args, ahead=False):
        if key not in self.compiled:
            compiled.append((self.spec.batch_size, key, threading.current_thread().name))
        return original(self, key, args, ahead)

    monkeypatch.setattr(GroupProgram, "_compile", spy)
    done = runner.run(config(SWEEP, "seeds=[0]"), tmp_path, quiet=True)
    assert len(done) == 4
    assert sorted((b, k) for b, k, _ in compiled) == [(8, 2), (16, 2)]
    (thread,) = [t for b, _, t in compiled if b == 16]
    assert thread != threading.main_thread().name
    assert assert_throughput(tmp_path) == 2
    ahead = {s["batch_size"]: s["throughput"]["compile_ahead_s"] for s in done}
    assert ahead[8] == 0 and ahead[16] > 0
    waited = {s["batch_size"]: s["compile_s"] for s in done}  # on the training thread
    assert waited[8] > 0 and waited[16] <= ahead[16] + 0.1  # at most the rest of that compile
