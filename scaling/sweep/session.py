"""The devices, data and compiled programs of one invocation, and what its groups share.

A `Session` builds its context (mesh, task, data on the devices) on first need, one program
per batch size (and per schedule phase), compiles the next group's chunk ahead while one
trains, and holds the state a sweep keeps across its groups: the finished runs, the tally,
the trackers and this process's claims. The groups themselves train through
scaling.sweep.batches, each by its driver (scaling.sweep.fixed, scaling.sweep.schedule) and
into its run folders through scaling.sweep.group.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from jax.sharding import Mesh

from scaling import store
from scaling.config import Config
from scaling.config.arithmetic import Arithmetic
from scaling.sweep import progress, segments
from scaling.sweep.claiming import GroupClaims
from scaling.sweep.grid import PlannedRun
from scaling.sweep.group import Outlet
from scaling.sweep.prepare import Prepared
from scaling.sweep.trackers import open_trackers
from scaling.tasks import build_task
from scaling.tasks.base import Task
from scaling.train import memory, start as start_mod, stream
from scaling.train.mesh import is_leader, make_mesh, put_replicated
from scaling.train.program import GroupProgram
from scaling.train.sinks import Sink
from scaling.train.spec import GroupSpec, group_spec

log = logging.getLogger(__name__)


def placement(cfg: Config, task: Task) -> str:
    """device or host: data.placement, or for auto the host when the training set would take
    more than a quarter of the device's memory limit (CPU reports none: device)."""
    if cfg.data.placement != "auto":
        return cfg.data.placement
    limit = memory.device_limit(cfg.train.memory_limit_gb)
    arrays = task.train_arrays()
    streams = task.finite_data or task.host_windows
    if limit is None or not streams or (cfg.gns.enabled and cfg.gns.hessian_every):
        return "device"
    return "host" if memory.tree_bytes(arrays) > limit / 4 else "device"


def host_spec(spec: GroupSpec, cfg: Config, task: Task) -> GroupSpec:
    """The spec of a host-streamed program: its chunk cut so one chunk's batches for every seed
    stay within the stream's bytes (scaling.train.stream)."""
    steps = stream.chunk_steps(spec.chunk_steps, spec.batch_size, len(cfg.seeds),
                               stream.example_bytes(task.streamed_example()))
    return spec.replace(data={"host_data": True}, chunk_steps=steps)


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
    mesh = make_mesh(runs_axis, data_shards, fsdp=cfg.train.fsdp)
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
                spec = host_spec(spec, self.p.cfg, ctx.task)
            self.programs[size] = GroupProgram(ctx.task, spec, ctx.mesh)
        return self.programs[size]

    def phase_program(self, size: int, budget: int) -> tuple[GroupProgram, Arithmetic]:
        """The program of a schedule's phase at `size` (the run's budget in examples, no
        targets: a scheduled run trains its whole budget), with its arithmetic; one per batch
        size and budget."""
        if (size, budget) not in self.phase_programs:
            spec, arith = group_spec(segments.budget_in_examples(self.p.cfg, budget), size,
                                     self.p.data_shards)
            spec = spec.replace(stopping={"targets": (), "stop_at_targets": False})
            program = GroupProgram(self.context.task, spec, self.context.mesh)
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
        data = self.data_shapes(program, {r.spec.seed for r in runs[:size]})
        program.compile_in_background(start_mod.fresh_width(program, size, self.p.runs_axis),
                                      data, self.context.eval_data)

    def data_shapes(self, program: GroupProgram, seeds: set[int]) -> Any:
        """The training data as a chunk of `program` sees it: on the devices, or the shapes of
        a host-streamed chunk for these seeds."""
        ctx = self.context
        if not ctx.host_data:
            return ctx.data
        return stream.abstract(program.spec, ctx.task.streamed_example(), len(seeds), ctx.mesh)

    def close(self) -> None:
        """Wait for the compiles started ahead (one may be the next invocation's cache entry)."""
        for program in [*self.programs.values(), *(p for p, _ in self.phase_programs.values())]:
            program.close()

    def shown_here(self) -> str:
        """How a group's progress shows from this process (only the leader shows it)."""
        return self.shown if is_leader() else "none"

    @property
    def outlet(self) -> Outlet:
        """Where this session's groups write: its folder, trackers, hooks and claims."""
        tokens = self.context.task.tokens_per_example(self.p.cfg.task.options)
        return Outlet(self.p.out, self.trackers, self.hooks, self.claims, tokens)

