"""`scaling branch`: the plan's arithmetic, the errors before compute, a branch at k = 1 that is
the base continued bit for bit, reproducible branches, the NQM's closed form at every factor,
and the local critical batch size's reading."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from scaling import config as config_mod, store
from scaling.analysis.branching import analyze_branches, local_critical_batch, window_value
from scaling.analysis.nqm_reference import phases_expected_loss
from scaling.cli.main import main
from scaling.config import ConfigError
from scaling.sweep import branch, session as session_mod
from scaling.sweep.branch_plan import branch_plan
from scaling.train.checkpoint import GroupCheckpoints
from scaling.train.loop import run_group
from scaling.train.start import from_slots
from tests.helpers import Collect, config

NQM = {
    "name": "br", "task": {"name": "nqm", "dim": 10, "draw": "means"}, "optimizer": {"name": "sgd"},
    "batch": {"sizes": [8]}, "learning_rate": {"values": [0.1]}, "budget": {"max_steps": 400},
    "seeds": [0, 1], "train": {"chunk_steps": 50, "min_chunks": 1, "checkpoint_minutes": 0},
    "branch": {"factors": [2, 4], "window": 512, "points": [800, 1600], "evals": 4},
}
DIGITS = {
    "name": "brd", "task": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]},
    "optimizer": {"name": "momentum"}, "batch": {"sizes": [16]},
    "learning_rate": {"values": [0.05]}, "budget": {"max_steps": 240}, "seeds": [0, 1],
    "eval": {"points_per_decade": 5},
    "train": {"chunk_steps": 40, "min_chunks": 1, "checkpoint_minutes": 0},
    "branch": {"factors": [1, 2], "lr_grid": [1.0, 0.5], "window": 1280, "points": [640],
               "evals": 2},
}


def _rows(folder: Path) -> dict[str, list[dict]]:
    return {p.parent.name: [{k: v for k, v in json.loads(line).items() if k != "wall_s"}
                            for line in p.read_text().splitlines()]
            for p in sorted(folder.glob("runs/*/metrics.jsonl"))}


# ---------------------------------------------------------------- the plan, before compute


def test_plan_arithmetic():
    p = branch_plan(config(NQM, "branch.window=500", "branch.points=[700, 1650, 3000]"))
    # The window is rounded to a multiple of lcm(2, 4) x 8 x 4 evals = 128 examples.
    assert p.window == 512 and any("rounded to 512" in n for n in p.notes)
    # 700 / 8 = 87.5 steps -> the chunk boundary 100; 1650 / 8 -> 200; 3000 / 8 = 375 steps
    # leaves no room for the 64-step window before step 400, so it is dropped.
    assert p.points == (100, 200) and any("dropped" in n for n in p.notes)
    assert p.window_steps(2) == 32 and p.eval_offsets(2) == [8, 16, 24, 32]
    assert p.base_eval_steps() == [100, 116, 132, 148, 164, 200, 216, 232, 248, 264]
    assert p.branch_eval_steps(4) == [29, 33, 37, 41, 54, 58, 62, 66]  # 100 // 4 = 25 + 4j
    (a, b), (c, d) = p.branches(100, 2), p.branches(100, 4)  # seeds 0 and 1
    assert (a.start, a.steps, a.batch_size, a.learning_rate) == (50, 32, 16, pytest.approx(0.2))
    assert (c.start, c.steps, c.learning_rate) == (25, 16, pytest.approx(0.4))
    assert (a.seed, b.seed, d.seed) == (0, 1, 1) and b.run_id == "step100-bs16-lr0.2-seed1"
    sqrt = branch_plan(config(NQM, "branch.lr_rule=sqrt", "branch.lr_grid=[1.0, 2.0]"))
    assert sqrt.learning_rate(4, 2.0) == pytest.approx(0.1 * 2 * 2)
    # With a learning-rate grid, B0 trains at the grid's other factors too (the k = 1 reference).
    assert [(p, k) for p, k, _ in sqrt.groups()] == [(100, 1), (100, 2), (100, 4), (200, 1),
                                                     (200, 2), (200, 4)]
    one = branch_plan(config(NQM, "branch.factors=[1, 2]", "branch.lr_grid=[1.0, 0.5]"))
    assert [b.lr_factor for b in one.branches(100, 1)] == [0.5, 0.5]  # the base is lr factor 1


@pytest.mark.parametrize("change, key", [
    ("branch.factors=[0, 2]", "branch.factors"),
    ("branch.lr_rule=cubic", "branch.lr_rule"),
    (f"branch.window={10**6}", "branch.window"),
    ("branch.points=[3100]", "branch.points"),
    ("data.placement=host", "data.placement"),
    ("learning_rate.values=[0.1, 0.2]", "branch.learning_rate"),
    ("branch.average=5", "branch.average"),
    ("branch.metric=eval_accuracy", "branch.metric"),
])
def test_bad_branch_settings_fail_before_compute(change, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        branch_plan(config(NQM, change))


def test_a_folder_saved_at_other_points_is_refused(tmp_path):
    branch.run(config(NQM, "branch.points=[800]"), tmp_path, quiet=True)
    with pytest.raises(ConfigError, match="points"):
        branch.prepare(config(NQM, "branch.points=[1600]"), tmp_path)
    branch.prepare(config(NQM, "branch.points=[800]", "branch.factors=[2, 4, 8]"), tmp_path)
    # Fewer factors: nothing trains, and the analysis reads only the branches still asked for.
    branch.run(config(NQM, "branch.points=[800]", "branch.factors=[4]"), tmp_path, quiet=True)
    (point,) = analyze_branches(tmp_path, bootstrap=0)["branching"]["points"]
    assert [b["factor"] for b in point["branches"]] == [4]


class _Tracker:
    """Records what a tracker hears: runs started, rows logged, runs finished."""

    def __init__(self) -> None:
        self.started, self.finished, self.logged = [], [], {}

    def start(self, run_id, config, resume_step):
        self.started.append(run_id)

    def log(self, run_id, rows):
        self.logged[run_id] = self.logged.get(run_id, 0) + len(rows)

    def finish(self, run_id, summary):
        self.finished.append(run_id)

    def close(self):
        pass


def test_every_base_and_branch_run_reaches_the_trackers(tmp_path, monkeypatch):
    """One tracker run per base run and per branch run (log.wandb promises one W&B run per
    training run), each fed rows and finished."""
    tracker = _Tracker()
    monkeypatch.setattr(session_mod, "open_trackers", lambda cfg, out: [tracker])
    branch.run(config(NQM, "branch.points=[800]"), tmp_path, quiet=True)
    base = sorted(p.name for p in (tmp_path / "base" / "runs").iterdir())
    branches = sorted(p.name for p in (tmp_path / "branches" / "runs").iterdir())
    assert len(base) == 2 and len(branches) == 2 * 2  # 2 seeds; factors 2 and 4 at one point
    assert sorted(tracker.started) == sorted(tracker.finished) == sorted(base + branches)
    assert all(tracker.logged.get(r, 0) > 0 for r in base + branches)


# ---------------------------------------------------------------- the engine's part


@pytest.mark.slow
def test_factor_one_from_the_checkpoint_is_the_base_continued_exactly(tmp_path):
    """Restore the base's saved state at the point, continue it at B0 with the same data stream:
    every metric row after the point equals the base's own (parameters, permutations, keys and
    optimizer state all carried)."""
    cfg = config(DIGITS, "branch.factors=[2]")
    p = branch.run(cfg, tmp_path, quiet=True)
    session = session_mod.Session(p.base, True)
    program = session.program(p.plan.base_batch)
    data, eval_data = session.context.data, session.context.eval_data
    (listing,) = (tmp_path / "base" / "checkpoints").glob("*/runs.json")
    point = p.plan.points[0]
    runs = [r.spec for r in p.base.planned]
    saved = GroupCheckpoints(listing.parent, 0, True, (point,)).restore(program, runs, data,
                                                                         eval_data, step=point)
    start = from_slots(program, saved.state, list(range(len(runs))), runs, point, 1)
    collect = Collect(len(runs))
    run_group(program, start, data, eval_data, [collect])
    base = _rows(tmp_path / "base")
    for r, rows in zip(p.base.planned, collect.records):
        after = [row for row in base[r.run_id] if row["step"] > point]
        assert len(rows) == len(after) > 0
        for mine, theirs in zip(rows, after):
            for key in ("step", "eval_loss", "eval_accuracy", "train_loss", "lr"):
                assert mine[key] == theirs[key], (r.run_id, mine["step"], key)


@pytest.mark.slow
def test_branches_are_reproducible_and_resume_where_they_stopped(tmp_path):
    cfg = config(DIGITS)
    branch.run(cfg, tmp_path, quiet=True)
    first = _rows(tmp_path / "branches")
    assert len(first) == 2 * 3  # k = 1 at lr factor 0.5, k = 2 at 1.0 and 0.5; two seeds
    again = sorted((tmp_path / "branches" / "runs").glob("*bs32*seed1/summary.json"))
    for summary in again:
        summary.unlink()
    base_mtime = {p: p.stat().st_mtime_ns for p in (tmp_path / "base").rglob("summary.json")}
    branch.run(cfg, tmp_path, quiet=True)
    assert _rows(tmp_path / "branches") == first
    assert {p: p.stat().st_mtime_ns for p in base_mtime} == base_mtime  # the base not retrained
    rows = first["step40-bs32-lr0.05-seed0"]  # lr factor 0.5 on the linear rule's 0.1
    # The point is step 40 of the base (640 examples); at batch 32 the branch starts at its
    # step 20 and counts 32 examples a step.
    assert [r["step"] for r in rows] == [40, 60]
    assert [r["examples"] for r in rows] == [640 + 640, 640 + 1280]


# ---------------------------------------------------------------- ground truth


@pytest.mark.slow
def test_nqm_branches_match_the_closed_form(tmp_path):
    """64 seeds of the NQM: each factor's mean loss at the window's end, paired with the base
    per seed, against the exact expectation of SGD run from the base's own distribution at the
    point. The closed form knows nothing of the engine: a branch started from the wrong state,
    with the wrong learning rate, window or batch, or replaying the base's noise, fails."""
    seeds = list(range(64))
    cfg = config(NQM, f"seeds={seeds}", "branch.factors=[2, 4, 8]", "branch.window=1024",
                 "budget.max_steps=600", "branch.points=[400, 2400]")
    branch.run(cfg, tmp_path, quiet=True)
    result = analyze_branches(tmp_path, bootstrap=200)["branching"]
    base_rows = {r["config"]["seed"]: r["metrics"] for r in store.load(tmp_path / "base")}
    branch_recs = store.load(tmp_path / "branches")
    opts, b0, lr0, window = cfg.task.options, 8, 0.1, 1024
    for point in result["points"]:
        s0 = point["step"]
        base_cf = phases_expected_loss(opts, [(lr0, b0, s0 + window // b0)])[-1]
        base = np.array([window_value(base_rows[s], [s0 + window // b0], "eval_loss", 1)
                         for s in seeds])
        for row in point["branches"]:
            k = row["factor"]
            cf = phases_expected_loss(opts, [(lr0, b0, s0), (row["best_lr"], k * b0,
                                                            window // (k * b0))])[-1]
            mine = {r["config"]["seed"]: r["metrics"][-1]["eval_loss"] for r in branch_recs
                    if r["config"]["point"] == s0 and r["config"]["factor"] == k}
            diff = np.array([mine[s] for s in seeds]) - base
            se = diff.std(ddof=1) / math.sqrt(len(seeds))
            assert abs(diff.mean() - (cf - base_cf)) < 4 * se + 1e-6, (s0, k)
            assert row["best_lr"] == pytest.approx(lr0 * k)
    # The exact local critical batch size lies in the measured interval at every point.
    for point in result["points"]:
        s0 = point["step"]
        ref = phases_expected_loss(opts, [(lr0, b0, s0 + window // b0)])[-1]
        exact = [phases_expected_loss(opts, [(lr0, b0, s0), (lr0 * k, k * b0,
                                                           window // (k * b0))])[-1]
                 for k in (2, 4, 8)]
        local, _ = local_critical_batch([2, 4, 8], np.array(exact), ref, 0.01, b0)
        lo, hi = point["local_b_crit_ci"]
        assert lo <= local <= hi, (s0, local, point["local_b_crit_ci"])


# ---------------------------------------------------------------- the reading


def test_local_critical_batch_counts_factors_up_to_the_first_that_falls_behind():
    ref = 1.0
    losses = np.array([1.0, 1.005, 1.2, 1.001])  # k = 1, 2, 4, 8: 4 falls behind, 8 is lucky
    assert local_critical_batch([1, 2, 4, 8], losses, ref, 0.01, 16) == (32, False)
    assert local_critical_batch([2, 4], np.array([1.0, 1.0]), ref, 0.01, 16) == (64, True)
    assert local_critical_batch([2, 4], np.array([np.nan, 1.0]), ref, 0.01, 16) == (16, False)
    # Branches at k = 1 (other learning rates at B0) never end the count: the base is k = 1.
    assert local_critical_batch([1, 2], np.array([5.0, 1.0]), ref, 0.01, 16) == (32, True)
    assert local_critical_batch([2], np.array([1.0]), math.nan, 0.01, 16) == (None, False)


def test_window_value_averages_the_last_points_and_refuses_gaps():
    rows = [{"step": 10, "eval_loss": 3.0}, {"step": 20, "eval_loss": 2.0},
            {"step": 30, "eval_loss": 1.0}, {"step": 25, "eval_loss": 99.0}]
    assert window_value(rows, [10, 20, 30], "eval_loss", 2) == pytest.approx(1.5)
    assert math.isnan(window_value(rows, [10, 20, 40], "eval_loss", 1))
    rows[2]["eval_loss"] = math.inf
    assert math.isnan(window_value(rows, [10, 20, 30], "eval_loss", 1))


@pytest.mark.slow
def test_branch_command_end_to_end(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(config_mod.to_yaml(config(NQM)))
    out = tmp_path / "out"
    assert main(["branch", str(path), "--out", str(out), "--dry-run"]) == 0
    assert "point at step 100" in capsys.readouterr().out and not out.exists()
    assert main(["branch", str(path), "--out", str(out), "--progress", "none",
                 "--bootstrap", "50"]) == 0
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["kind"] == "branch" and len(analysis["branching"]["points"]) == 2
    for name in ("report.md", "figures/local_b_crit.png", "figures/branch_ratios.png",
                 "index.html", "base/sweep.yaml"):
        assert (out / name).is_file(), name
    assert main(["analyze", str(out), "--quiet", "--bootstrap", "20"]) == 0
    assert "local critical batch size" in (out / "report.md").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(path.read_text().replace("lr_rule: linear", "lr_rule: cubic"))
    assert main(["branch", str(bad), "--out", str(tmp_path / "x")]) == 2
    assert "branch.lr_rule" in capsys.readouterr().err


def _branch_record(point, factor, lr_factor, seed, start, steps, loss, status="completed"):
    rows = [{"step": start + j * steps // 2, "eval_loss": loss} for j in (1, 2)]
    return {"config": {"point": point, "factor": factor, "lr_factor": lr_factor, "seed": seed,
                       "start_step": start, "window_steps": steps, "learning_rate": 0.1 * factor * lr_factor},
            "summary": {"status": status}, "metrics": rows}


def test_each_factor_and_the_reference_take_their_best_learning_rate():
    """Hand-made rows: at k = 1 the grid's 0.5 beats the base, so it is the reference; k = 2
    keeps within 5% of it at its own best factor, k = 4 does not; a diverged branch counts
    as falling behind."""
    from scaling.analysis.branching import analyze_point
    plan = {"batch_size": 10, "learning_rate": 0.1, "window": 200, "evals": 2}
    base = {s: [{"step": 100 + 10, "eval_loss": 1.0}, {"step": 100 + 20, "eval_loss": 1.0}]
            for s in (0, 1)}
    records = [_branch_record(100, 1, 0.5, s, 100, 20, 0.9) for s in (0, 1)]
    records += [_branch_record(100, 2, f, s, 50, 10, loss) for s in (0, 1)
                for f, loss in ((1.0, 0.93), (0.5, 1.2))]
    records += [_branch_record(100, 4, 1.0, s, 25, 5, 0.99) for s in (0, 1)]
    records += [_branch_record(100, 8, 1.0, s, 12, 2, math.nan, "diverged") for s in (0, 1)]
    settings = {"metric": "eval_loss", "average": 1, "tolerance": 0.05}
    p = analyze_point(base, records, 100, plan, settings, 20, np.random.default_rng(0))
    assert p["reference_loss"] == pytest.approx(0.9) and p["reference"]["best_lr_factor"] == 0.5
    by_k = {b["factor"]: b for b in p["branches"]}
    assert by_k[2]["best_lr_factor"] == 1.0 and by_k[2]["ratio"] == pytest.approx(0.93 / 0.9)
    assert by_k[2]["within"] and not by_k[4]["within"] and by_k[8]["loss"] is None
    assert p["local_b_crit"] == 20 and not p["at_edge"]
    assert p["local_b_crit_ci"] == [20.0, 20.0]  # identical seeds: every factor is decided
    assert p["local_b_crit_by_tolerance"]["0.1"] == 40 and p["local_b_crit_by_tolerance"]["0.01"] == 10


@pytest.mark.slow
def test_the_base_can_be_a_sweeps_run(tmp_path, capsys):
    """--base-run takes batch size, learning rate and seed from a finished sweep's run and
    trains it again with its state saved: the retrained base reproduces the run's rows."""
    sweep = config(DIGITS, "batch.sizes=[16, 32]", "learning_rate.values=[0.05, 0.1]",
                   "targets=['eval_accuracy>=0.8']", "branch={}")
    from scaling.sweep import runner
    runner.run(sweep, tmp_path / "sweep", quiet=True)
    run_dir = tmp_path / "sweep" / "runs" / "bs16-lr0.1-seed1"
    sweep_yaml = tmp_path / "sweep" / "sweep.yaml"
    out = tmp_path / "branch"
    assert main(["branch", str(sweep_yaml), "branch.factors=[2]", "branch.points=[640]",
                 "branch.window=1280", "branch.evals=2", "--base-run", str(run_dir),
                 "--out", str(out), "--progress", "none", "--no-analyze"]) == 0
    printed = capsys.readouterr().out
    assert "the base reproduces" in printed, printed
    (base,) = store.load(out / "base")
    assert (base["config"]["batch_size"], base["config"]["learning_rate"],
            base["config"]["seed"]) == (16, 0.1, 1)
    other = tmp_path / "other.yaml"
    other.write_text(sweep_yaml.read_text().replace("hidden:\n  - 16", "hidden:\n  - 24"))
    assert main(["branch", str(other), "--base-run", str(run_dir), "--out",
                 str(tmp_path / "x")]) == 2
    assert "model differs" in capsys.readouterr().err


@pytest.mark.slow
def test_branches_on_a_mesh_of_runs_equal_those_on_data_shards(tmp_path):
    """Two runs axes x 4 data shards (branch groups padded to multiples of 2) against 8 data
    shards: the same branch rows to float tolerance."""
    common = ("gns.groups=8", "branch.factors=[2]", "seeds=[0, 1, 2]")  # odd: padding
    branch.run(config(DIGITS, "parallel.runs=1", "parallel.data=8", *common), tmp_path / "a",
               quiet=True)
    branch.run(config(DIGITS, "parallel.runs=2", "parallel.data=4", *common), tmp_path / "b",
               quiet=True)
    a, b = _rows(tmp_path / "a" / "branches"), _rows(tmp_path / "b" / "branches")
    assert a.keys() == b.keys() and len(a) == 3 * 3  # k = 1 at 0.5; k = 2 at 1.0 and 0.5
    for rid in a:
        for x, y in zip(a[rid], b[rid]):
            assert x["step"] == y["step"] and x["examples"] == y["examples"]
            assert y["eval_loss"] == pytest.approx(x["eval_loss"], rel=1e-4), rid
