"""The arithmetic of a run whose batch size changes: its segments, each a stretch trained by the
program of one batch size, and the phases of a batch-size schedule (docs/schedules.md).

Each batch size's program counts its own steps, and its budget is the run's budget in
examples, so its step s stands at examples ~ s x B: its schedule (warm-up, decay) and its
evaluation points are where they would be in examples. A segment maps the program's steps to
the run's own: the optimizer steps taken so far and the examples seen (partial batches exact,
by the program's arithmetic). jax-free.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from scaling import config as config_mod
from scaling.config import BatchScheduleConfig, Config
from scaling.config.learning_rates import lr_multiplier, scaled_lr
from scaling.config.arithmetic import Arithmetic, for_config
from scaling.tasks import task_class


def budget_in_examples(cfg: Config, examples: int) -> Config:
    """`cfg` with its budget given as `examples`: the config a program at another batch size
    is built from (a schedule's phase, a branch), so its steps stand at the same examples."""
    data = config_mod.to_dict(cfg)
    data["budget"] = {"max_examples": examples}
    return config_mod.from_dict(data)


@dataclass(frozen=True)
class Segment:
    """The program at `batch_size` trains its steps [first, end) of a run that had taken
    `steps_before` optimizer steps and seen `examples_before` examples when it began."""

    batch_size: int
    first: int
    end: int
    steps_before: int
    examples_before: int
    arith: Arithmetic  # the program's: examples after its step s, from its own step 0

    def step(self, own: int) -> int:
        """The run's optimizer steps after the program's step `own`."""
        return self.steps_before + own - self.first

    def examples(self, own: int) -> int:
        return self.examples_before + self.arith.examples_at(own) - self.arith.examples_at(self.first)

    def following(self, own: int, batch_size: int, arith: Arithmetic, end: int | None = None
                  ) -> "Segment":
        """The segment that takes over after the program's step `own`, at `batch_size` (whose
        program's arithmetic is `arith`), up to `end` (default: that program's last step)."""
        examples = self.examples(own)
        first = -(-examples // batch_size)  # so the run ends within one batch under the budget
        return Segment(batch_size, first, arith.total_steps if end is None else end,
                       self.step(own), examples, arith)


def as_static(cfg: Config, sched: BatchScheduleConfig, start: Arithmetic) -> BatchScheduleConfig:
    """A seesaw schedule as the doubling schedule it is for this config: the batch doubles at
    the first step where the learning-rate multiplier of the start batch's run has fallen to
    1/2, 1/4, ... of its peak (each as a fraction of the budget's examples), up to `max`, and
    the rate follows by the schedule's rule (sqrt: it falls by sqrt(2) where it would halve).
    Every other schedule as it is."""
    if sched.kind != "seesaw":
        return sched
    s, total = cfg.schedule, start.total_steps
    steps = np.arange(total)
    rate = lr_multiplier(s.name, steps, total, start.warmup_steps, s.final_fraction,
                         start.decay_steps, s.decay[1])
    at = []
    for k in range(1, len(sched.batch_sizes)):
        fallen = np.nonzero((steps >= start.warmup_steps) & (rate <= 0.5**k + 1e-6))[0]
        if not len(fallen):
            break
        at.append(start.examples_at(int(fallen[0])) / start.examples)
    return dataclasses.replace(sched, kind="doubling", name=sched.label, at=at)


def phase_plan(sched: BatchScheduleConfig, budget: int,
               tokens_per_example: int | None = None) -> list[tuple[int, int]]:
    """(from examples, batch size) of a static schedule's phases within `budget` examples:
    steps as given (in tokens with unit: tokens, cut to whole examples), doubling at each
    fraction of the budget up to max, a switch to max at its fraction, or a linear ramp's
    multiples of start where the ramp reaches each. Phases that would start at or past the budget are left
    out."""
    if sched.kind == "steps":
        per = tokens_per_example if sched.unit == "tokens" else 1
        phases = [(int(e) // per, int(b)) for e, b in sched.steps]
    elif sched.kind in ("doubling", "switch"):
        sizes = sched.batch_sizes
        phases = [(0, sizes[0])] + [(int(round(a * budget)), b) for a, b in zip(sched.at, sizes[1:])]
    elif sched.kind == "linear_examples":  # batch k x start once the ramp has reached it
        reach, span = sched.at[0] * budget, sched.max - sched.start
        phases = [(int(round((b - sched.start) / span * reach)), b) for b in sched.batch_sizes]
    else:
        raise ValueError(f"a {sched.kind} schedule has no phases fixed in advance")
    return [p for p in phases if p[0] < budget or p[0] == 0]


def static_segments(sched: BatchScheduleConfig, budget: int, arith: dict[int, Arithmetic],
                    tokens_per_example: int | None = None) -> list[Segment]:
    """Every segment of a static schedule: each phase ends on the first whole step at or past
    the next phase's examples; the last runs to its program's end (the budget)."""
    phases = phase_plan(sched, budget, tokens_per_example)
    b0 = phases[0][1]
    segs = [Segment(b0, 0, arith[b0].total_steps, 0, 0, arith[b0])]
    for start, batch in phases[1:]:
        last = segs[-1]
        own = last.first + math.ceil((start - last.examples_before) / last.batch_size)
        own = min(max(own, last.first), last.end)
        segs[-1] = Segment(last.batch_size, last.first, own, last.steps_before,
                           last.examples_before, last.arith)
        segs.append(last.following(own, batch, arith[batch]))
    return [s for s in segs if s.end > s.first]


def phase_learning_rate(sched: BatchScheduleConfig, lr: float, batch_size: int) -> float:
    """The learning rate at `batch_size` of a run that started at `lr`, by the schedule's rule."""
    return scaled_lr(sched.lr_rule, batch_size, sched.first_batch, lr)


def planned_segments(cfg: Config, sched: BatchScheduleConfig, data_shards: int = 1
                     ) -> list[Segment]:
    """A fixed schedule's segments as planned (not a noise_scale one, which follows its runs):
    where each batch size trains, in the run's steps and examples."""
    budget = for_config(cfg, sched.first_batch, data_shards).examples
    arith = {b: for_config(cfg, b, data_shards) for b in sched.batch_sizes}
    return static_segments(as_static(cfg, sched, arith[sched.first_batch]), budget, arith,
                           task_class(cfg.task.name).tokens_per_example(cfg.task.options))


def describe(cfg: Config, sched: BatchScheduleConfig, data_shards: int = 1) -> str:
    """One schedule's plan for `scaling plan` and --dry-run: each phase's batch, its steps in
    the run's own count and its examples; a noise_scale schedule's rule."""
    budget = for_config(cfg, sched.first_batch, data_shards).examples
    ruled = " and ".join(cfg.optimizer.ruled)
    head = (f"schedule {sched.label} ({sched.kind}, learning rate by the {sched.lr_rule} rule"
            + (f", {ruled} by the optimizer's rules at each batch" if ruled else "") + "):")
    if sched.kind == "noise_scale":
        return (f"{head} from batch {sched.start}, doubling up to {sched.max} whenever a run's "
                f"B_simple exceeds {sched.multiple:g} x its batch (checked at every chunk "
                f"boundary, train.chunk_steps), within {budget:,} examples")
    segs = planned_segments(cfg, sched, data_shards)
    parts = [f"batch {s.batch_size} for steps {s.steps_before:,}-{s.step(s.end):,} "
             f"({s.examples_before:,}-{s.examples(s.end):,} examples)" for s in segs]
    return f"{head} " + "; ".join(parts) + f"; {segs[-1].step(segs[-1].end):,} steps in all"
