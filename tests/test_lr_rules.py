"""The surge rule fitted to measured optima (scaling.analysis.lr_rules), its bootstrap interval
and the falling optimum, against optima made from a known eta_max and B_peak."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.analysis import contract, lr_rules
from scaling.analysis import intervals
from scaling.analysis.optima import refine_lr, replicate_optima
from scaling.analysis.table import LRCurve
from scaling.config.learning_rates import surge_lr
from scaling.report import lr_rules as report_rules

SIZES = [16, 32, 64, 128, 256, 512, 1024, 2048]
ETA_MAX, B_PEAK = 0.01, 256.0
GRID = list(np.geomspace(1e-3, 0.05, 12))  # factor 1.43 apart


def optima_of(values) -> list[dict]:
    return [{"batch_size": b, "learning_rate": float(v)} for b, v in zip(SIZES, values)]


def test_surge_fit_recovers_a_known_rule_exactly():
    fit = lr_rules.surge_fit(optima_of(surge_lr(np.array(SIZES), ETA_MAX, B_PEAK)))
    assert fit["eta_max"] == pytest.approx(ETA_MAX, rel=1e-8)
    assert fit["b_peak"] == pytest.approx(B_PEAK, rel=1e-8)
    assert fit["rms_log_residual"] == pytest.approx(0.0, abs=1e-8)
    assert lr_rules.surge_fit(optima_of([0.1, 0.2])) is None  # two batch sizes: not fitted


def test_surge_fit_of_an_optimum_that_only_rises_puts_the_peak_beyond_the_grid():
    fit = lr_rules.surge_fit(optima_of(0.001 * np.sqrt(SIZES)))
    assert fit["b_peak"] > 10 * SIZES[-1]
    assert fit["rms_log_residual"] < 0.01  # far below the peak the rule is sqrt scaling


def grid_for(optima_per_seed: np.ndarray) -> LRCurve:
    """Steps to target per grid LR and seed: log steps a parabola in log lr around each seed's
    own optimum, so a seed's best LR refines to its optimum exactly."""
    x = np.log(np.asarray(GRID))[:, None]
    steps = 100.0 * np.exp(0.5 * (x - np.log(optima_per_seed)[None, :]) ** 2)
    nan = [np.full(len(optima_per_seed), math.nan) for _ in GRID]
    return LRCurve(lrs=list(GRID), steps=list(steps), examples=list(steps), b_simple=nan,
                   b_noise=nan, b_simple_precond=nan, diverged=[False] * len(GRID))


def point_of(size: int, grid: LRCurve) -> dict:
    means = grid.means()
    best = int(np.nanargmin(means))
    return {"batch_size": size, "best_lr": grid.lrs[best], "steps": float(means[best]),
            "refined_lr": refine_lr(np.asarray(grid.lrs), means, best)}


def noisy_sweep(seeds: int, spread: float, rng: np.random.Generator):
    """Points and grids of a sweep whose seeds' optima scatter log-normally around the rule."""
    truth = surge_lr(np.array(SIZES), ETA_MAX, B_PEAK)
    grids = {b: grid_for(t * np.exp(spread * rng.standard_normal(seeds))) for b, t in zip(SIZES, truth)}
    return [point_of(b, grids[b]) for b in SIZES], grids


def test_a_seed_refines_to_its_own_optimum():
    grid = grid_for(np.array([0.0123]))
    assert point_of(64, grid)["refined_lr"] == pytest.approx(0.0123, rel=1e-9)


@pytest.mark.parametrize("method,replicates", [("percentile", 300), ("jackknife", 8)])
def test_surge_fit_with_noise_holds_the_truth_in_its_interval(method, replicates):
    """8 seeds per batch size, each seed's optimum 15% off the rule (log-normal): the fit lands
    near eta_max and B_peak, and the interval over seeds holds both (how often:
    surge_coverage below)."""
    points, grids = noisy_sweep(8, 0.15, np.random.default_rng(3))
    rules = lr_rules.lr_rules("eval_loss<=1.0", points, grids, 300, np.random.default_rng(0),
                              method=method)
    fit = rules["surge_fit"]
    assert fit["eta_max"] == pytest.approx(ETA_MAX, rel=0.1)
    assert fit["b_peak"] == pytest.approx(B_PEAK, rel=0.5)
    assert fit["eta_max_ci"][0] <= ETA_MAX <= fit["eta_max_ci"][1]
    assert fit["b_peak_ci"][0] <= B_PEAK <= fit["b_peak_ci"][1]
    assert fit["interval"] == intervals.info("seeds", method, replicates)
    assert fit["identification"]["b_peak"]["identified"]
    assert fit["b_peak_ci"][1] / fit["b_peak_ci"][0] < 2, "an interval that says something"
    assert len(rules["rules"]["surge"]) == len(SIZES)
    assert all(e["ratio_to_optimum"] == pytest.approx(
        surge_lr(e["batch_size"], fit["eta_max"], fit["b_peak"]) / o["learning_rate"])
        for e, o in zip(rules["rules"]["surge"], rules["optima"]))


def surge_coverage(method: str, sweeps: int = 100) -> tuple[float, float]:
    """The share of `sweeps` noisy sweeps (8 seeds, optima 15% off the rule) whose interval holds
    eta_max and B_peak."""
    held = np.zeros(2)
    for s in range(sweeps):
        points, grids = noisy_sweep(8, 0.15, np.random.default_rng(s))
        fit = lr_rules.lr_rules("eval_loss<=1.0", points, grids, 300, np.random.default_rng(0),
                                method=method)["surge_fit"]
        held += [bool(fit[f"{k}_ci"] and fit[f"{k}_ci"][0] <= truth <= fit[f"{k}_ci"][1])
                 for k, truth in (("eta_max", ETA_MAX), ("b_peak", B_PEAK))]
    return tuple(held / sweeps)


def test_the_surge_fits_jackknife_interval_holds_its_level():
    """surge_coverage: the jackknife held eta_max in 94 and B_peak in 95 of 100 sweeps (the
    percentile bootstrap, 87 and 87)."""
    assert min(surge_coverage("jackknife")) >= 0.9


def test_one_seed_gives_no_interval_and_says_why():
    """With one seed there is no spread between seeds: the fits carry no interval (never a
    resampling of the batch sizes), and their record says why."""
    points, grids = noisy_sweep(1, 0.0, np.random.default_rng(0))
    rules = lr_rules.lr_rules("eval_loss<=1.0", points, grids, 300, np.random.default_rng(1))
    for fit in (rules["noise_scale_fit"], rules["surge_fit"]):
        assert fit["interval"] == intervals.none(intervals.ONE_SEED)
        assert all(fit[k] is None for k in fit if k.endswith("_ci"))


def test_replicates_leave_the_same_seed_out_at_every_batch_size():
    """Each seed's optimum sits 10% off the rule in its own direction: the leave-one-out
    replicate without seed j moves every batch size's optimum the same way."""
    points, grids = noisy_sweep(3, 0.0, np.random.default_rng(0))
    shifts = np.array([1.1, 1.0, 1 / 1.1])
    grids = {b: grid_for(np.full(3, o["learning_rate"]) * shifts) for b, o in
             zip(SIZES, optima_of(surge_lr(np.array(SIZES), ETA_MAX, B_PEAK)))}
    draws = intervals.seed_draws(3, "jackknife", 0, np.random.default_rng(0))
    reps = replicate_optima(points, grids, draws)
    ratios = [[o["learning_rate"] / t for o, t in zip(rep, surge_lr(np.array(SIZES), ETA_MAX,
                                                                     B_PEAK))] for rep in reps]
    assert np.ptp(np.array(ratios), axis=1) == pytest.approx(np.zeros(3), abs=1e-6)
    assert ratios[0][0] < 1 < ratios[2][0]  # without the high seed the optimum reads lower


def test_a_surge_peak_at_the_range_searched_is_a_bound():
    points = [{"batch_size": b, "best_lr": v, "steps": 100.0, "refined_lr": None}
              for b, v in zip(SIZES, 0.001 * np.sqrt(SIZES))]
    grids = {b: grid_for(np.array([p["best_lr"]])) for b, p in zip(SIZES, points)}
    fit = lr_rules.lr_rules("eval_loss<=1.0", points, grids)["surge_fit"]
    status = fit["identification"]["b_peak"]
    assert not status["identified"] and status["bound"] == "lower"
    assert "B_peak = > " in lr_rules.lr_rules("eval_loss<=1.0", points, grids)["summary"]


def test_a_falling_optimum_is_reported():
    points, grids = noisy_sweep(1, 0.0, np.random.default_rng(0))
    rules = lr_rules.lr_rules("eval_loss<=1.0", points, grids,
                              noise_scales={"b_simple": 300.0, "b_noise": 180.0})
    falls = rules["optimum_falls"]
    assert (falls["peak_batch_size"], falls["largest_batch_size"]) == (256, 2048)
    assert falls["ratio"] == pytest.approx((math.sqrt(8) + 1 / math.sqrt(8)) / 2, rel=1e-9)
    assert "falls with the batch size: from 0.01 at B = 256 to 0.00629 at B = 2048" in rules["summary"]
    assert "B_peak 256 beside the measured B_simple 300, B_noise 180" in rules["summary"]


def test_an_optimum_that_saturates_does_not_fall():
    """The noise-scale rule's shape (McCandlish et al.): rises, then levels off."""
    optima = optima_of([0.5 / (1 + 100 / b) for b in SIZES])
    assert lr_rules.optimum_falls(optima) is None
    at_1024 = optima[-2]["learning_rate"]
    ending = lambda lr: optima[:-1] + [{"batch_size": 2048, "learning_rate": lr}]
    assert lr_rules.optimum_falls(ending(at_1024 / 1.2)) is None  # within FALL_RATIO: noise
    assert lr_rules.optimum_falls(ending(at_1024 / 1.3))["peak_batch_size"] == 1024


# ---------------------------------------------------------------- report.md


def test_the_report_judges_every_rule_at_every_target_and_says_the_optimum_falls():
    points, grids = noisy_sweep(1, 0.0, np.random.default_rng(0))
    scales = {"b_simple": 300.0, "b_noise": 180.0, "b_simple_precond": 90.0}
    targets = [{"name": name, "lr_rules": lr_rules.lr_rules(name, points, grids, 50,
                                                            np.random.default_rng(1), scales)}
               for name in ("eval_loss<=1.0", "eval_loss<=0.5")]
    analysis = contract.filled({"targets": targets + [{"name": "eval_loss<=0.1", "lr_rules": None}],
                                "lr_rules": targets[0]["lr_rules"]})
    text = "\n".join(report_rules.lr_rules_section(analysis))
    rows = [line for line in text.splitlines() if line.startswith("| eval_loss")]
    assert len(rows) == 2 * len(lr_rules.RULES) * len(SIZES)
    assert {line.split(" | ")[1] for line in rows} == set(lr_rules.RULES)
    assert "steps at the rule's LR" in text and "relative cost (steps)" in text
    assert ("Surge rule fitted to the optima: eta_max 0.01, B_peak 256; no interval (one seed: "
            "no spread between seeds to resample)") in text
    conclusion = report_rules.lr_conclusion(analysis)
    falls = [s for s in conclusion if "falls with the batch size" in s]
    assert len(falls) == 2 and "eval_loss<=0.5" in falls[1]
    assert ("B_peak 256, beside the measured B_simple 300, B_noise 180, B_simple in "
            "Adam's metric 90.") in falls[0]


def test_the_report_reads_an_analysis_from_before_the_rules_were_per_target():
    points, grids = noisy_sweep(1, 0.0, np.random.default_rng(0))
    old = lr_rules.lr_rules("eval_loss<=1.0", points, grids)
    for key in ("surge_fit", "optimum_falls", "noise_scales"):
        old.pop(key)
    old["rules"].pop("surge")
    old["summary"] = "Square-root scaling tracks the optimum best."
    older = contract.filled({"targets": [{"name": "x"}], "lr_rules": old})
    text = "\n".join(report_rules.lr_rules_section(older))
    assert text.count("| eval_loss<=1.0 |") == 3 * len(SIZES) and "falls" not in text
