"""Typed sweep configuration: YAML in, validated dataclasses out, `section.key=value` overrides.

Every mistake a user can make in a config is caught here, before any compute, with one message
that names the key, the bad value and what would be accepted (DESIGN.md section 7).
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scaling import targets as targets_mod


class ConfigError(ValueError):
    """A config value that cannot be used; the message names key, value and what is accepted."""


OPTIMIZERS = ("sgd", "momentum", "nesterov", "adam", "adamw")
SCHEDULES = ("constant", "linear", "cosine")
LR_MODES = ("grid", "rule", "centered")
LR_RULES = ("linear", "sqrt", "constant", "noise_scale")
METRICS = ("train_loss", "eval_loss", "eval_accuracy")
LR_SELECTIONS = ("min", "crossfit")


class _YAMLLoader(yaml.SafeLoader):
    """safe_load that reads 1e-3 as a float, as YAML 1.2 does (PyYAML alone gives the string)."""


_YAMLLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def _yaml_load(text: str) -> Any:
    return yaml.load(text, Loader=_YAMLLoader)  # noqa: S506 (a SafeLoader subclass)


@dataclass
class TaskConfig:
    """Which workload; `options` holds the task's own typed options (see scaling.tasks)."""

    name: str = "mnist1d"
    options: Any = None


@dataclass
class ModelConfig:
    """Network shape. Each task accepts some model names; "default" picks the task's own."""

    name: str = "default"
    hidden: list[int] = field(default_factory=lambda: [128, 128])
    channels: list[int] = field(default_factory=lambda: [16, 32])
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4


@dataclass
class OptimizerConfig:
    """Optimizer family and its scalars; the scalars are data (vmapped), the family is not.

    momentum, weight_decay and b2 may each be a list: a grid axis (every combination of the
    listed values is a run, next to the learning rates and seeds; see `grid_axes`).
    """

    name: str = "sgd"
    momentum: float | list[float] = 0.9
    weight_decay: float | list[float] = 0.0
    b1: float = 0.9
    b2: float | list[float] = 0.999
    eps: float = 1e-8


# Optimizer scalars that may be grid axes: each with its run-id label and its accepted range.
AXES: dict[str, tuple[str, Any, str]] = {
    "momentum": ("mom", lambda v: 0 <= v < 1, "0 <= momentum < 1"),
    "weight_decay": ("wd", lambda v: v >= 0, ">= 0"),
    "b2": ("b2", lambda v: 0 <= v < 1, "0 <= b2 < 1"),
}


def grid_axes(o: OptimizerConfig) -> dict[str, list[float]]:
    """The list-valued optimizer scalars, in AXES order: the grid's extra axes."""
    return {k: getattr(o, k) for k in AXES if isinstance(getattr(o, k), list)}


@dataclass
class ScheduleConfig:
    """Learning-rate shape over a run; warm-up is a fraction of the run's total steps."""

    name: str = "constant"
    warmup_fraction: float = 0.0
    warmup_steps: int | None = None
    final_fraction: float = 0.0


@dataclass
class BatchConfig:
    """Global batch sizes (examples or sequences per update) and how each step is split."""

    sizes: list[int] = field(default_factory=lambda: [128])
    accumulation: int = 1
    drop_last: bool = False


@dataclass
class LearningRateConfig:
    """Learning rates per batch size: an explicit or log-spaced grid, one from a rule, or a
    log grid centred on the rule's prediction that the sweep extends when the optimum is at
    an edge (mode: centered: `num` points spanning `span`x either side, at most
    `max_extensions` extensions per batch size)."""

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
    span: float | None = None
    max_extensions: int = 2


@dataclass
class BudgetConfig:
    """Limits on one run; the first one reached ends it. Examples are the natural unit."""

    max_steps: int | None = None
    max_examples: int | None = None
    max_epochs: float | None = None
    max_tokens: int | None = None


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
    """When a run counts as having reached a target (scaling.targets): rule first, sustained,
    smoothed or ema, and the window factor of sustained and smoothed."""

    rule: str = targets_mod.DEFAULT_RULE
    window: float = targets_mod.DEFAULT_WINDOW

    @property
    def reach(self) -> targets_mod.Reach:
        return targets_mod.Reach(self.rule, self.window)


@dataclass
class AnalysisConfig:
    """How the analysis picks each batch size's learning rate: min (the fewest mean steps over
    seeds) or crossfit (chosen on the other seeds, measured on each held-out seed)."""

    lr_selection: str = "min"


@dataclass
class TrainConfig:
    """Engine knobs that do not change results: chunking and stopping rules.

    repack: at chunk boundaries, cut a group down to its still-running runs (fewer FLOPs).
    memory_limit_gb: device memory to plan groups for (default: what the device reports;
    CPU reports none); groups are cut so a compiled chunk fits (scaling.memory).
    """

    chunk_steps: int = 100
    divergence_factor: float = 10.0
    stop_at_targets: bool = True
    max_group_size: int | None = None
    repack: bool = True
    memory_limit_gb: float | None = None


@dataclass
class ParallelConfig:
    """Mesh shape: data-parallel shards per run and device groups for independent runs."""

    data: int | None = None
    runs: int = 1


@dataclass
class GNSConfig:
    """Gradient-noise-scale measurement inside every step (DESIGN.md section 3).

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
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    gns: GNSConfig = field(default_factory=GNSConfig)


# ---------------------------------------------------------------- typed parsing


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is list:
        inner = typing.get_args(tp)[0]
        plural = {int: "integers", float: "numbers", str: "strings", bool: "true/false values"}
        return f"a list of {plural.get(inner) or _type_name(inner)}"
    return {int: "an integer", float: "a number", str: "a string", bool: "true/false",
            type(None): "null"}.get(tp, getattr(tp, "__name__", str(tp)))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check `value` against the type hint `tp`; ints are accepted where floats are."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            try:
                return _coerce(value, arg, key)
            except ConfigError:
                continue
    elif origin is list:
        if isinstance(value, list):
            (inner,) = typing.get_args(tp)
            return [_coerce(v, inner, f"{key}[{i}]") for i, v in enumerate(value)]
    elif tp is type(None):
        if value is None:
            return None
    elif tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    raise ConfigError(f"{key}: got {value!r}, expected {_type_name(tp)}")


def build(cls: type, data: Any, prefix: str) -> Any:
    """Build dataclass `cls` from a mapping, rejecting unknown keys and wrong types."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'config'}: got {data!r}, expected a mapping of keys")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(
            f"{prefix + '.' if prefix else ''}{unknown[0]}: unknown key; accepted keys: "
            f"{', '.join(names)}")
    kwargs = {}
    for name in names:
        if name not in data:
            continue
        key = f"{prefix}.{name}" if prefix else name
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            kwargs[name] = build(tp, data[name], key)
        else:
            kwargs[name] = _coerce(data[name], tp, key)
    return cls(**kwargs)


def _build_task(data: Any) -> TaskConfig:
    """The task section: `name` plus that task's own options, typed by the task registry."""
    from scaling.tasks import TASKS

    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"task: got {data!r}, expected a mapping of name and the task's options")
    data = dict(data or {})
    name = data.pop("name", TaskConfig.name)
    if name not in TASKS:
        raise ConfigError(f"task.name: got {name!r}, expected one of {', '.join(sorted(TASKS))}")
    return TaskConfig(name=name, options=build(TASKS[name].Options, data, "task"))


def from_dict(data: dict) -> Config:
    """Validated Config from a plain mapping (the parsed YAML plus overrides)."""
    if not isinstance(data, dict):
        raise ConfigError(f"config: got {data!r}, expected a mapping of sections")
    data = dict(data)
    task = _build_task(data.pop("task", None))
    cfg = build(Config, data, "")
    cfg.task = task
    validate(cfg)
    return cfg


def to_dict(cfg: Config) -> dict:
    """Plain-data form of a config (task options flattened back into the task section)."""
    out = dataclasses.asdict(dataclasses.replace(cfg, task=TaskConfig()))
    out["task"] = {"name": cfg.task.name, **dataclasses.asdict(cfg.task.options)}
    return out


def to_yaml(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def to_json(cfg: Config) -> str:
    return json.dumps(to_dict(cfg), indent=2)


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply `section.key=value` strings; values are parsed as YAML (`[8, 16]`, `1e-3`, `true`)."""
    if not isinstance(data, dict):
        raise ConfigError(f"config: got {data!r}, expected a mapping of sections")
    data = json.loads(json.dumps(data))
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected section.key=value")
        path, raw = item.split("=", 1)
        try:
            value = _yaml_load(raw)
        except yaml.YAMLError as err:
            raise ConfigError(f"override {item!r}: {raw!r} is not a YAML value; expected e.g. "
                              f"0.1, 1e-3, true, adam or [8, 16] ({err.__class__.__name__})") from None
        node = data
        parts = path.strip().split(".")
        for part in parts[:-1]:
            if node.get(part) is None:  # a section left empty in the YAML reads as null
                node[part] = {}
            node = node[part]
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {part} is not a section")
        node[parts[-1]] = value
    return data


def load(path: str | Path, overrides: list[str] | None = None) -> Config:
    """Read a YAML config (safe_load), apply overrides, validate."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        data = _yaml_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {str(path)!r}: not valid YAML: {err}") from None
    return from_dict(apply_overrides(data or {}, overrides or []))


# ---------------------------------------------------------------- validation


def _need(ok: bool, key: str, value: Any, accepted: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: got {value!r}, expected {accepted}")


def parse_target(text: str) -> tuple[str, str, float]:
    """'eval_loss<=0.5' -> ('eval_loss', '<=', 0.5)."""
    try:
        metric, op, value = targets_mod.parse_target(text)
    except ValueError:
        raise ConfigError(f"targets: got {text!r}, expected METRIC<=VALUE or METRIC>=VALUE, "
                          "e.g. eval_loss<=0.5") from None
    _need(metric in METRICS, "targets", text, f"a metric among {', '.join(METRICS)}")
    return metric, op, value


def _validate_reached(cfg: Config) -> None:
    r = cfg.reached
    _need(r.rule in targets_mod.RULES, "reached.rule", r.rule, f"one of {', '.join(targets_mod.RULES)}")
    _need(r.window > 1, "reached.window", r.window,
          "a number > 1 (the window spans step/window .. step*window)")
    _need(r.rule != "ema" or cfg.eval.ema_decay is not None, "reached.rule", r.rule,
          "first, sustained or smoothed while eval.ema_decay is null (rule ema reads the "
          "metrics of the parameters' moving average: set eval.ema_decay, e.g. 0.99)")
    _need(cfg.analysis.lr_selection in LR_SELECTIONS, "analysis.lr_selection",
          cfg.analysis.lr_selection, f"one of {', '.join(LR_SELECTIONS)}")


def learning_rates(lr: LearningRateConfig, batch_size: int) -> list[float]:
    """The learning rates one batch size trains with, from the learning_rate section."""
    if lr.mode == "grid":
        if lr.values is not None:
            return list(lr.values)
        import numpy as np

        return [float(v) for v in np.geomspace(lr.min, lr.max, lr.num)]
    if lr.mode == "centered":
        return [centered_lr(lr, batch_size, k) for k in range(lr.num)]
    return [_rule_lr(lr, batch_size)]


def _rule_lr(lr: LearningRateConfig, batch_size: int) -> float:
    from scaling.rules import scaled_lr

    return scaled_lr(lr.rule, batch_size, lr.batch_ref, lr.lr_ref, lr.eps_max, lr.b_noise)


def centered_lr(lr: LearningRateConfig, batch_size: int, k: int) -> float:
    """Point k of the centred log grid; k < 0 or k >= num are extensions with the same spacing.

    Points 0 and num-1 sit at prediction / span and prediction * span.
    """
    exponent = (2 * k - (lr.num - 1)) / (lr.num - 1)
    return _rule_lr(lr, batch_size) * lr.span ** exponent


def _validate_lr(lr: LearningRateConfig, sizes: list[int]) -> None:
    _need(lr.mode in LR_MODES, "learning_rate.mode", lr.mode, f"one of {', '.join(LR_MODES)}")
    _need(lr.mode == "centered" or lr.span is None, "learning_rate.span", lr.span,
          "unset except with mode: centered")
    if lr.mode == "grid":
        if lr.values is not None:
            _need(len(lr.values) > 0 and all(v > 0 for v in lr.values), "learning_rate.values",
                  lr.values, "a non-empty list of positive numbers")
            _need((lr.min, lr.max, lr.num) == (None, None, None), "learning_rate.values", lr.values,
                  "either values or a min/max/num range, not both")
        else:
            ok = None not in (lr.min, lr.max, lr.num)
            _need(ok, "learning_rate", "values/min/max/num unset",
                  "either values: [...] or min, max and num for a log-spaced grid")
            _need(0 < lr.min <= lr.max, "learning_rate.min", lr.min, "0 < min <= max")
            _need(lr.num >= 1, "learning_rate.num", lr.num, "an integer >= 1")
        return
    _need(lr.rule in LR_RULES, "learning_rate.rule", lr.rule, f"one of {', '.join(LR_RULES)}")
    if lr.mode == "centered":
        _validate_centered(lr)
    else:
        _need((lr.values, lr.min, lr.max, lr.num) == (None,) * 4, "learning_rate.values",
              lr.values, "unset with mode: rule (the rule gives each batch size its learning rate)")
    if lr.rule == "noise_scale":
        _need(lr.eps_max is not None and lr.eps_max > 0, "learning_rate.eps_max", lr.eps_max,
              "a positive number for the noise_scale rule")
        _need(lr.b_noise is not None and lr.b_noise > 0, "learning_rate.b_noise", lr.b_noise,
              "a positive number for the noise_scale rule")
    else:
        _need(lr.lr_ref is not None and lr.lr_ref > 0, "learning_rate.lr_ref", lr.lr_ref,
              "a positive number (the learning rate at batch_ref)")
        _need(lr.batch_ref is None or lr.batch_ref > 0, "learning_rate.batch_ref", lr.batch_ref,
              "a positive integer (default: the smallest batch size)")
        if lr.batch_ref is None:
            lr.batch_ref = min(sizes)


def _validate_centered(lr: LearningRateConfig) -> None:
    _need((lr.values, lr.min, lr.max) == (None,) * 3, "learning_rate.values", lr.values,
          "unset with mode: centered (num and span set the grid around the rule's prediction)")
    _need(lr.num is not None and lr.num >= 2, "learning_rate.num", lr.num,
          "an integer >= 2 with mode: centered (points in each batch size's grid)")
    _need(lr.span is not None and lr.span > 1, "learning_rate.span", lr.span,
          "a number > 1 with mode: centered (the grid spans prediction/span to prediction*span)")
    _need(lr.max_extensions >= 0, "learning_rate.max_extensions", lr.max_extensions,
          "an integer >= 0 (extensions of a batch size's grid when its optimum is at an edge)")


def validate(cfg: Config) -> None:
    """Checks that need no devices; `validate_devices` adds the ones that do."""
    from scaling.tasks import TASKS

    task = TASKS[cfg.task.name]
    task.validate(cfg)
    _need(cfg.optimizer.name in OPTIMIZERS, "optimizer.name", cfg.optimizer.name,
          f"one of {', '.join(OPTIMIZERS)}")
    _validate_axes(cfg)
    _need(0 <= cfg.optimizer.b1 < 1, "optimizer.b1", cfg.optimizer.b1, "0 <= b1 < 1")
    _need(cfg.optimizer.eps > 0, "optimizer.eps", cfg.optimizer.eps, "> 0")
    s = cfg.schedule
    _need(s.name in SCHEDULES, "schedule.name", s.name, f"one of {', '.join(SCHEDULES)}")
    _need(0 <= s.warmup_fraction < 1, "schedule.warmup_fraction", s.warmup_fraction, "0 <= fraction < 1")
    _need(s.warmup_steps is None or s.warmup_steps >= 0, "schedule.warmup_steps", s.warmup_steps,
          "a non-negative integer or null")
    _need(0 <= s.final_fraction <= 1, "schedule.final_fraction", s.final_fraction, "0 <= fraction <= 1")
    b = cfg.batch
    _need(len(b.sizes) > 0, "batch.sizes", b.sizes, "a non-empty list of positive integers")
    for size in b.sizes:
        _need(size > 0, "batch.sizes", size, "positive integers")
    _need(len(set(b.sizes)) == len(b.sizes), "batch.sizes", b.sizes, "distinct batch sizes")
    _need(b.accumulation >= 1, "batch.accumulation", b.accumulation, "an integer >= 1")
    for size in b.sizes:
        _need(size % b.accumulation == 0, "batch.sizes", size,
              f"a multiple of batch.accumulation={b.accumulation}")
    _validate_lr(cfg.learning_rate, b.sizes)
    _validate_budget(cfg, task)
    for text in cfg.targets:
        metric, _, _ = parse_target(text)
        _need(metric in task.metrics, "targets", text,
              f"a metric task {cfg.task.name} reports: {', '.join(task.metrics)}")
    if cfg.learning_rate.mode == "centered" and cfg.learning_rate.max_extensions > 0:
        _need(bool(cfg.targets), "targets", cfg.targets, "at least one target with "
              "learning_rate.mode: centered (the first one decides where the grid extends), "
              "or learning_rate.max_extensions: 0")
    _need(len(cfg.seeds) > 0, "seeds", cfg.seeds, "a non-empty list of integers")
    _need(len(set(cfg.seeds)) == len(cfg.seeds), "seeds", cfg.seeds, "distinct seeds")
    e = cfg.eval
    _need(e.every is None or e.every > 0, "eval.every", e.every, "a positive integer or null")
    _need(e.points_per_decade >= 0, "eval.points_per_decade", e.points_per_decade, ">= 0")
    _need(e.examples is None or e.examples > 0, "eval.examples", e.examples, "a positive integer or null")
    _need(e.ema_decay is None or 0 < e.ema_decay < 1, "eval.ema_decay", e.ema_decay,
          "a number with 0 < decay < 1 or null (off)")
    _validate_reached(cfg)
    t = cfg.train
    _need(t.chunk_steps > 0, "train.chunk_steps", t.chunk_steps, "a positive integer")
    _need(t.divergence_factor > 1, "train.divergence_factor", t.divergence_factor, "a number > 1")
    _need(t.max_group_size is None or t.max_group_size > 0, "train.max_group_size",
          t.max_group_size, "a positive integer or null")
    _need(t.memory_limit_gb is None or t.memory_limit_gb > 0, "train.memory_limit_gb",
          t.memory_limit_gb, "a positive number of gigabytes or null (the device's own limit)")
    _need(cfg.parallel.data is None or cfg.parallel.data > 0, "parallel.data", cfg.parallel.data,
          "a positive integer or null (all devices)")
    _need(cfg.parallel.runs > 0, "parallel.runs", cfg.parallel.runs, "a positive integer")
    _need(cfg.gns.groups is None or cfg.gns.groups >= 2, "gns.groups", cfg.gns.groups,
          "an integer >= 2 or null (automatic)")
    _need(0 <= cfg.gns.ema_decay < 1, "gns.ema_decay", cfg.gns.ema_decay, "0 <= decay < 1")
    _need(cfg.gns.hessian_every >= 0, "gns.hessian_every", cfg.gns.hessian_every,
          "0 (off) or a positive integer: measure B_noise every K evaluation points")
    _need(cfg.gns.every >= 1, "gns.every", cfg.gns.every,
          "a positive integer: measure on every N-th step (1: every step)")
    _need(not cfg.gns.preconditioned or cfg.optimizer.name in ("adam", "adamw"), "gns.preconditioned",
          cfg.gns.preconditioned, f"false for optimizer {cfg.optimizer.name} (true needs adam or adamw)")
    _need(not cfg.gns.preconditioned or cfg.gns.enabled, "gns.preconditioned", cfg.gns.preconditioned,
          "false while gns.enabled is false")


def _validate_axes(cfg: Config) -> None:
    """Each of momentum, weight_decay, b2: a number in range, or a list of them that the
    optimizer uses (a list is a grid axis, and its values become part of the run ids)."""
    from scaling.optimizers import HYPERPARAMS

    o = cfg.optimizer
    for name, (_, ok, accepted) in AXES.items():
        key, value = f"optimizer.{name}", getattr(o, name)
        if not isinstance(value, list):
            _need(ok(value), key, value, accepted)
            continue
        _need(len(value) > 0, key, value, f"a number or a non-empty list of numbers ({accepted})")
        _need(name in HYPERPARAMS[o.name], key, value,
              f"a single number: optimizer {o.name} does not use {name}, so it cannot be a "
              f"grid axis (a list); {name} is used by "
              + ", ".join(n for n, used in HYPERPARAMS.items() if name in used))
        for i, v in enumerate(value):
            _need(ok(v), f"{key}[{i}]", v, accepted)
        _need(len({f"{v:.6g}" for v in value}) == len(value), key, value,
              "distinct values (to 6 significant digits, as run ids show them)")
        _need(cfg.learning_rate.mode != "centered", key, value,
              "a single number with learning_rate.mode: centered (a centred grid extends at "
              "the best learning rate of each batch size, over all of its runs)")


def _validate_budget(cfg: Config, task: Any) -> None:
    bud = cfg.budget
    limits = {k: getattr(bud, k) for k in ("max_steps", "max_examples", "max_epochs", "max_tokens")}
    set_limits = {k: v for k, v in limits.items() if v is not None}
    _need(bool(set_limits), "budget", "no limit set",
          "at least one of max_steps, max_examples, max_epochs, max_tokens")
    for key, value in set_limits.items():
        _need(value > 0, f"budget.{key}", value, "a positive number")
    finite = task.finite_data
    if not finite:
        _need(bud.max_epochs is None, "budget.max_epochs", bud.max_epochs,
              f"null: task {cfg.task.name} samples fresh data and has no epochs")
    if task.tokens_per_example(cfg.task.options) is None:
        _need(bud.max_tokens is None, "budget.max_tokens", bud.max_tokens,
              f"null: task {cfg.task.name} has no tokens")
    for size in cfg.batch.sizes:
        if bud.max_examples is not None:
            _need(bud.max_examples >= size, "budget.max_examples", bud.max_examples,
                  f"at least one batch (>= {size} for batch size {size})")


def validate_devices(cfg: Config, num_devices: int) -> tuple[int, int]:
    """Mesh shape (runs, data) for this many devices; batches must split over data x accumulation."""
    p = cfg.parallel
    _need(num_devices % p.runs == 0, "parallel.runs", p.runs, f"a divisor of the {num_devices} devices")
    data = p.data if p.data is not None else num_devices // p.runs
    _need(data * p.runs == num_devices, "parallel.data", p.data,
          f"runs x data = {num_devices} devices (runs={p.runs})")
    for size in cfg.batch.sizes:
        unit = data * cfg.batch.accumulation
        _need(size % unit == 0, "batch.sizes", size,
              f"a multiple of data shards x accumulation = {data} x {cfg.batch.accumulation} = {unit}")
    return p.runs, data
