"""The host side of a group: dispatch chunks, hand their metrics on, repack, stop.

One device-to-host read per chunk, one chunk behind the device, so the device never waits
on the host.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import jax
import numpy as np

from scaling.train.checkpoint import GroupCheckpoints, Resume
from scaling.train.program import GroupProgram
from scaling.train.repack import PAD, Packing
from scaling.train.spec import RunSpec, Status
from scaling.train.stream import HostStream


@dataclass
class RunResult:
    """What the host knows about one run when its group stops."""

    status: str
    steps: int


def run_group(program: GroupProgram, runs: list[RunSpec], data: Any, eval_data: Any,
              on_records: Callable[[list[list[dict]], float], None],
              runs_axis: int = 1, stream: HostStream | None = None,
              checkpoints: GroupCheckpoints | None = None, resume: Resume | None = None,
              on_running: Callable[[int], None] | None = None,
              until: int | None = None,
              on_end: Callable[[Any, Packing], None] | None = None
              ) -> tuple[list[RunResult], float]:
    """Train a group to the end; `on_records(records_per_run, wall_s)` is called once per chunk.

    The next chunk is dispatched before the previous chunk's metrics are read, so the device
    never waits on the host. With spec.repack, the state shrinks to the runs still running when
    they fit a smaller width (scaling.train.repack). With a `stream` (data.placement: host) each
    chunk's batches come from it instead of `data`. With `checkpoints`, the state is saved at
    the chunk boundaries where one is due (its rows written first, so the files and the state
    agree); `resume` continues from one, or from any state built like one (a branch, a
    schedule's next phase: GroupProgram.start_from). `on_running(n)` hears how many runs still
    train after each chunk the host reads. `until` ends the group before that step (default:
    the spec's total steps); runs still training then end with status "running", and
    `on_end(state, packing)` receives the group's last state (to continue it at another batch
    size: a schedule's next phase). Returns the results and the compile seconds of the chunk
    programs this group ran.
    """
    spec = program.spec
    if resume is None:
        rs, packing, pending, first_step, start = _start(program, runs, data, eval_data,
                                                         on_records, runs_axis)
    else:
        rs, packing, first_step = resume.rs, resume.packing, resume.first_step
        pending, start = _Seen(*resume.seen), time.perf_counter() - resume.wall_s
    padded = runs + [runs[-1]] * (len(packing.slots) - len(runs))
    keys: set = set()

    def fold(chunk: _Seen | _Pending) -> bool:
        """Fold in which slots still ran at the chunk's end (its rows written first if they are
        not yet); True when every real run has stopped."""
        if isinstance(chunk, _Pending):
            chunk = chunk.write(packing, start, on_records)
        stopped = packing.update(chunk.running, chunk.slots)
        if on_running is not None:
            on_running(int(packing.running.sum()))
        return stopped

    end = spec.total_steps if until is None else min(until, spec.total_steps)
    for first in range(first_step, end, spec.chunk_steps):
        cut = packing.plan()
        if cut is not None:
            final_view = program.final_view(rs)
            rs = program.take(rs, *cut)
            packing.repacked(*cut, final_view)
        chunk_data, slots = data, None
        if stream is not None:
            chunk_data = stream.get(first)
            slots = stream.slots([padded[max(s, 0)].seed for s in packing.slots])
        rs, rows = program.chunk(rs, chunk_data, eval_data, first, slots, end)
        keys.add(program.compile_key(len(packing.slots), chunk_data))
        if pending is not None and fold(pending):
            pending = None
            break
        pending = _Pending(rows, packing.slots)
        if checkpoints is not None and first + spec.chunk_steps < end \
                and checkpoints.due(first + spec.chunk_steps):
            pending = pending.write(packing, start, on_records)
            if not pending.running[pending.slots != PAD].any():
                fold(pending)
                pending = None
                break
            checkpoints.save(rs, packing, first + spec.chunk_steps, time.perf_counter() - start,
                             (pending.running, pending.slots))
    if pending is not None:
        fold(pending)
    if on_end is not None:
        on_end(rs, packing)
    final = packing.final(program.final_view(rs))
    return [_result(final, i) for i in range(len(runs))], sum(program.compile_s[k] for k in keys)


def _start(program: GroupProgram, runs: list[RunSpec], data: Any, eval_data: Any,
           on_records: Callable, runs_axis: int) -> tuple:
    """A fresh group: every run's first state, its step-0 row written."""
    pad = (-len(runs)) % runs_axis
    padded = runs + [runs[-1]] * pad
    status = np.array([Status.RUNNING] * len(runs) + [Status.PADDING] * pad)
    start = time.perf_counter()
    rs, row0 = program.init(padded, status, data, eval_data)
    packing = Packing(len(runs), len(padded), program.spec.repack, runs_axis)
    on_records(packing.records(jax.device_get(row0), packing.slots), time.perf_counter() - start)
    return rs, packing, None, 0, start


@dataclass
class _Seen:
    """A chunk whose rows are written; which of its slots still ran is folded in later."""

    running: np.ndarray
    slots: np.ndarray


@dataclass
class _Pending:
    """A dispatched chunk whose metrics the host has not read yet."""

    rows: dict
    slots: np.ndarray

    def write(self, packing: Packing, start: float, on_records: Callable) -> _Seen:
        """Read the chunk's metrics (waiting for it) and hand them to the host."""
        rows = jax.device_get(self.rows)
        on_records(packing.records(rows, self.slots), time.perf_counter() - start)
        return _Seen(np.asarray(rows["status"])[-1] == Status.RUNNING, self.slots)


def _result(final: dict, i: int) -> RunResult:
    return RunResult(Status(int(final["status"][i])).label, int(final["steps"][i]))
