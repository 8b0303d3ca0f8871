"""The fixed-budget view's intervals over 3 seeds where the truth is known: a landscape whose log
metric is exactly quadratic in log lr (optimum 0.05 (B / 16)^0.5, between the grid's rates) and
in log B (optimum 45, between the batch sizes), each run's metric scattered log-normally. The
jackknife holds its level; a percentile bootstrap of whole seeds does not."""

from __future__ import annotations

import math

import numpy as np

from scaling.analysis.budget_cell import analyze_cell
from tests.test_fixed_budget import LRS, SIZES, landscape, records_of

B_STAR = 45.0
TRIALS = 200


def _truth_lr(size: float) -> float:
    return 0.05 * (size / 16.0) ** 0.5


def _held(ci: list[float] | None, truth: float) -> bool:
    return ci is not None and ci[0] <= truth <= ci[1]


def _coverage(method: str, bootstrap: int, sigma: float = 0.01, seeds: int = 3,
              trials: int = TRIALS) -> dict[str, float]:
    """The share of intervals that hold the truth, per quantity, over `trials` cells."""
    rng = np.random.default_rng(3)
    held: dict[str, list[bool]] = {"per_batch_lr": [], "batch_size": [], "learning_rate": []}
    where = {(b, lr): (i, j) for i, b in enumerate(SIZES) for j, lr in enumerate(LRS)}
    for _ in range(trials):
        noise = rng.normal(0, sigma, (len(SIZES), len(LRS), seeds))
        recs = records_of(lambda b, lr, s: landscape(b, lr, b_star=B_STAR)
                          * math.exp(noise[where[b, lr]][s]), seeds=tuple(range(seeds)))
        entry, _ = analyze_cell(recs, "eval_loss", bootstrap, rng, method)
        held["per_batch_lr"] += [_held(p["learning_rate_ci"], _truth_lr(p["batch_size"]))
                                 for p in entry["per_batch"] if not p["at_edge"]]
        opt = entry["optimum"]
        held["batch_size"].append(_held(opt["batch_size_ci"], B_STAR))
        held["learning_rate"].append(_held(opt["learning_rate_ci"], _truth_lr(B_STAR)))
    return {k: float(np.mean(v)) for k, v in held.items()}


def test_the_jackknife_over_three_seeds_holds_its_level_and_the_percentile_does_not():
    """Measured: the jackknife 91.1% (per-batch optimal lr), 91.5% (B_opt), 94.0% (its lr);
    the percentile bootstrap 71.8%, 73.5%, 80.5%."""
    jack = _coverage("jackknife", 1)
    assert min(jack.values()) >= 0.9, jack
    pct = _coverage("percentile", 200)
    assert max(pct.values()) < 0.85, pct


def test_with_one_seed_the_landscapes_own_noise_holds_its_level_where_the_quadratic_is_exact():
    """Measured (100 cells): 94.8%, 96.0%, 94.0%. Where the landscape is not quadratic in
    log lr near its optimum, the misfit counts as noise and the interval errs wide."""
    one = _coverage("jackknife", 200, seeds=1, trials=100)
    assert min(one.values()) >= 0.9, one


def test_the_intervals_name_the_jackknife():
    recs = records_of(lambda b, lr, s: landscape(b, lr) * (1 + 0.01 * math.sin(7 * b * lr + s)),
                      seeds=(0, 1, 2))
    entry, draws = analyze_cell(recs, "eval_loss", 50, np.random.default_rng(0))
    assert entry["interval"]["method"] == "jackknife" and entry["interval"]["replicates"] == 3
    assert draws.shape == (3, 50)  # the laws keep the bootstrap's draws
    bootstrapped, _ = analyze_cell(recs, "eval_loss", 50, np.random.default_rng(0), "percentile")
    assert bootstrapped["interval"]["method"] == "percentile"
    assert bootstrapped["interval"]["replicates"] == 50
