"""The host side of a group: dispatch chunks, hand their rows to the sinks, repack, stop.

One device-to-host read per chunk, one chunk behind the device, so the device never waits on
the host. A group begins from a `Start` (scaling.train.start) and ends as a `GroupEnd`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import jax
import numpy as np

from scaling.train.checkpoint import GroupCheckpoints
from scaling.train.program import GroupProgram
from scaling.train.repack import PAD, Packing, cut_pays
from scaling.train.sinks import Sink, rows_all, start_all
from scaling.train.spec import Status
from scaling.train.start import Start
from scaling.train.step import RunState
from scaling.train.stream import HostStream


@dataclass
class RunResult:
    """What the host knows about one run when its group stops."""

    status: str
    steps: int


@dataclass
class GroupEnd:
    """A group that stopped: each run's result, the seconds its thread spent compiling chunks
    (or waiting for a compile started ahead), its training seconds (the chunks from the first
    dispatch to the last rows read, those compile seconds left out), its last state (to
    continue it elsewhere), and the compile seconds of its chunks compiled ahead, before it
    started (overlapping the previous group's training, or its own first state's compile;
    only what was left of them when the group needed them counts in compile_s)."""

    results: list[RunResult]
    compile_s: float
    train_s: float
    state: RunState
    packing: Packing
    compile_ahead_s: float = 0.0

    def slots(self) -> dict[int, int]:
        """Each run's slot in `state`, by its index in the group (a run repacked away has
        none): where a driver finds a run to continue it."""
        return {run: j for j, run in enumerate(self.packing.slots) if run != PAD}


class Stopper(Protocol):
    """Decides on the host which runs stop early (scaling.sweep.search: runs that can no
    longer be their batch size's best learning rate)."""

    def decide(self, running: np.ndarray) -> np.ndarray:
        """Per run of the group, in run order, whether it stops now; `running`: which still
        train as of the chunk just folded in."""


def run_group(program: GroupProgram, start: Start, data: Any, eval_data: Any,
              sinks: Sequence[Sink], stream: HostStream | None = None,
              checkpoints: GroupCheckpoints | None = None, until: int | None = None,
              stopper: Stopper | None = None) -> GroupEnd:
    """Train a group from `start` until its runs stop, or until step `until` (runs still
    training then end with status "running").

    With spec.repack, the state shrinks to the runs still running when they fit a smaller
    width (scaling.train.repack; with auto, where the cut pays for the new width's compile,
    judged from the chunk seconds each read of rows measures). With a `stream`
    (data.placement: host) each chunk's batches come from it. With `checkpoints`, the state is
    saved at the chunk boundaries where one is due, its rows written first so the files and the
    state agree. A `stopper` is asked after each chunk is folded in (one chunk behind the
    device, as the packing is, so a group resumed from a checkpoint stops the same runs at the
    same steps); the runs it names stop with status "dominated" from the chunk after the next.
    """
    spec, packing, rs = program.spec, start.packing, start.state
    clock = _Clock(program, start.wall_s)
    pending = _begin(start, sinks)
    end = spec.last_step if until is None else min(until, spec.last_step)
    for first in range(start.first_step, end, spec.chunk_steps):
        chunk_data = data if stream is None else stream.get(first)
        rs = _repack(program, rs, packing, chunk_data, len(range(first, end, spec.chunk_steps)))
        slots = None
        if stream is not None:
            slots = stream.slots([start.runs[max(s, 0)].seed for s in packing.slots])
        rs, rows = clock.chunk(rs, chunk_data, eval_data, first, slots, end,
                               start.first_eval and first == start.first_step)
        if pending is not None:
            if pending.fold(packing, clock, sinks):
                pending = None
                break
            rs = _stop(program, rs, packing, stopper)
        pending = _Chunk(rows, packing.slots)
        after = first + spec.chunk_steps
        if checkpoints is not None and after < end and checkpoints.due(after):
            pending.write(packing, clock, sinks)
            if pending.all_stopped():
                pending.fold(packing, clock, sinks)
                pending = None
                break
            checkpoints.save(rs, packing, after, clock.wall(), (pending.running, pending.slots))
    if pending is not None:
        pending.fold(packing, clock, sinks)
    final = packing.final(program.final_view(rs))
    results = [RunResult(Status(int(final["status"][i])).label, int(final["steps"][i]))
               for i in range(packing.num_runs)]
    return GroupEnd(results, clock.compiling, clock.train_s(), rs, packing, clock.ahead_s)


def _begin(start: Start, sinks: Sequence[Sink]) -> "_Chunk | None":
    """The sinks told the group starts; a resumed group's last chunk, its rows written
    before, to fold in after the next dispatch."""
    start_all(sinks, start.first_step)
    if start.seen is not None:
        return _Chunk(None, start.seen[1], start.seen[0])
    return None


def _stop(program: GroupProgram, rs: RunState, packing: Packing,
          stopper: Stopper | None) -> RunState:
    """The state with the runs the stopper names marked stopped."""
    if stopper is None:
        return rs
    stop = np.asarray(stopper.decide(packing.running.copy()), bool)
    slots = np.array([s != PAD and stop[s] for s in packing.slots])
    return program.stop(rs, slots) if slots.any() else rs


def _repack(program: GroupProgram, rs: RunState, packing: Packing, data: Any,
            chunks_left: int) -> RunState:
    """The state cut to the runs still running, when the packing says so and, with
    train.repack: auto, when the cut pays for its compile (repack.cut_pays)."""
    cut = packing.plan()
    if cut is None:
        return rs
    width, new_width = len(packing.slots), len(cut[0])
    if (program.spec.repack == "auto" and program.slot_s is not None
            and program.compile_key(new_width, data) not in program.compiled
            and not cut_pays(width, new_width, program.slot_s, chunks_left,
                             program.compile_cost())):
        return rs
    final_view = program.final_view(rs)
    packing.repacked(*cut, final_view)
    return program.take(rs, *cut)


class _Clock:
    """The group's wall seconds (from `wall_s` already spent, as a resumed group counts), and
    its training seconds: the loop's time less the time this thread spent compiling chunks;
    apart, the compile seconds of the chunks it runs that were compiled ahead."""

    def __init__(self, program: GroupProgram, wall_s: float) -> None:
        self.program = program
        self.began = time.perf_counter()
        self.offset = wall_s
        self.compiling = 0.0
        self.ahead_s = 0.0
        self._read_at = 0.0  # train_s() when the latest chunk's rows were read

    def chunk(self, rs: RunState, data: Any, *args: Any) -> tuple[RunState, dict]:
        program = self.program
        key = program.compile_key(int(rs.status.shape[0]), data)
        first_run = not program.chunks_at.get(key)
        before = program.compile_wait_s
        out = program.chunk(rs, data, *args)
        self.compiling += program.compile_wait_s - before
        if first_run and key in program.ahead:
            self.ahead_s += program.compile_s[key]
        return out

    def read(self, width: int) -> None:
        """A chunk of `width` slots has its rows read: the host waited for it, so the training
        seconds since the chunk before's were read are about what it took (one chunk in
        flight); the program keeps them a slot, for where to cut or start its groups."""
        now = self.train_s()
        self.program.slot_s = (now - self._read_at) / width
        self._read_at = now

    def wall(self) -> float:
        return self.offset + time.perf_counter() - self.began

    def train_s(self) -> float:
        return max(time.perf_counter() - self.began - self.compiling, 0.0)


class _Chunk:
    """A dispatched chunk: its rows (device values until read) and the slots they belong to;
    once read, which of its slots still ran at its end."""

    def __init__(self, rows: Any, slots: np.ndarray, running: np.ndarray | None = None) -> None:
        self.rows, self.slots, self.running = rows, slots, running

    def write(self, packing: Packing, clock: _Clock, sinks: Sequence[Sink]) -> None:
        """Read the chunk's rows (waiting for it) and hand them to the sinks, once."""
        if self.running is not None:
            return
        rows = jax.device_get(self.rows)
        clock.read(len(self.slots))
        status = np.asarray(rows["status"])
        self.running = (status[-1] if status.ndim > 1 else status) == Status.RUNNING
        records = packing.records(rows, self.slots)
        rows_all(sinks, records, clock.wall(), int(self.running[self.slots != PAD].sum()))

    def all_stopped(self) -> bool:
        return not self.running[self.slots != PAD].any()

    def fold(self, packing: Packing, clock: _Clock, sinks: Sequence[Sink]) -> bool:
        """Write the rows if not yet, fold in which slots still ran; True when every run has
        stopped."""
        self.write(packing, clock, sinks)
        return packing.update(self.running, self.slots)
