"""Run arithmetic in one place: steps, epochs, examples, tokens, warm-up, and the warnings.

The engine and `scaling plan` both ask here how long a run at one batch size is
(docs/arithmetic.md), so the numbers a user is shown are the numbers that train. Counting is
exact (integers, and fractions for fractional epochs or token budgets) so the worked examples
hold to the step. jax is never imported on the calculator path: the plan must be instant.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from scaling.config.learning_rates import (decay_steps as _decay_steps, learning_rates, scaled_lr,
                                           warmup_steps as _warmup_steps)
from scaling.config.names import SCHEDULES, WSD_DECAY_FRACTION
from scaling.config.schema import Config, ScheduleConfig
from scaling.errors import ConfigError, need
from scaling.formatting import text_table
from scaling.tasks import task_class

MAX_WARMUP_SHARE = 0.25  # a fixed warm-up above this share of the run warns
MIN_SCHEDULE_STEPS = 100  # fewer steps than this are too few for warm-up or decay to work
MANY_EPOCHS = 20  # more passes than this over the data set warns (epochs are not data)
TABLE_RULES = ("linear", "sqrt", "constant")  # rules shown in lr_by_rule


@dataclass
class Arithmetic:
    """Everything about one run at one batch size that follows from the config alone."""

    batch_size: int
    effective_batch: int  # per_device_batch x accumulation x data_shards
    per_device_batch: int  # examples one device holds in one gradient pass
    accumulation: int
    data_shards: int
    micro_batch: int  # batch_size / accumulation: examples in one gradient pass
    num_examples: int | None  # training-set size, None for sampled data
    steps_per_epoch: int | None
    last_batch_size: int | None  # final batch of an epoch (batch_size when N divides evenly)
    dropped_per_epoch: int  # examples left out of every epoch by drop_last
    total_steps: int
    stopped_by: str  # the budget limit reached first: max_steps/examples/epochs/tokens
    warmup_steps: int
    examples: int  # examples processed over the whole run, partial batches counted exactly
    epochs: float | None  # passes over the data (examples / examples per epoch)
    tokens: int | None  # tokens processed, None where tokens mean nothing
    times_seen: float | None  # average uses of each training example (examples / N)
    lr_by_rule: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    decay_steps: int = 0  # a wsd schedule's last steps, which decay (0: no separate decay)

    @property
    def stable_steps(self) -> int:
        """A wsd run's steps at the peak rate, between the warm-up and the decay."""
        return self.total_steps - self.warmup_steps - self.decay_steps

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def examples_at(self, steps: int) -> int:
        """Examples processed after `steps` steps of this run, partial batches counted exactly."""
        ep = None if self.num_examples is None else _Epoch(
            self.steps_per_epoch, self.last_batch_size, self.dropped_per_epoch,
            self.num_examples - self.dropped_per_epoch)
        return _examples_after(steps, self.batch_size, ep)


@dataclass(frozen=True)
class _Epoch:
    """How one epoch is cut into batches; `examples` is what one full pass processes."""

    steps: int
    last_batch: int
    dropped: int
    examples: int


def _epoch(n: int, b: int, drop_last: bool) -> _Epoch:
    """ceil(N/B) steps keeping the last partial batch, floor(N/B) dropping it."""
    if drop_last:
        if b > n:
            raise ConfigError(f"batch size {b}: larger than the {n} training examples with "
                              "drop_last set, so an epoch has no full batch; expected at most "
                              f"{n}, or keep the last batch")
        return _Epoch(n // b, b, n % b, (n // b) * b)
    steps = -(-n // b)
    return _Epoch(steps, n - (steps - 1) * b, 0, n)


def _examples_after(steps: int, b: int, ep: _Epoch | None) -> int:
    """Examples processed by `steps` steps; only an epoch's last step may be partial."""
    if ep is None:
        return steps * b
    full, rest = divmod(steps, ep.steps)
    return full * ep.examples + rest * b


def _steps_to_reach(target: Fraction, b: int, ep: _Epoch | None) -> int:
    """Smallest step count whose examples processed are >= `target`."""
    if ep is None:
        return math.ceil(target / b)
    full, rest = divmod(target, ep.examples)
    return int(full) * ep.steps + math.ceil(rest / b)


def _epoch_fields(ep: _Epoch | None, done: int, n: int | None) -> dict[str, Any]:
    """The Arithmetic fields that only finite data has (None, or 0 dropped, when sampled)."""
    if ep is None:
        return dict(steps_per_epoch=None, last_batch_size=None, dropped_per_epoch=0,
                    epochs=None, times_seen=None)
    return dict(steps_per_epoch=ep.steps, last_batch_size=ep.last_batch,
                dropped_per_epoch=ep.dropped, epochs=done / ep.examples, times_seen=done / n)


def _tokens_per_example(examples: int | None, tokens: int | None,
                        tokens_per_example: float | None) -> Fraction | None:
    """Exact tokens per example from either the per-example count or the data-set total."""
    if tokens is not None and tokens_per_example is not None:
        raise ConfigError("tokens: give the data-set total or tokens_per_example, not both")
    if tokens_per_example is not None:
        return Fraction(str(tokens_per_example))
    if tokens is None:
        return None
    if examples is None:
        raise ConfigError(f"tokens: got {tokens}, but a sampled task has no training-set size "
                          "to divide it over; give tokens_per_example instead")
    return Fraction(tokens, examples)


def _total_steps(limits: dict[str, Any], b: int, ep: _Epoch | None,
                 tpe: Fraction | None) -> tuple[int, str]:
    """(steps, limit name): the first budget limit reached ends the run."""
    steps = {}
    if limits["max_steps"] is not None:
        steps["max_steps"] = limits["max_steps"]
    if limits["max_examples"] is not None:
        steps["max_examples"] = _steps_to_reach(Fraction(limits["max_examples"]), b, ep)
    if limits["max_epochs"] is not None:
        if ep is None:
            raise ConfigError(f"max_epochs: got {limits['max_epochs']}, but sampled data has no "
                              "epochs; expected a step, example or token budget")
        epochs = Fraction(str(limits["max_epochs"]))
        steps["max_epochs"] = _steps_to_reach(epochs * ep.examples, b, ep)
    if limits["max_tokens"] is not None:
        if tpe is None:
            raise ConfigError(f"max_tokens: got {limits['max_tokens']}, but tokens per example "
                              "are unknown; give tokens or tokens_per_example")
        steps["max_tokens"] = _steps_to_reach(Fraction(limits["max_tokens"]) / tpe, b, ep)
    if not steps:
        raise ConfigError("budget: no limit set; expected at least one of epochs, max_steps, "
                          "max_examples, max_tokens")
    name = min(steps, key=steps.get)
    return steps[name], name


def _check_inputs(examples: int | None, batch_size: int, limits: dict[str, Any],
                  accumulation: int, data_shards: int, schedule: str,
                  warmup: tuple[float, int | None], ref: tuple[int | None, float | None]) -> None:
    need(batch_size > 0, "batch_size", batch_size, "a positive integer")
    need(examples is None or examples > 0, "examples", examples, "a positive integer or None")
    need(accumulation >= 1, "accumulation", accumulation, "an integer >= 1")
    need(data_shards >= 1, "data_shards", data_shards, "an integer >= 1")
    unit = accumulation * data_shards
    need(batch_size % unit == 0, "batch_size", batch_size,
         f"a multiple of accumulation x data shards = {accumulation} x {data_shards} = {unit}")
    for key, value in limits.items():
        need(value is None or value > 0, key, value, "a positive number")
    need(schedule in SCHEDULES, "schedule", schedule, f"one of {', '.join(SCHEDULES)}")
    need(0 <= warmup[0] < 1, "warmup_fraction", warmup[0], "0 <= fraction < 1")
    need(warmup[1] is None or warmup[1] >= 0, "warmup_steps", warmup[1],
         "a non-negative integer or None")
    need((ref[0] is None) == (ref[1] is None) and (ref[1] is None or min(ref) > 0),
         "batch_ref/lr_ref", ref, "both positive, or neither")


def calculate(examples: int | None, batch_size: int, *, epochs: float | None = None,
              max_steps: int | None = None, max_examples: int | None = None,
              max_tokens: int | None = None, drop_last: bool = False,
              warmup_fraction: float = 0.0, warmup_steps: int | None = None,
              tokens: int | None = None, tokens_per_example: float | None = None,
              accumulation: int = 1, data_shards: int = 1, schedule: str = "constant",
              batch_ref: int | None = None, lr_ref: float | None = None,
              decay_fraction: float | None = None) -> Arithmetic:
    """The arithmetic of one run of `batch_size` over `examples` (None: sampled data).

    `tokens` is the training set's total; `epochs` is the max_epochs limit; `decay_fraction`
    a wsd schedule's share of decay steps (default 0.2). Raises ConfigError naming the
    argument when the inputs cannot describe a run.
    """
    limits = {"max_steps": max_steps, "max_examples": max_examples, "max_epochs": epochs,
              "max_tokens": max_tokens}
    _check_inputs(examples, batch_size, limits, accumulation, data_shards, schedule,
                  (warmup_fraction, warmup_steps), (batch_ref, lr_ref))
    need(decay_fraction is None or (schedule == "wsd" and 0 < decay_fraction <= 1),
         "decay_fraction", decay_fraction, "0 < fraction <= 1, with the wsd schedule only")
    ep = None if examples is None else _epoch(examples, batch_size, drop_last)
    tpe = _tokens_per_example(examples, tokens, tokens_per_example)
    total, stopped_by = _total_steps(limits, batch_size, ep, tpe)
    done = _examples_after(total, batch_size, ep)
    micro = batch_size // accumulation
    arith = Arithmetic(
        batch_size=batch_size, effective_batch=batch_size, per_device_batch=micro // data_shards,
        accumulation=accumulation, data_shards=data_shards, micro_batch=micro,
        num_examples=examples, total_steps=total, stopped_by=stopped_by,
        warmup_steps=_warmup_steps(ScheduleConfig(schedule, warmup_fraction, warmup_steps), total),
        examples=done, tokens=None if tpe is None else round(done * tpe),
        **_epoch_fields(ep, done, examples),
        lr_by_rule={} if lr_ref is None else
        {r: scaled_lr(r, batch_size, batch_ref, lr_ref) for r in TABLE_RULES},
        decay_steps=_decay_steps(WSD_DECAY_FRACTION if decay_fraction is None else decay_fraction,
                                 total) if schedule == "wsd" else 0)
    if arith.stable_steps < 0:
        raise ConfigError(
            f"schedule.decay_fraction: at batch size {batch_size} the warm-up ({arith.warmup_steps} "
            f"steps) and the decay ({arith.decay_steps} steps) overlap in the {total}-step run; "
            "expected warm-up + decay within the run: shorten either, or raise the budget")
    arith.warnings = run_warnings(arith, schedule, warmup_fraction, warmup_steps is not None)
    return arith


def run_warnings(a: Arithmetic, schedule: str, warmup_fraction: float,
                 fixed_warmup: bool) -> list[str]:
    """Common mistakes (docs/arithmetic.md) visible in one run's arithmetic."""
    out = []
    at = f"batch size {a.batch_size}"
    share = a.warmup_steps / a.total_steps
    if fixed_warmup and share > MAX_WARMUP_SHARE:
        out.append(f"{at}: the fixed warm-up of {a.warmup_steps} steps is {share:.0%} of the "
                   f"{a.total_steps}-step run (more than {MAX_WARMUP_SHARE:.0%}); give "
                   "schedule.warmup_fraction so the warm-up scales with each run")
    shape = [f"{schedule} decay"] * (schedule != "constant")
    shape += [f"{a.warmup_steps} warm-up steps"] * (a.warmup_steps > 0)
    if shape and a.total_steps < MIN_SCHEDULE_STEPS:
        out.append(f"{at}: {a.total_steps} total steps are too few for {' and '.join(shape)} to "
                   f"work (fewer than {MIN_SCHEDULE_STEPS}); raise the budget, or train "
                   "at a constant learning rate without warm-up")
    if warmup_fraction > 0 and not fixed_warmup and a.warmup_steps == 0:
        out.append(f"{at}: warm-up fraction {warmup_fraction} of {a.total_steps} steps rounds to "
                   "0 steps, so there is no warm-up")
    if a.times_seen is not None and a.times_seen > MANY_EPOCHS:
        out.append(f"{at}: each of the {a.num_examples:,} training examples is seen "
                   f"{a.times_seen:.3g} times (more than {MANY_EPOCHS}); more epochs do not make "
                   "up for too little data, use a larger data set or a smaller budget")
    if a.num_examples is not None and a.batch_size > a.num_examples:
        out.append(f"{at}: larger than the {a.num_examples:,} training examples, so every step "
                   "is a full-batch step and a larger batch cannot help")
    return out


def reference_point(cfg: Config) -> tuple[int, float]:
    """(batch_ref, lr_ref): the config's own, else the smallest batch and its grid's middle."""
    lr = cfg.learning_rate
    batch_ref = lr.batch_ref if lr.batch_ref is not None else min(cfg.batch.sizes)
    if lr.lr_ref is not None:
        return batch_ref, lr.lr_ref
    rates = learning_rates(lr, batch_ref)
    return batch_ref, math.sqrt(min(rates) * max(rates))


def for_config(cfg: Config, batch_size: int, data_shards: int = 1) -> Arithmetic:
    """The arithmetic of one run of a validated config at `batch_size`."""
    task, opts, bud, sched = task_class(cfg.task.name), cfg.task.options, cfg.budget, cfg.schedule
    batch_ref, lr_ref = reference_point(cfg)
    return calculate(
        task.num_train_examples(opts), batch_size, epochs=bud.max_epochs,
        max_steps=bud.max_steps, max_examples=bud.max_examples, max_tokens=bud.max_tokens,
        drop_last=cfg.batch.drop_last, warmup_fraction=sched.warmup_fraction,
        warmup_steps=sched.warmup_steps, tokens_per_example=task.tokens_per_example(opts),
        accumulation=cfg.batch.accumulation, data_shards=data_shards, schedule=sched.name,
        batch_ref=batch_ref, lr_ref=lr_ref, decay_fraction=sched.decay_fraction)


def sweep_warnings(cfg: Config) -> list[str]:
    """Mistakes visible only across batch sizes: the learning rate or budget not following B."""
    sizes = cfg.batch.sizes
    if len(sizes) < 2:
        return []
    out = []
    span_b = max(sizes) / min(sizes)
    if cfg.learning_rate.mode == "grid":
        rates = learning_rates(cfg.learning_rate, min(sizes))
        span_lr = max(rates) / min(rates)
        gentlest = math.sqrt(span_b)  # the gentlest rule that moves the optimum: square root
        if span_lr == 1:
            out.append(f"every batch size ({min(sizes)} to {max(sizes)}) trains at the same "
                       f"learning rate {rates[0]:g}: changing the batch size without changing "
                       "the learning rate; use a grid or learning_rate.mode: rule")
        elif span_lr < gentlest:
            out.append(f"the learning-rate grid spans {span_lr:.3g}x for every batch size while "
                       f"batch sizes span {span_b:.3g}x; the optimum moves by sqrt(B) to B "
                       f"({gentlest:.3g}x to {span_b:.3g}x), so the grid misses it at the ends; "
                       f"widen it to at least {gentlest:.3g}x or use learning_rate.mode: rule")
    bud = cfg.budget
    if bud.max_steps is not None and bud.max_examples is None and bud.max_epochs is None \
            and bud.max_tokens is None:
        out.append(f"budget.max_steps={bud.max_steps} is one step budget for every batch size, "
                   f"so batch size {max(sizes)} gets {span_b:.3g}x the examples of batch size "
                   f"{min(sizes)}; set budget.max_examples (docs/arithmetic.md)")
    return out


def format_table(rows: list[Arithmetic], rule_columns: bool = True) -> str:
    """Plain-text table for the terminal, one line per batch size, warnings below; the
    learning rate each rule would give only with `rule_columns` (a report leaves them out
    where the sweep used no rule)."""
    cols: list[tuple[str, Any]] = [
        ("batch", lambda a: a.batch_size), ("micro", lambda a: a.micro_batch),
        ("accum", lambda a: a.accumulation), ("shards", lambda a: a.data_shards),
        ("steps/epoch", lambda a: a.steps_per_epoch), ("last batch", lambda a: a.last_batch_size),
        ("steps", lambda a: a.total_steps), ("warm-up", lambda a: a.warmup_steps),
        ("examples", lambda a: a.examples), ("epochs", lambda a: a.epochs),
        ("tokens", lambda a: a.tokens), ("ends at", lambda a: a.stopped_by)]
    if any(a.decay_steps for a in rows):  # a wsd schedule's phases, after the warm-up
        cols[8:8] = [("stable", lambda a: a.stable_steps), ("decay", lambda a: a.decay_steps)]
    if any(a.dropped_per_epoch for a in rows):
        cols.insert(6, ("dropped", lambda a: a.dropped_per_epoch))
    for rule in rows[0].lr_by_rule if rows and rule_columns else ():
        cols.append((f"lr {rule}", lambda a, r=rule: a.lr_by_rule.get(r)))
    lines = [text_table([name for name, _ in cols], [[get(a) for _, get in cols] for a in rows])]
    lines += [f"warning: {w}" for a in rows for w in a.warnings]
    return "\n".join(lines)
