"""From a config to finished run folders: the grid, the groups that share a program, the writing.

The grid is batch sizes x learning rates x seeds. Runs at one batch size share a compiled
program and train as vmapped groups (at most train.max_group_size runs each). Finished runs
(summary.json present) are skipped, so running the same command again resumes a killed sweep.
`shard=(i, n)` trains only this host's share of the groups (scaling.sweep.grid.partition); a
centred learning-rate grid grows at its edges after a batch size finishes (extensions.json).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import yaml

from scaling import config as config_mod, store
from scaling.config import Config, ConfigError, parse_target
from scaling.sweep import grid, plan, progress, schedule, segments
from scaling.sweep.grid import PlannedRun, Unit, expand
from scaling.sweep.trackers import Tracker, open_trackers
from scaling.sweep.writer import OnRecords, Writer
from scaling.tasks import build_task
from scaling.tasks.base import Task
from scaling.train import memory, precision, stream, throughput
from scaling.train.checkpoint import GroupCheckpoints
from scaling.train.loop import run_group
from scaling.train.mesh import is_leader, make_mesh, put_replicated
from scaling.train.program import GroupProgram
from scaling.train.spec import GroupLayout, GroupSpec

log = logging.getLogger(__name__)

# Sections that may change between invocations into one folder: the grid's axes (which may grow
# freely, as may list-valued optimizer scalars, config.AXES: see _differences), the analysis,
# and knobs that do not change results. Any other change makes earlier runs incomparable.
GRID_KEYS = ("batch", "learning_rate", "seeds", "targets", "train", "parallel", "name", "analysis",
             "data", "log", "branch")


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, value there, value here) of every non-grid setting that changed.

    An optimizer scalar that is a list on either side is a grid axis and may change like the
    learning rates; as a number on both sides it must stay the same.
    """
    out = [(k, old.get(k), new[k]) for k in new
           if k not in GRID_KEYS and k != "optimizer" and old.get(k) != new[k]]
    # A folder from before train.precision existed trained in float32.
    old_precision = precision.here((old.get("train") or {}).get("precision", "float32"))
    new_precision = precision.here(new["train"]["precision"])
    if old_precision != new_precision:
        out.append(("train.precision", old_precision, new_precision))
    old_opt, new_opt = dict(old.get("optimizer") or {}), dict(new["optimizer"])
    for k in config_mod.AXES:
        if isinstance(old_opt.get(k), list) or isinstance(new_opt.get(k), list):
            old_opt.pop(k, None)
            new_opt.pop(k, None)
    return out + [(f"optimizer.{k}", old_opt.get(k), new_opt.get(k))
                  for k in {**old_opt, **new_opt} if old_opt.get(k) != new_opt.get(k)]


def check_folder(cfg: Config, out: Path, force: bool) -> None:
    """Refuse to mix runs of a different task, model, optimizer, schedule or budget into `out`."""
    path = out / "sweep.yaml"
    if not path.is_file() or force:
        return
    differ = _differences(yaml.safe_load(path.read_text()) or {}, config_mod.to_dict(cfg))
    if differ:
        key, there, here = differ[0]
        raise ConfigError(
            f"{out}: holds a sweep with a different {', '.join(d[0] for d in differ)} ({key}: "
            f"{there!r} there, {here!r} here); use a new --out folder, or --force to add these "
            "runs anyway. To extend a sweep on purpose, change only batch sizes, learning rates, "
            "seeds, or optimizer momentum/weight_decay/b2 given as lists (grid axes).")


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
        hessian_every=cfg.gns.hessian_every if cfg.gns.enabled else 0, gns_every=cfg.gns.every,
        preconditioned=cfg.gns.enabled and cfg.gns.preconditioned, repack=cfg.train.repack,
        reach=cfg.reached.reach, eval_every=cfg.eval.every,
        points_per_decade=cfg.eval.points_per_decade, param_ema=cfg.eval.ema_decay,
        precision=precision.here(cfg.train.precision))
    return spec, arith


def placement(cfg: Config, task: Task) -> str:
    """device or host: data.placement, or for auto the host when the training set would take
    more than a quarter of the device's memory limit (CPU reports none: device)."""
    if cfg.data.placement != "auto":
        return cfg.data.placement
    limit = memory.device_limit(cfg.train.memory_limit_gb)
    arrays = task.train_arrays()
    if limit is None or not task.finite_data or (cfg.gns.enabled and cfg.gns.hessian_every):
        return "device"
    return "host" if memory.tree_bytes(arrays) > limit / 4 else "device"


def eval_subset(task: Task, cfg: Config) -> dict:
    """The fixed evaluation subset: the first eval.examples examples of the task's eval set."""
    arrays = task.eval_arrays()
    if cfg.eval.examples is not None:
        arrays = {k: v[: cfg.eval.examples] for k, v in arrays.items()}
    return arrays


@dataclass
class Prepared:
    """A validated sweep, before any compute: the grid, each batch size's program, this shard."""

    cfg: Config
    out: Path
    planned: list[PlannedRun]  # the whole grid, recorded extensions included
    specs: dict[int, tuple[GroupSpec, plan.Arithmetic]]
    units: list[Unit]  # this shard's groups of the base grid
    extensions: list[dict[str, Any]]
    runs_axis: int
    data_shards: int
    checkpoint_at: tuple[int, ...] = ()  # steps every group saves (and keeps) its state at
    batch_sizes: list[int] | None = None  # only these batch sizes (scaling train), else all

    @property
    def centered(self) -> bool:
        return self.cfg.learning_rate.mode == "centered"

    def runs_of(self, unit: Unit) -> list[PlannedRun]:
        """A unit's runs; a centred unit is its whole batch size, extensions so far included."""
        if self.centered:
            return self.batch_runs(unit.batch_size)
        return list(unit.runs)

    def batch_runs(self, size: int) -> list[PlannedRun]:
        rates = grid.batch_learning_rates(self.cfg, size, self.extensions)
        return grid.runs_for(self.cfg, size, rates)

    def cost(self, r: PlannedRun) -> int:
        return self.specs[r.batch_size][1].examples


def prepare(cfg: Config, out: str | Path, batch_sizes: list[int] | None = None,
            force: bool = False, shard: tuple[int, int] | None = None) -> Prepared:
    """Every check that needs no training, in order: devices, batch sizes, shard, the folder."""
    out = Path(out)
    runs_axis, data_shards = config_mod.validate_devices(cfg, jax.device_count())
    for size in batch_sizes or []:
        if size not in cfg.batch.sizes:
            raise ConfigError(f"--batch-size: got {size}, expected one of the config's batch.sizes "
                              f"{cfg.batch.sizes}")
    if shard is not None and not 0 <= shard[0] < shard[1]:
        raise ConfigError(f"--shard: got {shard[0]}/{shard[1]}, expected I/N with 0 <= I < N")
    extensions = store.read_extensions(out) if cfg.learning_rate.mode == "centered" else []
    planned = expand(cfg, batch_sizes, extensions)
    specs = {size: group_spec(cfg, size, data_shards) for size in {r.batch_size for r in planned}}
    examples = {size: arith.examples for size, (_, arith) in specs.items()}
    units = grid.units(cfg, expand(cfg, batch_sizes), examples)
    if shard is not None:
        units = grid.partition(units, shard[1])[shard[0]]
    check_folder(cfg, out, force)
    return Prepared(cfg=cfg, out=out, planned=planned, specs=specs, units=units,
                    extensions=extensions, runs_axis=runs_axis, data_shards=data_shards,
                    batch_sizes=batch_sizes)


def describe(p: Prepared) -> str:
    """The --dry-run report: the plan arithmetic, this shard's groups and runs; nothing written."""
    arith = [p.specs[size][1] for size in sorted(p.specs)]
    schedules = [segments.describe(p.cfg, s, p.data_shards) for s in p.cfg.batch.schedules
                 if p.batch_sizes is None]
    lines = [plan.format_table(arith), *schedules, "",
             f"groups ({len(p.units)}) and runs in {p.out}:"]
    for unit in p.units:
        runs = p.runs_of(unit)
        done = [store.is_done(p.out, r.run_id) for r in runs]
        lines.append(f"{unit.label} group {unit.index}: {len(runs)} runs, "
                     f"{sum(done)} done, {len(runs) - sum(done)} to train")
        lines += [f"  {'done ' if d else 'to do'}  {r.run_id}" for r, d in zip(runs, done)]
    lines += [f"extension: batch {e['batch_size']} {e['side']} side, learning rates "
              + ", ".join(f"{lr:.4g}" for lr in e["learning_rates"]) for e in p.extensions]
    device = memory.device_limit(p.cfg.train.memory_limit_gb)
    if device is not None:
        lines.append(f"memory: {device / memory.GB:.3g} GB per device; the sweep compiles each "
                     "batch size's chunk first and cuts its groups further if they do not fit")
    return "\n".join(lines)


def final_table(p: Prepared) -> str:
    """The end table over the whole grid (every shard's runs) as it stands on disk."""
    target = p.cfg.targets[0] if p.cfg.targets else None
    planned = expand(p.cfg, p.batch_sizes, store.read_extensions(p.out) if p.centered else [])
    summaries = {r.run_id: store.read_summary(p.out, r.run_id) for r in planned}
    return progress.format_final(progress.batch_rows(planned, summaries, target), target, str(p.out))


def run(cfg: Config, out: str | Path, batch_sizes: list[int] | None = None, force: bool = False,
        quiet: bool = False, shard: tuple[int, int] | None = None,
        on_records: OnRecords | None = None, shown: str = "auto") -> list[dict[str, Any]]:
    """Train every unfinished run of this shard of the grid (optionally only some batch sizes).

    `on_records(rows_per_run, wall_s)`, if given, sees each group's rows once per chunk, after
    they are written (examples and tokens filled in). `shown`: how each group's progress shows
    (scaling.sweep.progress.MODES; `quiet` shows none and no tables).
    """
    p = prepare(cfg, out, batch_sizes, force, shard)
    if is_leader():
        p.out.mkdir(parents=True, exist_ok=True)
        store.atomic_write(p.out / "sweep.yaml", config_mod.to_yaml(cfg))
    session = Session(p, quiet, on_records, shown)
    summaries = []
    todo = lambda unit: [r for r in p.runs_of(unit) if r.run_id not in session.finished]
    try:
        for i, unit in enumerate(p.units):
            runs = todo(unit)
            if i + 1 < len(p.units):
                session.compile_ahead(todo(p.units[i + 1]), runs)
            summaries += session.train(runs)
            if p.centered:
                summaries += _extend(session, unit.batch_size)
    finally:
        session.close()
    return summaries


def _extend(session: Session, size: int) -> list[dict[str, Any]]:
    """Grow a centred grid at the edge holding the optimum, train the new points, repeat."""
    p, summaries = session.p, []
    while p.cfg.targets:
        runs = p.batch_runs(size)
        todo = [r for r in runs if r.run_id not in session.finished]
        if todo:
            summaries += session.train(todo)
            continue
        side = grid.extension_due(p.cfg, size, [session.finished[r.run_id] for r in runs],
                                  p.extensions)
        if side is None:
            break
        record = grid.extension(p.cfg, size, side, p.extensions)
        p.extensions.append(record)
        if is_leader():
            store.add_extension(p.out, record)
            session.say(f"batch {size}: best learning rate at the {side} edge of the grid; "
                        "extending with " + ", ".join(f"{lr:.4g}" for lr in record["learning_rates"]))
    return summaries


class Session:
    """The devices, data and compiled programs of one invocation, built on first need."""

    def __init__(self, p: Prepared, quiet: bool, on_records: OnRecords | None = None,
                 shown: str = "auto") -> None:
        self.p, self.quiet, self.on_records = p, quiet, on_records
        self.shown = "none" if quiet else progress.resolve(shown)  # each group's progress
        self.finished = {r.run_id: s for r in p.planned
                         if (s := store.read_summary(p.out, r.run_id))}
        self.pending = {r.run_id: r for u in p.units for r in p.runs_of(u)
                        if r.run_id not in self.finished}
        self.context: tuple | None = None
        self.host_data = False  # data.placement resolved to host (with the context)
        self.ahead: concurrent.futures.ThreadPoolExecutor | None = None  # compile_ahead's thread
        self.programs: dict[int, GroupProgram] = {}
        self.phase_programs: dict[tuple[int, int], tuple[GroupProgram, plan.Arithmetic]] = {}
        self.started, self.cost_done, self.groups_done = time.perf_counter(), 0, 0
        self.widths: dict[tuple[int, str | None], int] = {}  # group width per (batch, schedule)
        self.trackers = open_trackers(p.cfg, p.out) if is_leader() else []

    def say(self, text: str) -> None:
        """A message for the person running the sweep (the `scaling` logger; the CLI shows it)."""
        if not self.quiet and is_leader():
            log.info("%s", text)

    def program(self, size: int) -> GroupProgram:
        """One program per batch size (it compiles its chunk once per group width)."""
        cfg = self.p.cfg
        if self.context is None:
            mesh = make_mesh(self.p.runs_axis, self.p.data_shards)
            task = build_task(cfg)
            self.host_data = placement(cfg, task) == "host"
            on_device = {} if self.host_data else task.train_arrays() or {}
            if self.host_data:
                self.say(f"training data streamed from the host "
                         f"({memory.tree_bytes(task.train_arrays()) / memory.GB:.3g} GB)")
            self.context = (mesh, task, put_replicated(mesh, on_device),
                            put_replicated(mesh, eval_subset(task, cfg)))
        if size not in self.programs:
            spec = self.p.specs[size][0]
            if self.host_data:
                arrays = self.context[1].train_arrays()
                steps = stream.chunk_steps(spec.chunk_steps, size, len(cfg.seeds),
                                           stream.example_bytes(arrays))
                spec = dataclasses.replace(spec, host_data=True, chunk_steps=steps)
            self.programs[size] = GroupProgram(self.context[1], spec, self.context[0])
        return self.programs[size]

    def scheduled(self, group: list[PlannedRun]) -> list[dict[str, Any]]:
        """Train one batch-size schedule's group (scaling.sweep.schedule)."""
        cfg = self.p.cfg
        sched = next(s for s in cfg.batch.schedules if s.label == group[0].schedule)
        arith = self.p.specs[sched.first_batch][1]
        _, task, data, eval_data = self.context
        return schedule.train(cfg, self.p.out, sched, group,
                              lambda b: self._phase_program(b, arith.examples), task, data,
                              eval_data, self.p.runs_axis, arith.examples, arith, self.shown,
                              self.on_records, self.trackers)

    def _phase_program(self, size: int, budget: int) -> tuple[GroupProgram, plan.Arithmetic]:
        """The program of a schedule's phase at `size` (the run's budget in examples, no
        targets), with its arithmetic; one per batch size and budget."""
        if (size, budget) not in self.phase_programs:
            spec, arith = group_spec(segments.budget_in_examples(self.p.cfg, budget), size,
                                     self.p.data_shards)
            program = GroupProgram(self.context[1], schedule.phase_spec(spec), self.context[0])
            self.phase_programs[(size, budget)] = (program, arith)
        return self.phase_programs[(size, budget)]

    def compile_ahead(self, runs: list[PlannedRun], now: list[PlannedRun]) -> None:
        """Compile the chunk of the group that trains after `now` (the first of `runs`) on a
        background thread while `now` trains: its compile time then overlaps training. Only
        where no memory limit may change the group's width, and for fixed batch sizes; a
        failure here is left for the group itself to raise."""
        if not runs or not now or memory.device_limit(self.p.cfg.train.memory_limit_gb) \
                or runs[0].schedule is not None:
            return
        self.program(now[0].batch_size)  # the devices, the data and `now`'s program first
        program = self.program(runs[0].batch_size)
        size = min(self.p.cfg.train.max_group_size or len(runs), len(runs))
        width = -(-size // self.p.runs_axis) * self.p.runs_axis
        mesh, task, data, eval_data = self.context
        if self.host_data:
            seeds = {r.spec.seed for r in runs[:size]}
            data = stream.abstract(program.spec, task.train_arrays(), len(seeds), mesh)
        if self.ahead is None:
            self.ahead = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self.ahead.submit(program.compile_ahead, width, data, eval_data)

    def close(self) -> None:
        """Wait for a compile started ahead (it may be the next invocation's cache entry)."""
        if self.ahead is not None:
            self.ahead.shutdown(wait=True)

    def _stream(self, program: GroupProgram, seeds: list[int]) -> stream.HostStream | None:
        """The group's host stream (data.placement: host), else None."""
        if not self.host_data:
            return None
        mesh, task = self.context[0], self.context[1]
        return stream.HostStream(program.spec, task.train_arrays(), seeds, program.new_perm, mesh)

    def train(self, runs: list[PlannedRun]) -> list[dict[str, Any]]:
        """Train `runs` (one batch size) in groups of train.max_group_size, reporting after each."""
        summaries: list[dict[str, Any]] = []
        limit = self.p.cfg.train.max_group_size or max(1, len(runs))
        if runs and runs[0].schedule is None:
            limit = self._fit_memory(runs[0].batch_size, min(limit, len(runs)))
        if runs:
            self.widths[(runs[0].batch_size, runs[0].schedule)] = limit
        for start in range(0, len(runs), limit):
            group = runs[start:start + limit]
            size = group[0].batch_size
            program = self.program(size)
            _, task, data, eval_data = self.context
            if group[0].schedule is not None:
                done = self.scheduled(group)
            else:
                feed = self._stream(program, [r.spec.seed for r in group])
                try:
                    done = _train_group(self.p.cfg, self.p.out, program, group,
                                        self.p.specs[size][1], task, data, eval_data,
                                        self.p.runs_axis, self.shown, self.on_records, feed,
                                        self.trackers, self.p.checkpoint_at)
                finally:
                    if feed is not None:
                        feed.close()
            for r, s in zip(group, done):
                self.finished[r.run_id] = s
                self.pending.pop(r.run_id, None)
                self.cost_done += self.p.cost(r)
            summaries += done
            self.groups_done += 1
            self.report()
        return summaries

    def _fit_memory(self, size: int, limit: int) -> int:
        """`limit` cut to the widest group whose compiled chunk fits device memory (where a limit
        is known: train.memory_limit_gb or the device's own); unchanged, and nothing compiled,
        without one. The chunk compiled here is the one the group at that width then runs."""
        device = memory.device_limit(self.p.cfg.train.memory_limit_gb)
        if device is None:
            return limit
        program = self.program(size)
        _, task, data, eval_data = self.context
        width = -(-limit // self.p.runs_axis) * self.p.runs_axis
        if self.host_data:
            data = stream.abstract(program.spec, task.train_arrays(), len(self.p.cfg.seeds),
                                   self.context[0])
        fit = memory.group_width(program, width, data, eval_data, device, self.p.runs_axis)
        if fit is None or fit[0] >= limit:
            return limit
        self.say(f"batch {size}: {limit} runs need about {fit[1] / memory.GB:.3g} GB, the device "
                 f"has {device / memory.GB:.3g} GB: groups of {fit[0]}")
        return fit[0]

    def report(self) -> None:
        """The progress table over this shard's runs."""
        if self.quiet or not is_leader():
            return
        p = self.p
        target = p.cfg.targets[0] if p.cfg.targets else None
        shard_runs = [r for u in p.units for r in p.runs_of(u)]
        limit = p.cfg.train.max_group_size
        left: dict[tuple, int] = {}
        for r in self.pending.values():
            left[(r.batch_size, r.schedule)] = left.get((r.batch_size, r.schedule), 0) + 1
        groups_left = sum(-(-n // self.widths.get(key, limit or n)) for key, n in left.items())
        eta_s = progress.eta(time.perf_counter() - self.started, self.cost_done,
                             sum(p.cost(r) for r in self.pending.values()))
        summaries = {r.run_id: self.finished.get(r.run_id) for r in shard_runs}
        rows = progress.batch_rows(shard_runs, summaries, target)
        self.say(progress.format_progress(rows, target, self.groups_done, groups_left, eta_s))


def _train_group(cfg: Config, out: Path, program: GroupProgram, group: list[PlannedRun],
                 arith: plan.Arithmetic, task: Task, data: Any, eval_data: Any,
                 runs_axis: int, shown: str, on_records: OnRecords | None = None,
                 feed: stream.HostStream | None = None,
                 trackers: list[Tracker] | None = None,
                 at_steps: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """Train one group into its run folders (and `trackers`); `shown`: how its progress shows
    (progress.MODES, resolved). With `at_steps`, the state is also saved, and kept, at those
    steps, beside runs.json (the group's run ids in slot order: what a branch restores)."""
    checkpoints = None
    if cfg.train.checkpoint_minutes > 0 or at_steps:
        folder = store.checkpoint_dir(out, group_key(program, group))
        checkpoints = GroupCheckpoints(folder, cfg.train.checkpoint_minutes,
                                       cfg.train.keep_checkpoints, at_steps)
        if at_steps and is_leader():
            folder.mkdir(parents=True, exist_ok=True)
            store.write_json(folder / "runs.json", [r.run_id for r in group])
    resume = checkpoints.restore(program, data, eval_data) if checkpoints else None
    desc = f"batch {group[0].batch_size}: {len(group)} runs"
    if resume is not None and is_leader():
        log.info("%s: resumed from the checkpoint at step %d", desc, resume.first_step)
    bar = progress.GroupProgress(shown if is_leader() else "none", desc, arith.total_steps,
                                 group[0].batch_size, len(group),
                                 resume.first_step if resume else 0)
    writer = Writer(cfg, out, group, arith, task, bar.step, on_records,
                    resume.first_step if resume else None, trackers)
    try:
        results, compile_s = run_group(program, [r.spec for r in group], data, eval_data, writer,
                                       runs_axis, feed, checkpoints, resume, bar.running)
    except BaseException:
        writer.close()
        raise
    finally:
        bar.close()
    speed = throughput.figures(
        sum(r.steps for r in results), group[0].batch_size, max(writer.wall_s - compile_s, 0.0),
        program.model_flops(data), program.mesh.devices.flat[0], program.mesh.devices.size,
        program.spec.precision)
    summaries = writer.finish(results, compile_s, speed)
    if checkpoints is not None:
        checkpoints.finish()
    return summaries


def group_key(program: GroupProgram, group: list[PlannedRun]) -> str:
    """Names a group's checkpoints: its runs and everything about its program, so a checkpoint
    is only ever resumed by the same runs compiled the same way."""
    text = json.dumps([repr(program.spec), [r.run_id for r in group]])
    return f"batch{group[0].batch_size}-" + hashlib.sha256(text.encode()).hexdigest()[:16]
