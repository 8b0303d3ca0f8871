"""A searched beta2 or weight decay against its rule (scaling.analysis.hyper_rules): the best
value per batch size, what the rule keeps fixed, the rule's value and its cost, worked by hand
on synthetic curves; then a real sweep over b2 through `scaling analyze` and report.md."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.analysis import contract
from scaling.analysis.analyze import analyze
from scaling.analysis.hyper_rules import hyper_rules, scalar_rule
from scaling.analysis.table import LRCurve
from scaling.report.hyper_rules import hyper_rules_section
from scaling.sweep import runner
from tests.helpers import config


def _curve(scalar: str, value: float, steps_by_lr: dict[float, float]) -> LRCurve:
    """One cell row of a batch size: one seed's steps per learning rate (NaN: not reached)."""
    lrs = sorted(steps_by_lr)
    return LRCurve(lrs=lrs, steps=[np.array([steps_by_lr[lr]]) for lr in lrs],
                   hyperparameters={scalar: value})


def _b2_sizes(best: dict[int, float]) -> dict[int, list[LRCurve]]:
    """At each batch size three b2 values around `best[B]` (1 - b2 x 10 and / 10); the best
    takes 100 steps at lr 0.01, the others 150 and 200; lr 0.001 is 300 everywhere."""
    out = {}
    for size, b2 in best.items():
        values = [1 - (1 - b2) * 10, b2, 1 - (1 - b2) / 10]
        steps = [150.0, 100.0, 200.0]
        out[size] = [_curve("b2", v, {0.001: 300.0, 0.01: s}) for v, s in zip(values, steps)]
    return out


def test_a_best_b2_that_keeps_its_half_life_has_exponent_zero_and_costs_nothing():
    best = {8: 0.999, 32: 0.999 ** 4, 128: 0.999 ** 16}  # the half-life rule from B = 8
    entry = scalar_rule("b2", _b2_sizes(best), {8: 1000, 32: 1000, 128: 1000})
    assert [p["best"] for p in entry["points"]] == pytest.approx(list(best.values()))
    kept = 8 * math.log(0.5) / math.log(0.999)  # 5,541 examples at every batch size
    assert [p["measure"] for p in entry["points"]] == pytest.approx([kept] * 3)
    assert entry["exponent"] == pytest.approx(0.0, abs=1e-9)
    assert [p["rule_value"] for p in entry["points"]] == pytest.approx(list(best.values()))
    assert [p["relative_cost"] for p in entry["points"]] == pytest.approx([1.0] * 3)
    assert [p["best_lr"] for p in entry["points"]] == [0.01] * 3
    assert entry["reference"] == {"batch_size": 8, "value": 0.999, "measure": pytest.approx(kept)}


def test_a_fixed_best_b2_has_exponent_one_and_the_rule_cost_is_interpolated():
    """b2 = 0.999 best at B = 8 and 32: the half-life grows as B (exponent 1). At 32 the rule
    asks 0.999^4 = 0.996006, between the tried 0.99 (150 steps) and 0.999 (100): linear in
    log(1 - b2), t = ln(0.003994 / 0.01) / ln(0.1) = 0.39846, steps = 150 - 50 t."""
    sizes = _b2_sizes({8: 0.999, 32: 0.999})
    entry = scalar_rule("b2", sizes, {8: 1000, 32: 1000})
    assert entry["exponent"] == pytest.approx(1.0)
    at32 = entry["points"][1]
    t = math.log((1 - 0.999 ** 4) / 0.01) / math.log(0.1)
    assert at32["rule_value"] == pytest.approx(0.999 ** 4)
    assert at32["rule_steps"] == pytest.approx(150 - 50 * t)
    assert at32["relative_cost"] == pytest.approx((150 - 50 * t) / 100)
    assert at32["values"] == pytest.approx([0.99, 0.999, 0.9999]) and at32["at_edge"] is None
    assert at32["steps"] == [150.0, 100.0, 200.0]


def test_a_rule_value_outside_the_values_tried_is_named_and_not_costed():
    """b2 = 0.999 best at B = 8 and 1,024: at 1,024 the rule asks 0.999^128 = 0.8798, below
    the tried 0.99 .. 0.9999, so no cost is read there and the summary names it; the
    reference batch size's own cost (1 by construction) is not quoted as the rule's cost."""
    entry = scalar_rule("b2", _b2_sizes({8: 0.999, 1024: 0.999}), {8: 1000, 1024: 1000})
    far = entry["points"][1]
    assert far["rule_value"] == pytest.approx(0.999 ** 128) and far["relative_cost"] is None
    assert "outside the values tried at B = 1024 (0.8798)" in entry["summary"]
    assert "costs at worst" not in entry["summary"]


def test_the_weight_decay_timescale_from_the_smallest_batch():
    """At B = 8 the best is lambda 0.1 at lr 0.01 over D = 1,000 examples: tau = 8 / (0.01 x
    0.1 x 1,000) = 8. At B = 32 the best lr is 0.02, so the rule asks lambda = 32 / (0.02 x 8 x
    1,000) = 0.2, which is the best there: tau 8 again, exponent 0, cost 1."""
    by_size = {
        8: [_curve("weight_decay", 0.05, {0.01: 130.0}), _curve("weight_decay", 0.1, {0.01: 100.0}),
            _curve("weight_decay", 0.2, {0.01: 120.0})],
        32: [_curve("weight_decay", 0.1, {0.01: 60.0, 0.02: 50.0}),
             _curve("weight_decay", 0.2, {0.01: 55.0, 0.02: 40.0}),
             _curve("weight_decay", 0.4, {0.01: 70.0, 0.02: 45.0})],
    }
    entry = scalar_rule("weight_decay", by_size, {8: 1000, 32: 1000})
    first, second = entry["points"]
    assert (first["best"], first["best_lr"], first["measure"]) == (0.1, 0.01, pytest.approx(8.0))
    assert (second["best"], second["best_lr"]) == (0.2, 0.02)
    assert second["rule_value"] == pytest.approx(0.2) and second["relative_cost"] == pytest.approx(1.0)
    assert second["measure"] == pytest.approx(8.0) and entry["exponent"] == pytest.approx(0.0, abs=1e-9)


def test_edges_unreached_values_and_no_search():
    sizes = _b2_sizes({8: 0.999, 32: 0.999})
    sizes[32][1] = _curve("b2", 0.999, {0.001: math.nan, 0.01: math.nan})  # never reached
    entry = scalar_rule("b2", sizes, {8: 1000, 32: 1000})
    at32 = entry["points"][1]
    assert at32["steps"] == [150.0, None, 200.0] and at32["best"] == pytest.approx(0.99)
    assert at32["at_edge"] == "low" and at32["rule_steps"] is None
    plain = {8: [LRCurve(lrs=[0.01], steps=[np.array([10.0])])]}
    assert hyper_rules("eval_loss<=1", plain, {8: 1000}) is None


NQM = {
    "name": "b2search", "task": {"name": "nqm", "dim": 10, "draw": "means"},
    "optimizer": {"name": "adam", "b2": [0.9, 0.999]}, "batch": {"sizes": [8, 32]},
    "learning_rate": {"values": [0.03, 0.1], "search": False},
    "budget": {"max_examples": 6400},
    "targets": ["eval_loss<=0.5"], "seeds": [0, 1],
    "eval": {"every": 10, "points_per_decade": 0},
    "train": {"chunk_steps": 50, "checkpoint_minutes": 0},
}


@pytest.mark.slow
def test_a_sweep_over_b2_is_set_against_the_half_life_rule(tmp_path):
    runner.run(config(NQM), tmp_path, quiet=True)
    analysis = analyze(tmp_path, bootstrap=0)
    contract.check(analysis)
    rules = analysis["hyper_rules"]
    assert rules is not None and rules == analysis["targets"][0]["hyper_rules"]
    entry = rules["scalars"]["b2"]
    assert [p["batch_size"] for p in entry["points"]] == [8, 32]
    for p in entry["points"]:
        assert p["values"] == [0.9, 0.999] and p["best"] in (0.9, 0.999)
        assert p["measure"] == pytest.approx(p["batch_size"] * math.log(0.5) / math.log(p["best"]))
    text = "\n".join(hyper_rules_section(analysis))
    assert "## Beta2 and weight decay against their rules" in text and "| eval_loss<=0.5 | b2 | 32 |" in text
    assert analysis["targets"][0]["points"][0]["hyperparameters"].keys() == {"b2"}
