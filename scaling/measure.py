"""The engine's noise-scale measurement: which gradient, what to fold in, the Hessian probe at
evaluation points, what to record.

Functions of the group's spec (scaling.engine.GroupSpec) and one run's arrays, called inside the
engine's vmapped, compiled step; kept here so the engine stays about training.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from scaling import gns
from scaling.gradients import GradOut, batch_gradient
from scaling.optimizers import preconditioner

if TYPE_CHECKING:
    from scaling.engine import GroupSpec
    from scaling.tasks.base import Task


def step_gradient(spec: GroupSpec, per_example_loss: Callable, mesh: Mesh, params: Any,
                  opt_state: Any, batch: Any, weights: jax.Array, step: jax.Array
                  ) -> tuple[GradOut, jax.Array]:
    """The step's gradient, cut into groups on measurement steps; (out, which metrics count).

    With gns.every = N > 1, steps between measurements take the plain (ungrouped) gradient
    through a lax.cond; the step counter is shared by the group, so the cond stays a branch.
    """
    metric, seen = preconditioner(opt_state) if spec.preconditioned else (None, True)
    valid = jnp.stack([jnp.asarray(True), seen])[:spec.gns_metrics]
    grad = lambda layout: batch_gradient(per_example_loss, params, batch, weights, layout, mesh, metric)
    if spec.gns_every == 1 or not spec.measures:
        return grad(spec.layout), valid
    now = step % spec.gns_every == 0
    plain = spec.layout.plain()
    out = grad(spec.layout) if plain == spec.layout else jax.lax.cond(
        now, lambda: grad(spec.layout), lambda: grad(plain))
    return out, valid & now


def fold(spec: GroupSpec, ema: gns.EMAState, sums: jax.Array, counts: jax.Array, out: GradOut,
         valid: jax.Array) -> tuple[gns.EMAState, jax.Array, jax.Array]:
    """This step's two-batch estimates into the moving averages and the interval sums."""
    if not spec.measures:
        return ema, sums, counts
    g2, trace = gns.unbiased_estimates(out.sq_small, out.sq_big, spec.layout.b_small, spec.batch_size)
    valid = valid & out.full
    # One measurement per gns.every steps: decay**every per measurement spans the same steps.
    ema = gns.ema_update(ema, g2, trace, spec.ema_decay ** spec.gns_every, valid)
    return ema, sums + jnp.where(valid, jnp.stack([g2, trace]), 0.0), counts + valid


def hessian_probe(spec: GroupSpec, task: Task, params: Any, data_key: jax.Array, data: Any,
                  point: jax.Array) -> gns.HessianEstimate:
    """Hessian-aware noise scale off the training path: the groups' gradients on one fresh
    batch of i.i.d. examples, the Hessian on a second, independent one (gns.hessian_estimate)."""
    size = spec.batch_size

    def draw(key: jax.Array) -> Any:
        if spec.num_train is None:
            return task.sample(key, size)
        idx = jax.random.randint(key, (size,), 0, spec.num_train)
        return jax.tree.map(lambda a: a[idx], data)

    key = jax.random.fold_in(jax.random.fold_in(data_key, 0x7FFFFFFF), point)
    grad_key, hessian_key = jax.random.split(key)
    loss_fn = lambda p, b: jnp.mean(task.per_example_loss(p, b))
    return gns.hessian_estimate(loss_fn, params, draw(grad_key), spec.layout.num_groups,
                                draw(hessian_key))


def hessian_update(spec: GroupSpec, task: Task, params: Any, data_key: jax.Array,
                   ema: gns.EMAState, data: Any, point: jax.Array, now: jax.Array,
                   here: jax.Array) -> tuple[gns.EMAState, gns.HessianEstimate | None]:
    """At Hessian points (`now`, shared by the group so the cond stays a branch), fold
    G^T H G and tr(H Sigma) of the runs recorded `here` into their own moving averages; also
    returns this point's raw estimate (NaN where none was taken). No-op without hessian_every."""
    if not spec.hessian_every:
        return ema, None
    nan = jnp.float32(jnp.nan)
    est = jax.lax.cond(now, lambda: hessian_probe(spec, task, params, data_key, data, point),
                       lambda: gns.HessianEstimate(nan, nan, nan, nan))
    ok = now & here & jnp.isfinite(est.ghg) & jnp.isfinite(est.trace_h_sigma)
    ema = gns.ema_update(ema, est.ghg, est.trace_h_sigma, spec.ema_decay, ok)
    return ema, jax.tree.map(lambda v: jnp.where(ok, v, nan), est)


def row(spec: GroupSpec, ema: gns.EMAState, sums: jax.Array, counts: jax.Array,
        hessian_ema: gns.EMAState, hessian_point: gns.HessianEstimate | None = None
        ) -> dict[str, jax.Array]:
    """Noise-scale columns of a metrics row: moving averages, this interval's means, extras
    (with gns.hessian_every: the moving B_noise and eps_max, and this point's raw G^T H G and
    tr(H Sigma), NaN at points without a Hessian measurement)."""
    value = gns.ema_value(ema)
    interval = jnp.where(counts > 0, sums / jnp.maximum(counts, 1.0), jnp.nan)
    out = dict(gns_g2=value.g2[0], gns_trace_sigma=value.trace_sigma[0], b_simple=value.b_simple[0],
               gns_g2_interval=interval[0, 0], gns_trace_sigma_interval=interval[1, 0])
    if spec.preconditioned:
        out.update(gns_g2_precond=value.g2[1], gns_trace_sigma_precond=value.trace_sigma[1],
                   b_simple_precond=value.b_simple[1])
    if spec.hessian_every:
        h = gns.ema_value(hessian_ema)  # fields: g2 holds G^T H G, trace_sigma tr(H Sigma)
        out.update(b_noise=h.b_simple, eps_max=value.g2[0] / h.g2)
        if hessian_point is not None:
            out.update(gns_ghg_point=hessian_point.ghg,
                       gns_trace_h_sigma_point=hessian_point.trace_h_sigma)
    return out
