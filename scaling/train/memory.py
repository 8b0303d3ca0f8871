"""Group widths that fit device memory, from XLA's own memory analysis of the compiled chunk.

A chunk at width w holds, on each device, what no width changes (the replicated data, the
evaluation schedule's tables, scratch of the program's own) and w / runs_axis runs' state, data
slices and activations. Compiling the chunk at the planned width gives its bytes; where they do
not fit, the chunk at one run per device gives a second point of that line, and the largest
width whose bytes stay under a safety fraction of the device's limit is the group size.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

GB = 1e9
SAFETY = 0.8  # of the limit: room for the allocator, the init program, host transfers


def device_limit(override_gb: float | None) -> int | None:
    """Bytes one device may hold: train.memory_limit_gb if set, else what the device reports
    (GPU, TPU); None (no limit) where it reports nothing, as on CPU."""
    if override_gb is not None:
        return int(override_gb * GB)
    stats = jax.local_devices()[0].memory_stats()
    limit = (stats or {}).get("bytes_limit")
    return int(limit) if limit else None


def chunk_bytes(analysis: Any) -> int | None:
    """Per-device bytes of one compiled call: arguments, outputs and temporaries, less the
    outputs that reuse (donated) argument buffers; None where the backend gives no numbers."""
    names = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
             "alias_size_in_bytes")
    sizes = [getattr(analysis, n, None) for n in names]
    if analysis is None or any(s is None for s in sizes):
        return None
    return sizes[0] + sizes[1] + sizes[2] - sizes[3]


def tree_bytes(*trees: Any) -> int:
    """Bytes of the arrays (or shapes) in `trees` (replicated: the same bytes on every device)."""
    return sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize
               for t in trees for a in jax.tree.leaves(t))


def width_line(narrow: int, total: int, width: int, runs_axis: int) -> tuple[float, float]:
    """(bytes no width changes, bytes one run adds on its device), from a device's bytes at one
    run per device (`narrow`) and at `width`: through both points, so the part that does not
    grow with the width is neither charged to every run nor left out when cutting down."""
    per_run = (total - narrow) / (width // runs_axis - 1)
    return narrow - per_run, per_run


def max_width(limit: int, per_run: float, runs_axis: int, fixed: int = 0,
              fraction: float = SAFETY) -> int:
    """The largest multiple of runs_axis whose bytes per device, fixed + per_run x runs per
    device, stay within fraction x limit; at least runs_axis (one run per device)."""
    if per_run <= 0:
        raise ValueError(f"per_run: got {per_run}, expected a positive byte count")
    room = fraction * limit - fixed
    return max(int(room // per_run), 1) * runs_axis


def group_width(program: Any, width: int, data: Any, eval_data: Any, limit: int,
                runs_axis: int) -> tuple[int, int] | None:
    """(a width that fits, bytes per device at `width`), from the chunk compiled at `width`: the
    width itself where that fits or is one run per device, else the largest on the line through
    it and the chunk compiled at one run per device (width_line); None where XLA gives no
    memory analysis, or the two points give no positive per-run bytes (then no cut)."""
    total = chunk_bytes(program.memory_at(width, data, eval_data))
    if total is None:
        return None
    if width <= runs_axis or total <= SAFETY * limit:
        return width, total
    narrow = chunk_bytes(program.memory_at(runs_axis, data, eval_data))
    if narrow is None:
        return None
    fixed, per_run = width_line(narrow, total, width, runs_axis)
    if per_run <= 0:
        return None
    return max_width(limit, per_run, runs_axis, int(fixed)), total
