"""The arithmetic of `scaling branch`, before any compute: the base run, the points it branches
at, each branch's batch size, learning rate, start step and window (Merrill et al. 2025).

A base run trains at B0. At each point (a chunk boundary of the base, so its state can be
saved there) branches start at k x B0 and train for the same window of examples; the base
itself, continued, is the reference at k = 1. A branch counts its own steps: at k x B0 the
point's examples are step point / k, so the learning-rate schedule, which is a function of the
step and the run's total steps at that batch size, stands where the base's does (to within one
branch step). The window is a whole number of steps at every k, and so is each of its
evaluation points, so every branch is read at the same examples as the base.

jax-free, so `scaling branch --dry-run` is instant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scaling.config import Config, ConfigError, learning_rates
from scaling.config.learning_rates import scaled_lr
from scaling.config import arithmetic


@dataclass(frozen=True)
class Branch:
    """One branch run: from the base's state after `point` steps, at factor x B0."""

    point: int  # base steps
    factor: int
    lr_factor: float
    seed: int
    batch_size: int
    learning_rate: float
    start: int  # the branch's own step at the point
    steps: int  # steps in the window

    @property
    def run_id(self) -> str:
        return (f"step{self.point}-bs{self.batch_size}-lr{self.learning_rate:.6g}"
                f"-seed{self.seed}")


@dataclass(frozen=True)
class BranchPlan:
    """Everything about a branched measurement that follows from the config alone."""

    base_batch: int
    base_lr: float
    base_steps: int
    seeds: tuple[int, ...]
    points: tuple[int, ...]  # base steps, ascending
    window: int  # examples per branch
    factors: tuple[int, ...]
    lr_rule: str
    lr_grid: tuple[float, ...]
    evals: int
    notes: tuple[str, ...] = ()  # what was adjusted and why (points dropped, window rounded)

    def window_steps(self, factor: int) -> int:
        return self.window // (factor * self.base_batch)

    def eval_offsets(self, factor: int) -> list[int]:
        """Steps after a branch's start at which it is evaluated: evals points, evenly spaced."""
        w = self.window_steps(factor)
        return [j * w // self.evals for j in range(1, self.evals + 1)]

    def base_eval_steps(self) -> list[int]:
        """Extra evaluation steps of the base: every point and its window's evaluation points."""
        return sorted({p + o for p in self.points for o in [0, *self.eval_offsets(1)]})

    def branch_eval_steps(self, factor: int) -> list[int]:
        """The evaluation steps of the program at factor x B0 (every point's window)."""
        return sorted({p // factor + o for p in self.points for o in self.eval_offsets(factor)})

    def learning_rate(self, factor: int, lr_factor: float) -> float:
        return scaled_lr(self.lr_rule, factor * self.base_batch, self.base_batch,
                         self.base_lr) * lr_factor

    def branches(self, point: int, factor: int) -> list[Branch]:
        """The runs of one (point, factor) group: the lr grid x seeds; at factor 1 the base's own
        learning rate is left out (the base continued is that run)."""
        out = []
        for f in self.lr_grid:
            if factor == 1 and f == 1.0:
                continue
            for seed in self.seeds:
                out.append(Branch(point, factor, f, seed, factor * self.base_batch,
                                  self.learning_rate(factor, f), point // factor,
                                  self.window_steps(factor)))
        return out

    @property
    def trained_factors(self) -> tuple[int, ...]:
        """The factors branches train at: with a learning-rate grid factor 1 too (B0 at the
        grid's other factors), so the reference at k = 1 has the same choice of learning rates
        as every branch."""
        return tuple(sorted({1, *self.factors})) if len(self.lr_grid) > 1 else self.factors

    def groups(self) -> list[tuple[int, int, list[Branch]]]:
        """(point, factor, branches) of every group to train, by point then factor."""
        return [(p, k, runs) for p in self.points for k in self.trained_factors
                if (runs := self.branches(p, k))]

    def base_record(self) -> dict:
        """What the base's checkpoints depend on (a folder holding another is refused)."""
        return {"batch_size": self.base_batch, "learning_rate": self.base_lr,
                "points": list(self.points), "window": self.window, "evals": self.evals}

    def describe(self) -> str:
        lines = [f"base: batch {self.base_batch}, learning rate {self.base_lr:.4g}, "
                 f"{self.base_steps} steps, seeds {list(self.seeds)}",
                 f"window: {self.window} examples, {self.evals} evaluation points; branches at "
                 f"k = {', '.join(map(str, self.factors))} ({self.lr_rule} rule, learning-rate "
                 f"factors {', '.join(f'{f:g}' for f in self.lr_grid)})"]
        for p in self.points:
            lines.append(f"  point at step {p} ({p * self.base_batch} examples): "
                         + ", ".join(f"k={k}: {self.window_steps(k)} steps at lr "
                                     + "/".join(f"{self.learning_rate(k, f):.4g}"
                                                for f in self.lr_grid) for k in self.factors))
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def base_learning_rate(cfg: Config, batch: int) -> float:
    """branch.learning_rate, else the config's only learning rate at B0."""
    if cfg.branch.learning_rate is not None:
        return cfg.branch.learning_rate
    rates = learning_rates(cfg.learning_rate, batch)
    if len(rates) != 1:
        raise ConfigError(f"branch.learning_rate: unset, and the config has {len(rates)} learning "
                          f"rates at batch {batch}; expected a number (the base run's learning "
                          "rate), e.g. the best one a sweep found there")
    return rates[0]


def _window(cfg: Config, batch: int, budget: int, evals: int, notes: list[str]) -> int:
    """The window in examples, a multiple of lcm(factors) x B0 x evals so that every branch and
    every one of its evaluation points ends on a whole step."""
    unit = math.lcm(*cfg.branch.factors) * batch * evals
    asked = cfg.branch.window if cfg.branch.window is not None else budget // 10
    window = max(unit, round(asked / unit) * unit)
    if window != asked:
        notes.append(f"window {asked} examples rounded to {window}, a multiple of "
                     f"{unit} (lcm of the factors x B0 x evals), so every branch ends on a whole step")
    if window > budget:
        raise ConfigError(f"branch.window: {window} examples is more than the base run's budget of "
                          f"{budget}; expected a smaller window, fewer or smaller factors, or a "
                          "larger budget")
    return window


def _points(cfg: Config, batch: int, steps: int, chunk: int, window_steps: int,
            notes: list[str]) -> tuple[int, ...]:
    """Base steps to branch at: each asked point (examples) moved to the nearest chunk boundary,
    or num_points log-spaced ones; points whose window would pass the base's end are dropped."""
    last = steps - window_steps
    b = cfg.branch
    if b.points:
        asked = [e / batch for e in b.points]
    else:
        asked = list(np.geomspace(max(chunk, steps / 100), max(last, chunk), b.num_points))
    latest = last // chunk * chunk  # the last boundary a window fits after
    snapped = sorted({max(chunk, int(round(s / chunk)) * chunk) for s in asked})
    if not b.points:  # the log-spaced end is the last point that fits, not one past it
        snapped = sorted({min(p, latest) for p in snapped})
    kept = tuple(p for p in snapped if p <= last)
    if len(kept) < len(snapped):
        notes.append(f"points after step {last} dropped: their window would pass the base "
                     f"run's {steps} steps")
    if not kept:
        raise ConfigError(f"branch.points: no point leaves room for a window of {window_steps} "
                          f"base steps before the base run's end at step {steps} (points are "
                          f"moved to multiples of train.chunk_steps={chunk}); expected earlier "
                          "points, a smaller window or a larger budget")
    return kept


def branch_plan(cfg: Config, data_shards: int = 1) -> BranchPlan:
    """The plan of `scaling branch` for `cfg`; bad input is a ConfigError before any compute."""
    b = cfg.branch
    batch = b.batch_size or min(cfg.batch.sizes)
    if cfg.data.placement == "host":
        raise ConfigError("data.placement: got host, expected device or auto (a branch draws "
                          "its own data order on the device)")
    arith = arithmetic.for_config(cfg, batch, data_shards)
    chunk = cfg.train.chunk_for(arith.total_steps)
    notes: list[str] = []
    window = _window(cfg, batch, arith.examples, b.evals, notes)
    points = _points(cfg, batch, arith.total_steps, chunk, window // batch, notes)
    return BranchPlan(batch, base_learning_rate(cfg, batch), arith.total_steps, tuple(cfg.seeds),
                      points, window, tuple(sorted(set(b.factors))), b.lr_rule,
                      tuple(b.lr_grid), b.evals, tuple(notes))
