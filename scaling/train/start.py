"""One way to start a group: fresh, from its own checkpoint, or from slots of another group's
state (a branch off a saved base, a batch-size schedule's next phase, a cohort going on).

Whatever the source, a group starts as a `Start`: its runs (each learning rate given once, in
its RunSpec), the state, the packing (which run sits in which slot) and the step it continues
from. One width rule: the runs, padded to a multiple of the mesh's runs axis (a fresh group
further, to a wider width already trained at, where that costs less than a compile);
repacking later cuts to runs axis x a power of two (scaling.train.repack).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from scaling.config.names import HYPERPARAMS
from scaling.train import repack
from scaling.train.program import GroupProgram
from scaling.train.repack import Packing
from scaling.train.spec import RunSpec, Status
from scaling.train.step import RunState


@dataclass
class Start:
    """Where a group begins: its state after `first_step` and what the host knows of it.

    `seen` is the last chunk's (running, slots) of a group resumed from a checkpoint: its rows
    are written, and the packing folds it in after the next chunk is dispatched, as the
    uninterrupted group would. `first_eval`: a fresh group, whose first chunk evaluates step 0
    before it trains.
    """

    runs: list[RunSpec]
    state: RunState
    packing: Packing
    first_step: int = 0
    wall_s: float = 0.0
    seen: tuple[np.ndarray, np.ndarray] | None = None
    first_eval: bool = False


def width(num_runs: int, runs_axis: int) -> int:
    """A group's width when it starts: its runs, padded to a multiple of the runs axis."""
    return -(-num_runs // runs_axis) * runs_axis


def fresh_width(program: GroupProgram, num_runs: int, runs_axis: int) -> int:
    """A fresh group's width: `width`, and with train.repack: auto further to a wider width
    already trained at where padding to it costs less than a compile (repack.start_width).
    Host-streamed chunks are compiled per number of seeds too, so they keep `width`."""
    wide, spec = width(num_runs, runs_axis), program.spec
    if spec.repack != "auto" or spec.data.host_data:
        return wide
    # Widths a group has trained at: the memory plan's probes compile wider ones that may not fit.
    return repack.start_width(wide, [k for k, n in program.chunks_at.items() if n],
                              program.slot_s, len(range(0, spec.last_step, spec.chunk_steps)),
                              program.compile_cost())


def fresh(program: GroupProgram, runs: list[RunSpec], data: Any, eval_data: Any,
          runs_axis: int) -> Start:
    """Every run's first state (its step-0 row comes with the first chunk's), at its
    `fresh_width`."""
    wide = fresh_width(program, len(runs), runs_axis)
    padded = runs + [runs[-1]] * (wide - len(runs))
    status = np.array([Status.RUNNING] * len(runs) + [Status.PADDING] * (wide - len(runs)))
    began = time.perf_counter()
    if not program.spec.data.host_data:  # a streamed chunk's shapes come with its first batches
        program.compile_in_background(wide, data, eval_data)
    rs = program.init(padded, status)
    packing = Packing(len(runs), wide, program.spec.repack is not False, runs_axis)
    return Start(runs, rs, packing, first_eval=True, wall_s=time.perf_counter() - began)


def from_slots(program: GroupProgram, state: RunState, slots: list[int], runs: list[RunSpec],
               step: int, runs_axis: int, *, stream: int = 0, carry_noise: bool = False,
               same_program: bool = False) -> Start:
    """A group of `program` continuing, at its own step `step`, the runs in `slots` of another
    group's `state` (run i of `runs` from slot slots[i]).

    same_program: the state is this program's own and every leaf goes on as it was (a cohort
    that stays at its batch size). Otherwise a new segment (GroupProgram.start_from): the
    learning rates and the other optimizer scalars are the runs' (at another batch size the
    optimizer's rules may give another beta2 or weight decay), the targets start afresh, the
    noise-scale estimates carry over only with `carry_noise`, and a non-zero `stream` folds
    the data key so a run continued at another batch size replays no draws.
    """
    wide = width(len(slots), runs_axis)
    take = np.asarray(slots + [slots[0]] * (wide - len(slots)))
    pad = np.arange(wide) >= len(slots)
    if same_program:
        rs = program.take(state, take, pad)
    else:
        padded = runs + [runs[0]] * (wide - len(runs))
        scalars = {k: np.asarray([getattr(r, k) for r in padded])
                   for k in HYPERPARAMS[program.spec.optimizer] if k != "learning_rate"}
        lrs = np.asarray([r.learning_rate for r in padded])
        rs = program.start_from(state, take, pad, lrs, step, stream, carry_noise, scalars)
    return Start(runs, rs, Packing(len(slots), wide, program.spec.repack is not False, runs_axis),
                 step)


def side_by_side(program: GroupProgram, restored: list[tuple[list[str], Start]]
                 ) -> tuple[RunState, dict[str, int]]:
    """Several groups restored at one step (each with its run ids in slot order) as one
    state, their states joined on the runs axis, and the slot of each run still running in
    it (runs stopped before the step have none): what a branch group cuts its slots from."""
    parts, slots, offset = [], {}, 0
    for run_ids, start in restored:
        status = np.asarray(jax.device_get(program.final_view(start.state))["status"])
        for j, i in enumerate(start.packing.slots):
            if i >= 0 and status[j] == Status.RUNNING:
                slots[run_ids[i]] = offset + j
        parts.append(start.state)
        offset += len(start.packing.slots)
    state = parts[0] if len(parts) == 1 else jax.tree.map(
        lambda *xs: jnp.concatenate(xs), *parts)
    return state, slots
