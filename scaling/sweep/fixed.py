"""Training one group at a fixed batch size: a sweep's group or a search round's.

The group resumes from its newest checkpoint where it has one, stops dominated runs where
train.stop_dominated asks (scaling.sweep.stopping), streams its batches from the host where
the data lives there, and records its throughput; its files go through
scaling.sweep.group like every driver's. `width` cuts a batch size's groups to what device
memory holds, before the first trains.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from scaling import store
from scaling.config.arithmetic import Arithmetic
from scaling.store import layout
from scaling.sweep import cooldown_start, group as group_mod, progress
from scaling.sweep.grid import PlannedRun
from scaling.sweep.session import Session
from scaling.sweep.stopping import Dominance
from scaling.train import memory, start as start_mod, stream, throughput
from scaling.train.checkpoint import GroupCheckpoints
from scaling.train.loop import GroupEnd
from scaling.train.mesh import is_leader
from scaling.train.program import GroupProgram

log = logging.getLogger(__name__)


def train(session: Session, group: list[PlannedRun]) -> list[dict[str, Any]]:
    """One group at a fixed batch size into its run folders, from its checkpoint where it has
    one (a cooldown cell's: from the stable runs' state, its runs that ended before it copied);
    the summaries, in the group's order."""
    if not cooldown_start.applies(session.p, group[0].batch_size):
        return _train(session, group)
    ended = cooldown_start.copy_ended(session, group)
    rest = [r for r in group if r.run_id not in ended]
    trained = dict(zip([r.run_id for r in rest], _train(session, rest) if rest else []))
    return [ended.get(r.run_id) or trained[r.run_id] for r in group]


def _train(session: Session, group: list[PlannedRun]) -> list[dict[str, Any]]:
    p, ctx, size = session.p, session.context, group[0].batch_size
    program, arith = session.program(size), p.specs[size][1]
    checkpoints = _checkpoints(session, program, group)
    runs = [r.spec for r in group]
    configs = cooldown_start.configs(session, group)
    start = checkpoints.restore(program, runs, ctx.data, ctx.eval_data) if checkpoints else None
    if start is not None and is_leader():
        log.info("batch %d: %d runs: resumed from the checkpoint at step %d", size, len(group),
                 start.first_step)
    if start is None and cooldown_start.applies(p, size):
        start = cooldown_start.from_stable(session, program, group, configs)
    mode = "new" if start is None else "resume"
    start = start or start_mod.fresh(program, runs, ctx.data, ctx.eval_data, p.runs_axis)
    bar = progress.GroupProgress(session.shown_here(), f"batch {size}: {len(group)} runs",
                                 program.spec.total_steps, size, len(group), start.first_step,
                                 last_step=program.spec.last_step)
    outlet = session.outlet
    stopper = _dominance(session, group)
    folders = group_mod.GroupFolders(outlet, [r.run_id for r in group], configs,
                                     outlet.count(arith.examples_at), bar, mode, stopper)
    feed = None if not ctx.host_data else stream.open_stream(
        program.spec, ctx.task, [r.spec.seed for r in group], program.new_perm, ctx.mesh)
    try:
        end = folders.train(program, start, ctx.data, ctx.eval_data, stream=feed,
                            checkpoints=checkpoints)
    finally:
        if feed is not None:
            feed.close()
    timing = group_mod.Timing(folders.wall_s, end.compile_s,
                              _speed(program, arith, end, start.first_step, ctx.data,
                                     p.cfg.train.peak_tflops))
    done = folders.finish(group_mod.summaries(p.cfg, arith, outlet.tokens_per_example, group,
                                              end.results, folders.rows, timing,
                                              _stopped(end, stopper)))
    if checkpoints is not None:
        checkpoints.finish()
    return done


def width(session: Session, size: int, limit: int) -> int:
    """`limit` cut to the widest group whose compiled chunk fits device memory (where a limit
    is known: train.memory_limit_gb or the device's own); unchanged, and nothing compiled,
    without one. The chunk compiled here is the one the group at that width then runs."""
    device = memory.device_limit(session.p.cfg.train.memory_limit_gb)
    if device is None:
        return limit
    program = session.program(size)
    runs_width = start_mod.width(limit, session.p.runs_axis)
    data = session.data_shapes(program, set(session.p.cfg.seeds))
    fit = memory.group_width(program, runs_width, data, session.context.eval_data, device,
                             session.p.runs_axis)
    if fit is None or fit[0] >= limit:
        return limit
    session.say(f"batch {size}: {limit} runs need about {fit[1] / memory.GB:.3g} GB, the device "
                f"has {device / memory.GB:.3g} GB: groups of {fit[0]}")
    return fit[0]


def _dominance(session: Session, group: list[PlannedRun]) -> Dominance | None:
    """The group's stopper of dominated runs (train.stop_dominated, with targets that stop
    runs), comparing it with the batch size's runs that trained in other groups."""
    p = session.p
    if not (p.cfg.train.stop_dominated and p.cfg.targets and p.cfg.train.stop_at_targets):
        return None
    ids = {r.run_id for r in group}
    others = [(r, session.finished[r.run_id]) for r in p.batch_runs(group[0].batch_size)
              if r.run_id in session.finished and r.run_id not in ids]
    return Dominance(p.cfg, p.out, group, others)


def _checkpoints(session: Session, program: GroupProgram, group: list[PlannedRun]
                 ) -> GroupCheckpoints | None:
    """The group's checkpoints: every train.checkpoint_minutes, and kept at
    `checkpoint_at` beside runs.json (the group's run ids in slot order: what a branch
    or a cooldown restores)."""
    cfg = session.p.cfg
    at_steps = session.p.checkpoint_at.get(group[0].batch_size, ())
    if cfg.train.checkpoint_minutes <= 0 and not at_steps:
        return None
    folder = store.checkpoint_dir(session.p.out, group_key(program, group))
    if at_steps and is_leader():
        folder.mkdir(parents=True, exist_ok=True)
        store.write_json(folder / layout.GROUP_RUNS, [r.run_id for r in group])
    return GroupCheckpoints(folder, cfg.train.checkpoint_minutes, cfg.train.keep_checkpoints,
                            at_steps)


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
           data: Any, peak_tflops: float | None) -> dict[str, Any]:
    """The group's throughput over the steps it trained here (from `first`, a resumed group's
    checkpoint step) and its training seconds; its compile-ahead seconds apart."""
    steps = [max(r.steps - first, 0) for r in end.results]
    examples = sum(arith.examples_at(first + n) - arith.examples_at(first) for n in steps)
    mesh, size = program.mesh, program.spec.batch_size
    flops, source = throughput.per_step(program.task, size, lambda: program.model_flops(data))
    return {**throughput.figures(sum(steps), size, end.train_s, flops, mesh.devices.flat[0],
                                 mesh.devices.size, program.precision, examples, peak_tflops),
            "model_flops_source": source, "compile_ahead_s": end.compile_ahead_s}
