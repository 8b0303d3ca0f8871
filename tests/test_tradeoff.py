"""The batched fits (scaling.analysis.tradeoff.fit_tradeoffs, lr_rules.noise_scale_fits and
surge_fits) against per-draw single fits and against the closed form each draw was made from:
every bootstrap draw is one row of one batched fit, so a row must fit as it would alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.analysis import lr_rules
from scaling.analysis.tradeoff import fit_tradeoff, fit_tradeoffs
from scaling.config.learning_rates import surge_lr

# (S_min, E_min, batch sizes): each row's steps are S_min + E_min / B exactly
DRAWS = [(100.0, 6400.0, [8, 16, 32, 64, 128, 256, 512, 1024]),
         (3.0, 1e6, [16, 256]),
         (5000.0, 20.0, [4, 4, 64, 1024, 1024]),  # a resampled draw repeats batch sizes
         (40.0, 400.0, [32, 64, 128])]


def padded(rows: list[list[float]]) -> np.ndarray:
    """Rows of different lengths as one array, NaN past each row's end."""
    out = np.full((len(rows), max(len(r) for r in rows)), np.nan)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def test_the_batched_fit_recovers_every_draw_as_its_single_fit_does():
    sizes = [b for _, _, b in DRAWS]
    steps = [list(s + e / np.asarray(b, float)) for s, e, b in DRAWS]
    batched = fit_tradeoffs(padded(sizes), padded(steps))
    truth = np.array([(s, e) for s, e, _ in DRAWS])
    assert batched == pytest.approx(truth, rel=1e-6)
    singles = np.array([fit_tradeoff(b, s) for b, s in zip(sizes, steps)])
    assert batched == pytest.approx(singles, rel=1e-9)


def test_a_draw_that_cannot_be_fitted_is_nan_and_leaves_the_others_alone():
    """One batch size left, or steps that are NaN or not positive: that row is NaN."""
    sizes = padded([[16, 64, 256], [16, 16, 16], [16, 64, 256], [16, 64]])
    steps = padded([[104.0, 101.0, 100.25], [9.0, 9.0, 9.0], [104.0, math.nan, -1.0],
                    [104.0, 101.0]])
    fits = fit_tradeoffs(sizes, steps)
    assert np.isnan(fits[1]).all() and np.isnan(fits[2]).all()
    assert fits[0] == pytest.approx([100.0, 64.0], rel=1e-6)
    assert fits[3] == pytest.approx([100.0, 64.0], rel=1e-6)
    with pytest.raises(ValueError):
        fit_tradeoff([16, 16], [9.0, 9.0])


def optima(sizes, lrs) -> list[dict]:
    return [{"batch_size": int(b), "learning_rate": float(v)} for b, v in zip(sizes, lrs)]


def test_the_noise_scale_rule_fits_every_draw_as_alone():
    """lr = eps_max / (1 + B_noise / B) exactly; a draw of 2 batch sizes is not fitted."""
    rules = [(0.5, 100.0, [16, 32, 64, 128, 256]), (0.02, 8.0, [4, 8, 16]),
             (1.0, 1000.0, [64, 64, 256, 1024, 4096, 4096]), (0.1, 10.0, [16, 64])]
    draws = [optima(b, eps / (1 + bn / np.asarray(b, float))) for eps, bn, b in rules]
    fits = lr_rules.noise_scale_fits(draws)
    assert fits[3] is None and lr_rules.noise_scale_fit(draws[3]) is None
    for (eps, bn, _), fit, draw in zip(rules[:3], fits, draws):
        assert fit == pytest.approx({"eps_max": eps, "b_noise": bn}, rel=1e-6)
        assert fit == pytest.approx(lr_rules.noise_scale_fit(draw), rel=1e-9)


def test_the_surge_rule_fits_every_draw_as_alone():
    """lr = 2 eta_max / (sqrt(B_peak / B) + sqrt(B / B_peak)) exactly, at draws of different
    lengths; a draw of 2 batch sizes is not fitted, and an empty list of draws fits none."""
    rules = [(0.01, 256.0, [16, 32, 64, 128, 256, 512, 1024, 2048]),
             (0.3, 40.0, [8, 32, 128, 512]), (0.05, 1000.0, [100, 100, 300, 3000]),
             (0.01, 64.0, [16, 32])]
    draws = [optima(b, surge_lr(np.asarray(b, float), eta, peak)) for eta, peak, b in rules]
    fits = lr_rules.surge_fits(draws)
    assert fits[3] is None and lr_rules.surge_fits([]) == []
    for (eta, peak, _), fit, draw in zip(rules[:3], fits, draws):
        assert fit["eta_max"] == pytest.approx(eta, rel=1e-8)
        assert fit["b_peak"] == pytest.approx(peak, rel=1e-8)
        assert fit["rms_log_residual"] == pytest.approx(0.0, abs=1e-8)
        assert fit == pytest.approx(lr_rules.surge_fit(draw), rel=1e-9, abs=1e-12)
