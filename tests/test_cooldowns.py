"""Cooldown branches (budget.cooldowns): each smaller budget's runs, started from the stable
runs' saved state at its decay start, equal separate runs of that budget row for row; the
examples trained are the protocol's; a lost cooldown trains again from the saved state; and
every bad value is refused before compute."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scaling import store
from scaling.analysis.cells import analyze_cells
from scaling.cli.main import main
from scaling.config import ConfigError
from scaling.config.arithmetic import for_config
from scaling.config.scale import budgets, cells
from scaling.sweep import cooldown, runner
from tests.helpers import SWEEP, config, write_config

COOLDOWN = ("schedule.name=wsd", "schedule.warmup_steps=5", "budget.max_examples=1600",
            "budget.cooldowns=[400, 800]", "analysis.view=fixed_budget", "targets=[]",
            "train.chunk_steps=10", "eval.every=10", "eval.points_per_decade=0")


def _cfg(*overrides: str):
    return config(SWEEP, *COOLDOWN, *overrides)


def test_the_budgets_are_the_cooldowns_then_the_budget_one_cell_each():
    cfg = _cfg("budget.cooldowns=[400.0, 800, 1600]")
    assert budgets(cfg) == [400, 800, 1600] and all(isinstance(b, int) for b in budgets(cfg))
    got = cells(cfg)
    assert [c.name for c in got] == ["max_examples400", "max_examples800", "max_examples1600"]
    assert [c.cfg.budget.max_examples for c in got] == [400, 800, 1600]
    assert all(c.cfg.budget.cooldowns is None for c in got)


def test_a_cooldown_starts_at_the_last_chunk_boundary_before_its_decay():
    """Batch 8, 400 examples: 50 steps, a 20% decay over the last 10, so the decay starts at
    step 40: a chunk boundary of 10-step chunks, and 36 of 12-step ones."""
    arith = for_config(_cfg(), 8)
    assert (arith.total_steps, arith.decay_steps) == (200, 40)
    small = for_config(_cfg("budget.max_examples=400", "budget.cooldowns=null"), 8)
    assert cooldown.decay_start(small, 10) == 40
    assert cooldown.decay_start(small, 12) == 36
    assert cooldown.decay_start(small, 64) == 0


@pytest.mark.parametrize("override, key", [
    ("budget.cooldowns=[800, 400]", "budget.cooldowns"),
    ("budget.cooldowns=[400, 3200]", "budget.cooldowns"),
    ("budget.cooldowns=[0]", "budget.cooldowns"),
    ("budget.cooldowns=[]", "budget.cooldowns"),
    ("budget.max_steps=500", "budget.cooldowns"),
    ("schedule.name=cosine", "budget.cooldowns"),
    ("schedule.warmup_fraction=0.1", "schedule.warmup_fraction"),
    ("analysis.view=steps", "analysis.view"),
    ("batch.schedules=[{kind: switch, start: 8, max: 16, at: [0.5]}]", "budget.cooldowns"),
])
def test_bad_cooldowns_are_refused_in_one_line_naming_the_key(override, key):
    with pytest.raises(ConfigError) as err:
        _cfg(override)
    assert str(err.value).startswith(f"{key}:") and "\n" not in str(err.value)


def test_the_search_is_refused_with_cooldowns():
    with pytest.raises(ConfigError, match="learning_rate.search: false"):
        _cfg("targets=[eval_loss<=0.3]", "learning_rate.search=true")


def _rows(folder: Path, run_id: str) -> list[dict]:
    keep = lambda r: {k: v for k, v in r.items() if k != "wall_s"}
    return [keep(r) for r in store.read_metrics(store.run_dir(folder, run_id) / "metrics.jsonl")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A cooldown sweep (2 batch sizes x 2 rates x 2 seeds, groups of 2, budgets 400, 800 and
    1,600 examples), and each smaller budget as a separate sweep of its cell's config."""
    root = tmp_path_factory.mktemp("cooldowns")
    cfg = _cfg("learning_rate.values=[0.1, 0.5, 4.0]")  # 4.0 diverges before any cooldown
    found = cooldown.prepare_cells(cfg, root / "out")
    cooldown.run(cfg, root / "out", found, quiet=True)
    for cell in found[:-1]:
        runner.run(cell.cfg, root / cell.name, quiet=True)
    return cfg, found, root


def test_each_cooldown_run_equals_a_separate_run_of_its_budget_row_for_row(trained):
    _, found, root = trained
    for cell in found[:-1]:
        for r in cell.prepared.planned:
            assert _rows(cell.out, r.run_id) == _rows(root / cell.name, r.run_id)
            mine = store.read_summary(cell.out, r.run_id)
            theirs = store.read_summary(root / cell.name, r.run_id)
            final = lambda s: {k: v for k, v in s["final"].items() if k != "wall_s"}
            assert (mine["status"], mine["steps"], final(mine)) == \
                (theirs["status"], theirs["steps"], final(theirs))
            start = json.loads((store.run_dir(cell.out, r.run_id) / "config.json").read_text())
            assert start["cooldown"]["stable"] == "../max_examples1600"
            ended = mine["status"] == "diverged"  # copied whole: it starts where it ended
            assert start["cooldown"]["from_step"] == (
                mine["steps"] if ended else cell.prepared.stable.steps[r.batch_size])


def test_the_examples_trained_are_the_stable_runs_and_each_decay(trained):
    """Per run 1,600 examples stable, then each decay from its start. Batch 8 (10-step
    chunks): the decays start at steps 40 and 80 of 50 and 100, on chunk boundaries: 1,600 +
    80 + 160 = 1,840. Batch 16 (the stable run's 100 steps in 7-step chunks, train.min_chunks):
    the decays start at 20 of 25 and 40 of 50, so from the boundaries 14 and 35: 1,600 + 176 +
    240 = 2,016. Six runs each: 23,136 examples of the 12 x 2,800 = 33,600 that separate runs
    would train (0.69x). As trained, the two runs at rate 4.0 of each batch size diverge at
    step 10 in the stable cell (80 and 160 examples) and each cooldown cell copies them,
    training nothing: 4 x 1,840 + 4 x 2,016 + 2 x 80 + 2 x 160 = 15,904 examples, against 8 x
    2,800 + 3 x (2 x 80 + 2 x 160) = 23,840 for separate runs."""
    _, found, root = trained
    assert [c.prepared.stable.steps for c in found[:-1]] == [{8: 40, 16: 14}, {8: 80, 16: 35}]
    assert cooldown.planned_examples(found) == (6 * 1840 + 6 * 2016, 12 * 2800)
    parent, _, _ = analyze_cells(root / "out", bootstrap=20)
    assert parent["cooldowns"] == {"examples_trained": 15904, "examples_separate": 23840,
                                   "ratio": pytest.approx(15904 / 23840)}
    assert [c["name"] for c in parent["fixed_budget"]["cells"]] == \
        ["max_examples400", "max_examples800", "max_examples1600"]


def test_a_lost_cooldown_trains_again_from_the_saved_state(trained):
    cfg, found, root = trained
    cell = found[1]
    run_id = cell.prepared.planned[0].run_id
    before = _rows(cell.out, run_id)
    shutil.rmtree(store.run_dir(cell.out, run_id))
    again = cooldown.prepare_cells(cfg, root / "out")
    trained_now = cooldown.run(cfg, root / "out", again, quiet=True)
    assert [s["run_id"] for s in trained_now] == [run_id]  # alone: the group is cut anew
    after = _rows(cell.out, run_id)
    assert [r["step"] for r in after] == [r["step"] for r in before]
    # a group of another width rounds differently after the cooldown's start
    assert [r["eval_loss"] for r in after] == pytest.approx([r["eval_loss"] for r in before],
                                                             rel=1e-5)
    assert cooldown.run(cfg, root / "out", cooldown.prepare_cells(cfg, root / "out"),
                        quiet=True) == []


def test_the_command_previews_the_cost_and_refuses_shards(tmp_path, capsys):
    config = write_config(tmp_path, *COOLDOWN)
    assert main(["sweep", config, "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    shown = capsys.readouterr().out
    assert "cell max_examples400: cooldowns start from the stable runs at batch 8: step 40, " \
           "batch 16: step 14" in shown
    assert "cooldowns: 15,424 examples to train, against 22,400 for separate runs" in shown
    assert not (tmp_path / "o").exists()
    assert main(["sweep", config, "--out", str(tmp_path / "o"), "--shard", "0/2"]) == 2
    assert "--shard: a sweep with budget.cooldowns trains in one process" in capsys.readouterr().err
    assert main(["train", config, "--out", str(tmp_path / "o")]) == 2


def test_a_cell_without_run_files_has_no_measured_difference(tmp_path, monkeypatch):
    """experiments/cooldowns.py compares each cooldown run with its separate twin row by row;
    a committed cell keeps no run files, and there the difference is not measured (None,
    printed so), never a 0 read from nothing."""
    import importlib.util
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("cooldowns_study",
                                                  root / "experiments" / "cooldowns.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "protocol" / "cells" / "max_tokens100").mkdir(parents=True)
    monkeypatch.setattr(module, "PROTOCOL", tmp_path / "protocol")
    monkeypatch.setattr(module, "SEPARATE", tmp_path / "separate")
    assert module.run_differences() == {"max_tokens100": None}
