"""The devices, data and compiled programs of one invocation, and the training of its groups.

A `Session` builds its context (mesh, task, data on the devices) on first need, one program
per batch size, and trains groups of one batch size: fixed batch sizes here, batch-size
schedules through scaling.sweep.schedule. Each group starts the one way a group starts
(scaling.train.start), trains through `run_group`, and is written by its sinks: the run
folders, the trackers, any caller's hooks and the progress display.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict
from typing import Any, NamedTuple

from jax.sharding import Mesh

from scaling import store
from scaling.config import Config
from scaling.config.arithmetic import Arithmetic
from scaling.store.records import run_config, run_summary
from scaling.sweep import progress, schedule, segments
from scaling.sweep.claiming import GroupClaims
from scaling.sweep.grid import PlannedRun
from scaling.sweep.prepare import Prepared
from scaling.sweep.stopping import Dominance
from scaling.sweep.trackers import TrackerSink, open_trackers
from scaling.sweep.writer import Writer, arithmetic_count
from scaling.tasks import build_task
from scaling.tasks.base import Task
from scaling.train import memory, precision, start as start_mod, stream, throughput
from scaling.train.checkpoint import GroupCheckpoints
from scaling.train.loop import GroupEnd, RunResult, run_group
from scaling.train.mesh import is_leader, make_mesh, put_replicated
from scaling.train.program import GroupProgram
from scaling.train.sinks import Sink, close_all, finish_all
from scaling.train.spec import group_spec

log = logging.getLogger(__name__)


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


class Context(NamedTuple):
    """What every group of a session shares: the mesh, the task, its training arrays on the
    devices (empty when streamed from the host) and the fixed evaluation subset."""

    mesh: Mesh
    task: Task
    data: Any
    eval_data: Any
    host_data: bool


def build_context(cfg: Config, runs_axis: int, data_shards: int) -> Context:
    """The mesh, the task and its data placed as data.placement says."""
    mesh = make_mesh(runs_axis, data_shards)
    task = build_task(cfg)
    host = placement(cfg, task) == "host"
    if host:
        log.info("training data streamed from the host (%.3g GB)",
                 memory.tree_bytes(task.train_arrays()) / memory.GB)
    on_device = {} if host else task.train_arrays() or {}
    return Context(mesh, task, put_replicated(mesh, on_device),
                   put_replicated(mesh, eval_subset(task, cfg)), host)


class Session:
    """One invocation's context and programs, built on first need; trains groups of runs.

    `hooks` are sinks of the caller's that hear every group's rows (after they are counted);
    `shown` is how each group's progress shows (progress.MODES, or none when quiet).
    """

    def __init__(self, p: Prepared, quiet: bool, hooks: list[Sink] | None = None,
                 shown: str = "auto") -> None:
        self.p, self.quiet, self.hooks = p, quiet, list(hooks or [])
        self.shown = "none" if quiet else progress.resolve(shown)
        self.finished = {r.run_id: s for r in p.planned
                         if (s := store.read_summary(p.out, r.run_id))}
        self.tally = progress.Tally(p, self.finished)
        self._context: Context | None = None
        self.programs: dict[int, GroupProgram] = {}
        self.phase_programs: dict[tuple[int, int], tuple[GroupProgram, Arithmetic]] = {}
        self.trackers = open_trackers(p.cfg, p.out) if is_leader() else []
        self.claims = GroupClaims(p.out)  # a group trains only while this process holds its claim

    @property
    def context(self) -> Context:
        if self._context is None:
            self._context = build_context(self.p.cfg, self.p.runs_axis, self.p.data_shards)
        return self._context

    def say(self, text: str) -> None:
        """A message for the person running the sweep (the `scaling` logger; the CLI shows it)."""
        if not self.quiet and is_leader():
            log.info("%s", text)

    def program(self, size: int) -> GroupProgram:
        """One program per batch size (it compiles its chunk once per group width)."""
        if size not in self.programs:
            ctx, spec = self.context, self.p.specs[size][0]
            if ctx.host_data:
                arrays = ctx.task.train_arrays()
                steps = stream.chunk_steps(spec.chunk_steps, size, len(self.p.cfg.seeds),
                                           stream.example_bytes(arrays))
                spec = spec.replace(data={"host_data": True}, chunk_steps=steps)
            self.programs[size] = GroupProgram(ctx.task, spec, ctx.mesh)
        return self.programs[size]

    def phase_program(self, size: int, budget: int) -> tuple[GroupProgram, Arithmetic]:
        """The program of a schedule's phase at `size` (the run's budget in examples, no
        targets), with its arithmetic; one per batch size and budget."""
        if (size, budget) not in self.phase_programs:
            spec, arith = group_spec(segments.budget_in_examples(self.p.cfg, budget), size,
                                     self.p.data_shards)
            program = GroupProgram(self.context.task, schedule.phase_spec(spec), self.context.mesh)
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
        data = self._data_shapes(program, {r.spec.seed for r in runs[:size]})
        program.compile_in_background(start_mod.width(size, self.p.runs_axis), data,
                                      self.context.eval_data)

    def _data_shapes(self, program: GroupProgram, seeds: set[int]) -> Any:
        """The training data as a chunk of `program` sees it: on the devices, or the shapes of
        a host-streamed chunk for these seeds."""
        ctx = self.context
        if not ctx.host_data:
            return ctx.data
        return stream.abstract(program.spec, ctx.task.train_arrays(), len(seeds), ctx.mesh)

    def close(self) -> None:
        """Wait for the compiles started ahead (one may be the next invocation's cache entry)."""
        for program in [*self.programs.values(), *(p for p, _ in self.phase_programs.values())]:
            program.close()

    def train(self, runs: list[PlannedRun]) -> list[dict[str, Any]]:
        """Train `runs` (one batch size) in groups of train.max_group_size, reporting after each;
        each group while this process holds its claim (scaling.sweep.claiming)."""
        summaries: list[dict[str, Any]] = []
        limit = self.p.cfg.train.max_group_size or max(1, len(runs))
        if runs and runs[0].schedule is None:
            limit = self._fit_memory(runs[0].batch_size, min(limit, len(runs)))
        if runs:
            self.tally.widths[(runs[0].batch_size, runs[0].schedule)] = limit
        for first in range(0, len(runs), limit):
            claimed = self.claims.train(runs[first:first + limit], self._group)
            if claimed is None or not claimed[0]:  # held, or finished, by another process
                continue
            group, done = claimed
            self.finished.update((r.run_id, s) for r, s in zip(group, done))
            self.tally.done(group)
            summaries += done
            if not self.quiet and is_leader():
                log.info("%s", self.tally.table(self.finished))
        return summaries

    def _group(self, group: list[PlannedRun]) -> list[dict[str, Any]]:
        return self._scheduled(group) if group[0].schedule else self._fixed(group)

    def _fit_memory(self, size: int, limit: int) -> int:
        """`limit` cut to the widest group whose compiled chunk fits device memory (where a limit
        is known: train.memory_limit_gb or the device's own); unchanged, and nothing compiled,
        without one. The chunk compiled here is the one the group at that width then runs."""
        device = memory.device_limit(self.p.cfg.train.memory_limit_gb)
        if device is None:
            return limit
        program = self.program(size)
        width = start_mod.width(limit, self.p.runs_axis)
        data = self._data_shapes(program, set(self.p.cfg.seeds))
        fit = memory.group_width(program, width, data, self.context.eval_data, device,
                                 self.p.runs_axis)
        if fit is None or fit[0] >= limit:
            return limit
        self.say(f"batch {size}: {limit} runs need about {fit[1] / memory.GB:.3g} GB, the device "
                 f"has {device / memory.GB:.3g} GB: groups of {fit[0]}")
        return fit[0]

    def _scheduled(self, group: list[PlannedRun]) -> list[dict[str, Any]]:
        """One batch-size schedule's group (scaling.sweep.schedule)."""
        sched = next(s for s in self.p.cfg.batch.schedules if s.label == group[0].schedule)
        arith = self.p.specs[sched.first_batch][1]
        self.program(sched.first_batch)
        return schedule.train(self, sched, group, arith)

    def _fixed(self, group: list[PlannedRun]) -> list[dict[str, Any]]:
        """One group at a fixed batch size, from its checkpoint where it has one."""
        size, ctx = group[0].batch_size, self.context
        program, arith = self.program(size), self.p.specs[size][1]
        checkpoints = self._checkpoints(program, group)
        runs = [r.spec for r in group]
        start = checkpoints.restore(program, runs, ctx.data, ctx.eval_data) if checkpoints else None
        if start is not None and is_leader():
            log.info("batch %d: %d runs: resumed from the checkpoint at step %d", size,
                     len(group), start.first_step)
        mode = "new" if start is None else "resume"
        start = start or start_mod.fresh(program, runs, ctx.data, ctx.eval_data, self.p.runs_axis)
        bar = progress.GroupProgress(self.shown_here(), f"batch {size}: {len(group)} runs",
                                     program.spec.total_steps, size, len(group), start.first_step,
                                     last_step=program.spec.last_step)
        sinks = self.sinks(group, arith, mode, arithmetic_count(arith, self._tokens()), bar)
        stopper = self._dominance(group)
        feed = None if not ctx.host_data else stream.HostStream(
            program.spec, ctx.task.train_arrays(), [r.spec.seed for r in group], program.new_perm,
            ctx.mesh)
        try:
            end = run_group(program, start, ctx.data, ctx.eval_data,
                            sinks + ([stopper] if stopper else []), feed, checkpoints,
                            stopper=stopper)
        except BaseException:
            close_all(sinks)
            raise
        finally:
            if feed is not None:
                feed.close()
        writer = sinks[0]
        summaries = self.summaries(group, end.results, writer.written, writer.wall_s, end.compile_s,
                                   _speed(program, arith, end, start.first_step, ctx.data),
                                   _stopped(end, stopper))
        finish_all(sinks, summaries)
        if checkpoints is not None:
            checkpoints.finish()
        return summaries

    def _dominance(self, group: list[PlannedRun]) -> Dominance | None:
        """The group's stopper of dominated runs (train.stop_dominated, with targets that stop
        runs), comparing it with the batch size's runs that trained in other groups."""
        cfg = self.p.cfg
        if not (cfg.train.stop_dominated and cfg.targets and cfg.train.stop_at_targets):
            return None
        ids = {r.run_id for r in group}
        others = [(r, self.finished[r.run_id]) for r in self.p.batch_runs(group[0].batch_size)
                  if r.run_id in self.finished and r.run_id not in ids]
        return Dominance(cfg, self.p.out, group, others)

    def _checkpoints(self, program: GroupProgram, group: list[PlannedRun]
                     ) -> GroupCheckpoints | None:
        """The group's checkpoints: every train.checkpoint_minutes, and kept at
        `checkpoint_at` beside runs.json (the group's run ids in slot order: what a branch
        restores)."""
        cfg, at_steps = self.p.cfg, self.p.checkpoint_at
        if cfg.train.checkpoint_minutes <= 0 and not at_steps:
            return None
        folder = store.checkpoint_dir(self.p.out, group_key(program, group))
        if at_steps and is_leader():
            folder.mkdir(parents=True, exist_ok=True)
            store.write_json(folder / "runs.json", [r.run_id for r in group])
        return GroupCheckpoints(folder, cfg.train.checkpoint_minutes, cfg.train.keep_checkpoints,
                                at_steps)

    def shown_here(self) -> str:
        """How a group's progress shows from this process (only the leader shows it)."""
        return self.shown if is_leader() else "none"

    def _tokens(self) -> int | None:
        return self.context.task.tokens_per_example(self.p.cfg.task.options)

    def sinks(self, group: list[PlannedRun], arith: Arithmetic, mode: str, count: Any,
              bar: progress.GroupProgress) -> list[Sink]:
        """A group's sinks, in the order they hear a chunk: the writer first (it counts the
        rows' examples and tokens), the trackers, the caller's hooks, the progress display,
        and the renewal of the group's claim."""
        ids = [r.run_id for r in group]
        configs = [self.run_config(r, arith) for r in group]
        return [Writer(self.p.out, ids, configs, count, mode),
                TrackerSink(self.trackers, ids, configs, mode), *self.hooks, bar,
                *self.claims.sinks()]

    def run_config(self, r: PlannedRun, arith: Arithmetic) -> dict[str, Any]:
        cfg = self.p.cfg
        extra = {}
        if r.schedule:
            extra["batch_schedule"] = asdict(next(s for s in cfg.batch.schedules
                                                  if s.label == r.schedule))
        return run_config(cfg, r.run_id, r.batch_size, r.spec, total_steps=arith.total_steps,
                          warmup_steps=arith.warmup_steps,
                          precision=precision.here(cfg.train.precision),
                          data=self.context.task.describe(), **extra)

    def summaries(self, group: list[PlannedRun], results: list[RunResult],
                  rows: list[list[dict[str, Any]]], wall_s: float, compile_s: float,
                  speed: dict[str, Any] | None, extra: list[dict[str, Any]] | None = None
                  ) -> list[dict[str, Any]]:
        """Every run's summary.json from its result and rows; `extra` (a scheduled group's):
        per run, its examples and tokens and the keys to add."""
        cfg, tpe, out = self.p.cfg, self._tokens(), []
        arith = self.p.specs[group[0].batch_size][1]
        for i, (r, res) in enumerate(zip(group, results)):
            more = dict(extra[i]) if extra else {}
            examples = more.pop("examples") if "examples" in more else arith.examples_at(res.steps)
            tokens = (more.pop("tokens") if "tokens" in more
                      else None if tpe is None else examples * tpe)
            if not r.schedule:
                more["extension_steps"] = max(res.steps - arith.total_steps, 0)
            out.append(run_summary(
                r.run_id, res.status, rows[i], batch_size=r.batch_size, spec=r.spec,
                steps=res.steps, examples=examples, tokens=tokens, targets=cfg.targets,
                reach=cfg.reached.reach, clip=cfg.reading_extension <= 1,
                task=cfg.task.name, optimizer=cfg.optimizer.name,
                wall_s=round(wall_s, 3), compile_s=round(compile_s, 3),
                group_size=len(group), throughput=speed, **more))
        return out


def group_key(program: GroupProgram, group: list[PlannedRun]) -> str:
    """Names a group's checkpoints: its runs and everything about its program, so a checkpoint
    is only ever resumed by the same runs compiled the same way."""
    text = json.dumps([repr(program.spec), program.precision, [r.run_id for r in group]])
    return f"batch{group[0].batch_size}-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _stopped(end: GroupEnd, stopper: Dominance | None) -> list[dict[str, Any]]:
    """Per run, what its summary adds: steps_censored where it stopped as dominated."""
    return [{"steps_censored": stopper.censored(i)} if res.status == "dominated" else {}
            for i, res in enumerate(end.results)]


def _speed(program: GroupProgram, arith: Arithmetic, end: GroupEnd, first: int,
           data: Any) -> dict[str, Any]:
    """The group's throughput over the steps it trained here (from `first`, a resumed group's
    checkpoint step) and its training seconds; its compile-ahead seconds apart."""
    steps = [max(r.steps - first, 0) for r in end.results]
    examples = sum(arith.examples_at(first + n) - arith.examples_at(first) for n in steps)
    mesh = program.mesh
    return {**throughput.figures(sum(steps), program.spec.batch_size, end.train_s,
                                 program.model_flops(data), mesh.devices.flat[0],
                                 mesh.devices.size, program.precision, examples),
            "compile_ahead_s": end.compile_ahead_s}
