"""Learning-rate schedules within a run, traced inside the compiled step: the multiplier of
scaling.config.learning_rates (one formula, jax-free there for `scaling plan` and the
schedules' phases) evaluated with jax.numpy."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from scaling.config.learning_rates import lr_multiplier as _multiplier
from scaling.train.spec import LRSchedule


def lr_multiplier(name: str, step: Any, total_steps: int, warmup: int,
                  final_fraction: float, decay_steps: int = 0, decay_shape: str = "linear") -> Any:
    """scaling.config.learning_rates.lr_multiplier at a (possibly traced) `step`, in float32."""
    return _multiplier(name, jnp.asarray(step, dtype=jnp.float32), total_steps, warmup,
                       final_fraction, decay_steps, decay_shape, xp=jnp)


def schedule_multiplier(schedule: LRSchedule, step: Any, total_steps: int) -> Any:
    """`lr_multiplier` of a program's schedule (scaling.train.spec.LRSchedule)."""
    return lr_multiplier(schedule.name, step, total_steps, schedule.warmup_steps,
                         schedule.final_fraction, schedule.decay_steps, schedule.decay_shape)
