"""One step's gradient: micro-batches scanned (gradient accumulation), each split into groups.

The per-group gradients are what the noise-scale estimator needs (docs/noise-scale.md): their
mean squared norm is |G_small|^2 and their weighted mean is the step's gradient G_big, so the
statistics cost no extra backward pass. B_small is the group size, never the per-device batch.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from scaling.train.spec import GroupLayout


def group_sq_norms(grads: Any, wsum: jax.Array, metrics: tuple = (None,)) -> jax.Array:
    """Per metric, the sum over groups of |group gradient sum / group weight|^2_M, leaf by leaf.

    A metric is None (Euclidean) or a pytree like params of diagonal weights M. Squaring the
    stacked gradients in place (not dividing them first) avoids writing another k gradient
    copies (measured a few percent of a step cheaper at 8 groups on CPU).
    """
    scale = 1.0 / jnp.square(jnp.maximum(wsum, 1e-12))

    def total(metric: Any) -> jax.Array:
        leaves = jax.tree.leaves(grads)
        diag = jax.tree.leaves(metric) if metric is not None else [1.0] * len(leaves)
        per_group = sum(jnp.sum((jnp.square(g) * m).reshape(g.shape[0], -1), axis=1)
                        for g, m in zip(leaves, diag))
        return jnp.sum(per_group * scale)

    return jnp.stack([total(m) for m in metrics])


class GradOut(NamedTuple):
    """sq_small and sq_big hold one entry per metric: Euclidean first, then the given one."""

    grad: Any
    loss: jax.Array
    sq_small: jax.Array
    sq_big: jax.Array
    full: jax.Array


def micro_gradient(per_example_loss: Callable, params: Any, batch: Any, weights: jax.Array,
                   metrics: tuple = (None,)) -> tuple[Any, jax.Array, jax.Array, jax.Array]:
    """(gradient sum, loss sum, weight sum, group_sq_norms) of one micro-batch cut (groups, size).

    One group takes the plain gradient: a vmap over a group axis of length 1 costs ~10% of a
    step on CPU (measured), and that is every step of a sweep with the estimator off.
    """
    def group(b: Any, w: jax.Array) -> tuple[jax.Array, Any]:
        return jax.value_and_grad(lambda p: jnp.sum(per_example_loss(p, b) * w))(params)

    wsum = jnp.sum(weights, axis=1)
    if weights.shape[0] == 1:
        value, grad = group(jax.tree.map(lambda a: a[0], batch), weights[0])
        stacked = jax.tree.map(lambda g: g[None], grad)
    else:
        values, stacked = jax.vmap(group)(batch, weights)
        value, grad = jnp.sum(values), jax.tree.map(lambda g: jnp.sum(g, axis=0), stacked)
    return grad, value, jnp.sum(wsum), group_sq_norms(stacked, wsum, metrics)


def group_partition(layout: GroupLayout, rows_per_group: int) -> P:
    """Shard the group axis over the batch shards ('data' x 'fsdp') when it divides evenly, else
    the rows inside groups."""
    if layout.groups_per_micro % layout.data_shards == 0:
        return P(None, ("data", "fsdp"))
    if rows_per_group % layout.data_shards == 0:
        return P(None, None, ("data", "fsdp"))
    return P()


def batch_gradient(per_example_loss: Callable, params: Any, batch: Any, weights: jax.Array,
                   layout: GroupLayout, mesh: Mesh | None = None, metric: Any = None) -> GradOut:
    """Weighted mean loss and gradient over the batch, plus the group statistics for the GNS.

    The batch has layout.group_size rows per group, or fewer, each weighted for the examples it
    stands for (one mean example per group: Task.sample_means). With a `metric` (diagonal
    weights shaped like params, e.g. Adam's preconditioner squared), the squared norms are also
    taken in that metric: a second entry in sq_small and sq_big.
    """
    metrics = (None,) if metric is None else (None, metric)
    rows = weights.shape[0] // layout.num_groups
    shape = (layout.accumulation, layout.groups_per_micro, rows)
    cut = lambda a: a.reshape(*shape, *a.shape[1:])
    batch, weights = jax.tree.map(cut, batch), cut(weights)
    if mesh is not None:
        sharding = NamedSharding(mesh, group_partition(layout, rows))
        batch, weights = jax.lax.with_sharding_constraint((batch, weights), sharding)
    micro = lambda b, w: micro_gradient(per_example_loss, params, b, w, metrics)
    if layout.accumulation == 1:
        grad_sum, loss_sum, w_sum, sq_sum = micro(jax.tree.map(lambda a: a[0], batch), weights[0])
    else:
        zero = jnp.zeros((), jnp.float32)
        init = (jax.tree.map(jnp.zeros_like, params), zero, zero, jnp.zeros(len(metrics)))
        add = lambda carry, xs: (jax.tree.map(jnp.add, carry, micro(*xs)), None)
        (grad_sum, loss_sum, w_sum, sq_sum), _ = jax.lax.scan(add, init, (batch, weights))
    grad = jax.tree.map(lambda g: g / w_sum, grad_sum)
    full = w_sum == layout.num_groups * layout.group_size
    sq_big = group_sq_norms(jax.tree.map(lambda g: g[None], grad), jnp.ones(1), metrics)
    return GradOut(grad, loss_sum / w_sum, sq_sum / layout.num_groups, sq_big, full)
