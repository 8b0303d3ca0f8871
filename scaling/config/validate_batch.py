"""The checks of what a run's batch is: the batch section, the batch-size schedules (a sweep
axis) and the branch section of `scaling branch`; each failure one ConfigError naming the key."""

from __future__ import annotations

import re

from scaling.config import names
from scaling.config.schema import BatchConfig, BatchScheduleConfig, Config
from scaling.errors import need
from scaling.tasks import task_class


def validate_branch(cfg: Config) -> None:
    """The branch section (read by `scaling branch` only; its defaults always pass)."""
    b = cfg.branch
    need(b.batch_size is None or b.batch_size > 0, "branch.batch_size", b.batch_size,
         "a positive integer or null (the smallest of batch.sizes)")
    need(b.learning_rate is None or b.learning_rate > 0, "branch.learning_rate",
         b.learning_rate, "a positive number or null (the config's learning rate at B0)")
    need(all(p > 0 for p in b.points), "branch.points", b.points,
         "a list of positive numbers of examples")
    need(b.num_points >= 1, "branch.num_points", b.num_points, "an integer >= 1")
    need(len(b.factors) > 0 and all(k >= 1 for k in b.factors), "branch.factors", b.factors,
         "a non-empty list of integers >= 1 (branches at k x branch.batch_size; 1 adds only the "
         "learning-rate grid's other factors at the base's batch)")
    need(b.lr_rule in names.BATCH_LR_RULES, "branch.lr_rule", b.lr_rule,
         f"one of {', '.join(names.BATCH_LR_RULES)}")
    need(len(b.lr_grid) > 0 and all(f > 0 for f in b.lr_grid), "branch.lr_grid", b.lr_grid,
         "a non-empty list of positive factors on the rule's learning rate")
    need(b.window is None or b.window > 0, "branch.window", b.window,
         "a positive number of examples or null (a tenth of the base's budget)")
    need(b.tolerance >= 0, "branch.tolerance", b.tolerance, "a number >= 0 (relative)")
    need(b.metric in names.BRANCH_METRICS, "branch.metric", b.metric,
         f"one of {', '.join(names.BRANCH_METRICS)}")
    need(b.evals >= 1, "branch.evals", b.evals, "an integer >= 1")
    need(1 <= b.average <= b.evals, "branch.average", b.average,
         f"an integer from 1 to branch.evals={b.evals}")


def validate_batch(b: BatchConfig) -> None:
    need(len(b.sizes) > 0, "batch.sizes", b.sizes, "a non-empty list of positive integers")
    for size in b.sizes:
        need(size > 0, "batch.sizes", size, "positive integers")
    need(len(set(b.sizes)) == len(b.sizes), "batch.sizes", b.sizes, "distinct batch sizes")
    need(b.accumulation >= 1, "batch.accumulation", b.accumulation, "an integer >= 1")
    for size in b.sizes:
        need(size % b.accumulation == 0, "batch.sizes", size,
             f"a multiple of batch.accumulation={b.accumulation}")
    for i, sched in enumerate(b.schedules):
        _validate_schedule_entry(sched, f"batch.schedules[{i}]", b.accumulation)
    labels = [sched.label for sched in b.schedules]
    need(len(set(labels)) == len(labels), "batch.schedules", labels,
         "schedules with distinct names (set name: on each)")


def _validate_schedule_entry(sched: BatchScheduleConfig, key: str, accumulation: int) -> None:
    """One batch-size schedule: its kind's own keys, growing batch sizes."""
    need(sched.kind in names.BATCH_SCHEDULES, f"{key}.kind", sched.kind,
         f"one of {', '.join(names.BATCH_SCHEDULES)}")
    need(sched.lr_rule in names.BATCH_LR_RULES, f"{key}.lr_rule", sched.lr_rule,
         f"one of {', '.join(names.BATCH_LR_RULES)}")
    need(sched.name is None or re.fullmatch(r"[A-Za-z0-9._+-]+", sched.name) is not None,
         f"{key}.name", sched.name, "letters, digits and . _ + - (it names run folders)")
    if sched.kind == "steps":
        steps = sched.steps
        need(len(steps) > 0 and all(len(s) == 2 and s[0] >= 0 and s[1] > 0 for s in steps),
             f"{key}.steps", steps, "a non-empty list of [from examples, batch size] pairs")
        need(steps[0][0] == 0, f"{key}.steps", steps, "a first pair from 0 examples")
        need(all(a[0] < b[0] and a[1] < b[1] for a, b in zip(steps, steps[1:])),
             f"{key}.steps", steps, "pairs with growing examples and growing batch sizes")
        need(not sched.at and sched.start is None and sched.max is None, f"{key}.steps", steps,
             "start, at and max unset with kind: steps (the pairs give the batch sizes)")
    else:
        need(sched.start is not None and sched.start > 0, f"{key}.start", sched.start,
             "a positive batch size to start from")
        need(sched.max is not None and sched.max >= sched.start, f"{key}.max", sched.max,
             f"a batch size >= start={sched.start} (the largest the schedule may reach)")
        need(not sched.steps, f"{key}.steps", sched.steps, f"unset with kind: {sched.kind}")
    if sched.kind == "doubling":
        need(len(sched.at) > 0 and all(0 < a < 1 for a in sched.at)
             and sorted(set(sched.at)) == sched.at, f"{key}.at", sched.at,
             "growing fractions of the budget, each 0 < at < 1, where the batch doubles")
    if sched.kind in ("switch", "linear_examples"):
        need(len(sched.at) == 1 and 0 < sched.at[0] < 1, f"{key}.at", sched.at,
             "one fraction of the budget, 0 < at < 1, " + ("where the batch switches to max"
                                                           if sched.kind == "switch" else
                                                           "where the ramp reaches max"))
        need(sched.max > sched.start, f"{key}.max", sched.max, f"a batch size > start={sched.start}")
    if sched.kind == "linear_examples":
        need(sched.max % sched.start == 0, f"{key}.max", sched.max,
             f"a multiple of start={sched.start} (the ramp moves in steps of start)")
    if sched.kind == "seesaw":
        need(not sched.at, f"{key}.at", sched.at,
             "unset with kind: seesaw (the learning-rate schedule's halvings place the doublings)")
    if sched.kind == "noise_scale":
        need(sched.multiple > 0, f"{key}.multiple", sched.multiple,
             "a positive number: the batch doubles when B_simple exceeds multiple x batch")
        need(not sched.at, f"{key}.at", sched.at, "unset with kind: noise_scale")
    for size in sched.batch_sizes:
        need(size % accumulation == 0, f"{key}", size,
             f"batch sizes that are multiples of batch.accumulation={accumulation}")


def validate_schedules(cfg: Config) -> None:
    """What schedules need from the rest of the config."""
    if not cfg.batch.schedules:
        return
    for i, sched in enumerate(cfg.batch.schedules):
        need(sched.unit in ("examples", "tokens"), f"batch.schedules[{i}].unit", sched.unit,
             "examples or tokens")
        need(sched.unit == "examples" or sched.kind == "steps", f"batch.schedules[{i}].unit",
             sched.unit, "examples except with kind: steps (the others count fractions)")
        need(sched.unit == "examples" or task_class(cfg.task.name).tokens_per_example(
            cfg.task.options) is not None, f"batch.schedules[{i}].unit", sched.unit,
             f"examples: task {cfg.task.name} has no tokens")
    need(cfg.learning_rate.mode != "centered", "learning_rate.mode", cfg.learning_rate.mode,
         "grid or rule with batch.schedules (a scheduled run takes the learning rates of its "
         "start batch)")
    need(cfg.data.placement != "host", "data.placement", cfg.data.placement,
         "device or auto with batch.schedules (each phase draws its data order on the device)")
    if any(s.kind == "seesaw" for s in cfg.batch.schedules):
        need(cfg.schedule.name != "constant", "schedule.name", cfg.schedule.name,
             "a decaying schedule (linear, cosine, wsd) with a seesaw batch schedule: its "
             "doublings stand where the rate would halve, and a constant rate never does")
        need(cfg.schedule.final_fraction < 0.5, "schedule.final_fraction",
             cfg.schedule.final_fraction, "below 0.5 with a seesaw batch schedule (a rate that "
             "ends at half its peak or above never halves)")
    if any(s.kind == "noise_scale" for s in cfg.batch.schedules):
        need(cfg.gns.enabled, "gns.enabled", cfg.gns.enabled,
             "true with a noise_scale schedule (it reads each run's B_simple)")
