"""The batch section: global batch sizes, how each step is split, and the batch-size schedules
(each a sweep axis beside the fixed sizes; docs/schedules.md). Part of the schema
(scaling.config.schema), kept apart so each module stays readable in one sitting."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BatchScheduleConfig:
    """A batch size that grows during a run: a sweep axis beside the fixed batch sizes, trained
    for each of the learning rates at its start batch x the seeds (docs/schedules.md).

    kind: steps (`steps`: [[from examples, batch size], ...], the first from 0; with `unit:
    tokens` the first numbers count tokens, for token tasks), doubling (from
    `start`, twice the batch at each fraction `at` of the budget, up to `max`) or noise_scale
    (from `start`, twice the batch whenever the run's measured B_simple exceeds `multiple` x
    its batch, checked at chunk boundaries, up to `max`) or seesaw (from `start`, twice the
    batch wherever the learning-rate schedule would have halved the rate, up to `max`;
    Meterez et al. 2025), switch (from `start` to `max` at the one fraction `at` of the budget;
    Wang et al. 2026) or linear_examples (a ramp linear in examples from `start` to `max`, reached
    at the fraction `at`, in steps of `start`: the batch is the largest multiple of `start` the
    ramp has passed; DeepSeek-V3). lr_rule: how the learning rate follows each change from its value at
    the start batch (linear, sqrt, constant; default linear, sqrt for seesaw: the rate falls by
    sqrt(2) where the schedule would halve it). name: how run ids and reports call it
    (default: the kind and the start batch, e.g. doubling32).
    """

    kind: str = "doubling"
    name: str | None = None
    steps: list[list[int]] = field(default_factory=list)
    start: int | None = None
    at: list[float] = field(default_factory=list)
    max: int | None = None
    multiple: float = 1.0
    lr_rule: str | None = None
    unit: str = "examples"

    def __post_init__(self) -> None:
        if self.lr_rule is None:
            self.lr_rule = "sqrt" if self.kind == "seesaw" else "linear"

    @property
    def first_batch(self) -> int:
        return self.steps[0][1] if self.kind == "steps" else self.start

    @property
    def label(self) -> str:
        return self.name or f"{self.kind.replace('_', '')}{self.first_batch}"

    @property
    def batch_sizes(self) -> list[int]:
        """Every batch size the schedule may take."""
        if self.kind == "steps":
            return sorted({b for _, b in self.steps})
        sizes, b = [], self.start
        while b <= (self.max or self.start):
            sizes.append(b)
            b *= 2
        if self.kind == "switch":
            return [self.start, self.max]
        if self.kind == "linear_examples":
            return list(range(self.start, self.max + 1, self.start))
        return sizes[:len(self.at) + 1] if self.kind == "doubling" else sizes


@dataclass
class BatchConfig:
    """Global batch sizes (examples or sequences per update), how each step is split, and
    batch-size schedules (each a sweep axis like a batch size)."""

    sizes: list[int] = field(default_factory=lambda: [128])
    accumulation: int = 1
    drop_last: bool = False
    schedules: list[BatchScheduleConfig] = field(default_factory=list)
