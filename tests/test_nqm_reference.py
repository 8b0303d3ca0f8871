"""The NQM's closed form with momentum, preconditioning and the iterates' moving average
(scaling.analysis.nqm_momentum, scaling.analysis.nqm_reference): against the SGD closed forms,
an independent impulse-response sum, and the engine's runs averaged over seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling import config as config_mod
from scaling.analysis import nqm_momentum as M
from scaling.analysis.nqm_reference import (closed_form_b_crit, constant_lr_expected_loss,
                                            expected_loss, phases_expected_loss)
from scaling.config.learning_rates import decay_steps, warmup_steps
from scaling.errors import ConfigError
from scaling.tasks.nqm import NQMOptions, spectra, trained_spectra
from scaling.train.schedules import lr_multiplier
from scaling.train.spec import RunSpec
from tests.helpers import NQM, config, train


# ---------------------------------------------------------------- the change of variables


def test_preconditioned_coordinates_hold_the_same_loss_and_step():
    """phi = h^(p/2) theta: the loss is the same function, and a gradient step on phi is the step
    on theta preconditioned by h^-p, noise included."""
    options = NQMOptions(dim=6, h_power=0.7, c_power=0.3, precondition_power=0.5)
    h, c = spectra(options)
    h2, c2, start = trained_spectra(options)
    theta, z, lr = np.linspace(-1.0, 2.0, 6), np.linspace(0.5, -0.4, 6), 0.3
    scale = h**0.25
    phi, z_phi = scale * theta, z / scale  # z_phi ~ N(0, c h^-p) when z ~ N(0, c)
    assert np.allclose(c2, c / h**0.5) and np.allclose(start, scale)
    loss = lambda th: 0.5 * np.sum(h * th**2) + z @ th
    assert 0.5 * np.sum(h2 * phi**2) + z_phi @ phi == pytest.approx(loss(theta), rel=1e-12)
    phi_next = phi - lr * (h2 * phi + z_phi)
    theta_next = theta - lr * h**-0.5 * (h * theta + z)
    assert np.allclose(phi_next / scale, theta_next, rtol=1e-12)


@pytest.mark.parametrize("p", [-0.1, 1.5, math.nan])
def test_a_power_outside_zero_to_one_is_refused(p):
    with pytest.raises(ConfigError, match=r"^task\.precondition_power: got .*\[0, 1\]"):
        config_mod.from_dict({"task": {"name": "nqm", "precondition_power": p},
                              "optimizer": {"name": "sgd"}, "batch": {"sizes": [8]},
                              "learning_rate": {"values": [0.1]}, "budget": {"max_steps": 10}})


# ---------------------------------------------------------------- closed form against closed form


@pytest.mark.parametrize("p", [0.0, 0.5])
def test_momentum_zero_is_the_sgd_closed_form(p):
    options = NQMOptions(dim=40, h_power=0.8, precondition_power=p)
    lrs = np.array([0.2, 0.9, 1.7])
    general = M.constant_lr_momentum_loss(options, lrs, 8, 80)
    assert np.allclose(general, constant_lr_expected_loss(options, lrs, 8, 80), rtol=1e-12)
    sequence = np.linspace(1.2, 0.1, 50)
    assert np.allclose(M.momentum_expected_loss(options, sequence, 8),
                       expected_loss(options, sequence, 8), rtol=1e-12)
    phases = [(0.3, 8, 20), (0.6, 16, 10), (1.2, 32, 10)]
    rates = np.concatenate([np.full(n, lr) for lr, _, n in phases])
    batches = np.concatenate([np.full(n, b) for _, b, n in phases])
    assert np.allclose(M.momentum_expected_loss(options, rates, batches),
                       phases_expected_loss(options, phases), rtol=1e-12)


def impulse_response_loss(options: NQMOptions, lr: float, batch: int, steps: int, momentum: float,
                          nesterov: bool, decay: float | None) -> np.ndarray:
    """E[L] from x_t = e_x A^t s_0 + sum_j e_x A^(t-1-j) b xi_j written out per step (and the
    average as its weighted sum of x_1..x_t), no second-moment recursion: each noise draw's
    contributions are summed before squaring."""
    h, c, start = trained_spectra(options)
    out = np.zeros(steps + 1)
    for hi, ci, x0 in zip(h, c, start):
        a, b = M.transition(np.array([hi]), np.array([lr]), momentum, nesterov, None)
        a, b = a[0, 0], b[0, 0]
        powers = [np.eye(2)]
        for _ in range(steps):
            powers.append(a @ powers[-1])
        mean = np.array([(q @ [x0, 0.0])[0] for q in powers])
        gain = np.array([(q @ b)[0] for q in powers])  # x_t gets gain[t - 1 - j] xi_j
        for t in range(steps + 1):
            w = np.zeros(t + 1)
            w[t] = 1.0
            if decay is not None and t > 0:
                w = (1 - decay) * decay ** (t - np.arange(t + 1)) / (1 - decay**t)
                w[0] = 0.0
            m = w @ mean[:t + 1]
            noise = [sum(w[s] * gain[s - 1 - j] for s in range(j + 1, t + 1)) for j in range(t)]
            out[t] += 0.5 * hi * (m**2 + ci / batch * np.sum(np.square(noise)))
    return out


@pytest.mark.parametrize("momentum, nesterov, decay, p", [
    (0.0, False, 0.8, 0.0), (0.9, False, None, 0.5), (0.7, True, 0.9, 1.0), (0.5, False, 0.7, 0.3)])
def test_the_recursion_equals_the_impulse_response_sum(momentum, nesterov, decay, p):
    options = NQMOptions(dim=5, h_power=0.6, c_power=0.4, precondition_power=p)
    exact = impulse_response_loss(options, 0.4, 4, 25, momentum, nesterov, decay)
    got = M.constant_lr_momentum_loss(options, np.array([0.4]), 4, 25, momentum, nesterov, decay)
    assert np.allclose(got[0], exact, rtol=1e-10)


def test_stable_lr_is_where_the_loss_stops_converging():
    options = NQMOptions(dim=10)
    for momentum, nesterov in ((0.0, False), (0.9, False), (0.9, True)):
        top = M.stable_lr(options, momentum, nesterov)
        curves = M.constant_lr_momentum_loss(options, np.array([0.98, 1.02]) * top, 10**6, 3000,
                                             momentum, nesterov)
        assert curves[0, -1] < 1e-3 * curves[0, 0]
        assert not curves[1, -1] <= 10 * curves[1, 0]  # grown, or overflowed to inf / nan


# ---------------------------------------------------------------- B_crit of the closed form


def test_b_crit_grows_with_the_preconditioning_power():
    """G. Zhang et al. 2019 (figure 5): preconditioning raises the critical batch size."""
    sizes = [4, 16, 64, 256, 1024]
    for fraction in (0.1, 0.03):
        found = []
        for p in (0.0, 0.5, 1.0):
            options = NQMOptions(dim=50, precondition_power=p)
            h, _, start = trained_spectra(options)
            result = closed_form_b_crit(options, sizes, fraction * 0.5 * np.sum(h * start**2),
                                        20000, lrs=np.geomspace(1e-3, 0.999, 80) * M.stable_lr(options))
            assert None not in result["steps"]
            found.append(result["b_crit"])
        assert found[0] < found[1] < found[2], (fraction, found)


def test_b_crit_with_momentum_reads_the_fewest_steps_of_full_curves():
    options = NQMOptions(dim=30, h_power=0.8)
    target = 0.05 * 0.5 * np.sum(trained_spectra(options)[0])
    lrs = np.geomspace(0.02, 1.5, 12)
    result = closed_form_b_crit(options, [8, 64], target, 600, lrs, 0.9, momentum=0.5)
    for size, steps in zip([8, 64], result["steps"]):
        curves = M.constant_lr_momentum_loss(options, lrs, size, 600, 0.5, ema_decay=0.9)
        hits = [np.nonzero(c <= target)[0][0] for c in curves if np.any(c <= target)]
        k = min(hits)
        rows = [c for c in curves if c[k] <= target]
        dense = min(k - 1 + (target - c[k - 1]) / (c[k] - c[k - 1]) for c in rows)
        assert steps == pytest.approx(dense, rel=1e-12)
    assert result["fit"]["b_crit"] == result["b_crit"] > 0


# ---------------------------------------------------------------- the engine against the closed form

SEEDS = 64
CASES = {  # name: (config overrides, run's momentum, closed forms the runs must be told from)
    "momentum": (["optimizer.name=momentum"], 0.9, [{"momentum": 0.0}]),
    "nesterov, p = 0.5": (["optimizer.name=nesterov", "task.precondition_power=0.5"], 0.8,
                          [{"nesterov": False}, {"precondition_power": 0.0}]),
    "sgd, p = 1": (["task.precondition_power=1.0", "task.h_power=0.5"], 0.0,
                   [{"precondition_power": 0.5}]),
    "momentum, p = 0.5, moving average, cosine": (
        ["optimizer.name=momentum", "task.precondition_power=0.5", "eval.ema_decay=0.9",
         "schedule.name=cosine", "schedule.warmup_fraction=0.1"], 0.9,
        [{"ema": False}, {"schedule": "constant"}, {"momentum": 0.0}]),
    "sgd, wsd with a 1 - sqrt decay": (
        ["schedule.name=wsd", "schedule.warmup_fraction=0.1", "schedule.decay_fraction=0.3",
         "schedule.decay_shape=sqrt", "schedule.final_fraction=0.05"], 0.0,
        [{"schedule": "constant"}, {"decay_shape": "linear"}, {"schedule": "cosine"}]),
}


def _exact(cfg: config_mod.Config, lr: float, momentum: float, ema: bool = True,
           nesterov: bool | None = None, schedule: str | None = None,
           decay_shape: str | None = None, **changed: float) -> np.ndarray:
    """The closed form of the config's runs, or with one thing changed."""
    total = cfg.budget.max_steps
    warmup = warmup_steps(cfg.schedule, total)
    fraction, shape = cfg.schedule.decay
    rates = lr * np.array([float(lr_multiplier(
        schedule or cfg.schedule.name, k, total, warmup, cfg.schedule.final_fraction,
        decay_steps(fraction, total), decay_shape or shape)) for k in range(total)])
    options = NQMOptions(**{**vars(cfg.task.options), **changed})
    nesterov = cfg.optimizer.name == "nesterov" if nesterov is None else nesterov
    return M.momentum_expected_loss(options, rates, cfg.batch.sizes[0], momentum, nesterov,
                                    cfg.eval.ema_decay if ema else None)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_engine_runs_match_the_closed_form(case):
    """64 seeds through the engine: the mean loss (the moving average's, with eval.ema_decay)
    at every step within 4 standard errors of the closed form, and not within them of the
    closed form with any one option changed (momentum, Nesterov, p, averaging, schedule)."""
    over, momentum, alternatives = CASES[case]
    cfg = config(NQM, *over)
    lr = 0.1
    _, records = train(cfg, [RunSpec(lr, s, momentum=momentum) for s in range(SEEDS)])
    ema = cfg.eval.ema_decay is not None
    losses = np.array([[row["eval_loss_ema" if ema else "eval_loss"] for row in rows]
                       for rows in records])
    assert [row["step"] for row in records[0]] == list(range(cfg.budget.max_steps + 1))
    tolerance = 4 * losses.std(0, ddof=1) / math.sqrt(SEEDS) + 1e-5 * losses.mean(0)
    gap = lambda exact: np.abs(losses.mean(0) - exact)
    assert np.all(gap(_exact(cfg, lr, momentum, ema)) <= tolerance), case
    for change in alternatives:
        wrong = _exact(cfg, lr, **{"momentum": momentum, "ema": ema, **change})
        assert np.any(gap(wrong) > tolerance), f"{case}: cannot tell it from {change}"
