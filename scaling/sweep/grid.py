"""The sweep's grid as plain data: run ids, the work units, shards, and the centred-grid rules.

Nothing here trains or touches devices, so `--dry-run`, the shard partition and the decision
to extend a learning-rate grid are pure functions of the config (and of the summaries on disk).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Iterable

from scaling.config import AXES, Config, ConfigError, centered_lr, grid_axes, learning_rates
from scaling.config.optimizer_rules import budget_examples, rule_values
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


def grid_indices(cfg: Config, batch_size: int, extensions: list[dict[str, Any]]) -> range:
    """Centred mode: the grid's point indices at one batch size, widened by its extensions."""
    low, high = 0, cfg.learning_rate.num - 1
    for ext in extensions:
        if ext["batch_size"] == batch_size:
            low = min(low, ext["first"])
            high = max(high, ext["last"])
    return range(low, high + 1)


def batch_learning_rates(cfg: Config, batch_size: int, extensions: list[dict[str, Any]]) -> list[float]:
    """Learning rates of one batch size, including recorded extensions of a centred grid."""
    if cfg.learning_rate.mode != "centered":
        return learning_rates(cfg.learning_rate, batch_size)
    return [centered_lr(cfg.learning_rate, batch_size, k)
            for k in grid_indices(cfg, batch_size, extensions)]


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
           extensions: list[dict[str, Any]] | None = None) -> list[PlannedRun]:
    """Every run of the grid, in a fixed order (batch size, learning rate, seed, axes), then
    every scheduled run (schedule, learning rate at its start batch, seed, axes); with
    `batch_sizes`, only those batch sizes' runs."""
    fixed = [r for size in batch_sizes or cfg.batch.sizes
             for r in runs_for(cfg, size, batch_learning_rates(cfg, size, extensions or []))]
    if batch_sizes is not None:
        return fixed
    return fixed + [r for sched in cfg.batch.schedules
                    for r in runs_for(cfg, sched.first_batch,
                                      learning_rates(cfg.learning_rate, sched.first_batch),
                                      sched.label)]


def units(cfg: Config, runs: list[PlannedRun], examples: dict[int, int]) -> list[Unit]:
    """The vmapped groups of the full grid: train.max_group_size runs of one batch size each.

    A centred grid keeps a batch size whole: deciding an extension needs all of its runs.
    """
    out = []
    keys = sorted({(r.schedule or "", r.batch_size) for r in runs})
    for schedule, size in keys:
        members = [r for r in runs if r.batch_size == size and (r.schedule or "") == schedule]
        limit = cfg.train.max_group_size
        if limit is None or cfg.learning_rate.mode == "centered":
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


# ---------------------------------------------------------------- best learning rate, extensions


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


def extension_side(summaries: list[dict[str, Any]], target: str) -> str | None:
    """Which side of a finished batch size's grid to extend, or None.

    low/high: the best LR is the grid's smallest/largest. When no LR reached the target and
    not all diverged: high if the largest LR did not diverge (the grid is too timid); None
    when it did (the optimum lies inside the grid and the budget, not the grid, is short).
    """
    rates = sorted({s["learning_rate"] for s in summaries})
    if not rates:
        return None
    best = best_lr(summaries, target)
    if best is not None:
        if len(rates) > 1 and best[0] == rates[0]:
            return "low"
        return "high" if best[0] == rates[-1] else None
    diverged = {s["learning_rate"] for s in summaries if s["status"] == "diverged"}
    if len(diverged) == len(rates) or rates[-1] in diverged:
        return None
    return "high"


def extension_due(cfg: Config, batch_size: int, summaries: list[dict[str, Any]],
                  extensions: list[dict[str, Any]]) -> str | None:
    """The side a finished centred batch size's grid extends next (extension_side for the
    first target), or None: no target, no extension called for, or max_extensions reached."""
    done = sum(e["batch_size"] == batch_size for e in extensions)
    if not cfg.targets or done >= cfg.learning_rate.max_extensions:
        return None
    return extension_side(summaries, cfg.targets[0])


def extension(cfg: Config, batch_size: int, side: str, extensions: list[dict[str, Any]]) -> dict:
    """The record of one extension: half the grid's width of new points on `side`."""
    indices = grid_indices(cfg, batch_size, extensions)
    width = max(1, (cfg.learning_rate.num - 1) // 2)
    first, last = ((indices.start - width, indices.start - 1) if side == "low"
                   else (indices.stop, indices.stop + width - 1))
    rates = [centered_lr(cfg.learning_rate, batch_size, k) for k in range(first, last + 1)]
    return {"batch_size": batch_size, "side": side, "first": first, "last": last,
            "learning_rates": rates, "round": 1 + sum(e["batch_size"] == batch_size for e in extensions)}
