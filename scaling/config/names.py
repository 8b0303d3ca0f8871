"""The names a config may use, kept once: the config validates against them, the CLI offers
them as choices, and the code that implements each one is keyed by them (the analysis views
name their modules here, `VIEW_TABLE`: the one registry of views, which every layer reads)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Optimizer:
    """What the rest of the suite asks of an optimizer family: the scalars its optax factory
    takes (scaling.train.optimizers, one program per family, these are per-run data), and
    whether it is adaptive (Adam's second moment: betas and eps, a preconditioned metric).

    decay_timescale: its weight decay shrinks the weights by (1 - eta lambda) per step whatever
    the gradient, so 1 / (eta lambda) steps is the decay's timescale and the timescale rule
    applies: adamw (decoupled), and sgd, momentum and nesterov, where L2 on the gradient is the
    same shrink (momentum stretches the timescale by a constant 1 / (1 - momentum)). Not adam:
    its L2 term passes through the second-moment preconditioner.
    """

    hyperparams: tuple[str, ...]
    adaptive: bool = False
    decay_timescale: bool = True

    @property
    def uses_momentum(self) -> bool:
        return "momentum" in self.hyperparams


OPTIMIZER_TABLE: dict[str, Optimizer] = {
    "sgd": Optimizer(("learning_rate", "weight_decay")),
    "momentum": Optimizer(("learning_rate", "momentum", "weight_decay")),
    "nesterov": Optimizer(("learning_rate", "momentum", "weight_decay")),
    "adam": Optimizer(("learning_rate", "b1", "b2", "eps", "weight_decay"), adaptive=True,
                      decay_timescale=False),
    "adamw": Optimizer(("learning_rate", "b1", "b2", "eps", "weight_decay"), adaptive=True),
}
OPTIMIZERS = tuple(OPTIMIZER_TABLE)
HYPERPARAMS: dict[str, tuple[str, ...]] = {k: o.hyperparams for k, o in OPTIMIZER_TABLE.items()}
# Every per-run optimizer scalar but the learning rate: the axes a run shares with the runs it
# is compared with (a new one in the table above becomes an axis, it cannot be missed).
OPTIMIZER_AXES: tuple[str, ...] = tuple(sorted(
    {name for o in OPTIMIZER_TABLE.values() for name in o.hyperparams} - {"learning_rate"}))


@dataclass(frozen=True)
class ViewEntry:
    """An analysis view as the registry names it, by import path so that the config reads it
    without importing the analysis: the module holding its `VIEW` (scaling.analysis.view), the
    one holding its `REPORT` when that is another (a report that draws figures needs the report
    layer, which the analysis cannot import), and whether it reads every run at its budget (its
    final analysis.metric: runs then do not stop at their targets, and targets are optional)."""

    module: str
    at_budget: bool
    report: str | None = None

    @property
    def report_module(self) -> str:
        return self.report or self.module


_FIXED_BUDGET = ViewEntry("scaling.analysis.budget_folder", at_budget=True,
                          report="scaling.report.budget_report")
# The analysis views, the one place they are named: analysis.view and `scaling analyze --view`
# accept its keys; the analysis (scaling.analysis.views) and the report (scaling.report.views)
# import each module when they read it. `both` names the fixed-budget view, for a folder that
# has targets too.
VIEW_TABLE: dict[str, ViewEntry] = {
    "steps": ViewEntry("scaling.analysis.steps_view", at_budget=False,
                       report="scaling.report.steps_report"),
    "fixed_budget": _FIXED_BUDGET,
    "both": _FIXED_BUDGET,
}


def budget_views() -> tuple[str, ...]:
    """The views that read every run at its budget, as their registry lines say."""
    return tuple(name for name, entry in VIEW_TABLE.items() if entry.at_budget)


SCHEDULES = ("constant", "linear", "cosine", "wsd")
DECAY_SHAPES = ("linear", "cosine", "sqrt")  # a wsd schedule's decay (schedule.decay_shape)
WSD_DECAY_FRACTION = 0.2  # schedule.decay_fraction when a wsd schedule gives none
LR_MODES = ("grid", "rule", "centered")
FIRST_GRIDS = ("grid", "neighbours")  # learning_rate.first_grid (scaling.sweep.neighbours)
LR_RULES = ("linear", "sqrt", "constant", "noise_scale", "surge")
B2_RULES = ("half_life",)  # optimizer.b2_rule (scaling.config.optimizer)
WEIGHT_DECAY_RULES = ("timescale",)  # optimizer.weight_decay_rule
METRICS = ("train_loss", "eval_loss", "eval_accuracy")
LR_SELECTIONS = ("min", "crossfit")
INTERVAL_METHODS = ("jackknife", "pooled", "percentile")  # analysis.interval: how seeds are resampled
REACH_RULES = ("first", "sustained", "smoothed", "ema")  # when a run has reached a target
PLACEMENTS = ("auto", "device", "host")
PRECISIONS = ("auto", "float32", "bfloat16")
REPACKS = ("auto", True, False)  # train.repack: when a group is cut down (scaling.train.repack)
WANDB_MODES = ("online", "offline")
BATCH_LR_RULES = ("linear", "sqrt", "constant")  # the learning rate when the batch grows
BRANCH_METRICS = ("eval_loss", "train_loss")
BATCH_SCHEDULES = ("steps", "doubling", "noise_scale", "seesaw", "switch", "linear_examples")
