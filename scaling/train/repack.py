"""Repacking a vmapped group at chunk boundaries, so that stopped runs stop costing FLOPs.

A run's status is monotone: once it has completed, diverged or used its budget it never trains
again. The engine dispatches one chunk ahead, so when the host reads chunk k's statuses it
already holds the state after chunk k+1; every run stopped at k is still stopped there, so the
state can be cut down to the runs still running at k (docs/architecture.md). Widths are the runs
axis times a power of two, so a sweep's groups reuse a few compiled chunk programs.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

PAD = -1  # the slot of a padding copy: it belongs to no run


def width_for(active: int, runs_axis: int) -> int:
    """The smallest runs_axis x 2**k that holds `active` runs (the mesh shards the runs axis)."""
    width = runs_axis
    while width < active:
        width *= 2
    return width


def cut_pays(width: int, new_width: int, slot_s: float, chunks_left: int,
             compile_s: float) -> bool:
    """Whether cutting a group from `width` to `new_width` slots saves more training seconds
    than compiling the new width's chunk costs (train.repack: auto). A chunk's seconds are
    taken as proportional to the width (`slot_s` a slot, the latest chunk's), which
    overstates what a narrower chunk saves on a device that a wide group does not fill, and
    `chunks_left` counts to the end of the budget, though runs may stop sooner: both err
    towards cutting, as train.repack: true always does."""
    return chunks_left * slot_s * (width - new_width) > compile_s


def start_width(width: int, trained: list[int], slot_s: float | None, chunks: int,
                compile_s: float) -> int:
    """A new group's width (train.repack: auto): the narrowest width above `width` that groups
    have trained at (so it is compiled and fits), padded, where the padding's training seconds
    (the slots added x `slot_s` x the group's `chunks`, an upper bound: runs may stop sooner)
    cost less than compiling `width` would; else `width`. A search round then trains at its
    first grid's width."""
    wider = [w for w in trained if w > width]
    if width in trained or slot_s is None or not wider:
        return width
    padded = min(wider)
    return padded if (padded - width) * slot_s * chunks < compile_s else width


class Packing:
    """Which run sits in which slot of the group's state, and what the host knows of each run.

    `slots[j]` is the run index held in slot j (PAD for a padding copy). `finals` keeps the
    final view of every state the group left, so the facts of a run packed out survive it.
    """

    def __init__(self, num_runs: int, width: int, enabled: bool, runs_axis: int) -> None:
        self.num_runs, self.enabled, self.runs_axis = num_runs, enabled, runs_axis
        self.slots = np.array(list(range(num_runs)) + [PAD] * (width - num_runs))
        self.running = np.ones(num_runs, bool)
        self.finals: list[tuple[np.ndarray, Any]] = []

    def records(self, rows: dict[str, np.ndarray], slots: np.ndarray) -> list[list[dict[str, float]]]:
        """Per run, the evaluation points it recorded (rows shaped (steps, width) or (width,))."""
        rows = {k: np.asarray(v) for k, v in rows.items()}
        if rows["recorded"].ndim == 1:
            rows = {k: v[None] for k, v in rows.items()}
        names = [k for k in rows if k not in ("recorded", "status")]
        out: list[list[dict[str, float]]] = [[] for _ in range(self.num_runs)]
        for t, j in zip(*np.nonzero(rows["recorded"])):
            if slots[j] != PAD:
                out[slots[j]].append({k: int(rows[k][t, j]) if k == "step" else float(rows[k][t, j])
                                      for k in names})
        return out

    def update(self, running: np.ndarray, slots: np.ndarray) -> bool:
        """Fold in which slots still ran at a chunk's end; True when no run is running."""
        real = slots != PAD
        self.running[slots[real]] = np.asarray(running)[real]
        return not self.running.any()

    def plan(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(slots of the current state to keep, padding mask), or None to keep the group as is.

        Only when the running runs fit half the width or less: each cut at least halves the
        FLOPs, and a group of width W compiles at most log2(W) more chunk programs. Padding
        slots repeat the first kept slot; the engine marks them PADDING.
        """
        keep = np.nonzero([s != PAD and self.running[s] for s in self.slots])[0]
        width = width_for(len(keep), self.runs_axis)
        if not self.enabled or not len(keep) or 2 * width > len(self.slots):
            return None
        take = np.concatenate([keep, np.full(width - len(keep), keep[0])])
        return take, np.arange(width) >= len(keep)

    def repacked(self, take: np.ndarray, pad: np.ndarray, final_view: Any) -> None:
        """The state was cut to `take`: remember the old state's final view, move the slots."""
        self.finals.append((self.slots, final_view))
        self.slots = np.where(pad, PAD, self.slots[take])

    def final(self, final_view: Any) -> dict[str, np.ndarray]:
        """Per run (in run order), its facts from the last state it was in."""
        out: dict[str, np.ndarray] = {}
        for slots, view in [*self.finals, (self.slots, final_view)]:
            real = slots != PAD
            for key, value in jax.device_get(view).items():
                value = np.asarray(value)
                arr = out.setdefault(key, np.zeros((self.num_runs, *value.shape[1:]), value.dtype))
                arr[slots[real]] = value[real]
        return out

    def to_dict(self) -> dict[str, Any]:
        """Everything the packing knows, as JSON-ready lists (for a mid-run checkpoint)."""
        return {"num_runs": self.num_runs, "enabled": self.enabled, "runs_axis": self.runs_axis,
                "slots": self.slots.tolist(), "running": self.running.tolist(),
                "finals": [[slots.tolist(), {k: np.asarray(v).tolist() for k, v in view.items()}]
                           for slots, view in self.finals]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Packing":
        packing = cls(d["num_runs"], len(d["slots"]), d["enabled"], d["runs_axis"])
        packing.slots = np.asarray(d["slots"], np.int64)
        packing.running = np.asarray(d["running"], bool)
        packing.finals = [(np.asarray(slots, np.int64),
                           {k: np.asarray(v, np.int32) for k, v in view.items()})
                          for slots, view in d["finals"]]
        return packing
