"""Learning rates across batch sizes: the scaling rules and each batch size's grid.

The rules (docs/arithmetic.md) say how the learning rate should move with the batch size,
relative to a reference point (batch_ref, lr_ref). numpy only, so `scaling plan` stays instant.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from scaling.config.names import LR_RULES
from scaling.config.schema import LearningRateConfig


class WarmupSpec(Protocol):
    """What `warmup_steps` reads: scaling.config.ScheduleConfig or anything shaped like it."""

    warmup_fraction: float
    warmup_steps: int | None


def scaled_lr(rule: str, batch_size: int, batch_ref: int | None, lr_ref: float | None,
              eps_max: float | None = None, b_noise: float | None = None,
              eta_max: float | None = None, b_peak: float | None = None) -> float:
    """Learning rate at `batch_size` under `rule`.

    linear: lr_ref * B / B_ref; sqrt: lr_ref * sqrt(B / B_ref); constant: lr_ref;
    noise_scale: eps_max / (1 + b_noise / B) (McCandlish et al. 2018), no reference needed;
    surge: `surge_lr` (Li et al. 2024), from eta_max and b_peak.
    """
    if rule not in LR_RULES:
        raise ValueError(f"learning-rate rule {rule!r} is unknown; expected one of {', '.join(LR_RULES)}")
    if batch_size <= 0:
        raise ValueError(f"batch size must be positive, got {batch_size}")
    if rule == "noise_scale":
        if eps_max is None or b_noise is None:
            raise ValueError("the noise_scale rule needs eps_max and b_noise")
        return eps_max / (1.0 + b_noise / batch_size)
    if rule == "surge":
        if eta_max is None or b_peak is None:
            raise ValueError("the surge rule needs eta_max and b_peak")
        return surge_lr(batch_size, eta_max, b_peak)
    if lr_ref is None:
        raise ValueError(f"the {rule} rule needs lr_ref, the learning rate at batch_ref")
    if rule == "constant":
        return float(lr_ref)
    if batch_ref is None or batch_ref <= 0:
        raise ValueError(f"the {rule} rule needs a positive batch_ref, got {batch_ref}")
    ratio = batch_size / batch_ref
    return lr_ref * (ratio if rule == "linear" else math.sqrt(ratio))


def surge_lr(batch_size: Any, eta_max: float, b_peak: float) -> Any:
    """Adam's optimal learning rate by Li et al. 2024 ("Surge phenomenon in optimal learning rate
    and batch size scaling"): 2 eta_max / (sqrt(b_peak / B) + sqrt(B / b_peak)). It rises like
    sqrt(B) below b_peak, peaks at eta_max there and falls like 1/sqrt(B) above (numpy arrays
    too)."""
    ratio = np.sqrt(np.asarray(batch_size, np.float64) / b_peak)
    value = 2.0 * eta_max / (1.0 / ratio + ratio)
    return float(value) if np.ndim(value) == 0 else value


def warmup_steps(schedule_cfg: WarmupSpec, total_steps: int) -> int:
    """Warm-up length of a run of `total_steps`.

    A fixed `warmup_steps` is returned as given (plan warns when it eats much of the run);
    otherwise floor(warmup_fraction * total_steps + 0.5), i.e. rounded half up, so that the
    warm-up scales with each batch size's run (5% of 300 steps = 15 steps).
    """
    if schedule_cfg.warmup_steps is not None:
        return int(schedule_cfg.warmup_steps)
    return int(math.floor(schedule_cfg.warmup_fraction * total_steps + 0.5))


# ---------------------------------------------------------------- a batch size's learning rates


def learning_rates(lr: LearningRateConfig, batch_size: int) -> list[float]:
    """The learning rates one batch size trains with, from the learning_rate section."""
    if lr.mode == "grid":
        if lr.values is not None:
            return list(lr.values)
        return [float(v) for v in np.geomspace(lr.min, lr.max, lr.num)]
    if lr.mode == "centered":
        return [centered_lr(lr, batch_size, k) for k in range(lr.num)]
    return [_rule_lr(lr, batch_size)]


def _rule_lr(lr: LearningRateConfig, batch_size: int) -> float:
    return scaled_lr(lr.rule, batch_size, lr.batch_ref, lr.lr_ref, lr.eps_max, lr.b_noise,
                     lr.eta_max, lr.b_peak)


def centered_lr(lr: LearningRateConfig, batch_size: int, k: int) -> float:
    """Point k of the centred log grid (0 .. num - 1).

    Points 0 and num-1 sit at prediction / span and prediction * span.
    """
    exponent = (2 * k - (lr.num - 1)) / (lr.num - 1)
    return _rule_lr(lr, batch_size) * lr.span ** exponent
