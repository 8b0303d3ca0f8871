"""The analysis layer (scaling.analysis: analyze, curves, tradeoff, lr_rules) against ground
truth: exact fits, hand-computed interpolation, known regimes and rules, whole sweeps on disk."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from scaling import store
from scaling.analysis import (analyze as A, contract, curves, intervals, lr_rules, tradeoff,
                              views)
from scaling.analysis.fit import fit_with_interval
from scaling.analysis.optima import refine_lr
from scaling.analysis.points import best_point
from scaling.analysis.table import LRCurve
from scaling.config import ConfigError
from scaling.config.targets import Reach, crossing

FIRST = Reach("first")


def model_steps(sizes, s_min: float, e_min: float) -> np.ndarray:
    return s_min + e_min / np.asarray(sizes, float)


def grid_of(lrs, steps_per_seed, diverged=None) -> LRCurve:
    """A LRCurve from per-LR lists of per-seed steps (None: not reached); examples = steps x 1."""
    to_arr = [np.array([math.nan if s is None else s for s in seeds], float) for seeds in steps_per_seed]
    return LRCurve(lrs=list(lrs), steps=to_arr, examples=[a.copy() for a in to_arr],
                  b_simple=[np.full(len(a), math.nan) for a in to_arr],
                  b_noise=[np.full(len(a), math.nan) for a in to_arr],
                  b_simple_precond=[np.full(len(a), math.nan) for a in to_arr],
                  diverged=list(diverged or [False] * len(lrs)))


# ---------------------------------------------------------------- one run


def test_steps_to_target_interpolates_linearly_between_evaluation_points():
    rows = [{"step": 0, "eval_loss": 3.0}, {"step": 10, "eval_loss": 2.0},
            {"step": 20, "eval_loss": 1.2}, {"step": 30, "eval_loss": 0.8}]
    assert crossing(rows, "eval_loss<=1.0", FIRST) == pytest.approx(25.0)  # 1.2 -> 0.8 halfway
    assert crossing(rows, "eval_loss<=2.0", FIRST) == 10.0  # met exactly at a point
    assert crossing(rows, "eval_loss<=3.0", FIRST) == 0.0
    assert crossing(rows, "eval_loss<=0.5", FIRST) is None
    acc = [{"step": 0, "eval_accuracy": 0.1}, {"step": 40, "eval_accuracy": None},
           {"step": 50, "eval_accuracy": 0.5}, {"step": 100, "eval_accuracy": 0.7}]
    assert crossing(acc, "eval_accuracy>=0.6", FIRST) == pytest.approx(75.0)


def test_examples_follow_the_run_count_with_a_partial_last_batch():
    # 100 examples, B = 8, last batch kept: step 12 has seen 96 examples, step 13 all 100.
    rows = [{"step": 12, "examples": 96, "eval_loss": 1.1}, {"step": 13, "examples": 100, "eval_loss": 0.9}]
    step = crossing(rows, "eval_loss<=1.0", FIRST)
    assert step == pytest.approx(12.5)
    assert store.examples_at(rows, step, 8) == pytest.approx(98.0)  # not 12.5 x 8 = 100
    assert store.examples_at([{"step": 12, "eval_loss": 1.0}], step, 8) == pytest.approx(100.0)


# ---------------------------------------------------------------- best LR


def test_parabola_refinement_finds_the_vertex_of_an_exact_parabola():
    lrs = np.geomspace(0.01, 1.0, 7)
    x0 = math.log(0.13)
    steps = np.exp(0.7 * (np.log(lrs) - x0) ** 2 + math.log(200.0))
    best = int(np.argmin(steps))
    assert refine_lr(lrs, steps, best) == pytest.approx(0.13, rel=1e-3)  # the windows sit on other rows
    assert refine_lr(lrs, 1.0 / steps, best) is None  # opens downward
    assert refine_lr(lrs, steps, 0) is None  # at the edge
    holed = steps.copy()
    holed[best + 1] = math.nan
    assert refine_lr(lrs, holed, best) is None


def test_best_point_means_over_seeds_and_flags_grid_edges():
    lrs = [0.1, 0.2, 0.4]
    low = best_point(8, [grid_of(lrs, [[90, 110], [150, 150], [None, 100]])])
    assert (low["best_lr"], low["at_edge"], low["steps"], low["num_reached"]) == (0.1, "low", 100.0, 2)
    # 0.4 is faster on one seed but a seed missed the target there: the cell is not reached.
    high = best_point(8, [grid_of(lrs, [[300, 300], [200, 200], [100, 120]], [False, False, True])])
    assert (high["best_lr"], high["at_edge"], high["steps"], high["num_diverged"]) == (0.4, "high", 110.0, 1)
    mid = best_point(8, [grid_of(lrs, [[300], [200], [300]])])
    assert mid["at_edge"] is None and mid["refined_lr"] == pytest.approx(0.2)
    assert best_point(8, [grid_of(lrs, [[None], [None], [None]])]) is None


# ---------------------------------------------------------------- trade-off fit


@pytest.mark.parametrize("s_min,e_min", [(100.0, 6400.0), (3.0, 1e6), (5000.0, 20.0)])
def test_fit_tradeoff_recovers_the_model_exactly(s_min, e_min):
    sizes = [2**k for k in range(3, 13)]
    fit = tradeoff.fit_tradeoff(sizes, model_steps(sizes, s_min, e_min))
    assert fit == pytest.approx((s_min, e_min), rel=1e-6)
    two = tradeoff.fit_tradeoff([16, 256], model_steps([16, 256], s_min, e_min))
    assert two == pytest.approx((s_min, e_min), rel=1e-6)


def noisy_grids(rng, seeds: int, sigma: float, sizes, s_min: float, e_min: float):
    """Per B three LRs whose true steps are 1.6x, 1x, 1.6x S(B), times lognormal seed noise."""
    out = {}
    for size, s in zip(sizes, model_steps(sizes, s_min, e_min)):
        cells = [s * f * np.exp(sigma * rng.standard_normal(seeds)) for f in (1.6, 1.0, 1.6)]
        out[size] = [grid_of([0.1, 0.2, 0.4], cells)]
    return out


@pytest.mark.parametrize("method", intervals.METHODS)
def test_interval_over_seeds_covers_the_true_b_crit(method):
    sizes, s_min, e_min = [2**k for k in range(2, 12)], 50.0, 50.0 * 128
    rng = np.random.default_rng(1)
    covered, widths = 0, []
    for _ in range(20):
        by_size = noisy_grids(rng, 4, 0.1, sizes, s_min, e_min)
        points = [best_point(b, g) for b, g in by_size.items()]
        fit = fit_with_interval(by_size, points, 200, rng, method=method)
        lo, hi = fit["b_crit_ci"]
        covered += lo <= 128 <= hi
        widths.append(hi / lo)
        assert fit["interval"]["resamples"] == "seeds" and fit["interval"]["method"] == method
    assert covered >= 15, covered
    assert np.median(widths) < 2.0  # an interval this narrow only covers if it is centred right


def test_one_seed_gives_no_interval_never_a_resampling_of_batch_sizes():
    sizes = [2**k for k in range(2, 12)]
    by_size = noisy_grids(np.random.default_rng(0), 1, 0.1, sizes, 50.0, 6400.0)
    fit = fit_with_interval(by_size, [best_point(b, g) for b, g in by_size.items()], 200,
                            np.random.default_rng(0))
    assert fit["b_crit_ci"] is None and fit["band"] is None
    assert fit["interval"] == intervals.none(intervals.ONE_SEED)


def test_a_fit_on_three_points_gets_no_interval():
    by_size = noisy_grids(np.random.default_rng(0), 4, 0.1, [8, 64, 512], 50.0, 6400.0)
    fit = fit_with_interval(by_size, [best_point(b, g) for b, g in by_size.items()], 200,
                            np.random.default_rng(0))
    assert fit["b_crit_ci"] is None and fit["interval"] == intervals.none(intervals.FEW_POINTS)


@pytest.mark.parametrize("e_min,bound,at", [(50.0 * 1e5, "lower", 2048), (50.0 * 0.1, "upper", 4)])
def test_a_b_crit_beyond_the_batch_sizes_fitted_is_a_bound(e_min, bound, at):
    sizes = [2**k for k in range(2, 12)]
    by_size = noisy_grids(np.random.default_rng(0), 4, 0.01, sizes, 50.0, e_min)
    fit = fit_with_interval(by_size, [best_point(b, g) for b, g in by_size.items()], 200,
                            np.random.default_rng(0))
    status = fit["identification"]
    assert not status["identified"] and (status["bound"], status["at"]) == (bound, at)


def test_no_interval_from_two_single_seed_points():
    by_size = {b: [grid_of([0.1], [[s]])] for b, s in zip([8, 64], model_steps([8, 64], 10, 640))}
    fit = fit_with_interval(by_size, [best_point(b, g) for b, g in by_size.items()], 100,
                            np.random.default_rng(0))
    assert fit["b_crit"] == pytest.approx(64.0) and fit["b_crit_ci"] is None


# ---------------------------------------------------------------- regimes


def test_regimes_of_a_hand_made_curve():
    r = tradeoff.regimes([1, 2, 4, 8, 16, 32, 64], [1000, 500, 250, 150, 120, 110, 105])
    # slopes 1, 1, log2(250/150) = 0.74 < 0.8; 110 -> 105 falls 4.5% < 10%, 120 -> 105 falls 12.5%.
    assert (r["perfect_scaling_until"], r["steps_plateau_from"]) == (4, 32)


def test_regimes_of_the_tradeoff_model():
    sizes = [2**k for k in range(13)]
    r = tradeoff.regimes(sizes, list(model_steps(sizes, 100.0, 6400.0)))
    # slope over (B, 2B) is log2((1 + x) / (1 + x/2)) with x = 64/B: >= 0.8 iff x >= 5.72, B <= 11.2;
    # plateau: S(B) <= S(4096) / 0.9 = 112.85 iff 6400/B <= 12.85, B >= 498.
    assert (r["perfect_scaling_until"], r["steps_plateau_from"]) == (16, 512)
    ideal = tradeoff.regimes(sizes, list(1e5 / np.asarray(sizes, float)))
    assert (ideal["perfect_scaling_until"], ideal["steps_plateau_from"]) == (4096, None)


# ---------------------------------------------------------------- learning-rate rules


def test_noise_scale_fit_recovers_the_rule():
    sizes = [8, 32, 128, 512, 2048]
    optima = [{"batch_size": b, "learning_rate": 0.5 / (1 + 100 / b)} for b in sizes]
    assert lr_rules.noise_scale_fit(optima) == pytest.approx({"eps_max": 0.5, "b_noise": 100.0}, rel=1e-6)
    assert lr_rules.noise_scale_fit(optima[:2]) is None


def test_lr_rules_on_hand_made_grids():
    lrs = [0.2, 0.4, 0.8, 1.6]
    by_size = {16: grid_of([0.1, 0.2, 0.4], [[300], [200], [300]]),
               32: grid_of(lrs, [[150], [100], [150], [None]], [False, False, False, True]),
               64: grid_of(lrs, [[100], [60], [100], [None]], [False, False, False, True]),
               128: grid_of(lrs, [[80], [50], [80], [None]], [False, False, False, True])}
    points = [best_point(b, [g]) for b, g in by_size.items()]
    rules = lr_rules.lr_rules("eval_loss<=1.0", points, by_size)
    assert rules["reference"] == {"batch_size": 16, "learning_rate": pytest.approx(0.2)}
    linear = {e["batch_size"]: e for e in rules["rules"]["linear"]}
    assert linear[32]["ratio_to_optimum"] == pytest.approx(1.0) and linear[32]["relative_cost"] == pytest.approx(1.0)
    assert linear[64]["ratio_to_optimum"] == pytest.approx(2.0)
    assert linear[64]["relative_cost"] == pytest.approx(100 / 60)
    assert linear[128]["steps"] is None and linear[128]["note"] == "diverges"
    assert rules["linear_breaks_at"] == 64
    sqrt = {e["batch_size"]: e for e in rules["rules"]["sqrt"]}
    assert sqrt[128]["learning_rate"] == pytest.approx(0.2 * math.sqrt(8))
    assert sqrt[128]["steps"] == pytest.approx(65.0)  # halfway in log lr between 50 and 80
    assert rules["noise_scale_fit"] is not None and len(rules["rules"]["noise_scale"]) == 4
    assert "over-shoots the measured optimum from B = 64" in rules["summary"]


def test_steps_at_lr_notes():
    grid = grid_of([0.1, 0.2, 0.4], [[100], [50], [None]])
    assert lr_rules.steps_at_lr(grid, 0.05) == (None, "outside the grid")
    assert lr_rules.steps_at_lr(grid, 0.3) == (None, "target not reached there")
    assert lr_rules.steps_at_lr(grid, 0.2) == (50.0, None)
    assert lr_rules.steps_at_lr(grid, math.sqrt(0.02))[0] == pytest.approx(75.0)


# ---------------------------------------------------------------- whole sweep on disk


def test_b_simple_at_pools_the_intervals_near_the_crossing():
    """Intervals of 10 steps; the crossing at step 40 pools those ending at 40 and 50 (32..50)."""
    rows = [{"step": 0}] + [{"step": 10 * i, "gns_trace_sigma_interval": 100.0 * i,
                             "gns_g2_interval": float(i), "b_simple": 1.0} for i in range(1, 8)]
    assert curves.b_simple_at(rows, 40.0) == pytest.approx((400 + 500) / (4 + 5))
    rows[4]["gns_g2_interval"] = rows[5]["gns_g2_interval"] = -1.0  # noisy |G|^2: the EMA instead
    assert curves.b_simple_at(rows, 40.0) == 1.0
    assert curves.b_simple_at([{"step": 0}, {"step": 10, "b_simple": 7.0}], 10.0) == 7.0  # no intervals


def test_b_noise_at_pools_the_hessian_points_equally():
    rows = [{"step": 0}] + [{"step": 10 * i, "gns_trace_h_sigma_point": 10.0 * i,
                             "gns_ghg_point": 1.0 if i % 2 else math.nan, "b_noise": 3.0}
                            for i in range(1, 8)]
    assert curves.b_noise_at(rows, 40.0) == pytest.approx(50.0)  # only step 50 was measured in 32..50
    assert curves.b_noise_at(rows, 60.0) == pytest.approx((50.0 + 70.0) / 2)  # steps 50 and 70
    assert curves.b_noise_at([{"step": 0}, {"step": 10, "b_noise": 7.0}], 10.0) == 7.0  # no points
    assert curves.b_noise_at([{"step": 0}, {"step": 10}], 10.0) is None


def fake_run(out: Path, size: int, lr: float, seed: int, losses: list[float], status: str,
             momentum: float = 0.9, precond: bool = False) -> None:
    """A run folder evaluated every 10 steps with the given eval_loss curve (and, with
    `precond`, a B_simple in Adam's metric of 4 per 10 steps)."""
    run_id = f"bs{size}-lr{lr:g}-seed{seed}-mom{momentum:g}"
    store.start_run(out, run_id, {"run_id": run_id, "batch_size": size, "learning_rate": lr,
                                  "seed": seed, "targets": ["eval_loss<=1.0"],
                                  "optimizer": {"name": "momentum", "momentum": momentum}})
    rows = [{"step": 10 * i, "examples": 10 * i * size, "tokens": None, "eval_loss": loss,
             "eval_accuracy": 0.5 if i else 0.1, "b_simple": None if i == 0 else 10.0 * i}
            for i, loss in enumerate(losses)]
    if precond:
        rows = [dict(row, b_simple_precond=None if i == 0 else 4.0 * i) for i, row in enumerate(rows)]
    store.append_metrics(out, run_id, rows)
    store.finish_run(out, run_id, {"run_id": run_id, "status": status, "task": "fake",
                                   "optimizer": "sgd", "batch_size": size})


@pytest.fixture
def messy_sweep(tmp_path: Path) -> Path:
    """B=8: a slow LR, a fast one, a diverged one; B=16: a single LR; B=32: never reaches."""
    for seed in (0, 1):
        fake_run(tmp_path, 8, 0.1, seed, [3.0, 2.0, 1.5, 1.2, 0.8], "completed")  # 35 steps
        fake_run(tmp_path, 8, 0.3, seed, [3.0, 1.5, 0.5], "completed")  # 15 steps
        fake_run(tmp_path, 8, 1.0, seed, [3.0, 0.9, 40.0], "diverged")
        fake_run(tmp_path, 16, 0.3, seed, [3.0, 1.0 + seed, 0.0], "completed")  # 10, 15 steps
        fake_run(tmp_path, 32, 0.3, seed, [3.0, 2.0, 1.5], "budget_exhausted")
    return tmp_path


def test_messy_sweep_is_analysed_and_reported(messy_sweep: Path):
    a = A.analyze(messy_sweep, targets=["eval_loss<=1.0", "eval_accuracy>=0.9"], bootstrap=50)
    loss, acc = a["targets"]
    by_size = {p["batch_size"]: p for p in loss["points"]}
    assert sorted(by_size) == [8, 16] and loss["unreached_batch_sizes"] == [32]
    assert (by_size[8]["best_lr"], by_size[8]["steps"], by_size[8]["num_diverged"]) == (0.3, 15.0, 1)
    assert by_size[8]["examples"] == pytest.approx(120.0)
    assert by_size[8]["at_edge"] is None and by_size[8]["refined_lr"] is None  # diverged neighbour
    assert (by_size[16]["steps"], by_size[16]["at_edge"], by_size[16]["num_lrs"]) == (12.5, "low", 1)
    assert by_size[8]["b_simple"] == pytest.approx(15.0)  # 10 per 10 steps, at step 15
    assert loss["fit"]["num_points"] == 2 and loss["b_crit"] > 0
    diverged = [r for r in a["runs"] if r["status"] == "diverged"]
    assert diverged and all(r["steps_to_target"]["eval_loss<=1.0"] is None for r in diverged)
    assert acc["points"] == [] and acc["fit"] is None and acc["b_crit"] is None
    assert acc["unreached_batch_sizes"] == [8, 16, 32]
    assert a["lr_rules"]["target"] == "eval_loss<=1.0" and a["lr_rules"]["noise_scale_fit"] is None
    assert by_size[8]["b_simple_precond"] is None and loss["b_simple_precond"] is None
    assert loss["lr_rules"] == a["lr_rules"] and acc["lr_rules"] is None
    assert a["sweep"]["statuses"] == {"completed": 6, "diverged": 2, "budget_exhausted": 2}
    assert a["sweep"]["unit"] == "examples" and a["primary_target"] == "eval_loss<=1.0"
    assert "not reached at B = 32" in views.summary_table(a)


def test_b_simple_in_adams_metric_is_read_at_the_crossing(tmp_path: Path):
    for size, losses in ((8, [3.0, 1.5, 0.5]), (16, [3.0, 2.0, 1.5, 0.5])):  # 15 and 25 steps
        fake_run(tmp_path, size, 0.1, 0, losses, "completed", precond=True)
    a = A.analyze(tmp_path, bootstrap=0)
    (t,) = a["targets"]
    assert [p["b_simple_precond"] for p in t["points"]] == pytest.approx([6.0, 10.0])
    assert t["b_simple_precond"] == pytest.approx(8.0)  # the median over batch sizes
    assert t["lr_rules"]["noise_scales"]["b_simple_precond"] == pytest.approx(8.0)


def test_optimizer_axes_are_tuned_per_batch_size_like_the_learning_rate(tmp_path: Path):
    """Momentum 0.0 is faster at B=8 and 0.9 at B=16: each batch size keeps its best."""
    for lr in (0.1, 0.3):
        fake_run(tmp_path, 8, lr, 0, [3.0, 2.0, 0.5], "completed", momentum=0.0)  # 16.7 steps
        fake_run(tmp_path, 8, lr, 0, [3.0, 2.0, 1.5, 0.5], "completed", momentum=0.9)  # 25
        fake_run(tmp_path, 16, lr, 0, [3.0, 2.0, 1.5, 0.5], "completed", momentum=0.0)  # 25
        fake_run(tmp_path, 16, lr, 0, [3.0, 0.5], "completed", momentum=0.9)  # 8
    a = A.analyze(tmp_path, bootstrap=0)
    points = {p["batch_size"]: p for p in a["targets"][0]["points"]}
    assert points[8]["hyperparameters"] == {"momentum": 0.0}
    assert points[8]["steps"] == pytest.approx(10 + 10 * (1.0 - 2.0) / (0.5 - 2.0))
    assert (points[16]["hyperparameters"], points[16]["steps"]) == ({"momentum": 0.9}, 8.0)
    assert points[8]["num_lrs"] == 2  # the two learning rates of one momentum, not four cells
    assert sorted(r["hyperparameters"]["momentum"] for r in a["runs"]) == [0.0] * 4 + [0.9] * 4


def _no_nan(text: str) -> None:
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON number {c}"))


def test_analysis_json_follows_the_contract(messy_sweep: Path):
    """Written through the contract (which refuses a key it does not name, or a missing one),
    with no NaN left in the file."""
    path = contract.write(messy_sweep, A.analyze(messy_sweep, bootstrap=20))
    assert path == messy_sweep / "analysis.json"
    _no_nan(path.read_text())
    a = json.loads(path.read_text())
    assert a["throughput"] == [], "summaries without throughput (older folders) give none"
    assert a["sweep"]["num_runs"] == 10 and len(a["targets"]) == 1
    rules = a["lr_rules"]
    assert set(rules["rules"]) == {"linear", "sqrt", "noise_scale", "surge"}
    assert rules == a["targets"][0]["lr_rules"], "the top-level rules are the first reached target's"


def test_bad_input_names_the_problem(tmp_path: Path, messy_sweep: Path):
    with pytest.raises(ConfigError, match="no finished runs"):
        A.analyze(tmp_path / "empty")
    with pytest.raises(ConfigError, match="train_acc"):
        A.analyze(messy_sweep, targets=["train_acc<=1"])
    with pytest.raises(ConfigError, match="'train_loss'"):
        A.analyze(messy_sweep, targets=["train_loss<=1"])


def test_a_target_met_at_the_start_gives_no_fit(messy_sweep: Path):
    a = A.analyze(messy_sweep, targets=["eval_loss<=5.0"], bootstrap=10)
    (t,) = a["targets"]
    assert [p["steps"] for p in t["points"]] == [0.0, 0.0, 0.0] and t["fit"] is None
    assert all(e["relative_cost"] is None for e in a["lr_rules"]["rules"]["linear"])


# ---------------------------------------------------------------- censored and clipped readings


def test_censored_runs_stay_censored_in_analysis_json_and_the_tables(tmp_path: Path):
    """B=16: 0.3 reaches eval_loss<=1.0 at step 8; 1.0 and 3.0 were stopped as dominated at
    steps 20 and 10 before reaching it (read `first`: more than their last evaluation)."""
    from scaling.report import tables

    for seed in (0, 1):
        fake_run(tmp_path, 8, 0.3, seed, [3.0, 1.5, 0.5], "completed")  # 15 steps
        fake_run(tmp_path, 8, 1.0, seed, [3.0, 2.0, 1.5, 0.5], "completed")  # 25 steps
        fake_run(tmp_path, 16, 0.3, seed, [3.0, 0.5], "completed")  # 8 steps
        fake_run(tmp_path, 16, 1.0, seed, [3.0, 2.5, 2.0], "dominated")
        fake_run(tmp_path, 16, 3.0, seed, [3.0, 2.8], "dominated")
    path = contract.write(tmp_path, A.analyze(tmp_path, bootstrap=10))
    _no_nan(path.read_text())
    a = json.loads(path.read_text())
    t = "eval_loss<=1.0"
    stopped = {(r["learning_rate"], r["steps_censored"][t]) for r in a["runs"]
               if r["reading"][t] == "censored"}
    assert stopped == {(1.0, 20.0), (3.0, 10.0)}
    assert all(r["steps_to_target"][t] is None for r in a["runs"] if r["status"] == "dominated")
    point = {p["batch_size"]: p for p in a["targets"][0]["points"]}[16]
    assert (point["best_lr"], point["steps"], point["num_censored"]) == (0.3, 8.0, 2)
    assert not point["censored_below_best"] and not point["optimum"]["bracketed"]
    text = tables.steps_section(a)
    assert "| 16 | 0.3: 8; 1: > 20; 3: > 10 |" in text
    linear = {e["batch_size"]: e for e in a["lr_rules"]["rules"]["linear"]}[16]
    # from B=8 at 0.3: 0.6 at B=16, between 0.3 (8 steps) and 1.0 (more than 20) in log lr
    bound = 8 + 12 * math.log(2) / math.log(1 / 0.3)
    assert linear["steps"] is None and linear["relative_cost"] is None
    assert linear["steps_censored"] == pytest.approx(bound)
    assert linear["relative_cost_censored"] == pytest.approx(bound / 8)
    assert tables.relative_cost(linear) == f"> {bound / 8:.3g}"


def _late_run(out: Path, size: int, lr: float, last: int) -> None:
    """Loss falling to 1 at step 20, recorded to `last`: eval_loss<=2.0 is crossed at 17.5."""
    run_id = f"bs{size}-lr{lr:g}-seed0"
    store.start_run(out, run_id, {"run_id": run_id, "batch_size": size, "learning_rate": lr,
                                  "seed": 0, "optimizer": {"name": "sgd"}})
    store.append_metrics(out, run_id, [{"step": s, "examples": s * size,
                                        "eval_loss": max(1.0, 9.0 - 0.4 * s)}
                                       for s in range(0, last + 1, 2)])
    store.finish_run(out, run_id, {"run_id": run_id, "status": "budget_exhausted",
                                   "batch_size": size})


@pytest.mark.parametrize("extension", [1.5, False])
def test_a_reading_window_past_the_budget_is_flagged_never_dropped(tmp_path: Path, extension):
    """B=8 ended at step 40, inside the smoothed window (x2) of its crossing: unconfirmed
    where the sweep could extend its best runs, read clipped (and flagged) where it could not."""
    (tmp_path / "sweep.yaml").write_text(
        f"targets: ['eval_loss<=2.0']\nreached: {{rule: smoothed, window: 2.0}}\n"
        f"budget: {{max_steps: 40, reading_extension: {str(extension).lower()}}}\n")
    _late_run(tmp_path, 8, 0.1, 40)
    _late_run(tmp_path, 16, 0.1, 100)
    a = A.analyze(tmp_path, bootstrap=0)
    (t,) = a["targets"]
    reading = {r["batch_size"]: r["reading"]["eval_loss<=2.0"] for r in a["runs"]}
    assert reading[16] == "reached"
    if extension:
        assert reading[8] == "unconfirmed" and t["unreached_reasons"] == {"8": "unconfirmed"}
        assert "not reached at B = 8: crossed, but the reading could not be confirmed" \
            in views.summary_table(a)
    else:
        assert reading[8] == "clipped" and t["unreached_batch_sizes"] == []
        assert {p["batch_size"] for p in t["points"]} == {8, 16}


def test_a_run_whose_batch_grows_is_read_along_its_examples():
    """Batch 10 for 100 steps (1,000 examples), then batch 100: the loss falls as 1 - e/2,000
    in examples and crosses 0.5 at 1,000 examples, step 100. Along steps, the smoothed rule's
    window (1.5x: to step 150) ends past the run's 120 steps, so the crossing would be
    unconfirmed; along examples the window ends near 1,500 examples (step 105), inside the run,
    and it reads the examples a fixed batch 10 run on the same curve in examples reads, at the
    step the run had taken there."""
    from scaling.analysis.table import read_scheduled, read_steps
    rows = [{"step": s, "examples": e, "eval_loss": 1 - e / 2000}
            for s in range(0, 121) for e in [s * 10 if s <= 100 else 1000 + (s - 100) * 100]]
    fixed = [{"step": s, "examples": 10 * s, "eval_loss": 1 - s / 200} for s in range(0, 301)]
    smoothed = Reach("smoothed", 1.5)
    assert read_steps(rows, "eval_loss<=0.5", smoothed, "completed", False)[1] == "unconfirmed"
    fixed_step, fixed_how, _ = read_steps(fixed, "eval_loss<=0.5", smoothed, "completed", False)
    step, how, bound, examples = read_scheduled(rows, "eval_loss<=0.5", smoothed, "completed",
                                                False)
    assert how == fixed_how == "reached" and bound is None
    assert examples == pytest.approx(10 * fixed_step, rel=1e-3)  # the windows sit on other rows
    assert step == pytest.approx(examples / 10)  # before the change, a step is 10 examples
