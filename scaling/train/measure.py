"""The engine's noise-scale measurement: which gradient, what to fold in, the Hessian probe at
evaluation points, what to record (the estimators and their bias: docs/noise-scale.md).

One run's measurement state is a NoiseState; the functions here take the group's spec
(scaling.train.spec.GroupSpec) and are called inside the vmapped, compiled step, so the
program stays about training.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from scaling import gns
from scaling.tasks.base import Task
from scaling.train.gradients import GradOut, batch_gradient
from scaling.train.optimizers import preconditioner
from scaling.train.spec import GroupSpec


class NoiseState(NamedTuple):
    """One run's noise-scale measurement: the moving averages of the two-batch estimates and of
    the Hessian probe, and the sums and counts of the estimates since the last evaluation point.

    The probe's averages hold two pairs, both taken at the Hessian points with one decay, so
    eps_max divides averages over the same window: [0] the H-weighted forms (G^T H G in the
    g2 field, tr(H Sigma) in trace_sigma), [1] the plain |G|^2 and tr(Sigma) of the probe."""

    ema: gns.EMAState
    hessian_ema: gns.EMAState
    sums: jax.Array  # (2, metrics): |G|^2 and tr(Sigma) estimates summed over the interval
    counts: jax.Array  # (metrics,): how many steps the sums hold


def init(spec: GroupSpec) -> NoiseState:
    m = spec.gns_metrics
    return NoiseState(ema=gns.ema_init((m,)), hessian_ema=gns.ema_init((2,)),
                      sums=jnp.zeros((2, m), jnp.float32), counts=jnp.zeros(m, jnp.float32))


def step_gradient(spec: GroupSpec, per_example_loss: Callable, mesh: Mesh, params: Any,
                  opt_state: Any, batch: Any, weights: jax.Array, step: jax.Array
                  ) -> tuple[GradOut, jax.Array]:
    """The step's gradient, cut into groups on measurement steps; (out, which metrics count).

    With gns.every = N > 1, steps between measurements take the plain (ungrouped) gradient
    through a lax.cond; the step counter is shared by the group, so the cond stays a branch.
    """
    metric, seen = preconditioner(opt_state) if spec.noise.preconditioned else (None, True)
    valid = jnp.stack([jnp.asarray(True), seen])[:spec.gns_metrics]
    grad = lambda layout: batch_gradient(per_example_loss, params, batch, weights, layout, mesh, metric)
    if spec.noise.every == 1 or not spec.measures:
        return grad(spec.layout), valid
    now = step % spec.noise.every == 0
    plain = spec.layout.plain()
    out = grad(spec.layout) if plain == spec.layout else jax.lax.cond(
        now, lambda: grad(spec.layout), lambda: grad(plain))
    return out, valid & now


def add_step(spec: GroupSpec, noise: NoiseState, out: GradOut, valid: jax.Array) -> NoiseState:
    """This step's two-batch estimates into the moving averages and the interval sums."""
    if not spec.measures:
        return noise
    g2, trace = gns.unbiased_estimates(out.sq_small, out.sq_big, spec.layout.b_small, spec.batch_size)
    valid = valid & out.full
    # One measurement per gns.every steps: decay**every per measurement spans the same steps.
    ema = gns.ema_update(noise.ema, g2, trace, spec.noise.ema_decay ** spec.noise.every, valid)
    return noise._replace(ema=ema, sums=noise.sums + jnp.where(valid, jnp.stack([g2, trace]), 0.0),
                          counts=noise.counts + valid)


def hessian_probe(spec: GroupSpec, task: Task, params: Any, data_key: jax.Array, data: Any,
                  point: jax.Array) -> gns.HessianEstimate:
    """Hessian-aware noise scale off the training path: the groups' gradients on one fresh
    batch of i.i.d. examples, the Hessian on a second, independent one (gns.hessian_estimate)."""
    size = spec.batch_size

    def draw(key: jax.Array) -> Any:
        if spec.data.num_train is None:
            return task.sample(key, size, data)
        index_key, augment_key = jax.random.split(key)
        idx = jax.random.randint(index_key, (size,), 0, spec.data.num_train)
        return task.augment(augment_key, jax.tree.map(lambda a: a[idx], data))

    key = jax.random.fold_in(jax.random.fold_in(data_key, 0x7FFFFFFF), point)
    grad_key, hessian_key = jax.random.split(key)
    loss_fn = lambda p, b: jnp.mean(task.per_example_loss(p, b))
    return gns.hessian_estimate(loss_fn, params, draw(grad_key), spec.layout.num_groups,
                                draw(hessian_key))


def hessian_update(spec: GroupSpec, task: Task, params: Any, data_key: jax.Array,
                   noise: NoiseState, data: Any, point: jax.Array, now: jax.Array,
                   here: jax.Array) -> tuple[NoiseState, gns.HessianEstimate | None]:
    """At Hessian points (`now`, shared by the group so the cond stays a branch), fold
    G^T H G and tr(H Sigma) of the runs recorded `here` into their own moving averages; also
    returns this point's raw estimate (NaN where none was taken). No-op without hessian_every."""
    if not spec.noise.hessian_every:
        return noise, None
    nan = jnp.float32(jnp.nan)
    est = jax.lax.cond(now, lambda: hessian_probe(spec, task, params, data_key, data, point),
                       lambda: gns.HessianEstimate(*[nan] * len(gns.HessianEstimate._fields)))
    forms = jnp.stack([est.ghg, est.g2]), jnp.stack([est.trace_h_sigma, est.trace_sigma])
    ok = now & here & jnp.all(jnp.isfinite(jnp.stack(forms)))
    ema = gns.ema_update(noise.hessian_ema, *forms, spec.noise.ema_decay, ok)
    return noise._replace(hessian_ema=ema), jax.tree.map(lambda v: jnp.where(ok, v, nan), est)


def record(spec: GroupSpec, noise: NoiseState,
           hessian_point: gns.HessianEstimate | None = None) -> dict[str, jax.Array]:
    """Noise-scale columns of a metrics row: moving averages, this interval's means, extras
    (with gns.hessian_every: the moving G^T H G, B_noise and eps_max, and this point's raw
    G^T H G and tr(H Sigma), NaN at points without a Hessian measurement). A ratio whose
    denominator's average is not positive is NaN (gns.ratio)."""
    value = gns.ema_value(noise.ema)
    interval = jnp.where(noise.counts > 0, noise.sums / jnp.maximum(noise.counts, 1.0), jnp.nan)
    out = dict(gns_g2=value.g2[0], gns_trace_sigma=value.trace_sigma[0], b_simple=value.b_simple[0],
               gns_g2_interval=interval[0, 0], gns_trace_sigma_interval=interval[1, 0])
    if spec.noise.preconditioned:
        out.update(gns_g2_precond=value.g2[1], gns_trace_sigma_precond=value.trace_sigma[1],
                   b_simple_precond=value.b_simple[1])
    if spec.noise.hessian_every:
        h = gns.ema_value(noise.hessian_ema)  # [0]: G^T H G, tr(H Sigma); [1]: |G|^2, tr(Sigma)
        out.update(gns_ghg=h.g2[0], b_noise=h.b_simple[0], eps_max=gns.step_size(h.g2[1], h.g2[0]))
        if hessian_point is not None:
            out.update(gns_ghg_point=hessian_point.ghg,
                       gns_trace_h_sigma_point=hessian_point.trace_h_sigma)
    return out


def new_interval(noise: NoiseState, here: jax.Array) -> NoiseState:
    """Empty the interval sums of a run recorded `here`; the moving averages carry on."""
    reset = lambda x: jnp.where(here, jnp.zeros_like(x), x)
    return noise._replace(sums=reset(noise.sums), counts=reset(noise.counts))
