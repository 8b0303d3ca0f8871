"""From a config to finished run folders: the grid, the groups that share a program, the writing.

The grid is batch sizes x learning rates x seeds. Runs at one batch size share a compiled
program and train as vmapped groups (at most train.max_group_size runs each). Finished runs
(summary.json present) are skipped, so running the same command again resumes a killed sweep.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import jax
import yaml

from scaling import config as config_mod, plan, store
from scaling.config import Config, ConfigError, learning_rates, parse_target
from scaling.engine import GroupProgram, GroupSpec, RunSpec, eval_steps, run_group
from scaling.gradients import GroupLayout
from scaling.parallel import is_leader, make_mesh, put_replicated
from scaling.tasks import build_task
from scaling.tasks.base import Task

# Sections whose change makes earlier runs incomparable; the grid's axes may grow freely.
GRID_KEYS = ("batch", "learning_rate", "seeds", "targets", "train", "parallel", "name")


@dataclass(frozen=True)
class PlannedRun:
    run_id: str
    batch_size: int
    spec: RunSpec


def run_id(batch_size: int, spec: RunSpec) -> str:
    """Readable and deterministic: the same hyperparameters always give the same folder name."""
    return re.sub(r"[^A-Za-z0-9.+_-]", "_", f"bs{batch_size}-lr{spec.learning_rate:.6g}-seed{spec.seed}")


def expand(cfg: Config, batch_sizes: list[int] | None = None) -> list[PlannedRun]:
    """Every run of the grid, in a fixed order (batch size, learning rate, seed)."""
    o = cfg.optimizer
    runs = []
    for size in batch_sizes or cfg.batch.sizes:
        for lr in learning_rates(cfg.learning_rate, size):
            for seed in cfg.seeds:
                spec = RunSpec(lr, seed, o.momentum, o.weight_decay, o.b1, o.b2, o.eps)
                runs.append(PlannedRun(run_id(size, spec), size, spec))
    return runs


def check_folder(cfg: Config, out: Path, force: bool) -> None:
    """Refuse to mix runs of a different task, model, optimizer, schedule or budget into `out`."""
    path = out / "sweep.yaml"
    if not path.is_file() or force:
        return
    old = yaml.safe_load(path.read_text()) or {}
    new = config_mod.to_dict(cfg)
    differ = [k for k in new if k not in GRID_KEYS and old.get(k) != new[k]]
    if differ:
        raise ConfigError(
            f"{out}: holds a sweep with a different {', '.join(differ)} ({differ[0]}: "
            f"{old.get(differ[0])!r} there, {new[differ[0]]!r} here); use a new --out folder, "
            "or --force to add these runs anyway. To extend a sweep on purpose, change only "
            "batch sizes, learning rates or seeds.")


def group_spec(cfg: Config, batch_size: int, data_shards: int) -> tuple[GroupSpec, plan.Arithmetic]:
    arith = plan.for_config(cfg, batch_size, data_shards)
    try:
        layout = GroupLayout.choose(batch_size, cfg.batch.accumulation, data_shards, cfg.gns.groups,
                                    cfg.gns.enabled)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.gns.enabled and cfg.gns.hessian_every and layout.num_groups < 2:
        raise ConfigError(f"gns.hessian_every: got {cfg.gns.hessian_every}, but batch size "
                          f"{batch_size} cannot be split into 2 or more groups; expected 0 here")
    spec = GroupSpec(
        batch_size=batch_size, layout=layout, optimizer=cfg.optimizer.name,
        total_steps=arith.total_steps, chunk_steps=min(cfg.train.chunk_steps, arith.total_steps),
        schedule=cfg.schedule.name, warmup_steps=arith.warmup_steps,
        final_fraction=cfg.schedule.final_fraction, num_train=arith.num_examples,
        drop_last=cfg.batch.drop_last, targets=tuple(parse_target(t) for t in cfg.targets),
        divergence_factor=cfg.train.divergence_factor, stop_at_targets=cfg.train.stop_at_targets,
        measure_gns=cfg.gns.enabled, ema_decay=cfg.gns.ema_decay,
        hessian_every=cfg.gns.hessian_every if cfg.gns.enabled else 0)
    return spec, arith


class Writer:
    """Streams one group's metrics into its run folders and writes the summaries at the end."""

    def __init__(self, cfg: Config, out: Path, runs: list[PlannedRun], arith: plan.Arithmetic,
                 task: Task, on_progress: Callable[[int], None]) -> None:
        self.cfg, self.out, self.runs, self.arith, self.task = cfg, out, runs, arith, task
        self.on_progress = on_progress
        self.last: list[dict[str, Any]] = [{} for _ in runs]
        self.wall_s = 0.0
        self.tokens_per_example = task.tokens_per_example(cfg.task.options)
        if is_leader():
            for r in runs:
                store.start_run(out, r.run_id, self.run_config(r))

    def run_config(self, r: PlannedRun) -> dict[str, Any]:
        c = config_mod.to_dict(self.cfg)
        return {"run_id": r.run_id, "task": c["task"], "model": c["model"],
                "optimizer": {"name": self.cfg.optimizer.name, **asdict(r.spec)},
                "schedule": c["schedule"], "batch_size": r.batch_size,
                "accumulation": self.cfg.batch.accumulation, "drop_last": self.cfg.batch.drop_last,
                "budget": c["budget"], "total_steps": self.arith.total_steps,
                "warmup_steps": self.arith.warmup_steps, "targets": self.cfg.targets,
                "learning_rate": r.spec.learning_rate, "seed": r.spec.seed,
                "eval": c["eval"], "gns": c["gns"], "data": self.task.describe()}

    def counts(self, steps: int) -> tuple[int, int | None]:
        examples = self.arith.examples_at(steps)
        return examples, None if self.tokens_per_example is None else examples * self.tokens_per_example

    def __call__(self, records: list[list[dict]], wall_s: float) -> None:
        self.wall_s = wall_s
        furthest = 0
        for i, rows in enumerate(records):
            for row in rows:
                row["examples"], row["tokens"] = self.counts(row["step"])
                row["wall_s"] = round(wall_s, 3)
                furthest = max(furthest, row["step"])
            if rows:
                self.last[i] = rows[-1]
                if is_leader():
                    store.append_metrics(self.out, self.runs[i].run_id, rows)
        self.on_progress(furthest)

    def finish(self, results: list, compile_s: float) -> list[dict[str, Any]]:
        summaries = []
        for r, res, last in zip(self.runs, results, self.last):
            examples, tokens = self.counts(res.steps)
            to_steps = {t: s for t, s in zip(self.cfg.targets, res.target_steps)}
            summary = {
                "run_id": r.run_id, "status": res.status, "task": self.cfg.task.name,
                "batch_size": r.batch_size, "learning_rate": r.spec.learning_rate,
                "seed": r.spec.seed, "optimizer": self.cfg.optimizer.name, "steps": res.steps,
                "examples": examples, "tokens": tokens, "steps_to_target": to_steps,
                "examples_to_target": {t: None if s is None else self.counts(s)[0]
                                       for t, s in to_steps.items()},
                "final": last, "b_simple": last.get("b_simple"), "wall_s": round(self.wall_s, 3),
                "compile_s": round(compile_s, 3), "group_size": len(self.runs)}
            summaries.append(summary)
            if is_leader():
                store.finish_run(self.out, r.run_id, summary)
        return summaries


def _eval_data(task: Task, cfg: Config) -> dict:
    """The fixed evaluation subset: the first eval.examples examples of the task's eval set."""
    arrays = task.eval_arrays()
    if cfg.eval.examples is not None:
        arrays = {k: v[: cfg.eval.examples] for k, v in arrays.items()}
    return arrays


def run(cfg: Config, out: str | Path, batch_sizes: list[int] | None = None, force: bool = False,
        quiet: bool = False) -> list[dict[str, Any]]:
    """Train every unfinished run of the grid (optionally only some batch sizes) into `out`."""
    out = Path(out)
    runs_axis, data_shards = config_mod.validate_devices(cfg, jax.device_count())
    for size in batch_sizes or []:
        if size not in cfg.batch.sizes:
            raise ConfigError(f"--batch-size: got {size}, expected one of the config's batch.sizes "
                              f"{cfg.batch.sizes}")
    planned = expand(cfg, batch_sizes)
    specs = {size: group_spec(cfg, size, data_shards) for size in {r.batch_size for r in planned}}
    check_folder(cfg, out, force)
    if is_leader():
        out.mkdir(parents=True, exist_ok=True)
        store.atomic_write(out / "sweep.yaml", config_mod.to_yaml(cfg))
    todo = [r for r in planned if not store.is_done(out, r.run_id)]
    if not todo:
        return []
    mesh = make_mesh(runs_axis, data_shards)
    task = build_task(cfg)
    data = put_replicated(mesh, task.train_arrays() or {})
    eval_data = put_replicated(mesh, _eval_data(task, cfg))
    summaries = []
    for size in sorted({r.batch_size for r in todo}):
        spec, arith = specs[size]
        program = GroupProgram(task, spec, mesh)
        points = eval_steps(spec.total_steps, cfg.eval.every, cfg.eval.points_per_decade)
        members = [r for r in todo if r.batch_size == size]
        limit = cfg.train.max_group_size or len(members)
        for start in range(0, len(members), limit):
            group = members[start:start + limit]
            summaries += _train_group(cfg, out, program, group, arith, task, data, eval_data,
                                      points, runs_axis, quiet)
    return summaries


def _train_group(cfg: Config, out: Path, program: GroupProgram, group: list[PlannedRun],
                 arith: plan.Arithmetic, task: Task, data: Any, eval_data: Any, points: Any,
                 runs_axis: int, quiet: bool) -> list[dict[str, Any]]:
    from tqdm import tqdm

    desc = f"batch {group[0].batch_size}: {len(group)} runs"
    bar = tqdm(total=arith.total_steps, desc=desc, unit="step", disable=quiet or not is_leader(),
               leave=True, dynamic_ncols=True)

    def progress(step: int) -> None:
        bar.update(max(0, step - bar.n))

    writer = Writer(cfg, out, group, arith, task, progress)
    started = time.perf_counter()
    results, compile_s = run_group(program, [r.spec for r in group], data, eval_data, points,
                                   writer, runs_axis)
    summaries = writer.finish(results, compile_s)
    bar.close()
    if not quiet and is_leader():
        done = sum(s["status"] == "completed" for s in summaries)
        diverged = sum(s["status"] == "diverged" for s in summaries)
        print(f"  batch {group[0].batch_size}: {done} completed, {diverged} diverged, "
              f"{len(group) - done - diverged} out of budget, {time.perf_counter() - started:.1f} s "
              f"(compile {compile_s:.1f} s)")
    return summaries
