"""The noisy quadratic model's closed form for SGD: expected loss, noise scales and the fewest
steps to a target, so the sweep's measured B_crit can be checked against ground truth.

With per-coordinate curvature h_i and noise variance c_i in the coordinates the task trains
(scaling.tasks.nqm.trained_spectra: preconditioning by h^-p is folded into them), SGD at learning
rate lr and batch B moves each coordinate's mean by (1 - lr h_i) per step and its variance by
(1 - lr h_i)^2 plus lr^2 c_i / B (Zhang et al. 2019). Momentum and the iterates' moving average:
scaling.analysis.nqm_momentum.
"""

from __future__ import annotations

import numpy as np

from scaling.analysis.nqm_momentum import constant_lr_momentum_loss, fewest_steps, stable_lr
from scaling.analysis.tradeoff import fit_tradeoff
from scaling.config.targets import first_crossing
from scaling.tasks.nqm import NQMOptions, trained_spectra

FINE_LRS = 200  # the closed form's B_crit searches this many learning rates by default


def expected_loss(options: NQMOptions, lrs: np.ndarray, batch_size: int) -> np.ndarray:
    """Exact E[L] after 0, 1, ..., len(lrs) SGD steps with step sizes `lrs` at batch `batch_size`."""
    h, c, mean = trained_spectra(options)
    var = np.zeros_like(h)
    out = np.empty(len(lrs) + 1)
    out[0] = 0.5 * np.sum(h * mean**2)
    for t, lr in enumerate(lrs):
        shrink = 1.0 - lr * h
        mean = shrink * mean
        var = shrink**2 * var + lr**2 * c / batch_size
        out[t + 1] = 0.5 * np.sum(h * (mean**2 + var))
    return out


def phases_expected_loss(options: NQMOptions, phases: list[tuple[float, int, int]]) -> np.ndarray:
    """Exact E[L] at every step of SGD that runs through `phases` in turn, each (learning rate,
    batch size, steps): the loss after 0, 1, ..., sum of steps. Each phase's mean and variance
    follow in closed form from the last one's (a branch from a base run, a batch-size
    schedule)."""
    h, c, mean = trained_spectra(options)
    var = np.zeros_like(h)
    out = [0.5 * np.sum(h * mean**2)]
    for lr, batch, steps in [phase for phase in phases if phase[2] > 0]:
        r = 1.0 - lr * h
        r2t = r ** (2 * np.arange(1, steps + 1)[:, None])
        noise = lr**2 * c / batch * (1.0 - r2t) / (1.0 - r**2)
        out.extend(0.5 * np.sum(h * ((mean**2 + var) * r2t + noise), axis=1))
        mean, var = mean * r**steps, var * r2t[-1] + noise[-1]
    return np.asarray(out)


def constant_lr_expected_loss_ema(options: NQMOptions, lrs: np.ndarray, batch_size: int,
                                  steps: int, decay: float) -> np.ndarray:
    """Exact E[L] of the bias-corrected moving average of the SGD iterates at each constant lr,
    shape (len(lrs), steps + 1): the engine's eval.ema_decay, m_t = decay m_(t-1) + (1 - decay)
    theta_t from m_0 = 0, evaluated at m_t / (1 - decay^t) (theta_0 at t = 0). The pair
    (theta, m) is a linear system with independent noise (scaling.analysis.nqm_momentum)."""
    return constant_lr_momentum_loss(options, lrs, batch_size, steps, ema_decay=decay)


def noise_scales(options: NQMOptions, params: np.ndarray) -> dict[str, float]:
    """Exact B_simple = tr(Sigma)/|G|^2, B_noise = tr(H Sigma)/(G^T H G), eps_max at `params`,
    in the coordinates the task trains (with precondition_power, the preconditioned ones)."""
    h, c, _ = trained_spectra(options)
    g = h * np.asarray(params, np.float64)
    g2, ghg = float(np.sum(g**2)), float(np.sum(h * g**2))
    return {"g2": g2, "trace_sigma": float(np.sum(c)), "b_simple": float(np.sum(c)) / g2,
            "b_noise": float(np.sum(h * c)) / ghg, "eps_max": g2 / ghg}


def constant_lr_expected_loss(options: NQMOptions, lrs: np.ndarray, batch_size: int,
                              steps: int | np.ndarray) -> np.ndarray:
    """E[L] after t SGD steps at each constant lr, shape (len(lrs), len(t)), for t = 0..steps
    (or the given array of t): the recursion of `expected_loss` summed in closed form (mean
    (1 - lr h)^t, variance lr^2 c / B times a geometric sum), one array expression for all."""
    h, c, start = trained_spectra(options)
    t = np.arange(steps + 1) if np.ndim(steps) == 0 else np.asarray(steps)
    lr = np.asarray(lrs, np.float64)[:, None, None]
    r = 1.0 - lr * h
    r2t = r ** (2 * t[None, :, None])
    var = lr**2 * c / batch_size * (1.0 - r2t) / (1.0 - r**2)
    return 0.5 * np.sum(h * (start**2 * r2t + var), axis=2)


def steps_to_target(options: NQMOptions, lr: float, batch_size: int, target: float,
                    steps: int) -> float | None:
    """First t (interpolated between integer steps) with E[L] <= target at the constant `lr`,
    None within `steps`.

    A coarse log-spaced scan (each expected-loss term is monotone in t, so the curve is smooth)
    finds the bracket; integer steps inside it give the crossing exactly as the rule `first`
    reads a run evaluated at every step.
    """
    coarse = np.unique(np.geomspace(1, steps, 400).astype(int))
    met = np.nonzero(constant_lr_expected_loss(options, [lr], batch_size, coarse)[0] <= target)[0]
    if met.size == 0:
        return None
    hi = int(coarse[met[0]])
    lo = int(coarse[met[0] - 1]) if met[0] > 0 else 0
    t = np.arange(lo, hi + 1)
    curve = constant_lr_expected_loss(options, [lr], batch_size, t)[0]
    return first_crossing(t, curve, "<=", target)


def optimal_steps_to_target(options: NQMOptions, batch_sizes: list[int], target: float,
                            lrs: np.ndarray, steps: int | list[int], ema_decay: float | None = None,
                            momentum: float = 0.0, nesterov: bool = False) -> list[float | None]:
    """Per batch size, the fewest expected steps to E[L] <= target over the constant `lrs`
    (interpolated like the analysis does) within `steps` (one budget, or one per batch size):
    the exact answer a tuned sweep should approach. With `momentum` (optax's heavy ball, or
    Nesterov) and `ema_decay` (the parameters' moving average), their exact expected loss."""
    budgets = [steps] * len(batch_sizes) if np.ndim(steps) == 0 else list(steps)
    best = []
    for size, budget in zip(batch_sizes, budgets):
        if ema_decay is None and momentum == 0.0:
            reached = [steps_to_target(options, float(lr), size, target, budget) for lr in lrs]
            reached = [s for s in reached if s is not None]
            best.append(min(reached) if reached else None)
        else:
            best.append(fewest_steps(options, lrs, size, target, budget, momentum, nesterov,
                                     ema_decay))
    return best


def closed_form_b_crit(options: NQMOptions, batch_sizes: list[int], target: float,
                       steps: int | list[int], lrs: np.ndarray | None = None,
                       ema_decay: float | None = None, momentum: float = 0.0,
                       nesterov: bool = False) -> dict:
    """The closed form's S(B) and B_crit: the fewest steps to E[L] <= target per batch size
    over the constant `lrs` (default FINE_LRS log-spaced from 1e-3 of the stability bound to
    just below it), then S(B) = S_min + E_min / B fitted as the analysis fits it. `fit` is None
    where fewer than 2 batch sizes reach the target."""
    if lrs is None:
        top = stable_lr(options, momentum, nesterov)
        lrs = np.geomspace(1e-3 * top, 0.999 * top, FINE_LRS)
    best = optimal_steps_to_target(options, batch_sizes, target, lrs, steps, ema_decay,
                                   momentum, nesterov)
    reached = [(b, s) for b, s in zip(batch_sizes, best) if s]
    fit = None
    if len(reached) >= 2:
        s_min, e_min = fit_tradeoff(*zip(*reached))
        fit = {"s_min": s_min, "e_min": e_min, "b_crit": e_min / s_min}
    return {"batch_sizes": list(batch_sizes), "steps": best, "fit": fit,
            "b_crit": fit and fit["b_crit"]}


def ramp_against_decay(options: NQMOptions, lr: float, batch_size: int, phase_examples: int,
                       phases: int, cut: float) -> list[float]:
    """A batch ramp against the step decay it stands in for, in closed form at equal examples.

    The decay run trains `phases` phases of `phase_examples` examples each at `batch_size`, its
    rate halving from one to the next; the ramp doubles the batch instead and multiplies the
    rate by `cut` (1: the rate kept, the SGD equivalence of halving the rate and doubling the
    batch; 1/sqrt(2): Seesaw's, derived for normalized SGD). Per phase after the first, the
    ramp's expected loss over the decay run's at the end of the phase."""
    decay = [(lr / 2**k, batch_size, phase_examples // batch_size) for k in range(phases)]
    ramp = [(lr * cut**k, batch_size * 2**k, phase_examples // (batch_size * 2**k))
            for k in range(phases)]
    if ramp[-1][2] < 1:
        raise ValueError(f"phase {phases - 1} of the ramp has no step: {phase_examples} examples "
                         f"at batch {ramp[-1][1]}")
    a, b = phases_expected_loss(options, decay), phases_expected_loss(options, ramp)
    ends = zip(np.cumsum([p[2] for p in decay]), np.cumsum([p[2] for p in ramp]))
    return [float(b[j] / a[i]) for i, j in list(ends)[1:]]
