"""When a run has reached a target: the rules, shared by the engine's stopping and the analysis.

A target is METRIC<=VALUE or METRIC>=VALUE, read at the evaluation points a run recorded. A
metric that fluctuates (small batches, large learning rates) meets a target by chance before
its expectation does, so the first crossing is biased early, most where the noise is largest:
small batch sizes look fast and the critical batch size comes out small. The rules:

- first: the first evaluation that meets the target, linear in step between the point that
  last missed and the first that met (Shallue et al. 2018). Nothing to confirm: a run may stop
  there.
- sustained: the first evaluation from which the metric meets the target at every evaluation
  up to `window` times its step, interpolated from the point before it as in `first`.
- smoothed: first crossing of the metric averaged over a window in log step around each point
  (the mean of the piecewise-linear curve over log(1 + step) within +-log(window)); noise
  averages out, and for a power-law curve the centred window adds only a second-order bias.
- ema: first crossing of the metric of an exponential moving average of the parameters
  (`eval_loss_ema` and the like, recorded with eval.ema_decay), as Zhang et al. (2024) did.

`sustained` and `smoothed` need the run to go on past the crossing, to about window x (1 +
step) - 1 (its horizon); the engine keeps a run training until the rule can decide, so their
cost is that factor on each run's last target. Steps count from 1 + step so that step 0 has a
place on the log axis; far from the start that is the window in step itself. A run that ends
before its horizon (the budget) can be read with the windows clipped at its last point
(`clip`): a one-sided window, flagged wherever it is used. A run stopped before it decided a
target has steps to it of more than `undecided_bound` (`Censored`).

Everything here is numpy and the window arithmetic (`window_mean`) takes its array module as
an argument, so the engine's in-run check (scaling.train.reach) runs the same formula under jit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

DEFAULT_RULE = "smoothed"
DEFAULT_WINDOW = 1.5
EMA_SUFFIX = "_ema"
TARGET_PATTERN = re.compile(r"^\s*([a-z_]+)\s*(<=|>=)\s*([-+0-9.eE]+)\s*$")


@dataclass(frozen=True)
class Reach:
    """How "reached the target" is read: a rule of names.REACH_RULES and its window factor (> 1)."""

    rule: str = DEFAULT_RULE
    window: float = DEFAULT_WINDOW

    def column(self, metric: str) -> str:
        """The metrics column the rule reads for `metric`."""
        return metric + EMA_SUFFIX if self.rule == "ema" else metric

    def describe(self) -> str:
        """One line for reports: the rule with its window."""
        if self.rule == "sustained":
            return f"sustained (meets the target at every evaluation up to {self.window:g}x the step)"
        if self.rule == "smoothed":
            return f"smoothed (mean over step/{self.window:g} .. step*{self.window:g} in log step)"
        if self.rule == "ema":
            return "ema (metric of the exponential moving average of the parameters)"
        return "first (first evaluation that meets the target)"


FIRST = Reach("first")  # the first crossing: the definition most papers used


class Censored(NamedTuple):
    """Steps to a target of a run that stopped (or is still running) before deciding it: more
    than `steps`, never a plain number."""

    steps: float


def past_horizon(step: Any, start: Any, window: float) -> Any:
    """Has a run that met the target from `start` on reached its horizon, `step` >= window x
    (1 + start) - 1? A
    relative slack of 1e-6 makes float32 (in the engine) and float64 (here) agree."""
    return (1.0 + step) >= window * (1.0 + start) * (1.0 - 1e-6)


def meets(values: Any, op: str, value: float) -> Any:
    """Elementwise: does the metric meet `op value` (NaN never does)."""
    return values <= value if op == "<=" else values >= value


def _interpolate(steps: np.ndarray, values: np.ndarray, k: int, value: float) -> float:
    """The step where the line through points k-1 and k reaches `value` (k itself at k = 0)."""
    if k == 0 or values[k - 1] == values[k]:
        return float(steps[k])
    t = (value - values[k - 1]) / (values[k] - values[k - 1])
    return float(steps[k - 1] + t * (steps[k] - steps[k - 1]))


def first_crossing(steps: np.ndarray, values: np.ndarray, op: str, value: float) -> float | None:
    """Rule `first`: interpolated step of the first point that meets the target."""
    hit = np.nonzero(meets(values, op, value))[0]
    return None if hit.size == 0 else _interpolate(steps, values, int(hit[0]), value)


def sustained_crossing(steps: np.ndarray, values: np.ndarray, op: str, value: float,
                       window: float, clip: bool = False) -> float | None:
    """Rule `sustained`: the first point k that meets the target with every point up to
    its horizon meeting it too, and the run recorded that far; interpolated as `first`.
    With `clip`, a horizon past the last point is cut there."""
    ok = meets(values, op, value)
    start = None
    for k in range(len(steps)):
        if not ok[k]:
            start = None
            continue
        start = k if start is None else start
        if past_horizon(steps[k], steps[start], window):
            return _interpolate(steps, values, start, value)
    return _interpolate(steps, values, start, value) if clip and start is not None else None


class WindowEdges(NamedTuple):
    """Where each point's window starts and ends on the curve of log(1 + step): the segment
    index and the fraction along it, the window's width, and whether the run recorded past it."""

    lo_index: np.ndarray
    lo_frac: np.ndarray
    hi_index: np.ndarray
    hi_frac: np.ndarray
    width: np.ndarray
    hi: np.ndarray  # the window's far edge in log(1 + step)


def window_edges(steps: np.ndarray, window: float, end: float | None = None) -> WindowEdges:
    """The windows of every point: log(1 + step) +- log(window), cut at step 0 on the left
    (and at `end`, in log(1 + step), on the right when given)."""
    u = np.log1p(np.asarray(steps, np.float64))
    lw = math.log(window)
    lo, hi = np.maximum(u - lw, 0.0), u + lw if end is None else np.minimum(u + lw, end)

    def locate(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(u) < 2:
            return np.zeros(len(x), np.int64), np.zeros(len(x))
        j = np.clip(np.searchsorted(u, x, side="right") - 1, 0, len(u) - 2)
        span = u[j + 1] - u[j]
        return j, np.where(span > 0, (x - u[j]) / np.where(span > 0, span, 1.0), 0.0)

    (lo_j, lo_f), (hi_j, hi_f) = locate(lo), locate(hi)
    return WindowEdges(lo_j, lo_f, hi_j, hi_f, hi - lo, hi)


def cumulative(xp: Any, u: Any, values: Any) -> Any:
    """Integral of the piecewise-linear curve over log(1 + step) up to each point (trapezoids)."""
    parts = (u[1:] - u[:-1]) * (values[1:] + values[:-1]) / 2
    return xp.concatenate([xp.zeros(1, parts.dtype), xp.cumsum(parts)])


def _integral(xp: Any, u: Any, values: Any, cum: Any, j: Any, frac: Any) -> Any:
    """The curve's integral up to the point `frac` of the way along segment j."""
    width = (u[j + 1] - u[j]) * frac
    return cum[j] + width * (2 * values[j] + frac * (values[j + 1] - values[j])) / 2


def window_mean(xp: Any, u: Any, values: Any, cum: Any, edges: WindowEdges, k: Any) -> Any:
    """Mean of the curve over point k's window; `xp` is numpy or jax.numpy, `k` an index or
    array of indices. The segments the window touches must be recorded."""
    top = _integral(xp, u, values, cum, edges.hi_index[k], edges.hi_frac[k])
    bottom = _integral(xp, u, values, cum, edges.lo_index[k], edges.lo_frac[k])
    return (top - bottom) / edges.width[k]


def smoothed_curve(steps: np.ndarray, values: np.ndarray, window: float, clip: bool = False
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(window means, whether the run recorded past each window): point 0 keeps its value.
    With `clip`, windows are cut at the last point, so every mean is read (one-sided near
    the end)."""
    steps, values = np.asarray(steps, np.float64), np.asarray(values, np.float64)
    if len(steps) < 2:
        return values.copy(), np.ones(len(steps), bool)
    u = np.log1p(steps)
    edges = window_edges(steps, window, u[-1] if clip else None)
    valid = edges.hi <= u[-1] + 1e-12
    means = window_mean(np, u, values, cumulative(np, u, values), edges, np.arange(len(steps)))
    means[0], valid[0] = values[0], True
    return np.where(valid, means, np.nan), valid


def smoothed_crossing(steps: np.ndarray, values: np.ndarray, op: str, value: float,
                      window: float, clip: bool = False) -> float | None:
    """Rule `smoothed`: first crossing of the window means the run recorded far enough for
    (point 0 keeps its own value, so a target met at the start is met at step 0); with
    `clip`, of every point's mean with its window cut at the last point."""
    means, valid = smoothed_curve(steps, values, window, clip)
    return first_crossing(steps[valid], means[valid], op, value)


def undecided_bound(steps: np.ndarray, reach: Reach) -> float:
    """The fewest steps to a target that a run evaluated at `steps` (ascending, its last the
    step it is at) and not yet reaching it under `reach` can still be read at: its last point
    for first and ema; for sustained and smoothed, the last point whose window has closed,
    since any later crossing is interpolated from there on. A lower bound (`Censored`)."""
    steps = np.asarray(steps, np.float64)
    if reach.rule in ("first", "ema") or len(steps) < 2:
        return float(steps[-1]) if len(steps) else 0.0
    if reach.rule == "smoothed":
        closed = window_edges(steps, reach.window).hi <= np.log1p(steps[-1]) + 1e-12
    else:
        closed = past_horizon(steps[-1], steps, reach.window)
    return float(steps[closed][-1]) if closed.any() else 0.0


def parse_target(text: str) -> tuple[str, str, float]:
    """'eval_loss<=0.5' -> ('eval_loss', '<=', 0.5); ValueError naming the expected form."""
    match = TARGET_PATTERN.match(text)
    if match is None:
        raise ValueError(f"got {text!r}, expected METRIC<=VALUE or METRIC>=VALUE, "
                         "e.g. eval_loss<=0.5")
    metric, op, value = match.groups()
    return metric, op, float(value)


def series(rows: list[dict[str, Any]], column: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of the rows where `column` holds a finite number."""
    pairs = [(r["step"], r[column]) for r in rows
             if isinstance(r.get(column), (int, float)) and math.isfinite(r[column])]
    if not pairs:
        return np.zeros(0), np.zeros(0)
    steps, values = zip(*pairs)
    return np.asarray(steps, np.float64), np.asarray(values, np.float64)


def crossing(rows: list[dict[str, Any]], target: str | tuple[str, str, float],
             reach: Reach = Reach(), clip: bool = False) -> float | None:
    """Interpolated steps to `target` in one run's metric rows under `reach`; None if not
    reached (or not yet decidable: the run stopped before the rule's horizon). With `clip`,
    a horizon past the last row is cut there (sustained and smoothed; flag such a reading)."""
    metric, op, value = parse_target(target) if isinstance(target, str) else target
    return crossing_in(*series(rows, reach.column(metric)), (metric, op, value), reach, clip)


def on_examples(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's rows with its examples as the axis the reading runs along. A run whose batch
    grows takes fewer steps per example after each change, so a window that is a ratio of
    steps (1.5x the crossing) would span more data than a fixed run's and could outrun the
    budget; as a ratio of examples it spans what a fixed batch size's window spans (for a fixed
    batch size the two readings agree)."""
    return [{**r, "step": r["examples"]} for r in rows if r.get("examples") is not None]


def step_at_examples(rows: list[dict[str, Any]], examples: float | None) -> float | None:
    """The run's step at `examples`, interpolated between its rows."""
    if examples is None:
        return None
    known = np.array([(r["examples"], r["step"]) for r in rows if r.get("examples") is not None])
    return float(np.interp(examples, known[:, 0], known[:, 1]))


def crossing_in(steps: np.ndarray, values: np.ndarray, target: tuple[str, str, float],
                reach: Reach = Reach(), clip: bool = False) -> float | None:
    """`crossing` from the run's series of the column `reach` reads (`series`), for a caller
    that keeps it as rows arrive instead of scanning every row again."""
    _, op, value = target
    if not len(steps):
        return None
    if reach.rule == "sustained":
        return sustained_crossing(steps, values, op, value, reach.window, clip)
    if reach.rule == "smoothed":
        return smoothed_crossing(steps, values, op, value, reach.window, clip)
    return first_crossing(steps, values, op, value)
