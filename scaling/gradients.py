"""One step's gradient: micro-batches scanned (gradient accumulation), each split into groups.

The per-group gradients are what the noise-scale estimator needs (DESIGN.md section 3): their
mean squared norm is |G_small|^2 and their weighted mean is the step's gradient G_big, so the
statistics cost no extra backward pass. B_small is the group size, never the per-device batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from scaling.gns import tree_sq_norm


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
        """Groups per micro-batch: `groups` in all when given, else max(data shards, 8) if it divides.

        With accumulation and no explicit count, each micro-batch is one group; without
        measurement (`measure=False`) micro-batches are not split at all.
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
            per_micro = max(data_shards, 8)
            while micro % per_micro:
                per_micro -= 1
        return cls(accumulation, per_micro, micro // per_micro, data_shards)

    def spec(self) -> P:
        """Shard the group axis over 'data' when it divides evenly, else the examples inside groups."""
        if self.groups_per_micro % self.data_shards == 0:
            return P(None, "data")
        if self.group_size % self.data_shards == 0:
            return P(None, None, "data")
        return P()


class GradOut(NamedTuple):
    grad: Any
    loss: jax.Array
    sq_small: jax.Array
    sq_big: jax.Array
    full: jax.Array


def batch_gradient(per_example_loss: Callable, params: Any, batch: Any, weights: jax.Array,
                   layout: GroupLayout, mesh: Mesh | None = None) -> GradOut:
    """Weighted mean loss and gradient over the batch, plus the group statistics for the GNS."""
    shape = (layout.accumulation, layout.groups_per_micro, layout.group_size)
    cut = lambda a: a.reshape(*shape, *a.shape[1:])
    batch, weights = jax.tree.map(cut, batch), cut(weights)
    if mesh is not None:
        sharding = NamedSharding(mesh, layout.spec())
        batch, weights = jax.lax.with_sharding_constraint((batch, weights), sharding)

    def group(b: Any, w: jax.Array) -> tuple[Any, jax.Array]:
        total = lambda p: jnp.sum(per_example_loss(p, b) * w)
        value, grad = jax.value_and_grad(total)(params)
        return grad, value

    def micro(carry: tuple, xs: tuple) -> tuple[tuple, None]:
        b, w = xs
        grads, values = jax.vmap(group)(b, w)
        wsum = jnp.sum(w, axis=1)
        means = jax.tree.map(lambda g: g / jnp.maximum(wsum, 1e-12).reshape(-1, *[1] * (g.ndim - 1)), grads)
        grad_acc, loss_acc, w_acc, sq_acc = carry
        grad_acc = jax.tree.map(lambda a, g: a + jnp.sum(g, axis=0), grad_acc, grads)
        return (grad_acc, loss_acc + jnp.sum(values), w_acc + jnp.sum(wsum),
                sq_acc + jnp.sum(jax.vmap(tree_sq_norm)(means))), None

    zero = jnp.zeros((), jnp.float32)
    init = (jax.tree.map(jnp.zeros_like, params), zero, zero, zero)
    (grad_sum, loss_sum, w_sum, sq_sum), _ = jax.lax.scan(micro, init, (batch, weights))
    grad = jax.tree.map(lambda g: g / w_sum, grad_sum)
    full = w_sum == layout.num_groups * layout.group_size
    return GradOut(grad, loss_sum / w_sum, sq_sum / layout.num_groups, tree_sq_norm(grad), full)
