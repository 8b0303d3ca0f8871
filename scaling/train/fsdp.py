"""Sharded parameters and optimizer state (FSDP / ZeRO-3) over the mesh's 'fsdp' axis.

Each parameter-shaped leaf of a group's state (params, opt_state, ema_params; runs axis first)
is split over 'fsdp' along one axis chosen from its shape alone (the largest that the fsdp size
divides; the first of equals), so every program and every checkpoint restore picks the same one.
Leaves with no such axis, and every other leaf, stay split over 'runs' only. XLA inserts the
all-gathers before use and the reduce-scatters of gradients; results equal the unsharded ones
up to the order of summation.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from scaling.errors import need

SHARDED_FIELDS = ("params", "opt_state", "ema_params")


def leaf_spec(shape: tuple[int, ...], fsdp: int) -> P:
    """'runs' on axis 0 and 'fsdp' on the largest later axis that `fsdp` divides (if any)."""
    if fsdp == 1 or len(shape) < 2:
        return P("runs")
    sizes = [(n, -i) for i, n in enumerate(shape[1:], start=1) if n % fsdp == 0]
    if not sizes:
        return P("runs")
    axis = -max(sizes)[1]
    return P("runs", *([None] * (axis - 1)), "fsdp")


def splits_some(shapes: list[tuple[int, ...]], fsdp: int) -> bool:
    """Whether fsdp size `fsdp` splits an axis of some parameter (`shapes`: one run's)."""
    return fsdp == 1 or any("fsdp" in leaf_spec((1, *shape), fsdp) for shape in shapes)


def state_specs(state: Any, fsdp: int) -> Any:
    """The PartitionSpec of every leaf of a RunState (arrays or shapes); an fsdp size that
    divides no parameter's axis is refused (it would shard nothing and gather for nothing)."""
    runs = lambda tree: jax.tree.map(lambda _: P("runs"), tree)
    split = lambda tree: jax.tree.map(lambda x: leaf_spec(x.shape, fsdp), tree)
    specs = state._replace(**{f: split(getattr(state, f)) if f in SHARDED_FIELDS
                              else runs(getattr(state, f)) for f in state._fields})
    shapes = [tuple(x.shape[1:]) for x in jax.tree.leaves(state.params)]
    need(splits_some(shapes, fsdp), "train.fsdp", fsdp,
         f"a size that divides an axis of some parameter (their shapes: {shapes[:6]}"
         f"{' ...' if len(shapes) > 6 else ''})")
    return specs


def state_shardings(state: Any, mesh: Mesh) -> Any:
    """NamedShardings of every leaf of a RunState on `mesh` (see state_specs)."""
    return jax.tree.map(lambda spec: NamedSharding(mesh, spec),
                        state_specs(state, mesh.shape["fsdp"]),
                        is_leaf=lambda x: isinstance(x, P))
