"""What a compiled group is built from, as plain data: the group's spec (everything that shapes
the program), one run's scalars, how a batch is cut into groups, and the run statuses.

jax-free, so planning, progress tables and the store can name these without importing jax.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

import numpy as np

from scaling.config.targets import Reach


class Status(enum.IntEnum):
    """A run's state, kept as an int inside the compiled program; `.label` is what run files say."""

    RUNNING = 0
    COMPLETED = 1
    DIVERGED = 2
    BUDGET_EXHAUSTED = 3
    PADDING = 4  # a slot that only fills the group to a multiple of the runs axis

    @property
    def label(self) -> str:
        return self.name.lower()


# Without data shards, 4 groups: on one CPU thread (experiments/bench_engine.py, mnist1d MLP,
# batch 128) a step costs 1.18x an unsplit one at 4 groups, 1.40x at 8 and 1.08x at 2, while
# B_simple's moving average is only ~5-10% noisier at 4 than at 8, ~20-30% at 2
# (experiments/gns_noise.py: the |G|^2 estimate's noise, the same for any k, dominates).
# With the batch sharded over 2 or 8 devices the groups cost nothing measurable (README).
DEFAULT_GROUPS = 4


@dataclass(frozen=True)
class GroupLayout:
    """How a global batch is cut: accumulation x groups per micro-batch x group size."""

    accumulation: int
    groups_per_micro: int
    group_size: int
    data_shards: int

    @property
    def num_groups(self) -> int:
        return self.accumulation * self.groups_per_micro

    @property
    def b_small(self) -> int:
        return self.group_size

    @classmethod
    def choose(cls, batch_size: int, accumulation: int, data_shards: int,
               groups: int | None, measure: bool = True) -> "GroupLayout":
        """Groups per micro-batch: `groups` in all when given, else max(data shards, DEFAULT_GROUPS).

        The automatic count steps down until it divides the micro-batch. With accumulation and no
        explicit count, each micro-batch is one group; without measurement (`measure=False`)
        micro-batches are not split at all.
        """
        micro = batch_size // accumulation
        if not measure:
            per_micro = 1
        elif groups is not None:
            if groups % accumulation or micro % (groups // accumulation):
                raise ValueError(
                    f"gns.groups: got {groups}, expected a multiple of batch.accumulation="
                    f"{accumulation} whose share per micro-batch divides the micro-batch {micro}")
            per_micro = groups // accumulation
        elif accumulation > 1:
            per_micro = 1
        else:
            per_micro = max(data_shards, DEFAULT_GROUPS)
            while micro % per_micro:
                per_micro -= 1
        return cls(accumulation, per_micro, micro // per_micro, data_shards)

    def plain(self) -> "GroupLayout":
        """The same cut without groups inside micro-batches: the cheap step between measurements."""
        return replace(self, groups_per_micro=1, group_size=self.group_size * self.groups_per_micro)


@dataclass(frozen=True)
class GroupSpec:
    """Everything that shapes the compiled program; runs in one group share all of it."""

    batch_size: int
    layout: GroupLayout
    optimizer: str
    total_steps: int
    chunk_steps: int
    schedule: str
    warmup_steps: int
    final_fraction: float
    num_train: int | None
    drop_last: bool
    targets: tuple[tuple[str, str, float], ...]
    divergence_factor: float
    stop_at_targets: bool
    measure_gns: bool
    ema_decay: float
    hessian_every: int = 0
    gns_every: int = 1
    preconditioned: bool = False
    repack: bool = True
    reach: Reach = Reach()
    eval_every: int | None = None
    points_per_decade: int = 20
    param_ema: float | None = None  # decay of the parameters' moving average, None: off
    host_data: bool = False  # batches arrive per chunk from the host (scaling.train.stream)
    precision: str = "float32"  # compute dtype of the loss and evaluation (train.precision)
    eval_at: tuple[int, ...] = ()  # more evaluation steps (a branch's window)

    @property
    def eval_points(self) -> np.ndarray:
        points = eval_steps(self.total_steps, self.eval_every, self.points_per_decade)
        return np.union1d(points, np.asarray(self.eval_at, np.int64)) if self.eval_at else points

    @property
    def measures(self) -> bool:
        return self.measure_gns and self.layout.num_groups >= 2

    @property
    def gns_metrics(self) -> int:
        """Estimates kept side by side: Euclidean, and Adam's preconditioned metric if asked."""
        return 2 if self.preconditioned else 1

    @property
    def steps_per_epoch(self) -> int | None:
        if self.num_train is None:
            return None
        div = self.num_train // self.batch_size if self.drop_last else -(-self.num_train // self.batch_size)
        return max(div, 1)


@dataclass(frozen=True)
class RunSpec:
    """The scalars of one run: data, not constants, in the compiled program."""

    learning_rate: float
    seed: int
    momentum: float = 0.9
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8


def eval_steps(total_steps: int, every: int | None, points_per_decade: int) -> np.ndarray:
    """Evaluation points: 0, the end, a fixed cadence, and geometric spacing for resolution."""
    points = {0, total_steps}
    if every:
        points.update(range(every, total_steps, every))
    if points_per_decade and total_steps > 1:
        n = int(math.ceil(points_per_decade * math.log10(total_steps))) + 1
        points.update(int(round(s)) for s in np.geomspace(1, total_steps, n))
    return np.array(sorted(points), dtype=np.int64)
