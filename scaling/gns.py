"""Gradient noise scale estimators (McCandlish et al. 2018), usable inside and outside the engine.

From the squared norms of gradients over batches of two sizes at the same parameters,
E|G_B|^2 = |G|^2 + tr(Sigma)/B gives unbiased estimates of |G|^2 and tr(Sigma). Their ratio is
biased, so callers keep separate moving averages of each and divide the averages.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np


def unbiased_estimates(sq_small: jax.Array, sq_big: jax.Array, b_small: float, b_big: float
                       ) -> tuple[jax.Array, jax.Array]:
    """(|G|^2, tr Sigma) from the MEAN squared small-batch norm and the big-batch squared norm."""
    g2 = (b_big * sq_big - b_small * sq_small) / (b_big - b_small)
    trace_sigma = (sq_small - sq_big) / (1.0 / b_small - 1.0 / b_big)
    return g2, trace_sigma


def ratio(numerator: jax.Array, denominator: jax.Array) -> jax.Array:
    """numerator / denominator where the denominator is positive, else NaN (null on disk).

    A noise scale divides by an estimate of |G|^2 (or G^T H G) that is unbiased, so it goes to
    zero or below when the gradient is small against its noise; the ratio is then undefined.
    Flooring the denominator would make up a huge number; NaN says nothing was measured."""
    return jnp.where(denominator > 0, numerator / jnp.where(denominator > 0, denominator, 1.0),
                     jnp.nan)


class GNSEstimate(NamedTuple):
    g2: jax.Array
    trace_sigma: jax.Array
    b_simple: jax.Array


def tree_sq_norm(tree: Any) -> jax.Array:
    """Squared L2 norm of a pytree of arrays."""
    return sum(jnp.sum(jnp.square(leaf)) for leaf in jax.tree.leaves(tree))


def group_gradients(loss_fn: Callable[[Any, Any], jax.Array], params: Any, batch: Any,
                    num_groups: int) -> tuple[int, Any]:
    """(B, gradients of each of `num_groups` equal groups of the batch, stacked on axis 0)."""
    size = jax.tree.leaves(batch)[0].shape[0]
    if num_groups < 2 or size % num_groups:
        raise ValueError(f"num_groups={num_groups} must be >= 2 and divide the batch size {size}")
    groups = jax.tree.map(lambda a: a.reshape(num_groups, size // num_groups, *a.shape[1:]), batch)
    return size, jax.vmap(jax.grad(loss_fn), in_axes=(None, 0))(params, groups)


def estimate(loss_fn: Callable[[Any, Any], jax.Array], params: Any, batch: Any,
             num_groups: int) -> GNSEstimate:
    """One-batch estimate: split `batch` into `num_groups` equal groups, no extra backward pass.

    `loss_fn(params, batch)` returns the mean loss of a batch; the batch leaves share a leading
    axis of length B divisible by num_groups. The group gradients' mean is the full-batch gradient.
    """
    size, grads = group_gradients(loss_fn, params, batch, num_groups)
    g2, trace_sigma = _two_batch(tree_sq_norm, grads, size)
    return GNSEstimate(g2, trace_sigma, ratio(trace_sigma, g2))


def _two_batch(form: Callable[[Any], jax.Array], grads: Any, size: int) -> tuple[jax.Array, jax.Array]:
    """unbiased_estimates for a quadratic form: its mean over the group gradients vs. at their mean."""
    num_groups = jax.tree.leaves(grads)[0].shape[0]
    mean = jax.tree.map(lambda g: jnp.mean(g, axis=0), grads)
    return unbiased_estimates(jnp.mean(jax.vmap(form)(grads)), form(mean), size // num_groups, size)


class EMAState(NamedTuple):
    """Separate moving averages of |G|^2 and tr Sigma, with the count for bias correction."""

    g2: jax.Array
    trace_sigma: jax.Array
    weight: jax.Array


def ema_init(shape: tuple[int, ...] = ()) -> EMAState:
    """Empty averages; a shape keeps several estimates side by side (e.g. plain, preconditioned)."""
    zero = jnp.zeros(shape, jnp.float32)
    return EMAState(zero, zero, zero)


def ema_update(state: EMAState, g2: jax.Array, trace_sigma: jax.Array, decay: float,
               valid: jax.Array | bool = True) -> EMAState:
    """Fold in one pair of estimates; `valid=False` leaves the state unchanged (jittable)."""
    new = EMAState(decay * state.g2 + (1 - decay) * g2,
                   decay * state.trace_sigma + (1 - decay) * trace_sigma,
                   decay * state.weight + (1 - decay))
    return jax.tree.map(lambda n, o: jnp.where(valid, n, o), new, state)


def ema_value(state: EMAState) -> GNSEstimate:
    """Bias-corrected averages and their ratio B_simple (NaN before the first update, and
    where the average of |G|^2 is not positive: `ratio`)."""
    g2 = state.g2 / state.weight
    trace_sigma = state.trace_sigma / state.weight
    return GNSEstimate(g2, trace_sigma, ratio(trace_sigma, g2))


class HessianEstimate(NamedTuple):
    """Two-batch estimates of G^T H G and tr(H Sigma), what follows from them (NaN where
    G^T H G, or for eps_max |G|^2, is not positive), and |G|^2 and tr(Sigma) of the same
    groups' gradients."""

    ghg: jax.Array
    trace_h_sigma: jax.Array
    b_noise: jax.Array
    eps_max: jax.Array
    g2: jax.Array
    trace_sigma: jax.Array


def hessian_estimate(loss_fn: Callable[[Any, Any], jax.Array], params: Any, batch: Any,
                     num_groups: int, hessian_batch: Any = None) -> HessianEstimate:
    """B_noise = tr(H Sigma) / (G^T H G) and eps_max = |G|^2 / (G^T H G) from one batch.

    The H-weighted forms follow the same two-batch construction as the plain norms:
    q_small = mean over groups of g_i^T H g_i, q_big = G^T H G, with H applied by
    Hessian-vector products (jax.jvp over jax.grad); no Hessian is formed.

    H must come from examples independent of the gradients' (`hessian_batch`): the Hessian of
    the gradients' own batch correlates with them wherever per-example curvature and gradients
    do (any non-quadratic loss), and then both forms carry a bias of order 1/B (17x G^T H G
    at B=8 on a small MLP: experiments/hessian_bias.py). Without `hessian_batch`, the first
    half of `batch` gives the groups' gradients and the second half the Hessian.
    """
    if hessian_batch is None:
        size = jax.tree.leaves(batch)[0].shape[0]
        if size % 2:
            raise ValueError(f"batch size {size} must be even to split off the Hessian's half "
                             "(or pass hessian_batch)")
        hessian_batch = jax.tree.map(lambda a: a[size // 2:], batch)
        batch = jax.tree.map(lambda a: a[:size // 2], batch)
    size, grads = group_gradients(loss_fn, params, batch, num_groups)
    hvp = lambda v: jax.jvp(jax.grad(lambda p: loss_fn(p, hessian_batch)), (params,), (v,))[1]
    form = lambda v: sum(jnp.vdot(a, b) for a, b in zip(jax.tree.leaves(v), jax.tree.leaves(hvp(v))))
    ghg, trace_h_sigma = _two_batch(form, grads, size)
    g2, trace_sigma = _two_batch(tree_sq_norm, grads, size)
    return HessianEstimate(ghg, trace_h_sigma, ratio(trace_h_sigma, ghg), step_size(g2, ghg),
                           g2, trace_sigma)


def step_size(g2: jax.Array, ghg: jax.Array) -> jax.Array:
    """eps_max = |G|^2 / (G^T H G), the best step along the gradient; NaN unless both are
    positive (a step size at or below zero means nothing)."""
    return jnp.where(g2 > 0, ratio(g2, ghg), jnp.nan)


class ExactStatistics(NamedTuple):
    g2: float
    trace_sigma: float
    ghg: float
    trace_h_sigma: float


def exact_statistics(per_example_loss: Callable[[Any, Any], jax.Array], params: Any,
                     data: Any) -> ExactStatistics:
    """|G|^2, tr(Sigma), G^T H G and tr(H Sigma) over a finite data set, the ground truth the
    estimators are checked against: every per-example gradient (population covariance) and
    the full Hessian of the mean loss, in float64. The Hessian is formed: small models only."""
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    one = lambda f, e: per_example_loss(unravel(f), jax.tree.map(lambda a: a[None], e))[0]
    grads = np.asarray(jax.vmap(jax.grad(one), in_axes=(None, 0))(flat, data), np.float64)
    hessian = np.asarray(jax.hessian(lambda f: jnp.mean(per_example_loss(unravel(f), data)))(flat),
                         np.float64)
    mean = grads.mean(0)
    centred = grads - mean
    return ExactStatistics(float(mean @ mean), float((centred ** 2).sum(1).mean()),
                           float(mean @ hessian @ mean),
                           float(((centred @ hessian) * centred).sum() / len(grads)))
