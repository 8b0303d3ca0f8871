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


# Noise-scale columns left null where their estimate is undefined (the moving average they
# divide by is not positive: scaling.gns.ratio), each with the column that is finite once
# that average has started.
UNDEFINED_WHERE = {"b_simple": "gns_g2", "b_simple_precond": "gns_g2_precond",
                   "b_noise": "gns_ghg", "eps_max": "gns_ghg"}


def undefined_noise_points(rows: list[Row]) -> dict[str, int]:
    """Per noise-scale column the run measured, how many of its rows are null although the
    average was running: the points where the estimate is undefined (summary.json)."""
    return {column: sum(finite(r.get(started)) and not finite(r.get(column)) for r in rows)
            for column, started in UNDEFINED_WHERE.items()
            if any(finite(r.get(started)) for r in rows)}
