"""Every check a config needs before compute; each failure is one ConfigError naming the key,
the bad value and what would be accepted."""

from __future__ import annotations

import importlib.util
from typing import Any

from scaling.config import names, targets as targets_mod
from scaling.config.optimizer_rules import validate_rules
from scaling.config.schema import AXES, Config, EvalConfig, LearningRateConfig, ScheduleConfig
from scaling.config.validate_batch import validate_batch, validate_branch, validate_schedules
from scaling.errors import ConfigError, need
from scaling.tasks import task_class


def parse_target(text: str) -> tuple[str, str, float]:
    """'eval_loss<=0.5' -> ('eval_loss', '<=', 0.5)."""
    try:
        metric, op, value = targets_mod.parse_target(text)
    except ValueError:
        raise ConfigError(f"targets: got {text!r}, expected METRIC<=VALUE or METRIC>=VALUE, "
                          "e.g. eval_loss<=0.5") from None
    need(metric in names.METRICS, "targets", text, f"a metric among {', '.join(names.METRICS)}")
    return metric, op, value


def _validate_reached(cfg: Config) -> None:
    r = cfg.reached
    need(r.rule in names.REACH_RULES, "reached.rule", r.rule,
         f"one of {', '.join(names.REACH_RULES)}")
    need(r.window > 1, "reached.window", r.window,
         "a number > 1 (the window spans step/window .. step*window)")
    need(r.rule != "ema" or cfg.eval.ema_decay is not None, "reached.rule", r.rule,
         "first, sustained or smoothed while eval.ema_decay is null (rule ema reads the "
          "metrics of the parameters' moving average: set eval.ema_decay, e.g. 0.99)")
    need(cfg.analysis.lr_selection in names.LR_SELECTIONS, "analysis.lr_selection",
         cfg.analysis.lr_selection, f"one of {', '.join(names.LR_SELECTIONS)}")
    need(cfg.analysis.interval in names.INTERVAL_METHODS, "analysis.interval",
         cfg.analysis.interval, f"one of {', '.join(names.INTERVAL_METHODS)}")
    need(cfg.analysis.view in names.VIEW_TABLE, "analysis.view", cfg.analysis.view,
         f"one of {', '.join(names.VIEW_TABLE)}")


def _validate_lr(lr: LearningRateConfig, sizes: list[int]) -> None:
    need(lr.mode in names.LR_MODES, "learning_rate.mode", lr.mode,
         f"one of {', '.join(names.LR_MODES)}")
    need(lr.mode == "centered" or lr.span is None, "learning_rate.span", lr.span,
         "unset except with mode: centered")
    _validate_search(lr)
    if lr.mode == "grid":
        if lr.values is not None:
            need(len(lr.values) > 0 and all(v > 0 for v in lr.values), "learning_rate.values",
                 lr.values, "a non-empty list of positive numbers")
            need((lr.min, lr.max, lr.num) == (None, None, None), "learning_rate.values", lr.values,
                 "either values or a min/max/num range, not both")
        else:
            ok = None not in (lr.min, lr.max, lr.num)
            need(ok, "learning_rate", "values/min/max/num unset",
                 "either values: [...] or min, max and num for a log-spaced grid")
            need(0 < lr.min <= lr.max, "learning_rate.min", lr.min, "0 < min <= max")
            need(lr.num >= 1, "learning_rate.num", lr.num, "an integer >= 1")
        return
    need(lr.rule in names.LR_RULES, "learning_rate.rule", lr.rule,
         f"one of {', '.join(names.LR_RULES)}")
    if lr.mode == "centered":
        _validate_centered(lr)
    else:
        need((lr.values, lr.min, lr.max, lr.num) == (None,) * 4, "learning_rate.values",
             lr.values, "unset with mode: rule (the rule gives each batch size its learning rate)")
    _validate_rule_parameters(lr, sizes)


def _validate_rule_parameters(lr: LearningRateConfig, sizes: list[int]) -> None:
    """noise_scale and surge read their own two parameters; the others a reference point."""
    own = {"noise_scale": ("eps_max", "b_noise"), "surge": ("eta_max", "b_peak")}.get(lr.rule)
    if own is not None:
        for key in own:
            value = getattr(lr, key)
            need(value is not None and value > 0, f"learning_rate.{key}", value,
                 f"a positive number for the {lr.rule} rule")
        return
    need(lr.lr_ref is not None and lr.lr_ref > 0, "learning_rate.lr_ref", lr.lr_ref,
         "a positive number (the learning rate at batch_ref)")
    need(lr.batch_ref is None or lr.batch_ref > 0, "learning_rate.batch_ref", lr.batch_ref,
         "a positive integer (default: the smallest batch size)")
    if lr.batch_ref is None:
        lr.batch_ref = min(sizes)


def _validate_search(lr: LearningRateConfig) -> None:
    """The search keys; resolution and floor are checked even with the search off, so turning
    it on later cannot meet a bad value."""
    need(lr.resolution > 1, "learning_rate.resolution", lr.resolution,
         "a number > 1 (the search ends when the best's neighbours are within this factor)")
    need(lr.floor is None or lr.floor > 0, "learning_rate.floor", lr.floor,
         "a positive learning rate or null (the first grid's lowest / 100)")
    need(not lr.searched or lr.max_rounds >= 1, "learning_rate.max_rounds", lr.max_rounds,
         "an integer >= 1 while learning_rate.search is on (or search: off)")
    need(lr.first_grid in names.FIRST_GRIDS, "learning_rate.first_grid", lr.first_grid,
         f"one of {', '.join(names.FIRST_GRIDS)}")
    need(isinstance(lr.neighbour_rates, int) and lr.neighbour_rates >= 1,
         "learning_rate.neighbour_rates", lr.neighbour_rates,
         "an integer >= 1 (the rates of a first grid centred on its neighbours' prediction)")
    need(lr.neighbour_spacing is None or (isinstance(lr.neighbour_spacing, (int, float))
                                          and lr.neighbour_spacing > 1),
         "learning_rate.neighbour_spacing", lr.neighbour_spacing,
         "a factor > 1 or null (the first grid's factor): the ratio between the rates of a "
         "first grid centred on its neighbours' prediction")


def _validate_neighbours(cfg: Config) -> None:
    """The first grid from neighbours needs the search (it goes on from a few rates), and one
    optimum per batch size to extrapolate."""
    lr = cfg.learning_rate
    if lr.first_grid != "neighbours":
        return
    need(lr.searched and bool(cfg.targets), "learning_rate.first_grid", lr.first_grid,
         "grid unless the learning-rate search is on, with targets (the search goes on from "
         "the few rates neighbours predict)")
    listed = [k for k in AXES if isinstance(getattr(cfg.optimizer, k), list)]
    need(not listed, "learning_rate.first_grid", lr.first_grid,
         f"grid while optimizer {', '.join(listed)} is a list (one optimum per batch size is "
         "what neighbours predict from)")


def _validate_centered(lr: LearningRateConfig) -> None:
    need((lr.values, lr.min, lr.max) == (None,) * 3, "learning_rate.values", lr.values,
         "unset with mode: centered (num and span set the grid around the rule's prediction)")
    need(lr.num is not None and lr.num >= 2, "learning_rate.num", lr.num,
         "an integer >= 2 with mode: centered (points in each batch size's grid)")
    need(lr.span is not None and lr.span > 1, "learning_rate.span", lr.span,
         "a number > 1 with mode: centered (the grid spans prediction/span to prediction*span)")


def validate(cfg: Config) -> None:
    """Checks that need no devices, section by section; `validate_devices` adds the ones
    that do."""
    task = task_class(cfg.task.name)
    task.validate(cfg)
    _validate_optimizer(cfg)
    _validate_schedule(cfg.schedule)
    validate_batch(cfg.batch)
    _validate_lr(cfg.learning_rate, cfg.batch.sizes)
    _validate_budget(cfg, task)
    _validate_targets(cfg, task)
    _validate_neighbours(cfg)
    need(len(cfg.seeds) > 0, "seeds", cfg.seeds, "a non-empty list of integers")
    need(len(set(cfg.seeds)) == len(cfg.seeds), "seeds", cfg.seeds, "distinct seeds")
    _validate_eval(cfg.eval)
    _validate_reached(cfg)
    _validate_train(cfg)
    _validate_gns(cfg)
    _validate_data(cfg, task)
    _validate_log(cfg)
    validate_branch(cfg)
    validate_schedules(cfg)


def _validate_log(cfg: Config) -> None:
    """The tracker settings, and that each tracker asked for can be imported (it is optional)."""
    w = cfg.log.wandb
    need(w.mode in names.WANDB_MODES, "log.wandb.mode", w.mode,
         f"one of {', '.join(names.WANDB_MODES)}")
    need(w.project is not None or (w.entity, w.group, w.tags) == (None, None, []),
         "log.wandb.project", None, "a project name while entity, group or tags are set")
    for on, key, module in ((w.project is not None, "log.wandb", "wandb"),
                            (cfg.log.tensorboard, "log.tensorboard", "tensorboardX")):
        need(not on or importlib.util.find_spec(module) is not None, key, "set",
             f"the {module} package installed (pip install {module}, or this package's trackers "
             "extra: pip install -e '.[trackers]'), or the tracker off")


def _validate_optimizer(cfg: Config) -> None:
    need(cfg.optimizer.name in names.OPTIMIZERS, "optimizer.name", cfg.optimizer.name,
         f"one of {', '.join(names.OPTIMIZERS)}")
    _validate_axes(cfg)
    validate_rules(cfg)
    need(0 <= cfg.optimizer.b1 < 1, "optimizer.b1", cfg.optimizer.b1, "0 <= b1 < 1")
    need(cfg.optimizer.eps > 0, "optimizer.eps", cfg.optimizer.eps, "> 0")


def _validate_schedule(s: ScheduleConfig) -> None:
    need(s.name in names.SCHEDULES, "schedule.name", s.name, f"one of {', '.join(names.SCHEDULES)}")
    need(0 <= s.warmup_fraction < 1, "schedule.warmup_fraction", s.warmup_fraction,
         "0 <= fraction < 1")
    need(s.warmup_steps is None or s.warmup_steps >= 0, "schedule.warmup_steps", s.warmup_steps,
         "a non-negative integer or null")
    need(0 <= s.final_fraction <= 1, "schedule.final_fraction", s.final_fraction,
         "0 <= fraction <= 1")
    for key in ("decay_fraction", "decay_shape"):
        need(s.name == "wsd" or getattr(s, key) is None, f"schedule.{key}", getattr(s, key),
             "unset: only a wsd schedule (schedule.name: wsd) has a separate decay")
    fraction, shape = s.decay
    need(s.name != "wsd" or 0 < fraction <= 1, "schedule.decay_fraction", fraction,
         "0 < fraction <= 1 (the share of the run's steps the decay takes)")
    need(shape in names.DECAY_SHAPES, "schedule.decay_shape", shape,
         f"one of {', '.join(names.DECAY_SHAPES)}")


def _validate_targets(cfg: Config, task: Any) -> None:
    reported = task.metric_names(cfg.task.options)
    for text in cfg.targets:
        metric, _, _ = parse_target(text)
        need(metric in reported, "targets", text,
             f"a metric task {cfg.task.name} reports: {', '.join(reported)}")
    if cfg.analysis.view in names.budget_views():
        need(cfg.analysis.metric in reported, "analysis.metric", cfg.analysis.metric,
             f"a metric task {cfg.task.name} reports: {', '.join(reported)}")


def _validate_eval(e: EvalConfig) -> None:
    need(e.every is None or e.every > 0, "eval.every", e.every, "a positive integer or null")
    need(e.points_per_decade >= 0, "eval.points_per_decade", e.points_per_decade, ">= 0")
    need(e.examples is None or e.examples > 0, "eval.examples", e.examples,
         "a positive integer or null")
    need(e.ema_decay is None or 0 < e.ema_decay < 1, "eval.ema_decay", e.ema_decay,
         "a number with 0 < decay < 1 or null (off)")


def _validate_train(cfg: Config) -> None:
    t = cfg.train
    need(t.chunk_steps > 0, "train.chunk_steps", t.chunk_steps, "a positive integer")
    need(t.min_chunks > 0, "train.min_chunks", t.min_chunks, "a positive integer")
    need(t.divergence_factor > 1, "train.divergence_factor", t.divergence_factor, "a number > 1")
    need(t.max_group_size is None or t.max_group_size > 0, "train.max_group_size",
         t.max_group_size, "a positive integer or null")
    need(t.repack in names.REPACKS, "train.repack", t.repack, "auto, true or false")
    need(t.precision in names.PRECISIONS, "train.precision", t.precision,
         f"one of {', '.join(names.PRECISIONS)}")
    need(t.memory_limit_gb is None or t.memory_limit_gb > 0, "train.memory_limit_gb",
         t.memory_limit_gb, "a positive number of gigabytes or null (the device's own limit)")
    need(t.peak_tflops is None or t.peak_tflops > 0, "train.peak_tflops", t.peak_tflops,
         "a positive number of TFLOP/s or null (the published peak, where known)")
    need(t.checkpoint_minutes >= 0, "train.checkpoint_minutes", t.checkpoint_minutes,
         "a number of minutes >= 0 (0: no mid-run checkpoints)")
    need(t.dominated_margin >= 0, "train.dominated_margin", t.dominated_margin,
         "a number >= 0 (relative: a run stops once its learning rate's steps exceed the "
         "best's by more than this share)")
    need(cfg.parallel.data is None or cfg.parallel.data > 0, "parallel.data", cfg.parallel.data,
         "a positive integer or null (all devices)")
    need(cfg.parallel.runs > 0, "parallel.runs", cfg.parallel.runs, "a positive integer")


def _validate_data(cfg: Config, task: Any) -> None:
    placement = cfg.data.placement
    need(placement in names.PLACEMENTS, "data.placement", placement,
         f"one of {', '.join(names.PLACEMENTS)}")
    if placement == "host":
        need(task.finite_data or task.host_windows, "data.placement", placement,
             f"device or auto: task {cfg.task.name} draws its batches on the device")
        need(not (cfg.gns.enabled and cfg.gns.hessian_every), "data.placement", placement,
             "device or auto while gns.hessian_every is set (the Hessian probe draws examples "
             "from the whole training set on the device)")


def _validate_gns(cfg: Config) -> None:
    g = cfg.gns
    need(g.groups is None or g.groups >= 2, "gns.groups", g.groups,
         "an integer >= 2 or null (automatic)")
    need(0 <= g.ema_decay < 1, "gns.ema_decay", g.ema_decay, "0 <= decay < 1")
    need(g.hessian_every >= 0, "gns.hessian_every", g.hessian_every,
         "0 (off) or a positive integer: measure B_noise every K evaluation points")
    need(g.every >= 1, "gns.every", g.every,
         "a positive integer: measure on every N-th step (1: every step)")
    adaptive = [n for n, o in names.OPTIMIZER_TABLE.items() if o.adaptive]
    need(not g.preconditioned or cfg.optimizer.name in adaptive, "gns.preconditioned",
         g.preconditioned, f"false for optimizer {cfg.optimizer.name} (true needs "
         f"{' or '.join(adaptive)})")
    need(not g.preconditioned or g.enabled, "gns.preconditioned", g.preconditioned,
         "false while gns.enabled is false")


def _validate_axes(cfg: Config) -> None:
    """Each of momentum, weight_decay, b2: a number in range, or a list of them that the
    optimizer uses (a list is a grid axis, and its values become part of the run ids)."""
    o = cfg.optimizer
    for name, (_, ok, accepted) in AXES.items():
        key, value = f"optimizer.{name}", getattr(o, name)
        if not isinstance(value, list):
            need(ok(value), key, value, accepted)
            continue
        need(len(value) > 0, key, value, f"a number or a non-empty list of numbers ({accepted})")
        need(name in names.HYPERPARAMS[o.name], key, value,
             f"a single number: optimizer {o.name} does not use {name}, so it cannot be a "
              f"grid axis (a list); {name} is used by "
              + ", ".join(n for n, used in names.HYPERPARAMS.items() if name in used))
        for i, v in enumerate(value):
            need(ok(v), f"{key}[{i}]", v, accepted)
        need(len({f"{v:.6g}" for v in value}) == len(value), key, value,
             "distinct values (to 6 significant digits, as run ids show them)")
        need(cfg.learning_rate.mode != "centered", key, value,
             "a single number with learning_rate.mode: centered (a centred grid extends at "
              "the best learning rate of each batch size, over all of its runs)")


def _validate_budget(cfg: Config, task: Any) -> None:
    bud = cfg.budget
    set_limits = bud.limits()
    need(bool(set_limits), "budget", "no limit set",
         "at least one of max_steps, max_examples, max_epochs, max_tokens")
    for key, value in set_limits.items():
        need(value > 0, f"budget.{key}", value, "a positive number")
    ext = bud.reading_extension
    need(ext is False or (ext is not True and ext >= 1), "budget.reading_extension", ext,
         "a factor >= 1 on the budget (how far a best run may train on to close its reading "
         "window), or off (1 or false: none, read with the window clipped at the budget)")
    finite = task.finite_data
    if not finite:
        need(bud.max_epochs is None, "budget.max_epochs", bud.max_epochs,
             f"null: task {cfg.task.name} samples fresh data and has no epochs")
    if task.tokens_per_example(cfg.task.options) is None:
        need(bud.max_tokens is None, "budget.max_tokens", bud.max_tokens,
             f"null: task {cfg.task.name} has no tokens")
    for size in cfg.batch.sizes:
        if bud.max_examples is not None:
            need(bud.max_examples >= size, "budget.max_examples", bud.max_examples,
                 f"at least one batch (>= {size} for batch size {size})")
    if bud.cooldowns is not None:
        _validate_cooldowns(cfg)


def _validate_cooldowns(cfg: Config) -> None:
    """Budgets that can share their stable runs: sorted, within the one limit, under a wsd
    schedule whose stable phase is the same at every budget, with one grid for all."""
    c, limits = cfg.budget.cooldowns, cfg.budget.limits()
    need(len(limits) == 1, "budget.cooldowns", c,
         f"unset while several limits are set ({', '.join(limits)}); cooldowns are in the unit "
         "of the one limit")
    (key, budget), = limits.items()
    need(isinstance(c, list) and len(c) > 0 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= budget for v in c),
        "budget.cooldowns", c, f"a non-empty list of budgets in (0, budget.{key}={budget:g}]")
    need(all(a < b for a, b in zip(c, c[1:])), "budget.cooldowns", c,
         "budgets in increasing order, each once")
    need(cfg.schedule.name == "wsd", "budget.cooldowns", c,
         f"unset under schedule {cfg.schedule.name!r}: a cooldown is the decay of a wsd schedule")
    need(cfg.schedule.warmup_fraction == 0, "schedule.warmup_fraction",
         cfg.schedule.warmup_fraction, "0 with budget.cooldowns (a warm-up in a fraction of the "
         "run would differ between budgets); give schedule.warmup_steps instead")
    need(not cfg.batch.schedules, "budget.cooldowns", c, "unset with batch.schedules")
    need(not (cfg.learning_rate.searched and cfg.targets), "budget.cooldowns", c,
         "unset with the learning-rate search (every budget reads the stable runs' one grid); "
         "set learning_rate.search: false")
    need(cfg.optimizer.weight_decay_rule != "timescale", "budget.cooldowns", c,
         "unset with optimizer.weight_decay_rule: timescale (its weight decay depends on the "
         "budget, so the budgets could not share their stable runs)")
    need(cfg.analysis.view in names.budget_views(), "analysis.view", cfg.analysis.view,
         f"{' or '.join(names.budget_views())} with budget.cooldowns (each budget is read at its "
         "end)")
    need(not cfg.scale, "budget.cooldowns", c, "unset with a scale section (not supported yet: "
         "give each model size its own config)")


def named_devices(cfg: Config) -> int | None:
    """The devices the config names, parallel.runs x data x train.fsdp; None where
    parallel.data is left to the devices there are (known only once jax starts)."""
    p = cfg.parallel
    return None if p.data is None else p.runs * p.data * cfg.train.fsdp


def validate_devices(cfg: Config, num_devices: int) -> tuple[int, int]:
    """(runs, data shards) for this many devices, data shards = parallel.data x train.fsdp (the
    batch splits over both); batches must split over data shards x accumulation."""
    p, fsdp = cfg.parallel, cfg.train.fsdp
    need(num_devices % p.runs == 0, "parallel.runs", p.runs, f"a divisor of the {num_devices} devices")
    need(isinstance(fsdp, int) and fsdp > 0 and num_devices % (p.runs * fsdp) == 0, "train.fsdp",
         fsdp, f"a positive integer dividing the {num_devices} devices / parallel.runs {p.runs}")
    data = p.data if p.data is not None else num_devices // (p.runs * fsdp)
    need(data * p.runs * fsdp == num_devices, "parallel.data", p.data,
         f"runs x data = {num_devices // fsdp} devices (runs={p.runs}, train.fsdp={fsdp})")
    data *= fsdp
    unit = data * cfg.batch.accumulation
    for size in cfg.batch.sizes:
        need(size % unit == 0, "batch.sizes", size,
             f"a multiple of data shards x accumulation = {data} x {cfg.batch.accumulation} = {unit}")
    for i, sched in enumerate(cfg.batch.schedules):
        for size in sched.batch_sizes:
            need(size % unit == 0, f"batch.schedules[{i}]", size,
                 f"batch sizes that are multiples of data shards x accumulation = {unit}")
    return p.runs, data
