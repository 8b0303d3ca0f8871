"""The optimizer section: the family, its scalars (data in the compiled program, so a list is a
grid axis), and the rules that set beta2 and the weight decay per batch size.

The rules' formulas live here, numpy-free and jax-free, so `scaling plan`, the grid, the
schedules, the branches and the analysis compute one value the same way
(scaling.config.optimizer_rules applies them to a config; docs/configs.md gives the references):

- half_life (Marek et al. 2025): beta2(B) = beta2_ref ** (B / B_ref), clipped to b2_range. A
  squared gradient's weight in Adam's second moment halves after ln(1/2) / ln(beta2) steps, that
  is B ln(1/2) / ln(beta2) examples; the rule keeps that half-life fixed in examples (or tokens).
- timescale (Wang & Aitchison 2024; Bergsma et al. 2025): tau = B / (eta lambda D) with eta the
  run's peak learning rate, lambda the weight decay and D the run's budget in examples. A
  decoupled decay shrinks the weights by (1 - eta lambda) per step, an average over the last
  1 / (eta lambda) steps, which is tau of the D / B steps of the run; the rule keeps tau fixed,
  so lambda = B / (eta tau D).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

DEFAULT_B2_RANGE = (0.9, 0.9999)


@dataclass
class OptimizerConfig:
    """Optimizer family and its scalars; the scalars are data (vmapped), the family is not.

    momentum, weight_decay and b2 may each be a list: a grid axis (every combination of the
    listed values is a run, next to the learning rates and seeds; see `grid_axes`).

    b2_rule half_life: each batch size's b2 from `b2` at `b2_ref_batch`, clipped to `b2_range`.
    weight_decay_rule timescale: each run's weight decay from `weight_decay_tau`, or from the
    reference run (`weight_decay` at `weight_decay_ref_batch` and `weight_decay_ref_lr`).
    """

    name: str = "sgd"
    momentum: float | list[float] = 0.9
    weight_decay: float | list[float] = 0.0
    b1: float = 0.9
    b2: float | list[float] = 0.999
    eps: float = 1e-8
    b2_rule: str | None = None
    b2_ref_batch: int | None = None
    b2_range: list[float] = field(default_factory=lambda: list(DEFAULT_B2_RANGE))
    weight_decay_rule: str | None = None
    weight_decay_tau: float | None = None
    weight_decay_ref_batch: int | None = None
    weight_decay_ref_lr: float | None = None

    def rule(self, scalar: str) -> str | None:
        """The rule that sets `scalar` (b2, weight_decay) per batch size; None: the config's."""
        return getattr(self, f"{scalar}_rule", None)

    @property
    def ruled(self) -> tuple[str, ...]:
        """The scalars a rule sets per batch size (b2, weight_decay), not the config's value."""
        return tuple(k for k in ("weight_decay", "b2") if self.rule(k) is not None)


# Optimizer scalars that may be grid axes: each with its run-id label and its accepted range.
AXES: dict[str, tuple[str, Any, str]] = {
    "momentum": ("mom", lambda v: 0 <= v < 1, "0 <= momentum < 1"),
    "weight_decay": ("wd", lambda v: v >= 0, ">= 0"),
    "b2": ("b2", lambda v: 0 <= v < 1, "0 <= b2 < 1"),
}


def grid_axes(o: OptimizerConfig) -> dict[str, list[float]]:
    """The list-valued optimizer scalars, in AXES order: the grid's extra axes."""
    return {k: getattr(o, k) for k in AXES if isinstance(getattr(o, k), list)}


def half_life_b2(b2_ref: float, batch_size: int, batch_ref: int,
                 b2_range: tuple[float, float] | list[float] = DEFAULT_B2_RANGE) -> float:
    """beta2 at `batch_size` with the half-life of `b2_ref` at `batch_ref` in examples,
    clipped to b2_range: b2_ref ** (B / B_ref)."""
    low, high = b2_range
    return min(max(b2_ref ** (batch_size / batch_ref), low), high)


def half_life_examples(b2: float, batch_size: int) -> float | None:
    """Examples after which a squared gradient's weight in Adam's second moment has halved:
    B ln(1/2) / ln(beta2); None for beta2 <= 0 (no memory) or >= 1 (no decay)."""
    if not 0 < b2 < 1:
        return None
    return batch_size * math.log(0.5) / math.log(b2)


def timescale(batch_size: int, learning_rate: float, weight_decay: float,
              examples: int) -> float | None:
    """tau = B / (eta lambda D): the decay's averaging window as a share of the run's D
    examples; None without decay."""
    if weight_decay <= 0 or learning_rate <= 0:
        return None
    return batch_size / (learning_rate * weight_decay * examples)


def timescale_weight_decay(tau: float, batch_size: int, learning_rate: float,
                           examples: int) -> float:
    """lambda = B / (eta tau D), the weight decay that gives the run the timescale tau."""
    return batch_size / (learning_rate * tau * examples)
