"""Learning rates across batch sizes: the scaling rules and each batch size's grid.

The rules (docs/arithmetic.md) say how the learning rate should move with the batch size,
relative to a reference point (batch_ref, lr_ref). numpy only, so `scaling plan` stays instant.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from scaling.config.names import DECAY_SHAPES, LR_RULES, SCHEDULES
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


def decay_steps(decay_fraction: float, total_steps: int) -> int:
    """A wsd schedule's decay length: its fraction of the run's steps rounded half up, at
    least one step (0 without a separate decay: fraction 0)."""
    if decay_fraction <= 0:
        return 0
    return max(1, int(math.floor(decay_fraction * total_steps + 0.5)))


def lr_multiplier(name: str, step: Any, total_steps: int, warmup: int,
                  final_fraction: float, decay_steps: int = 0, decay_shape: str = "linear",
                  xp: Any = np) -> Any:
    """Multiplier in [0, 1] on the peak learning rate at 0-based `step` (may be traced).

    Warm-up, for step < warmup: (step + 1) / warmup, so step 0 already trains at 1/warmup and
    step warmup-1 reaches 1. Afterwards, with p = clip((step - warmup) / max(total_steps -
    warmup - 1, 1), 0, 1) running from 0 at the first post-warm-up step to 1 at the last step
    (total_steps - 1):
      constant: 1
      linear:   1 - (1 - final_fraction) * p
      cosine:   final_fraction + (1 - final_fraction) * (1 + cos(pi * p)) / 2
    so decaying schedules end exactly at final_fraction on the last step.
    wsd (warm-up, stable, decay): 1 until the last `decay_steps` steps, which decay with
    q = clip((step - (total_steps - decay_steps) + 1) / decay_steps, 0, 1), from 1/decay_steps
    at the decay's first step to 1 at the run's last, by `decay_shape`:
      linear: 1 - (1 - final_fraction) * q
      cosine: final_fraction + (1 - final_fraction) * (1 + cos(pi * q)) / 2
      sqrt:   1 - (1 - final_fraction) * sqrt(q)   (the "1 - sqrt" cooldown, Hägele et al. 2024)
    so a decay branched from a stable run's state at total_steps - decay_steps is the same
    whichever run it came from. Every argument but `step` is a Python value (static); `xp` is
    the array module (numpy here, jax.numpy in the compiled step: scaling.train.schedules).
    """
    if name not in SCHEDULES:
        raise ValueError(f"schedule {name!r} is unknown; expected one of {', '.join(SCHEDULES)}")
    step = xp.asarray(step, dtype=xp.float32)
    warm = (step + 1.0) / max(warmup, 1)
    if name == "wsd":
        q = xp.clip((step - (total_steps - decay_steps) + 1.0) / max(decay_steps, 1), 0.0, 1.0)
        after = _decay(decay_shape, q, final_fraction, xp)
        return xp.where(step < warmup, warm, after)
    p = xp.clip((step - warmup) / max(total_steps - warmup - 1, 1), 0.0, 1.0)
    after = xp.ones_like(p) if name == "constant" else _decay(name, p, final_fraction, xp)
    return xp.where(step < warmup, warm, after)


def _decay(shape: str, q: Any, final_fraction: float, xp: Any) -> Any:
    """From 1 at q = 0 to final_fraction at q = 1, by `shape` (DECAY_SHAPES)."""
    if shape not in DECAY_SHAPES:
        raise ValueError(f"decay shape {shape!r} is unknown; expected one of "
                         f"{', '.join(DECAY_SHAPES)}")
    if shape == "linear":
        return 1.0 - (1.0 - final_fraction) * q
    if shape == "sqrt":
        return 1.0 - (1.0 - final_fraction) * xp.sqrt(q)
    return final_fraction + (1.0 - final_fraction) * 0.5 * (1.0 + xp.cos(xp.pi * q))


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
