"""The sweep configuration as typed dataclasses: one per YAML section, defaults included.

Parsing lives in scaling.config.load, the checks in scaling.config.validate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from scaling.config import targets as targets_mod
from scaling.config.names import WSD_DECAY_FRACTION
from scaling.config.batch import BatchConfig, BatchScheduleConfig  # noqa: F401 (the schema's)
from scaling.config.optimizer import AXES, OptimizerConfig, grid_axes  # noqa: F401 (the schema's)


@dataclass
class TaskConfig:
    """Which workload; `options` holds the task's own typed options (see scaling.tasks)."""

    name: str = "mnist1d"
    options: Any = None


@dataclass
class ModelConfig:
    """Network shape. Each task accepts some model names; "default" picks the task's own.

    mlp: hidden widths. cnn: channels (and on images dense, the widths between the convolutions
    and the output). resnet: depth (6n + 2). norm (cnn, resnet): none, layer, group or batch
    (ghost batch norm over slices of ghost_size examples); default: none for cnn, group for
    resnet. transformer: d_model, num_layers, num_heads. gpt (scaling.tasks.gpt): those, or a
    `preset` by name that gives them (the three given beside it override it), `positions`
    (rotary or learned) and `remat` (none, full or dots).

    name may also be the import path of a flax module, `package.module:Class`, for the tasks
    that accept outside models (docs/tasks.md); the section's other keys are then its keyword
    arguments (`kwargs`) and the fields below are unused.
    """

    name: str = "default"
    hidden: list[int] = field(default_factory=lambda: [128, 128])
    channels: list[int] = field(default_factory=lambda: [16, 32])
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    dense: list[int] = field(default_factory=list)
    depth: int = 20
    norm: str = "default"
    ghost_size: int = 32
    preset: str | None = None
    positions: str = "rotary"
    remat: str = "none"
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class ScheduleConfig:
    """Learning-rate shape over a run; warm-up is a fraction of the run's total steps. A wsd
    schedule (warm-up, stable, decay) decays over its last `decay_fraction` of the run's steps
    (default 0.2) by `decay_shape` (linear, cosine or sqrt; default linear)."""

    name: str = "constant"
    warmup_fraction: float = 0.0
    warmup_steps: int | None = None
    final_fraction: float = 0.0
    decay_fraction: float | None = None
    decay_shape: str | None = None

    @property
    def decay(self) -> tuple[float, str]:
        """A wsd schedule's (decay fraction, shape), defaults filled in; (0, linear) otherwise."""
        if self.name != "wsd":
            return 0.0, "linear"
        fraction = WSD_DECAY_FRACTION if self.decay_fraction is None else self.decay_fraction
        return fraction, self.decay_shape or "linear"


@dataclass
class LearningRateConfig:
    """Learning rates per batch size: an explicit or log-spaced grid, one from a rule, or a
    log grid centred on the rule's prediction (mode: centered: `num` points spanning `span`x
    either side).

    search (grid and centred modes; false or off: none): after the first grid, rounds of new
    learning rates per batch size until each target's best has a neighbour on each side
    within a factor `resolution` of each other, or `max_rounds` rounds; a walk down from the
    grid's low edge stops at `floor` (default: the first grid's lowest / 100)
    (scaling.sweep.search, docs/sweeps.md).

    first_grid (with the search): grid, every batch size starts from the whole first grid;
    neighbours, only the middle batch size does, and the others, released outward as their
    neighbours' searches end, start from `neighbour_rates` rates around each target's optimum
    those predict, `neighbour_spacing` apart (default 1.1, one lattice step; null: the first
    grid's factor), and walk outward by that spacing (scaling.sweep.neighbours).
    """

    mode: str = "grid"
    values: list[float] | None = None
    min: float | None = None
    max: float | None = None
    num: int | None = None
    rule: str = "linear"
    batch_ref: int | None = None
    lr_ref: float | None = None
    eps_max: float | None = None
    b_noise: float | None = None
    eta_max: float | None = None
    b_peak: float | None = None
    span: float | None = None
    search: bool = True
    resolution: float = 1.25
    max_rounds: int = 5
    floor: float | None = None
    first_grid: str = "grid"
    neighbour_rates: int = 3
    neighbour_spacing: float | None = 1.1

    @property
    def searched(self) -> bool:
        """Whether rounds of learning rates follow the first grid (a rule gives one rate)."""
        return self.search and self.mode in ("grid", "centered")


@dataclass
class BudgetConfig:
    """Limits on one run; the first one reached ends it. Examples are the natural unit.

    reading_extension: a run at its batch size's best learning rate whose reading window
    (reached.window) runs past the budget trains on until the window closes, up to this many
    times the budget; false, off or 1: none, and such a run is read with the window clipped
    at the budget, flagged (scaling.config.targets).

    cooldowns: smaller budgets in the unit of the one limit set, read from the same runs
    under a wsd schedule: each run trains its stable phase once, to the largest budget, and
    each smaller budget's decay branches from the state saved where that budget's decay
    starts (scaling.sweep.cooldown; a scale sweep over the budget, one cell per budget).
    """

    max_steps: int | None = None
    max_examples: int | None = None
    max_epochs: float | None = None
    max_tokens: int | None = None
    reading_extension: float | bool = 1.5
    cooldowns: list[float] | None = None

    @property
    def extension_factor(self) -> float:
        """How far past the budget a reading may extend a run, as a factor (1: not at all)."""
        return 1.0 if self.reading_extension is False else float(self.reading_extension)

    def limits(self) -> dict[str, float]:
        """The limits that are set, by key (max_steps, max_examples, max_epochs, max_tokens)."""
        return {k: v for k in LIMITS if (v := getattr(self, k)) is not None}


LIMITS = ("max_steps", "max_examples", "max_epochs", "max_tokens")


@dataclass
class EvalConfig:
    """When to evaluate: geometric spacing for steps-to-target resolution plus a fixed cadence.

    ema_decay: also evaluate an exponential moving average of the parameters with this decay
    per step (bias-corrected), recorded as eval_loss_ema etc.; null: off.
    """

    every: int | None = None
    points_per_decade: int = 20
    examples: int | None = None
    ema_decay: float | None = None


@dataclass
class ReachedConfig:
    """When a run counts as having reached a target (scaling.config.targets): rule first, sustained,
    smoothed or ema, and the window factor of sustained and smoothed."""

    rule: str = targets_mod.DEFAULT_RULE
    window: float = targets_mod.DEFAULT_WINDOW

    @property
    def reach(self) -> targets_mod.Reach:
        return targets_mod.Reach(self.rule, self.window)


@dataclass
class AnalysisConfig:
    """How the analysis picks each batch size's learning rate: min (the fewest mean steps over
    seeds) or crossfit (chosen on the other seeds, measured on each held-out seed); how its
    intervals resample the seeds: jackknife (leave one seed out, Student's t) or percentile
    (a bootstrap's percentiles) (scaling.analysis.intervals), for B_crit, the schedules'
    ratios and the fixed-budget optima alike. surge_rule: fit the surge rule
    to the optima (null: for adaptive optimizers only, whose optimum can fall at large batches).

    view: steps (steps to each target), fixed_budget (the final `metric` at the budget per
    batch size and learning rate, its optima; targets may be empty) or both. fixed_budget and
    both train every run to the end of its budget (train.stop_at_targets is set false).
    """

    lr_selection: str = "crossfit"
    interval: str = "jackknife"
    surge_rule: bool | None = None
    view: str = "steps"
    metric: str = "eval_loss"


@dataclass
class TrainConfig:
    """Engine knobs: chunking, stopping rules, memory, precision.

    repack: at chunk boundaries, cut a group down to its still-running runs once they fit half
    its width (fewer FLOPs, but a new width's chunk to compile): true cuts whenever they fit,
    false never; auto cuts only where the training seconds the narrower chunks save over the
    chunks left (an upper bound: runs may stop sooner) exceed the compile seconds the batch
    size's chunks took, a width already compiled being free, and starts a group padded to a
    wider width already trained at where the padding costs less than a compile. A run's
    numbers depend on its width at float rounding, so auto, deciding from measured times,
    does not repeat them exactly; true and false do.
    memory_limit_gb: device memory to plan groups for (default: what the device reports;
    CPU reports none); groups are cut so a compiled chunk fits (scaling.train.memory).
    precision: float32, bfloat16 (matmuls and activations; parameters, optimizer state,
    gradient statistics and loss reductions stay float32) or auto (bfloat16 on GPU and TPU,
    float32 on CPU). Unlike the other knobs here it changes results, so a folder keeps one.
    checkpoint_minutes: save a training group's whole state at the first chunk boundary after
    this many minutes (0: never), under <out>/checkpoints/; a sweep started again resumes the
    group there, with exactly the metrics an uninterrupted group gives.
    keep_checkpoints: keep a group's checkpoints after it finishes (else they are removed).
    min_chunks: a run shorter than chunk_steps x min_chunks steps trains in shorter chunks, at
    least min_chunks of them (1: chunk_steps whatever the length), so that what is decided at a
    chunk boundary and acts one chunk later (stopping a dominated run, a repack) costs at most
    1/min_chunks of its budget; results do not depend on it.
    fsdp: split each run's parameters and optimizer state over this many devices
    (scaling.train.fsdp); the batch then splits over data x fsdp.
    stop_dominated: at chunk boundaries, stop a run that can no longer be its batch size's best
    learning rate at any target it has not yet decided: a lower bound of its learning rate's
    mean steps exceeds the best's by more than dominated_margin (relative); at a target still
    open the best and its neighbours never stop (scaling.sweep.stopping.dominated).
    peak_tflops: one device's peak TFLOP/s at the compute precision, for MFU on a device whose
    published peak the table in scaling.train.throughput lacks (none: no MFU there, as on CPU).
    """

    chunk_steps: int = 100
    divergence_factor: float = 10.0
    stop_at_targets: bool = True
    max_group_size: int | None = None
    repack: bool | str = True
    memory_limit_gb: float | None = None
    precision: str = "auto"
    checkpoint_minutes: float = 5.0
    keep_checkpoints: bool = False
    stop_dominated: bool = True
    dominated_margin: float = 0.1
    min_chunks: int = 16
    peak_tflops: float | None = None
    fsdp: int = 1

    def chunk_for(self, total_steps: int) -> int:
        """The chunk length of runs of `total_steps` steps: chunk_steps, cut so that the runs
        have at least min_chunks chunks, since a stop decided at a chunk boundary (a dominated
        run, a repack) acts one chunk later."""
        return min(self.chunk_steps, max(1, math.ceil(total_steps / self.min_chunks)))


@dataclass
class DataConfig:
    """Where the training set lives while a group trains (results are the same either way).

    placement: device (the whole set on every device, gathered there each step), host (each
    chunk's batches gathered on the host from the task's arrays, memory-mapped where the files
    allow, and transferred while the previous chunk trains), or auto (host when the set would
    take more than a quarter of the device's memory limit, else device).
    """

    placement: str = "auto"


@dataclass
class ParallelConfig:
    """Mesh shape: data-parallel shards per run and device groups for independent runs."""

    data: int | None = None
    runs: int = 1


@dataclass
class GNSConfig:
    """Gradient-noise-scale measurement inside every step (docs/noise-scale.md).

    every: measure on every N-th step only (plain full-batch steps between; the moving
    average's decay per measurement is ema_decay**every, so it spans the same steps).
    preconditioned: also measure in Adam's metric (adam/adamw only).
    """

    enabled: bool = True
    groups: int | None = None
    ema_decay: float = 0.95
    hessian_every: int = 0
    every: int = 1
    preconditioned: bool = False


@dataclass
class BranchConfig:
    """`scaling branch` (docs/branching.md): a base run at batch_size, branched at points along
    training into runs at k x batch_size for each k in factors (learning rate by lr_rule from
    the base's, times each lr_grid factor), each for `window` examples; the local critical
    batch size at a point is the largest k x batch_size whose every smaller factor's `metric`
    keeps within `tolerance` (relative) of the base's, continued (Merrill et al. 2025).

    batch_size: B0 (default: the smallest of batch.sizes); learning_rate: the base's (default:
    the config's only learning rate at B0). points: examples at which to branch, each moved to
    the nearest chunk boundary of the base (train.chunk_steps); else num_points log-spaced from
    1% of the base's steps to the last point a window fits after. window: examples per branch
    (default a tenth of the budget), rounded to a whole number of steps at every factor and
    evaluation point. evals: evaluation points per window; average: how many of the last ones
    the compared metric averages.
    """

    batch_size: int | None = None
    learning_rate: float | None = None
    points: list[int] = field(default_factory=list)
    num_points: int = 5
    factors: list[int] = field(default_factory=lambda: [2, 4, 8, 16])
    lr_rule: str = "linear"
    lr_grid: list[float] = field(default_factory=lambda: [1.0])
    window: int | None = None
    tolerance: float = 0.01
    metric: str = "eval_loss"
    evals: int = 4
    average: int = 1


@dataclass
class WandbConfig:
    """One Weights & Biases run per training run, the sweep as its group (off while project is
    null). mode: online, or offline (files under <out>/wandb/, for `wandb sync` later)."""

    project: str | None = None
    entity: str | None = None
    group: str | None = None  # default: the sweep's name
    mode: str = "online"
    tags: list[str] = field(default_factory=list)


@dataclass
class LogConfig:
    """Experiment trackers fed from the metrics rows each chunk already returns (no extra
    device reads): W&B, and TensorBoard event files under <out>/tensorboard/<run_id>/."""

    wandb: WandbConfig = field(default_factory=WandbConfig)
    tensorboard: bool = False


@dataclass
class Config:
    """A whole study: one task and model, a grid of batch sizes x learning rates x seeds."""

    name: str = "study"
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)
    learning_rate: LearningRateConfig = field(default_factory=LearningRateConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    targets: list[str] = field(default_factory=list)
    reached: ReachedConfig = field(default_factory=ReachedConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    seeds: list[int] = field(default_factory=lambda: [0])
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    gns: GNSConfig = field(default_factory=GNSConfig)
    log: LogConfig = field(default_factory=LogConfig)
    branch: BranchConfig = field(default_factory=BranchConfig)
    scale: dict[str, list[Any]] = field(default_factory=dict)  # key -> values (config.scale)
    cell: dict[str, Any] | None = None  # which cell of a scale sweep this folder is

    @property
    def reading_extension(self) -> float:
        """The factor of its budget a run may go on to, to confirm a crossed target's reading:
        budget.reading_extension where runs stop at their targets and the reading needs more
        than the crossing, else 1 (runs train to the end, a reading cut off there is clipped;
        or the first crossing is the reading)."""
        stops = bool(self.targets) and self.train.stop_at_targets and self.reached.rule != "first"
        return self.budget.extension_factor if stops else 1.0
