"""Learning-rate scaling rules across batch sizes and learning-rate schedules within a run.

The rules (DESIGN.md section 3) say how the learning rate should move with the batch size,
relative to a reference point (batch_ref, lr_ref); the schedules shape it over one run.
jax is imported only inside `lr_multiplier`, so that `scaling plan` stays instant.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

RULES = ("linear", "sqrt", "constant", "noise_scale")
SCHEDULES = ("constant", "linear", "cosine")


class WarmupSpec(Protocol):
    """What `warmup_steps` reads: scaling.config.ScheduleConfig or anything shaped like it."""

    warmup_fraction: float
    warmup_steps: int | None


def scaled_lr(rule: str, batch_size: int, batch_ref: int | None, lr_ref: float | None,
              eps_max: float | None = None, b_noise: float | None = None) -> float:
    """Learning rate at `batch_size` under `rule`.

    linear: lr_ref * B / B_ref; sqrt: lr_ref * sqrt(B / B_ref); constant: lr_ref;
    noise_scale: eps_max / (1 + b_noise / B) (McCandlish et al. 2018), no reference needed.
    """
    if rule not in RULES:
        raise ValueError(f"learning-rate rule {rule!r} is unknown; expected one of {', '.join(RULES)}")
    if batch_size <= 0:
        raise ValueError(f"batch size must be positive, got {batch_size}")
    if rule == "noise_scale":
        if eps_max is None or b_noise is None:
            raise ValueError("the noise_scale rule needs eps_max and b_noise")
        return eps_max / (1.0 + b_noise / batch_size)
    if lr_ref is None:
        raise ValueError(f"the {rule} rule needs lr_ref, the learning rate at batch_ref")
    if rule == "constant":
        return float(lr_ref)
    if batch_ref is None or batch_ref <= 0:
        raise ValueError(f"the {rule} rule needs a positive batch_ref, got {batch_ref}")
    ratio = batch_size / batch_ref
    return lr_ref * (ratio if rule == "linear" else math.sqrt(ratio))


def warmup_steps(schedule_cfg: WarmupSpec, total_steps: int) -> int:
    """Warm-up length of a run of `total_steps`.

    A fixed `warmup_steps` is returned as given (plan warns when it eats much of the run);
    otherwise floor(warmup_fraction * total_steps + 0.5), i.e. rounded half up, so that the
    warm-up scales with each batch size's run (5% of 300 steps = 15 steps).
    """
    if schedule_cfg.warmup_steps is not None:
        return int(schedule_cfg.warmup_steps)
    return int(math.floor(schedule_cfg.warmup_fraction * total_steps + 0.5))


def lr_multiplier(name: str, step: Any, total_steps: int, warmup: int,
                  final_fraction: float) -> Any:
    """Multiplier in [0, 1] on the peak learning rate at 0-based `step` (may be traced).

    Warm-up, for step < warmup: (step + 1) / warmup, so step 0 already trains at 1/warmup and
    step warmup-1 reaches 1. Afterwards, with p = clip((step - warmup) / max(total_steps -
    warmup - 1, 1), 0, 1) running from 0 at the first post-warm-up step to 1 at the last step
    (total_steps - 1):
      constant: 1
      linear:   1 - (1 - final_fraction) * p
      cosine:   final_fraction + (1 - final_fraction) * (1 + cos(pi * p)) / 2
    so decaying schedules end exactly at final_fraction on the last step.
    `name`, `total_steps`, `warmup` and `final_fraction` are Python values (static).
    """
    import jax.numpy as jnp

    if name not in SCHEDULES:
        raise ValueError(f"schedule {name!r} is unknown; expected one of {', '.join(SCHEDULES)}")
    step = jnp.asarray(step, dtype=jnp.float32)
    warm = (step + 1.0) / max(warmup, 1)
    p = jnp.clip((step - warmup) / max(total_steps - warmup - 1, 1), 0.0, 1.0)
    if name == "constant":
        after = jnp.ones_like(p)
    elif name == "linear":
        after = 1.0 - (1.0 - final_fraction) * p
    else:
        after = final_fraction + (1.0 - final_fraction) * 0.5 * (1.0 + jnp.cos(jnp.pi * p))
    return jnp.where(step < warmup, warm, after)
