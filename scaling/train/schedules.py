"""Learning-rate schedules within a run, traced inside the compiled step."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from scaling.config.names import SCHEDULES


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
