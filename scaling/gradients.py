"""One step's gradient: micro-batches scanned (gradient accumulation), each split into groups.

The per-group gradients are what the noise-scale estimator needs (DESIGN.md section 3): their
mean squared norm is |G_small|^2 and their weighted mean is the step's gradient G_big, so the
statistics cost no extra backward pass. B_small is the group size, never the per-device batch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

# Without data shards, 4 groups: on one CPU thread (experiments/bench_engine.py, mnist1d MLP,
# batch 128) a step costs 1.18x an unsplit one at 4 groups, 1.40x at 8 and 1.08x at 2, while
# B_simple's moving average is only ~5-10% noisier at 4 than at 8, ~20-30% at 2
# (experiments/gns_noise.py: the |G|^2 estimate's noise, the same for any k, dominates).
# With the batch sharded over 2 or 8 devices the groups cost nothing measurable (README).
DEFAULT_GROUPS = 4


@dataclass(frozen=True)
class GroupLayout:
    """How a global batch is cut: accumulation x groups per micro-batch x group size."""

    accumulation: int
    groups_per_micro: int
    group_size: int
    data_shards: int

    @property
    def num_groups(self) -> int:
        return self.accumulation * self.groups_per_micro

    @property
    def b_small(self) -> int:
        return self.group_size

    @classmethod
    def choose(cls, batch_size: int, accumulation: int, data_shards: int,
               groups: int | None, measure: bool = True) -> "GroupLayout":
        """Groups per micro-batch: `groups` in all when given, else max(data shards, DEFAULT_GROUPS).

        The automatic count steps down until it divides the micro-batch. With accumulation and no
        explicit count, each micro-batch is one group; without measurement (`measure=False`)
        micro-batches are not split at all.
        """
        micro = batch_size // accumulation
        if not measure:
            per_micro = 1
        elif groups is not None:
            if groups % accumulation or micro % (groups // accumulation):
                raise ValueError(
                    f"gns.groups: got {groups}, expected a multiple of batch.accumulation="
                    f"{accumulation} whose share per micro-batch divides the micro-batch {micro}")
            per_micro = groups // accumulation
        elif accumulation > 1:
            per_micro = 1
        else:
            per_micro = max(data_shards, DEFAULT_GROUPS)
            while micro % per_micro:
                per_micro -= 1
        return cls(accumulation, per_micro, micro // per_micro, data_shards)

    def plain(self) -> "GroupLayout":
        """The same cut without groups inside micro-batches: the cheap step between measurements."""
        return replace(self, groups_per_micro=1, group_size=self.group_size * self.groups_per_micro)

    def spec(self) -> P:
        """Shard the group axis over 'data' when it divides evenly, else the examples inside groups."""
        if self.groups_per_micro % self.data_shards == 0:
            return P(None, "data")
        if self.group_size % self.data_shards == 0:
            return P(None, None, "data")
        return P()


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


def batch_gradient(per_example_loss: Callable, params: Any, batch: Any, weights: jax.Array,
                   layout: GroupLayout, mesh: Mesh | None = None, metric: Any = None) -> GradOut:
    """Weighted mean loss and gradient over the batch, plus the group statistics for the GNS.

    With a `metric` (diagonal weights shaped like params, e.g. Adam's preconditioner squared),
    the squared norms are also taken in that metric: a second entry in sq_small and sq_big.
    """
    metrics = (None,) if metric is None else (None, metric)
    shape = (layout.accumulation, layout.groups_per_micro, layout.group_size)
    cut = lambda a: a.reshape(*shape, *a.shape[1:])
    batch, weights = jax.tree.map(cut, batch), cut(weights)
    if mesh is not None:
        sharding = NamedSharding(mesh, layout.spec())
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
