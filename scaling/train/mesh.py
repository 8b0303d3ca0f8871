"""Meshes, shardings and multi-host start-up. Axes: 'runs' shards independent runs, 'data' and
'fsdp' the batch, 'fsdp' also each run's parameters and optimizer state (scaling.train.fsdp)."""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P


def make_mesh(runs: int, data: int, devices: list | None = None, fsdp: int = 1) -> Mesh:
    """A (runs, data / fsdp, fsdp) mesh over all devices (or the first runs x data of
    `devices`), Auto axes; `data` counts every batch shard, fsdp ones included."""
    return jax.make_mesh((runs, data // fsdp, fsdp), ("runs", "data", "fsdp"),
                         axis_types=(AxisType.Auto,) * 3,
                         devices=None if devices is None else devices[: runs * data])


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def put_replicated(mesh: Mesh, tree: Any) -> Any:
    """Place host data (identical on every process) on all devices of the mesh."""
    sharding = replicated(mesh)
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)
    return jax.tree.map(lambda a: jax.make_array_from_process_local_data(sharding, np.asarray(a)), tree)


def maybe_initialize_distributed() -> None:
    """Join a multi-host job when the launcher says so (SCALING_COORDINATOR, _NUM_PROCESSES, _PROCESS_ID).

    On clusters JAX finds these itself (SLURM, TPU pods): set SCALING_DISTRIBUTED=auto there.
    """
    coordinator = os.environ.get("SCALING_COORDINATOR")
    if coordinator:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=coordinator,
                                   num_processes=int(os.environ["SCALING_NUM_PROCESSES"]),
                                   process_id=int(os.environ["SCALING_PROCESS_ID"]))
    elif os.environ.get("SCALING_DISTRIBUTED") == "auto":
        jax.distributed.initialize()


def is_leader() -> bool:
    """Only process 0 writes files, so hosts never race on the same run."""
    return jax.process_index() == 0


def leader_decides(values: list[int]) -> list[int]:
    """The leader's `values` on every process: what only the leader decides (whether it holds
    a group's claim) but every process must follow, since they train the group together."""
    if jax.process_count() == 1:
        return list(values)
    sent = multihost_utils.broadcast_one_to_all(np.asarray(values, np.int32))
    return [int(v) for v in np.asarray(sent)]


def sync(name: str) -> None:
    """Every process waits here for the others: what the leader just wrote is then on disk
    for all of them."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)
