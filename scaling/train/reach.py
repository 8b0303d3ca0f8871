"""In-run target bookkeeping: when may a run stop because every target is reached?

The engine asks at each evaluation point whether the analysis, reading the run's rows with the
same rule (scaling.config.targets), would already find each target's crossing. `first` and `ema`
decide at the crossing itself; `sustained` once the metric has met the target from the start
of the current stretch up to its horizon; `smoothed` once the window of some point is recorded
and its mean meets the target. So a run stops exactly when its crossings are known, and never
before: the rows it leaves hold everything the analysis reads.

The smoothed check keeps the run's metric at every evaluation point and the running integral
of its curve (one slot per point), and at point p looks at the points whose windows end
between the previous point and p (the `fresh` table, built once per program from the static
evaluation points), with scaling.config.targets.window_mean under jit.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from scaling.config.targets import (Reach, WindowEdges, meets, past_horizon, window_edges,
                                    window_mean)


class Schedule(NamedTuple):
    """Per step, static for a program: where evaluations fall and what the smoothed check reads.

    index[step]: the evaluation point's number, -1 where none. hessian[step]: measure B_noise
    there. fresh[p]: the points whose smoothing windows end at point p (-1 pads). u: log(1 +
    step) of each point; edges: their windows.
    """

    index: jax.Array
    hessian: jax.Array
    fresh: jax.Array
    u: jax.Array
    edges: WindowEdges


def schedule(points: np.ndarray, length: int, hessian_every: int, reach: Reach) -> Schedule:
    """The static tables of a program whose evaluation points are `points` (steps ascending),
    sized for steps 0 .. length - 1."""
    index = np.full(length, -1, np.int32)
    index[points] = np.arange(len(points), dtype=np.int32)
    hessian = np.zeros(length, bool)
    if hessian_every:
        hessian[points[hessian_every::hessian_every]] = True
    u = np.log1p(points.astype(np.float64))
    edges = window_edges(points, reach.window)
    fresh = _fresh(u, edges.hi) if reach.rule == "smoothed" else np.full((len(points), 1), -1)
    as_jnp = lambda a: jnp.asarray(a, jnp.float32 if a.dtype.kind == "f" else jnp.int32)
    return Schedule(jnp.asarray(index), jnp.asarray(hessian), jnp.asarray(fresh, jnp.int32),
                    as_jnp(u), WindowEdges(*map(as_jnp, edges)))


def _fresh(u: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """fresh[p]: points k >= 1 whose window ends in (u[p-1], u[p]], padded with -1."""
    owner = np.searchsorted(u, ends - 1e-12, side="left")  # the first point at or past the end
    lists = [[] for _ in u]
    for k in range(1, len(u)):
        if owner[k] < len(u):
            lists[owner[k]].append(k)
    width = max(1, max(len(ks) for ks in lists))
    return np.array([ks + [-1] * (width - len(ks)) for ks in lists], np.int64)


class ReachState(NamedTuple):
    """One run's view of its targets: settled[j] once target j's crossing is known; crossed[j]
    once some evaluation met target j (its reading may still wait for a window); streak[j]
    the step the current stretch meeting target j began (-1: none; sustained); values and cum
    the metric at each evaluation point and its curve's running integral (smoothed)."""

    settled: jax.Array
    crossed: jax.Array
    streak: jax.Array
    values: jax.Array
    cum: jax.Array


def init(num_targets: int, num_points: int, reach: Reach) -> ReachState:
    slots = num_points if reach.rule == "smoothed" else 1
    return ReachState(jnp.zeros(num_targets, bool), jnp.zeros(num_targets, bool),
                      jnp.full(num_targets, -1.0, jnp.float32),
                      jnp.zeros((num_targets, slots), jnp.float32),
                      jnp.zeros((num_targets, slots), jnp.float32))


def update(state: ReachState, reach: Reach, targets: tuple[tuple[str, str, float], ...],
           metrics: dict[str, jax.Array], step: jax.Array, point: jax.Array, sched: Schedule,
           here: jax.Array) -> ReachState:
    """Fold in the evaluation at `step` (point number `point`) for a run recorded `here`.

    Every target at once, as arrays over the targets: the program holds one copy of the rule
    whatever the number of targets (unrolled per target, each one added about a quarter to the
    compile time of a small model's chunk)."""
    if not targets:
        return state
    settled, crossed, streak, values, cum = state
    current = jnp.stack([metrics[reach.column(metric)] for metric, _, _ in targets])
    below = jnp.asarray([op == "<=" for _, op, _ in targets])
    bound = jnp.asarray([value for _, _, value in targets], current.dtype)
    hit = _meets(current, below, bound)
    crossed = crossed | (here & hit)
    now = hit
    if reach.rule == "sustained":
        start = jnp.where(hit, jnp.where(streak < 0, step.astype(jnp.float32), streak), -1.0)
        streak = jnp.where(here, start, streak)
        now = hit & past_horizon(step, start, reach.window)
    elif reach.rule == "smoothed":
        row_v, row_c = jax.vmap(_record, (0, 0, 0, None, None))(values, cum, current, point,
                                                                 sched.u)
        values, cum = jnp.where(here, row_v, values), jnp.where(here, row_c, cum)
        met = jax.vmap(_window_met, (0, 0, None, None, 0, 0))(row_v, row_c, sched, point,
                                                              below, bound)
        now = (point == 0) & hit | met
    return ReachState(settled | (here & now), crossed, streak, values, cum)


def _meets(values: jax.Array, below: jax.Array, bound: jax.Array) -> jax.Array:
    """scaling.config.targets.meets with the operator as data: `below` for "<=", else ">="."""
    return jnp.where(below, meets(values, "<=", bound), meets(values, ">=", bound))


def _record(values: jax.Array, cum: jax.Array, current: jax.Array, point: jax.Array,
            u: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The slots with this point's value and the curve's integral up to it."""
    values = values.at[point].set(current)
    prev = jnp.maximum(point - 1, 0)
    part = jnp.where(point > 0, (u[point] - u[prev]) * (values[prev] + current) / 2, 0.0)
    return values, cum.at[point].set(cum[prev] + part)


def _window_met(values: jax.Array, cum: jax.Array, sched: Schedule, point: jax.Array,
                below: jax.Array, bound: jax.Array) -> jax.Array:
    """Whether a window that ends at this point has a mean that meets the target."""
    ks = sched.fresh[point]
    safe = jnp.maximum(ks, 0)
    means = window_mean(jnp, sched.u, values, cum, sched.edges, safe)
    return jnp.any((ks > 0) & _meets(means, below, bound))


def all_settled(state: ReachState) -> jax.Array:
    """Every target's crossing known (False without targets)."""
    return jnp.all(state.settled) if state.settled.shape[0] else jnp.asarray(False)


def unconfirmed(state: ReachState) -> jax.Array:
    """Some target met at an evaluation whose reading is not yet decided (its window, for
    the smoothed and sustained rules, still open): what a reading extension waits for."""
    return jnp.any(state.crossed & ~state.settled)

