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

from scaling.train.program import GroupProgram
from scaling.train.repack import Packing
from scaling.train.spec import RunSpec, Status
from scaling.train.stream import HostStream


@dataclass
class RunResult:
    """What the host knows about one run when its group stops."""

    status: str
    steps: int


def run_group(program: GroupProgram, runs: list[RunSpec], data: Any, eval_data: Any,
              on_records: Callable[[list[list[dict]], float], None],
              runs_axis: int = 1, stream: HostStream | None = None) -> tuple[list[RunResult], float]:
    """Train a group to the end; `on_records(records_per_run, wall_s)` is called once per chunk.

    The next chunk is dispatched before the previous chunk's metrics are read, so the device
    never waits on the host. With spec.repack, the state shrinks to the runs still running when
    they fit a smaller width (scaling.train.repack). With a `stream` (data.placement: host) each
    chunk's batches come from it instead of `data`. Returns the results and the compile seconds
    of the chunk programs this group ran.
    """
    spec = program.spec
    pad = (-len(runs)) % runs_axis
    padded = runs + [runs[-1]] * pad
    status = np.array([Status.RUNNING] * len(runs) + [Status.PADDING] * pad)
    start = time.perf_counter()
    rs, row0 = program.init(padded, status, data, eval_data)
    packing = Packing(len(runs), len(padded), spec.repack, runs_axis)
    on_records(packing.records(jax.device_get(row0), packing.slots), time.perf_counter() - start)
    keys, pending = set(), None
    for first in range(0, spec.total_steps, spec.chunk_steps):
        cut = packing.plan()
        if cut is not None:
            final_view = program.final_view(rs)
            rs = program.take(rs, *cut)
            packing.repacked(*cut, final_view)
        chunk_data, slots = data, None
        if stream is not None:
            chunk_data = stream.get(first)
            slots = stream.slots([padded[max(s, 0)].seed for s in packing.slots])
        rs, rows = program.chunk(rs, chunk_data, eval_data, first, slots)
        keys.add(program.compile_key(len(packing.slots), chunk_data))
        if pending is not None and _consume(pending, packing, start, on_records):
            pending = None
            break
        pending = (rows, packing.slots)
    if pending is not None:
        _consume(pending, packing, start, on_records)
    final = packing.final(program.final_view(rs))
    return [_result(final, i) for i in range(len(runs))], sum(program.compile_s[k] for k in keys)


def _consume(pending: tuple[dict, np.ndarray], packing: Packing, start: float,
             on_records: Callable) -> bool:
    """Hand a chunk's metrics to the host; True when every real run has stopped."""
    rows, slots = jax.device_get(pending[0]), pending[1]
    on_records(packing.records(rows, slots), time.perf_counter() - start)
    return packing.update(np.asarray(rows["status"])[-1] == Status.RUNNING, slots)


def _result(final: dict, i: int) -> RunResult:
    return RunResult(Status(int(final["status"][i])).label, int(final["steps"][i]))
