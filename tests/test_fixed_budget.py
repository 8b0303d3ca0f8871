"""The fixed-budget view of one cell against ground truth: the NQM's exact loss after a fixed
budget (a fine search gives the true optimal learning rate per batch size), landscapes whose
optima are known in closed form, whole-seed resampling, accuracies read as errors, and the
learning-rate rules where the optima follow one exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.analysis.budget_cell import analyze_cell
from scaling.analysis.fixed_budget import budget_curves, noise_sigma
from scaling.analysis.nqm_reference import constant_lr_expected_loss
from scaling.config import ConfigError
from scaling.tasks.nqm import NQMOptions

SIZES = [8, 16, 32, 64, 128, 256]
LRS = list(0.01 * 2.0 ** (np.arange(12) / 2))


def record(size: int, lr: float, seed: int, value: float, metric: str = "eval_loss",
           status: str = "completed", **config) -> dict:
    """A finished run whose last row holds `value` (a diverged one when value is not finite)."""
    ok = math.isfinite(value)
    return {"run_id": f"bs{size}-lr{lr:.6g}-seed{seed}",
            "config": {"batch_size": size, "learning_rate": lr, "seed": seed, "optimizer": {},
                       **config},
            "summary": {"status": status if ok else "diverged", "steps": config.get("total_steps")},
            "metrics": [{"step": 0, metric: 9.0}, {"step": 1, metric: value if ok else None}]}


def landscape(size: float, lr: float, b_star: float = 64.0, eta: float = 0.05,
              power: float = 0.5) -> float:
    """log L exactly quadratic in log lr about eta (B / 16)^power and in log B about b_star."""
    eta_b = eta * (size / 16.0) ** power
    return 2.0 * math.exp(0.08 * math.log(lr / eta_b) ** 2 + 0.02 * math.log(size / b_star) ** 2)


def records_of(loss, sizes=SIZES, lrs=LRS, seeds=(0,), metric="eval_loss") -> list[dict]:
    return [record(b, lr, s, loss(b, lr, s), metric) for b in sizes for lr in lrs for s in seeds]


# ---------------------------------------------------------------- against the NQM closed form


def nqm_final_loss(options: NQMOptions, lrs: list[float], size: int, examples: int) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):  # past the stable learning rates
        loss = constant_lr_expected_loss(options, np.asarray(lrs), size,
                                         np.array([examples // size]))
    return np.where(np.isfinite(loss[:, 0]) & (loss[:, 0] < 10.0), loss[:, 0], np.nan)


def test_the_optimal_lr_per_batch_size_against_the_nqm_closed_form():
    """SGD on the NQM, 32,768 examples: the exact final loss at each (B, lr). The parabola
    through a grid spaced sqrt(2) apart lands within 3% of the optimum a fine search finds,
    closer than the grid's own best, at every batch size whose optimum is inside the grid."""
    options, examples = NQMOptions(dim=100), 32768
    grid = list(2.0 ** np.arange(-8, 1.5, 0.5))
    sizes = [4, 16, 64, 256]
    recs = [record(b, lr, 0, float(v)) for b in sizes
            for lr, v in zip(grid, nqm_final_loss(options, grid, b, examples))]
    entry, _ = analyze_cell(recs, "eval_loss", 0, np.random.default_rng(0))
    fine = np.geomspace(grid[0], grid[-1], 6000)
    for p in entry["per_batch"]:
        true = fine[np.nanargmin(nqm_final_loss(options, fine, p["batch_size"], examples))]
        if p["batch_size"] == 256:  # the next grid LR diverges: no parabola, said so
            assert not p["interpolated"] and p["learning_rate"] == p["best_lr"]
            continue
        assert p["interpolated"] and abs(math.log(p["learning_rate"] / true)) < 0.03
        assert abs(math.log(p["learning_rate"] / true)) < abs(math.log(p["best_lr"] / true))
    # A fixed number of examples: SGD's smallest batch takes the most steps and wins; B_opt
    # sits at the grid's low edge and is not interpolated.
    assert entry["optimum"]["at_edge"] == "low" and entry["optimum"]["batch_size"] == 4
    assert not entry["optimum"]["interpolated"]


def test_an_interior_optimum_is_recovered_exactly_on_an_exact_landscape():
    """log L exactly quadratic in log lr and log B: each parabola is exact, so the optimal lr
    per batch size, B_opt and the lr there (linear in log B between batch sizes) are too."""
    entry, _ = analyze_cell(records_of(lambda b, lr, s: landscape(b, lr)), "eval_loss", 0,
                            np.random.default_rng(0))
    for p in entry["per_batch"]:
        assert p["interpolated"] and p["at_edge"] is None
        assert p["learning_rate"] == pytest.approx(0.05 * (p["batch_size"] / 16) ** 0.5, rel=1e-9)
    opt = entry["optimum"]
    assert opt["interpolated"] and opt["at_edge"] is None
    assert opt["batch_size"] == pytest.approx(64.0, rel=1e-9)
    assert opt["learning_rate"] == pytest.approx(0.1, rel=1e-9)
    assert opt["value"] == pytest.approx(2.0, rel=1e-9)
    best = entry["best"]
    assert best["batch_size"] == 64 and best["value"] == min(g["mean"] for g in entry["grid"])


# ---------------------------------------------------------------- intervals


def test_whole_seeds_are_resampled_so_a_seed_shared_by_every_run_moves_nothing():
    """Each seed scales every one of its runs alike (its data order, its initialisation):
    resampling whole seeds leaves every optimum where it is, an interval of zero width.
    Resampling runs one by one would scatter it."""
    recs = records_of(lambda b, lr, s: landscape(b, lr) * (1.0 + 0.02 * s), seeds=(0, 1, 2, 3))
    entry, draws = analyze_cell(recs, "eval_loss", 200, np.random.default_rng(1))
    assert entry["interval"]["resamples"] == "seeds" and draws.shape == (3, 200)
    opt = entry["optimum"]
    for key in ("batch_size", "learning_rate"):
        assert opt[f"{key}_ci"] == pytest.approx([opt[key], opt[key]], rel=1e-9)


def test_seed_noise_gives_intervals_that_cover_the_truth():
    rng = np.random.default_rng(7)
    noise = {(b, lr, s): rng.normal(0, 0.004) for b in SIZES for lr in LRS for s in range(3)}
    recs = records_of(lambda b, lr, s: landscape(b, lr) * math.exp(noise[b, lr, s]),
                      seeds=(0, 1, 2))
    entry, _ = analyze_cell(recs, "eval_loss", 400, np.random.default_rng(2))
    opt = entry["optimum"]
    assert opt["batch_size_ci"][0] <= 64.0 <= opt["batch_size_ci"][1]
    assert opt["learning_rate_ci"][0] <= 0.1 <= opt["learning_rate_ci"][1]
    assert opt["batch_size_ci"][1] / opt["batch_size_ci"][0] < 3  # informative, not everything
    covered = [p["learning_rate_ci"][0] <= 0.05 * (p["batch_size"] / 16) ** 0.5
               <= p["learning_rate_ci"][1] for p in entry["per_batch"]]
    assert sum(covered) >= len(covered) - 1


def test_with_one_seed_the_noise_is_read_off_the_landscape():
    """One seed per point: the spread of log metric about a quadratic in log lr through each
    batch size's best five points. On an exactly quadratic landscape with noise of 0.01 in
    log metric added, that estimate comes back near 0.01."""
    rng = np.random.default_rng(11)
    sizes = [2 ** k for k in range(3, 23)]
    recs = records_of(lambda b, lr, s: landscape(b, lr, b_star=4096.0) * math.exp(
        rng.normal(0, 0.01)), sizes=sizes, lrs=list(0.05 * 2.0 ** (np.arange(-6, 22) / 2)))
    sigma = noise_sigma(budget_curves(recs, "eval_loss"))
    assert 0.007 < sigma < 0.013
    entry, _ = analyze_cell(recs, "eval_loss", 100, np.random.default_rng(0))
    assert entry["interval"]["resamples"] == "landscape noise"
    assert entry["interval"]["sigma_log"] == pytest.approx(sigma)


# ---------------------------------------------------------------- metric, refusals, rules


def test_an_accuracy_is_read_as_its_error_and_reported_as_accuracy():
    loss_entry, _ = analyze_cell(records_of(lambda b, lr, s: landscape(b, lr) / 10),
                                 "eval_loss", 0, np.random.default_rng(0))
    acc = records_of(lambda b, lr, s: 1.0 - landscape(b, lr) / 10, metric="eval_accuracy")
    entry, _ = analyze_cell(acc, "eval_accuracy", 0, np.random.default_rng(0))
    assert entry["lower_is_better"] is False
    assert entry["optimum"]["batch_size"] == pytest.approx(loss_entry["optimum"]["batch_size"])
    assert entry["optimum"]["value"] == pytest.approx(1.0 - loss_entry["optimum"]["value"])
    assert entry["best"]["value"] == max(g["mean"] for g in entry["grid"])


def test_diverged_neighbours_stop_the_parabola_and_are_counted():
    def loss(b, lr, s):
        return math.nan if b == 16 and lr > 0.05 else landscape(b, lr)

    entry, _ = analyze_cell(records_of(loss), "eval_loss", 0, np.random.default_rng(0))
    p = next(p for p in entry["per_batch"] if p["batch_size"] == 16)  # optimum 0.05
    assert p["best_lr"] == pytest.approx(LRS[4]) and not p["interpolated"]
    assert p["at_edge"] is None and p["learning_rate"] == p["best_lr"]
    assert p["num_diverged"] == 7 and p["num_complete"] == 5


def test_runs_stopped_at_a_target_are_refused():
    recs = records_of(lambda b, lr, s: landscape(b, lr))
    recs[0]["config"]["total_steps"], recs[0]["summary"]["steps"] = 100, 40
    with pytest.raises(ConfigError, match="stopped before their budget"):
        analyze_cell(recs, "eval_loss", 0, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="no run recorded"):
        analyze_cell(recs[1:], "eval_accuracy", 0, np.random.default_rng(0))


def test_the_linear_rule_on_optima_that_follow_it_costs_nothing():
    recs = records_of(lambda b, lr, s: landscape(b, lr, power=1.0),
                      lrs=list(0.01 * 2.0 ** (np.arange(20) / 2)))
    entry, _ = analyze_cell(recs, "eval_loss", 0, np.random.default_rng(0))
    assert all(p["interpolated"] for p in entry["per_batch"])
    rules = entry["lr_rules"]["rules"]
    assert all(e["ratio_to_optimum"] == pytest.approx(1.0) and e["note"] is None
               and e["excess"] == pytest.approx(0.0, abs=1e-12) for e in rules["linear"])
    sqrt = {e["batch_size"]: e["ratio_to_optimum"] for e in rules["sqrt"]}
    assert sqrt[32] == pytest.approx(math.sqrt(8 / 32))
    assert entry["lr_rules"]["noise_scale_fit"] is not None and len(rules["noise_scale"]) == 6
