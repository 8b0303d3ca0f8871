"""The optimizer's batch-size rules (scaling.config.optimizer_rules): beta2 by the half-life
rule and the weight decay by the timescale rule, worked by hand at three batch sizes and held
against `scaling plan`, the grid's RunSpecs and --dry-run; a schedule's phase and a branch take
the rule's values into the optimizer's state; bad settings are refused before compute."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import yaml

from scaling import config as config_mod, store
from scaling.cli.main import main
from scaling.config import ConfigError
from scaling.sweep import branch, runner
from scaling.sweep import prepare as prepare_mod
from scaling.sweep.grid import expand
from scaling.sweep.session import Session
from scaling.train import start as start_mod
from tests.helpers import config

NQM = {
    "name": "rules", "task": {"name": "nqm", "dim": 10, "draw": "means"},
    "optimizer": {"name": "adam", "b2": 0.99, "b2_rule": "half_life", "b2_ref_batch": 32,
                  "b2_range": [0.95, 0.9999]},
    "batch": {"sizes": [64, 128, 256]}, "learning_rate": {"values": [0.01], "search": False},
    "budget": {"max_examples": 25600}, "seeds": [0],
    "eval": {"every": 10, "points_per_decade": 0},
    "train": {"chunk_steps": 50, "checkpoint_minutes": 0},
}
# adamw, the weight decay from tau = 1/2: lambda = B / (lr x 0.5 x 25,600) = B / (12,800 lr).
TAU = {**NQM, "optimizer": {"name": "adamw", "weight_decay_rule": "timescale",
                            "weight_decay_tau": 0.5},
       "learning_rate": {"values": [0.01, 0.1], "search": False}}
WD_BY_HAND = {(64, 0.01): 0.5, (64, 0.1): 0.05, (128, 0.01): 1.0, (128, 0.1): 0.1,
              (256, 0.01): 2.0, (256, 0.1): 0.2}


def _plan_json(tmp_path, capsys, data: dict) -> list[dict]:
    path = tmp_path / "c.yaml"
    path.write_text(config_mod.to_yaml(config_mod.from_dict(data)))
    assert main(["plan", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_half_life_b2_by_hand_agrees_with_plan_and_the_grid(tmp_path, capsys):
    # 0.99 at batch 32: 0.99^2 = 0.9801 at 64, 0.99^4 = 0.96059601 at 128, 0.99^8 = 0.92274...
    # at 256, below the range [0.95, 0.9999]: clipped to 0.95.
    by_hand = {64: 0.9801, 128: 0.96059601, 256: 0.95}
    rows = _plan_json(tmp_path, capsys, NQM)
    planned = {r["batch_size"]: r["optimizer_rules"] for r in rows}
    assert {b: planned[b]["b2"] for b in by_hand} == pytest.approx(by_hand, rel=1e-12)
    assert [planned[b]["b2_clipped"] for b in (64, 128, 256)] == [False, False, True]
    # The half-life in examples is the rule's invariant: 32 ln(1/2) / ln(0.99) unclipped.
    kept = 32 * math.log(0.5) / math.log(0.99)
    assert planned[64]["b2_half_life"] == pytest.approx(kept)
    assert planned[128]["b2_half_life"] == pytest.approx(kept)
    assert planned[256]["b2_half_life"] == pytest.approx(256 * math.log(0.5) / math.log(0.95))
    runs = expand(config(NQM))
    assert {r.batch_size: r.spec.b2 for r in runs} == pytest.approx(by_hand, rel=1e-12)
    assert [r.run_id for r in runs][0] == "bs64-lr0.01-seed0"  # one b2 per batch: no id suffix
    assert main(["plan", str(tmp_path / "c.yaml")]) == 0
    text = capsys.readouterr().out
    assert "batch 64: b2 0.9801," in text and "batch 256: b2 0.95, half-life" in text
    assert "(clipped)" in text.split("batch 256")[1]


@pytest.mark.parametrize("optimizer", [
    {"weight_decay_tau": 0.5},
    # The reference run: batch 64 at lr 0.01 with lambda 0.5 over 25,600 examples has
    # tau = 64 / (0.01 x 0.5 x 25,600) = 0.5.
    {"weight_decay_ref_batch": 64, "weight_decay_ref_lr": 0.01, "weight_decay": 0.5},
])
def test_timescale_weight_decay_by_hand_agrees_with_plan_and_the_grid(optimizer, tmp_path, capsys):
    data = {**TAU, "optimizer": {"name": "adamw", "weight_decay_rule": "timescale", **optimizer}}
    rows = _plan_json(tmp_path, capsys, data)
    planned = {(r["batch_size"], w["learning_rate"]): w["weight_decay"]
               for r in rows for w in r["optimizer_rules"]["weight_decay"]}
    assert planned == pytest.approx(WD_BY_HAND, rel=1e-12)
    runs = expand(config(data))
    assert {(r.batch_size, r.spec.learning_rate): r.spec.weight_decay for r in runs} == \
        pytest.approx(WD_BY_HAND, rel=1e-12)
    assert main(["plan", str(tmp_path / "c.yaml")]) == 0
    assert "tau = 0.5" in capsys.readouterr().out


@pytest.mark.slow
def test_dry_run_and_config_json_show_each_runs_ruled_scalars(tmp_path, capsys):
    cfg = config(TAU)
    p = prepare_mod.prepare(cfg, tmp_path)
    text = runner.describe(p)
    assert "bs128-lr0.1-seed0, weight_decay 0.1" in text and "tau = 0.5 (given)" in text
    runner.run(config(TAU, "batch.sizes=[64]", "learning_rate.values=[0.1]"), tmp_path / "r",
               quiet=True)
    (rec,) = store.load(tmp_path / "r")
    assert rec["config"]["optimizer"]["weight_decay"] == pytest.approx(0.05, rel=1e-12)
    assert rec["config"]["optimizer"]["weight_decay_rule"] == "timescale"


@pytest.mark.parametrize("changes, key", [
    ({"b2_ref_batch": None}, "optimizer.b2_ref_batch"),  # a half-life rule without a reference
    ({"name": "sgd"}, "optimizer.b2_rule"),  # no beta2
    ({"b2_rule": "sqrt"}, "optimizer.b2_rule"),
    ({"b2_range": [0.9, 1.0]}, "optimizer.b2_range"),
    ({"b2_range": [0.0, 0.99]}, "optimizer.b2_range"),
    ({"b2_range": [0.99, 0.9]}, "optimizer.b2_range"),
    ({"b2_range": [0.9]}, "optimizer.b2_range"),
    ({"b2": [0.99, 0.999]}, "optimizer.b2"),
    ({"b2_rule": None}, "optimizer.b2_ref_batch"),  # a reference without a rule
    ({"b2_ref_batch": 33, "b2_rule": "half_life"}, None),  # accepted: any batch
    ({"weight_decay_rule": "timescale", "weight_decay_tau": 0.5},
     "optimizer.weight_decay_rule"),  # adam: L2 through the preconditioner
    ({"name": "adamw", "weight_decay_rule": "timescale"}, "optimizer.weight_decay_ref_batch"),
    ({"name": "adamw", "weight_decay_rule": "timescale", "weight_decay_tau": 0.5,
      "weight_decay_ref_batch": 64}, "optimizer.weight_decay_ref_batch"),
    ({"name": "adamw", "weight_decay_rule": "timescale", "weight_decay_tau": 0.5,
      "weight_decay": 0.1}, "optimizer.weight_decay"),
    ({"name": "adamw", "weight_decay_rule": "timescale", "weight_decay_tau": -1.0},
     "optimizer.weight_decay_tau"),
    ({"name": "adamw", "weight_decay_rule": "timescale", "weight_decay_ref_batch": 64,
      "weight_decay": 0.1}, "optimizer.weight_decay_ref_lr"),
    ({"name": "adamw", "weight_decay_rule": "timescale", "weight_decay_ref_batch": 64,
      "weight_decay_ref_lr": 0.01}, "optimizer.weight_decay"),
    ({"name": "adamw", "weight_decay_rule": "timescale", "weight_decay_tau": 0.5,
      "weight_decay": [0.0, 0.1]}, "optimizer.weight_decay"),
    ({"weight_decay_tau": 0.5}, "optimizer.weight_decay_tau"),  # without the rule
    ({"name": "adamw", "weight_decay_rule": "l2"}, "optimizer.weight_decay_rule"),
])
def test_bad_rule_settings_fail_before_compute(changes, key):
    optimizer = {**NQM["optimizer"], **changes}
    if key is None:
        config(NQM, f"optimizer={json.dumps(optimizer)}")
        return
    with pytest.raises(ConfigError, match=rf"^{key.replace('.', '[.]')}: got "):
        config(NQM, f"optimizer={json.dumps(optimizer)}")


def test_a_bad_rule_is_one_line_and_exit_2_with_nothing_written(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(config_mod.to_yaml(config_mod.from_dict(NQM)))
    out = tmp_path / "out"
    assert main(["sweep", str(path), "optimizer.b2_ref_batch=null", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: optimizer.b2_ref_batch: got None") and err.count("\n") == 1
    assert not out.exists()


# ---------------------------------------------------------------- the engine


def test_start_from_writes_the_runs_optimizer_scalars(tmp_path):
    """A group continued from another's state (a schedule's phase, a branch) runs with its own
    runs' beta2 and weight decay, not the source's, and every other leaf carried."""
    cfg = config(NQM, "optimizer={name: adamw, b2: 0.99, weight_decay: 0.1}", "batch.sizes=[64]",
                 "learning_rate.values=[0.01, 0.02]")
    p = prepare_mod.prepare(cfg, tmp_path)
    session = Session(p, True)
    program, ctx = session.program(64), session.context
    runs = [r.spec for r in p.planned]
    first = start_mod.fresh(program, runs, ctx.data, ctx.eval_data, 1)
    moved = [dataclasses.replace(r, b2=b2, weight_decay=wd)
             for r, b2, wd in zip(runs, (0.9801, 0.95), (0.2, 0.4))]
    start = start_mod.from_slots(program, first.state, [1, 0], moved, 0, 1)
    hyper = start.state.opt_state.hyperparams
    assert [float(v) for v in hyper["b2"]] == pytest.approx([0.9801, 0.95], rel=1e-7)
    assert [float(v) for v in hyper["weight_decay"]] == pytest.approx([0.2, 0.4], rel=1e-7)
    assert [float(v) for v in start.state.base_lr] == pytest.approx([0.01, 0.02], rel=1e-7)
    assert [float(v) for v in hyper["b1"]] == pytest.approx([0.9, 0.9])


def _doubling(optimizer: dict):
    return config(NQM, f"optimizer={json.dumps(optimizer)}", "batch.sizes=[8]", "seeds=[0, 1]",
                  "budget.max_examples=3200", "learning_rate.values=[0.01]",
                  "batch.schedules=[{kind: doubling, start: 8, at: [0.5], max: 16}]")


@pytest.mark.slow
def test_a_schedule_phase_takes_the_rules_values(tmp_path):
    """batch 8 -> 16 at half the budget (lr 0.01 -> 0.02, linear): with the rules, b2 0.99 ->
    0.99^2 and lambda = B / (lr tau D) = 8 / (0.01 x 0.25 x 3,200) = 1 -> 16 / (0.02 x 0.25 x
    3,200) = 1 as well (lr doubles with B), so only b2 moves. Against the same schedule with
    those first-phase values fixed, the rows agree exactly up to the change and not after."""
    ruled = {"name": "adamw", "b2": 0.99, "b2_rule": "half_life", "b2_ref_batch": 8,
             "weight_decay_rule": "timescale", "weight_decay_tau": 0.25}
    fixed = {"name": "adamw", "b2": 0.99, "weight_decay": 1.0}
    runner.run(_doubling(ruled), tmp_path / "ruled", quiet=True)
    runner.run(_doubling(fixed), tmp_path / "fixed", quiet=True)
    sched = lambda out: {r["run_id"]: r for r in store.load(out) if r["config"].get("batch_schedule")}
    mine, theirs = sched(tmp_path / "ruled"), sched(tmp_path / "fixed")
    assert set(mine) == set(theirs) and len(mine) == 2
    for run_id, rec in mine.items():
        phases = rec["summary"]["phases"]
        assert [(p["step"], p["learning_rate"]) for p in phases] == [(0, 0.01), (200, 0.02)]
        assert [p["b2"] for p in phases] == pytest.approx([0.99, 0.9801], rel=1e-12)
        assert [p["weight_decay"] for p in phases] == pytest.approx([1.0, 1.0], rel=1e-12)
        loss = lambda r: {row["step"]: row["eval_loss"] for row in r["metrics"]}
        a, b = loss(rec), loss(theirs[run_id])
        assert all(a[s] == b[s] for s in a if s <= 200)
        assert any(a[s] != b[s] for s in a if s > 200)
    assert "phases" not in next(iter(theirs.values()))["summary"]


@pytest.mark.slow
def test_a_branch_takes_the_rules_values(tmp_path):
    """Branches at k x B0 run with beta2 = b2^k (the half-life rule from B0) and the weight
    decay of their batch and learning rate, as their config.json and the dry run say."""
    cfg = config(NQM, "optimizer={name: adamw, b2: 0.99, b2_rule: half_life, b2_ref_batch: 8, "
                 "weight_decay_rule: timescale, weight_decay_tau: 0.5}", "batch.sizes=[8]",
                 "budget.max_steps=400", "seeds=[0]",
                 "branch={factors: [2, 4], window: 512, points: [800], evals: 2}")
    p = branch.prepare(cfg, tmp_path)
    text = branch.describe(p)
    # D = 400 x 8 = 3,200; at k = 2, lr 0.02 (linear): lambda = 16 / (0.02 x 0.5 x 3,200) = 0.5.
    assert "k=2 (batch 16): lr 0.02: b2 0.9801, weight_decay 0.5" in text
    branch.run(cfg, tmp_path, quiet=True)
    for rec in store.load(tmp_path / "branches"):
        k = rec["config"]["factor"]
        assert rec["config"]["optimizer"]["b2"] == pytest.approx(0.99 ** k, rel=1e-12)
        assert rec["config"]["optimizer"]["weight_decay"] == pytest.approx(0.5, rel=1e-12)


def test_a_folder_from_before_the_rules_takes_the_same_config_and_refuses_a_rule(tmp_path):
    """A sweep.yaml written before the rules' keys existed trained without them: the same
    config goes on in that folder; turning a rule on there is refused, naming it."""
    plain = config(NQM, "optimizer={name: adam, b2: 0.99}")
    data = config_mod.to_dict(plain)
    for key in ("b2_rule", "b2_ref_batch", "b2_range", "weight_decay_rule", "weight_decay_tau",
                "weight_decay_ref_batch", "weight_decay_ref_lr"):
        del data["optimizer"][key]
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(data))
    prepare_mod.prepare(plain, tmp_path)
    with pytest.raises(ConfigError, match="optimizer.b2_rule"):
        prepare_mod.prepare(config(NQM), tmp_path)
