"""Batch-size schedules (scaling.sweep.schedule), end to end with their phases
(sweep/segments) and their analysis (analysis/schedules): the arithmetic, the checks before
compute, the NQM's closed form across phases, a schedule that never grows training exactly as
its fixed batch size, the noise-scale rule read back from the rows, and the analysis against
the fixed batch sizes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from scaling import store
from scaling.analysis.analyze import analyze
from scaling.analysis.nqm_reference import phases_expected_loss
from scaling.config import BatchScheduleConfig, ConfigError
from scaling.config import arithmetic as plan
from scaling.sweep import runner
from scaling.sweep.segments import describe, phase_plan, planned_segments, static_segments
from scaling.sweep import prepare as prepare_mod
from tests.helpers import assert_same, comparable, config

NQM = {
    "name": "sc", "task": {"name": "nqm", "dim": 10, "draw": "means"}, "optimizer": {"name": "sgd"},
    "batch": {"sizes": [8, 16, 32]}, "learning_rate": {"values": [0.1], "search": False},
    "budget": {"max_examples": 6400}, "seeds": [0, 1], "eval": {"every": 10, "points_per_decade": 0},
    "train": {"chunk_steps": 50, "checkpoint_minutes": 0},
}


def _rows(out, run_id):
    return store.read_metrics(store.run_dir(out, run_id) / "metrics.jsonl")


# ---------------------------------------------------------------- arithmetic


def test_doubling_segments_count_steps_and_examples_exactly():
    cfg = config(NQM, "batch.schedules=[{kind: doubling, start: 8, at: [0.25, 0.5], max: 64}]")
    sched = cfg.batch.schedules[0]
    assert sched.batch_sizes == [8, 16, 32] and sched.label == "doubling8"
    assert phase_plan(sched, 6400) == [(0, 8), (1600, 16), (3200, 32)]
    arith = {b: plan.for_config(cfg, b) for b in (8, 16, 32)}
    segs = static_segments(sched, 6400, arith)
    # 200 steps at 8 (1,600 examples), then the 16-program's steps 100..200 (1,600 more), then
    # the 32-program's steps 100..200: 500 optimizer steps, 6,400 examples.
    assert [(s.batch_size, s.first, s.end, s.steps_before, s.examples_before) for s in segs] == \
        [(8, 0, 200, 0, 0), (16, 100, 200, 200, 1600), (32, 100, 200, 300, 3200)]
    assert segs[-1].step(200) == 400 and segs[-1].examples(200) == 6400
    # A boundary between whole steps: 1,000 examples at batch 24 is 41.7 steps -> 42.
    odd = config(NQM, "batch.sizes=[8, 24]",
                 "batch.schedules=[{kind: steps, steps: [[0, 24], [1000, 48]]}]")
    arith = {b: plan.for_config(odd, b) for b in (24, 48)}
    a, b = static_segments(odd.batch.schedules[0], 6400, arith)
    assert (a.end, b.examples_before, b.first, b.steps_before) == (42, 1008, 21, 42)
    # The last phase ends where its program does: the budget's first whole step, as a fixed
    # batch of 48 ends (134 steps, 6,432 examples).
    assert b.end == 134 and b.examples(b.end) == 1008 + (134 - 21) * 48 == arith[48].examples


def test_the_planned_segments_are_the_plans_phases_on_each_programs_arithmetic():
    """planned_segments sets up what test_doubling_segments_... works by hand from the
    config alone; `scaling plan` prints them."""
    cfg = config(NQM, "batch.schedules=[{kind: doubling, start: 8, at: [0.25, 0.5], max: 64}]")
    segs = planned_segments(cfg, cfg.batch.schedules[0])
    assert [(s.batch_size, s.steps_before, s.examples_before) for s in segs] == \
        [(8, 0, 0), (16, 200, 1600), (32, 300, 3200)]
    assert describe(cfg, cfg.batch.schedules[0]).endswith(
        "batch 16 for steps 200-300 (1,600-3,200 examples); batch 32 for steps 300-400 "
        "(3,200-6,400 examples); 400 steps in all")


def test_steps_in_tokens_are_cut_to_whole_sequences():
    sched = BatchScheduleConfig(kind="steps", steps=[[0, 4], [64_000, 16], [100_000, 64]],
                                unit="tokens")
    assert phase_plan(sched, 23_440, tokens_per_example=64) == [(0, 4), (1000, 16), (1562, 64)]


@pytest.mark.parametrize("entry, key", [
    ("{kind: halving, start: 8, max: 16}", "kind"),
    ("{kind: doubling, start: 8, at: [0.5, 0.2], max: 64}", "at"),
    ("{kind: doubling, start: 8, at: [0.5], max: 4}", "max"),
    ("{kind: steps, steps: [[100, 8], [200, 16]]}", "steps"),
    ("{kind: steps, steps: [[0, 16], [200, 8]]}", "steps"),
    ("{kind: noise_scale, start: 8, max: 64, multiple: 0}", "multiple"),
    ("{kind: doubling, start: 8, at: [0.5], max: 64, lr_rule: cubic}", "lr_rule"),
    ("{kind: doubling, start: 12, at: [0.5], max: 64, sizes: [1]}", "sizes"),
    ("{kind: steps, steps: [[0, 8], [800, 16]], unit: tokens}", "unit"),  # nqm: none
    ("{kind: doubling, start: 8, at: [0.5], max: 64, unit: tokens}", "unit"),
])
def test_bad_schedules_fail_before_compute(entry, key):
    with pytest.raises(ConfigError, match=rf"batch\.schedules\[0\]\.{key}"):
        config(NQM, f"batch.schedules=[{entry}]")


def test_schedules_need_what_they_read():
    noise = "{kind: noise_scale, start: 8, max: 64}"
    with pytest.raises(ConfigError, match=r"gns\.enabled"):
        config(NQM, f"batch.schedules=[{noise}]", "gns.enabled=false")
    with pytest.raises(ConfigError, match=r"learning_rate\.mode"):
        config(NQM, f"batch.schedules=[{noise}]",
               "learning_rate={mode: centered, rule: linear, lr_ref: 0.1, num: 3, span: 2}")
    with pytest.raises(ConfigError, match=r"batch\.schedules"):
        config(NQM, f"batch.schedules=[{noise}, {noise}]")  # two called noisescale8
    with pytest.raises(ConfigError, match=r"batch\.schedules\[0\]"):  # 12 does not split over 8
        prepare_mod.prepare(config(NQM, "batch.schedules=[{kind: doubling, start: 12, at: [0.5], "
                                         "max: 24}]"), "/tmp/unused")


# ---------------------------------------------------------------- the engine


def test_a_doubling_schedule_follows_the_closed_form_through_its_phases(tmp_path):
    """64 seeds of the NQM through batch 8 -> 16 -> 32 with the learning rate doubling each time
    (linear rule): the mean loss at every evaluation point against the exact expectation of SGD
    through the same phases. A phase with the wrong batch, rate, length or start fails."""
    cfg = config(NQM, f"seeds={list(range(64))}", "batch.sizes=[8]",
                 "batch.schedules=[{kind: doubling, start: 8, at: [0.25, 0.5], max: 32}]")
    runner.run(cfg, tmp_path, quiet=True)
    runs = [r for r in store.load(tmp_path) if r["config"].get("batch_schedule")]
    assert len(runs) == 64
    assert runs[0]["summary"]["batch_path"] == [[0, 0, 8], [200, 1600, 16], [300, 3200, 32]]
    exact = phases_expected_loss(cfg.task.options, [(0.1, 8, 200), (0.2, 16, 100), (0.4, 32, 100)])
    steps = [r["step"] for r in runs[0]["metrics"]]
    losses = np.array([[row["eval_loss"] for row in r["metrics"]] for r in runs])
    assert steps[-1] == 400 and all(r["summary"]["examples"] == 6400 for r in runs)
    se = losses.std(axis=0, ddof=1) / math.sqrt(len(runs))
    gap = np.abs(losses.mean(axis=0) - exact[steps])
    assert np.all(gap[1:] < 4 * se[1:] + 1e-6), list(zip(steps, gap / np.maximum(se, 1e-12)))
    lrs = {row["step"]: row["lr"] for row in runs[0]["metrics"]}
    assert lrs[200] == pytest.approx(0.1) and lrs[210] == pytest.approx(0.2)
    assert lrs[310] == pytest.approx(0.4)


@pytest.mark.parametrize("entry", [
    "{kind: noise_scale, start: 8, max: 64, multiple: 1e9}",  # B_simple never gets there
    "{kind: steps, steps: [[0, 8]]}",
])
def test_a_schedule_that_never_grows_trains_exactly_as_its_batch_size(entry, tmp_path):
    cfg = config(NQM, "batch.sizes=[8]", f"batch.schedules=[{entry}]")
    runner.run(cfg, tmp_path, quiet=True)
    label = cfg.batch.schedules[0].label
    for seed in (0, 1):
        fixed = _rows(tmp_path, f"bs8-lr0.1-seed{seed}")
        mine = _rows(tmp_path, f"sched-{label}-lr0.1-seed{seed}")
        drop = lambda rows: [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]
        assert drop(mine) == drop(fixed)


def test_the_noise_scale_rule_doubles_where_the_rows_say(tmp_path):
    """At each chunk boundary a run doubles its batch exactly when the last B_simple it recorded
    in that chunk exceeded multiple x its batch: read the rows back and replay the rule."""
    cfg = config(NQM, "seeds=[0, 1, 2, 3]", "batch.sizes=[8]", "budget.max_examples=12800",
                 "batch.schedules=[{kind: noise_scale, start: 8, max: 64, multiple: 2.0}]")
    runner.run(cfg, tmp_path, quiet=True)
    runs = [r for r in store.load(tmp_path) if r["config"].get("batch_schedule")]
    paths = [r["summary"]["batch_path"] for r in runs]
    assert any(len(p) > 1 for p in paths), paths  # it grows at all
    for rec in runs:
        rows, path = rec["metrics"], rec["summary"]["batch_path"]
        for (step, examples, batch), (nxt_step, _, nxt) in zip(path, path[1:] + [[None, None, None]]):
            phase = [r for r in rows if step < r["step"] <= (nxt_step or 10**9)]
            # The chunk boundaries of this phase in the run's own steps (50 program steps each).
            ends = sorted({step + k * 50 for k in range(1, 10**4)
                           if step + k * 50 <= (nxt_step or rows[-1]["step"])})
            for end in ends:
                seen = [r["b_simple"] for r in phase if end - 50 < r["step"] <= end
                        and isinstance(r.get("b_simple"), float)]
                grew = nxt_step is not None and end == nxt_step
                wants = bool(seen) and seen[-1] > 2.0 * batch and 2 * batch <= 64
                assert wants == grew, (rec["run_id"], end, seen[-1:], batch)
                if grew:
                    break
        assert rec["summary"]["examples"] <= 12800


# ---------------------------------------------------------------- the analysis


def test_schedules_are_set_against_the_fixed_batch_sizes(tmp_path):
    cfg = config(NQM, "targets=['eval_loss<=0.1']",
                 "batch.schedules=[{kind: doubling, start: 8, at: [0.1, 0.2], max: 32, name: ramp}]")
    runner.run(cfg, tmp_path, quiet=True)
    result = analyze(tmp_path, bootstrap=100)
    assert result["sweep"]["batch_sizes"] == [8, 16, 32]  # scheduled runs are not a batch size
    (sched,) = result["schedules"]
    (entry,) = sched["targets"]
    assert sched["name"] == "ramp" and sched["final_batch_sizes"] == [32]
    summaries = {r["run_id"]: r["summary"] for r in store.load(tmp_path)}
    steps = [summaries[f"sched-ramp-lr0.1-seed{s}"]["steps_to_target"]["eval_loss<=0.1"]
             for s in (0, 1)]
    assert entry["steps"] == pytest.approx(np.mean(steps))
    by = {c["against"]: c for c in entry["comparisons"]}
    start = [summaries[f"bs8-lr0.1-seed{s}"]["steps_to_target"]["eval_loss<=0.1"] for s in (0, 1)]
    assert by["start"]["batch_size"] == 8
    assert by["start"]["steps_ratio"] == pytest.approx(np.mean(steps) / np.mean(start))
    lo, hi = by["start"]["steps_ratio_ci"]
    assert lo <= by["start"]["steps_ratio"] <= hi
    fewest = min((8, 16, 32), key=lambda b: np.mean(
        [summaries[f"bs{b}-lr0.1-seed{s}"]["steps_to_target"]["eval_loss<=0.1"] or math.inf
         for s in (0, 1)]))
    assert by["fewest_steps"]["batch_size"] == fewest
    report = (tmp_path / "report.md")
    assert not report.exists()  # analyze() alone writes nothing
    json.dumps(result)  # JSON-ready


def test_a_schedule_on_a_mesh_of_runs_equals_a_mesh_of_data_shards(tmp_path):
    """Two runs axes (cohorts padded to its multiples) x 4 data shards against 8 data shards:
    the same noise-scale groups, the same summaries to float tolerance."""
    common = ("seeds=[0, 1, 2]", "batch.sizes=[16]", "gns.groups=8",
              "batch.schedules=[{kind: noise_scale, start: 16, max: 64, multiple: 2.0}]")
    a = runner.run(config(NQM, "parallel.runs=1", "parallel.data=8", *common), tmp_path / "a",
                   quiet=True)
    b = runner.run(config(NQM, "parallel.runs=2", "parallel.data=4", *common), tmp_path / "b",
                   quiet=True)
    assert_same(comparable(a), comparable(b))
    assert any(len(s["batch_path"]) > 1 for s in a if s.get("batch_path"))
