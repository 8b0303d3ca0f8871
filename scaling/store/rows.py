"""Reading one run's metric rows (dicts, one per evaluation point, as metrics.jsonl holds them)
between the points where a column was measured."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

Row = dict[str, Any]


def positive(value: Any) -> bool:
    """A finite number above zero (steps, batch sizes, noise scales worth plotting or fitting)."""
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def finite(value: Any) -> bool:
    """A real, finite number (rows hold None or NaN where nothing was measured)."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def value_at(rows: list[Row], key: str, step: float) -> float | None:
    """Column `key` at a fractional `step`, linear between the rows where it was measured."""
    points = [(r["step"], r[key]) for r in rows if finite(r.get(key))]
    if not points:
        return None
    steps, values = zip(*points)
    return float(np.interp(step, steps, values))


def examples_at(rows: list[Row], step: float, batch_size: int) -> float:
    """Examples at `step` from the run's own count (partial batches exact), else steps x B."""
    measured = value_at(rows, "examples", step)
    return step * batch_size if measured is None else measured
