"""The sweep's grid as plain data: run ids, each batch size's learning rates (its first grid
and the search's recorded rounds), the work units and shards.

Nothing here trains or touches devices, so `--dry-run` and the shard partition are pure
functions of the config (and of the records on disk).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Iterable

from scaling.config import AXES, Config, ConfigError, centered_lr, grid_axes, learning_rates
from scaling.config.optimizer_rules import budget_examples, rule_values
from scaling.sweep import neighbours, search
from scaling.train.spec import RunSpec

SIDES = ("low", "high")


@dataclass(frozen=True)
class PlannedRun:
    run_id: str
    batch_size: int  # a scheduled run's first batch size
    spec: RunSpec
    schedule: str | None = None  # the batch-size schedule's name (batch.schedules), if any


@dataclass(frozen=True)
class Unit:
    """Runs that train as one vmapped group; the thing a shard owns. cost: examples budgeted."""

    batch_size: int
    index: int  # the unit's position among its batch size's (or schedule's) units
    runs: tuple[PlannedRun, ...]
    cost: int
    schedule: str | None = None

    @property
    def label(self) -> str:
        return f"schedule {self.schedule}" if self.schedule else f"batch {self.batch_size}"


def run_id(batch_size: int, spec: RunSpec, axes: Iterable[str] = ()) -> str:
    """Readable and deterministic: the same hyperparameters always give the same folder name.

    `axes`: the optimizer scalars that are grid axes (config.grid_axes); each adds its value,
    e.g. -mom0.9, so runs that differ only there get their own folders.
    """
    text = f"bs{batch_size}-lr{spec.learning_rate:.6g}-seed{spec.seed}"
    text += "".join(f"-{AXES[k][0]}{getattr(spec, k):.6g}" for k in axes)
    return re.sub(r"[^A-Za-z0-9.+_-]", "_", text)


def first_rates(cfg: Config, batch_size: int,
                rounds: list[dict[str, Any]] | None = None) -> list[float]:
    """A batch size's first grid of learning rates: the config's grid, rule or centred grid;
    with the first grid from neighbours, that only at the middle batch size, elsewhere the
    grid recorded as its round 0 in `rounds` (none until its neighbour released it)."""
    lr = cfg.learning_rate
    if neighbours.enabled(cfg) and batch_size != neighbours.middle(cfg.batch.sizes):
        return search.first_grid_of(rounds or [], batch_size)
    if lr.mode != "centered":
        return learning_rates(lr, batch_size)
    return [centered_lr(lr, batch_size, k) for k in range(lr.num)]


def batch_learning_rates(cfg: Config, batch_size: int, rounds: list[dict[str, Any]]) -> list[float]:
    """Every learning rate a batch size trains: its first grid, then each recorded round of
    the learning-rate search (scaling.sweep.search)."""
    return search.searched_rates(first_rates(cfg, batch_size, rounds), rounds, batch_size)


def runs_for(cfg: Config, batch_size: int, rates: Iterable[float],
             schedule: str | None = None) -> list[PlannedRun]:
    """One batch size's (or schedule's) runs: learning rates x seeds x every combination of the
    axes' values. A scheduled run's id starts `sched-<name>` instead of `bs<B>`. The
    optimizer's batch-size rules (b2_rule, weight_decay_rule) set their scalars here, for
    every caller (D: the budget at `batch_size`, a schedule's first)."""
    o = cfg.optimizer
    axes = grid_axes(o)
    examples = budget_examples(cfg, batch_size) if o.ruled else 0
    runs = []
    for lr in rates:
        ruled = rule_values(cfg, batch_size, lr, examples)
        for seed in cfg.seeds:
            for values in itertools.product(*axes.values()):
                scalars = {**{k: getattr(o, k) for k in AXES}, **dict(zip(axes, values)), **ruled}
                spec = RunSpec(lr, seed, b1=o.b1, eps=o.eps, **scalars)
                rid = run_id(batch_size, spec, axes)
                if schedule is not None:
                    rid = f"sched-{schedule}-" + rid.split("-", 1)[1]
                runs.append(PlannedRun(rid, batch_size, spec, schedule))
    return runs


def expand(cfg: Config, batch_sizes: list[int] | None = None,
           rounds: list[dict[str, Any]] | None = None) -> list[PlannedRun]:
    """Every run of the grid, in a fixed order (batch size, learning rate, seed, axes), then
    every scheduled run (schedule, learning rate at its start batch, seed, axes); with
    `batch_sizes`, only those batch sizes' runs."""
    fixed = [r for size in batch_sizes or cfg.batch.sizes
             for r in runs_for(cfg, size, batch_learning_rates(cfg, size, rounds or []))]
    if batch_sizes is not None:
        return fixed
    return fixed + [r for sched in cfg.batch.schedules
                    for r in runs_for(cfg, sched.first_batch,
                                      learning_rates(cfg.learning_rate, sched.first_batch),
                                      sched.label)]


def units(cfg: Config, runs: list[PlannedRun], examples: dict[int, int]) -> list[Unit]:
    """The vmapped groups of the full grid: train.max_group_size runs of one batch size each.

    A batch size whose learning rates are searched stays whole (one unit, which one shard
    owns): planning its next round needs all of its runs. Its groups are cut to
    train.max_group_size when they train.
    """
    out = []
    keys = sorted({(r.schedule or "", r.batch_size) for r in runs})
    for schedule, size in keys:
        members = [r for r in runs if r.batch_size == size and (r.schedule or "") == schedule]
        limit = cfg.train.max_group_size
        if limit is None or (search.searched(cfg) and not schedule):
            limit = len(members)
        for i, start in enumerate(range(0, len(members), limit)):
            group = tuple(members[start:start + limit])
            out.append(Unit(size, i, group, len(group) * examples[size], schedule or None))
    return out


def parse_shard(text: str) -> tuple[int, int]:
    """'I/N' -> (I, N) with 0 <= I < N."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    ok = match is not None and 0 <= int(match[1]) < int(match[2])
    if not ok:
        raise ConfigError(f"--shard: got {text!r}, expected I/N with 0 <= I < N, e.g. 0/4 "
                          "(shards count from 0)")
    return int(match[1]), int(match[2])


def partition(all_units: list[Unit], num_shards: int) -> list[list[Unit]]:
    """Longest-processing-time greedy split by cost; ties broken by (batch size, index).

    It depends only on the full grid, never on which runs are done, so every host computes
    the same partition.
    """
    shards: list[list[Unit]] = [[] for _ in range(num_shards)]
    load = [0] * num_shards
    for unit in sorted(all_units, key=lambda u: (-u.cost, u.schedule or "", u.batch_size, u.index)):
        target = min(range(num_shards), key=lambda s: (load[s], s))
        shards[target].append(unit)
        load[target] += unit.cost
    return [sorted(s, key=lambda u: (u.schedule or "", u.batch_size, u.index)) for s in shards]


# ---------------------------------------------------------------- best learning rate


def best_lr(summaries: list[dict[str, Any]], target: str) -> tuple[float, float] | None:
    """(learning rate, mean steps) of the fastest LR whose every seed reached `target`."""
    by_lr: dict[float, list[Any]] = {}
    for s in summaries:
        by_lr.setdefault(s["learning_rate"], []).append(s["steps_to_target"].get(target))
    reached = {lr: sum(v) / len(v) for lr, v in by_lr.items() if None not in v}
    if not reached:
        return None
    lr = min(reached, key=lambda k: (reached[k], k))
    return lr, reached[lr]
