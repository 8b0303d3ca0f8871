"""What a compiled group is built from, as plain data: the group's spec (everything that shapes
the program), one run's scalars, how a batch is cut into groups, and the run statuses.

jax-free, so planning, progress tables and the store can name these without importing jax.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass, replace

import numpy as np

from scaling.config import Config, ConfigError, parse_target
from scaling.config.arithmetic import Arithmetic, for_config
from scaling.config.targets import Reach


class Status(enum.IntEnum):
    """A run's state, kept as an int inside the compiled program; `.label` is what run files say."""

    RUNNING = 0
    COMPLETED = 1
    DIVERGED = 2
    BUDGET_EXHAUSTED = 3
    PADDING = 4  # a slot that only fills the group to a multiple of the runs axis
    DOMINATED = 5  # stopped by the host: it can no longer be its batch size's best rate

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
class DataSpec:
    """How each step's batch is drawn: its size and cut, and the epoch arithmetic of finite data."""

    batch_size: int
    layout: GroupLayout
    num_train: int | None  # training-set size; None: the task samples its batches
    drop_last: bool = False
    host_data: bool = False  # batches arrive per chunk from the host (scaling.train.stream)

    @property
    def steps_per_epoch(self) -> int | None:
        if self.num_train is None:
            return None
        b = self.batch_size
        return max(self.num_train // b if self.drop_last else -(-self.num_train // b), 1)


@dataclass(frozen=True)
class LRSchedule:
    """The learning rate's shape over a run (scaling.train.schedules)."""

    name: str = "constant"
    warmup_steps: int = 0
    final_fraction: float = 0.0
    decay_steps: int = 0  # wsd: the run's last steps, which decay by `decay_shape`
    decay_shape: str = "linear"


@dataclass(frozen=True)
class Stopping:
    """When a run stops before its budget: the targets under a reading rule, and divergence;
    and past it: `extension` (budget.reading_extension, 1: off) lets a run whose target is
    crossed but whose reading is not yet confirmed go on, to at most that factor of its steps."""

    targets: tuple[tuple[str, str, float], ...] = ()
    stop_at_targets: bool = True
    divergence_factor: float = 10.0
    reach: Reach = Reach()
    extension: float = 1.0


@dataclass(frozen=True)
class NoiseSpec:
    """The noise-scale measurement inside the step (scaling.train.measure)."""

    enabled: bool = True
    ema_decay: float = 0.95
    hessian_every: int = 0  # B_noise every K evaluation points, 0: off
    every: int = 1  # measure on every N-th step
    preconditioned: bool = False  # also in Adam's metric


@dataclass(frozen=True)
class EvalSpec:
    """Where evaluations fall (a cadence plus geometric spacing, and extra steps) and whether
    the parameters' moving average is evaluated too."""

    every: int | None = None
    points_per_decade: int = 20
    param_ema: float | None = None  # decay of the parameters' moving average, None: off
    at: tuple[int, ...] = ()  # more evaluation steps (a branch's window)

    def points(self, total_steps: int) -> np.ndarray:
        points = eval_steps(total_steps, self.every, self.points_per_decade)
        return np.union1d(points, np.asarray(self.at, np.int64)) if self.at else points


@dataclass(frozen=True)
class GroupSpec:
    """Everything that shapes the compiled program; runs in one group share all of it."""

    data: DataSpec
    optimizer: str
    total_steps: int
    chunk_steps: int
    schedule: LRSchedule = LRSchedule()
    stopping: Stopping = Stopping()
    noise: NoiseSpec = NoiseSpec()
    evaluation: EvalSpec = EvalSpec()
    repack: bool | str = True  # train.repack: true, auto or false
    precision: str = "auto"  # train.precision: the loss and evaluation's compute dtype

    @property
    def batch_size(self) -> int:
        return self.data.batch_size

    @property
    def layout(self) -> GroupLayout:
        return self.data.layout

    @property
    def last_step(self) -> int:
        """The last step any run may take: the budget's, or past it by the reading extension."""
        return int(math.floor(self.total_steps * max(self.stopping.extension, 1.0)))

    @property
    def eval_points(self) -> np.ndarray:
        """The budget's evaluation points, and the extension's beyond it on the same spacing."""
        points = self.evaluation.points(self.total_steps)
        if self.last_step == self.total_steps:
            return points
        beyond = self.evaluation.points(self.last_step)
        return np.union1d(points, beyond[beyond > self.total_steps])

    @property
    def measures(self) -> bool:
        return self.noise.enabled and self.layout.num_groups >= 2

    @property
    def gns_metrics(self) -> int:
        """Estimates kept side by side: Euclidean, and Adam's preconditioned metric if asked."""
        return 2 if self.noise.preconditioned else 1

    def replace(self, **parts: object) -> "GroupSpec":
        """A copy with some fields, or some fields of its parts (`stopping={"targets": ()}`)."""
        changes = {k: dataclasses.replace(getattr(self, k), **v) if isinstance(v, dict) else v
                   for k, v in parts.items()}
        return dataclasses.replace(self, **changes)


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


def group_spec(cfg: Config, batch_size: int, data_shards: int) -> tuple[GroupSpec, Arithmetic]:
    """The program of `cfg`'s runs at `batch_size`, and their arithmetic."""
    arith = for_config(cfg, batch_size, data_shards)
    try:
        layout = GroupLayout.choose(batch_size, cfg.batch.accumulation, data_shards, cfg.gns.groups,
                                    cfg.gns.enabled)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    g = cfg.gns
    if g.enabled and g.hessian_every and layout.num_groups < 2:
        raise ConfigError(f"gns.hessian_every: got {g.hessian_every}, but batch size "
                          f"{batch_size} cannot be split into 2 or more groups; expected 0 here")
    spec = GroupSpec(
        data=DataSpec(batch_size, layout, arith.num_examples, cfg.batch.drop_last),
        optimizer=cfg.optimizer.name, total_steps=arith.total_steps,
        chunk_steps=cfg.train.chunk_for(arith.total_steps),
        schedule=LRSchedule(cfg.schedule.name, arith.warmup_steps, cfg.schedule.final_fraction,
                            arith.decay_steps, cfg.schedule.decay[1]),
        stopping=Stopping(tuple(parse_target(t) for t in cfg.targets), cfg.train.stop_at_targets,
                          cfg.train.divergence_factor, cfg.reached.reach,
                          cfg.reading_extension),
        noise=NoiseSpec(g.enabled, g.ema_decay, g.hessian_every if g.enabled else 0, g.every,
                        g.enabled and g.preconditioned),
        evaluation=EvalSpec(cfg.eval.every, cfg.eval.points_per_decade, cfg.eval.ema_decay),
        repack=cfg.train.repack, precision=cfg.train.precision)
    return spec, arith
