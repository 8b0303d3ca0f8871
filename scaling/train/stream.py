"""Host-streamed training data (data.placement: host), for sets larger than device memory.

Per chunk, the host computes the epoch permutations the device path would draw (the same
jitted function of the same keys, run on the CPU), gathers the chunk's examples for every seed
in the group from the task's arrays (memory-mapped where the files allow), and places them on
the devices on a background thread while the previous chunk trains. Runs that share a seed
share one copy of their batches, so runs that differ only in learning rate see identical data,
exactly as with the data on the device. A task that draws random windows instead (tokens,
`host_windows`) streams through WindowStream: the window starts the device would draw, drawn
by the same function of the same keys on the CPU, the windows gathered from the mapped file.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import Mesh

from scaling.tasks.base import Task
from scaling.train.mesh import put_replicated, replicated
from scaling.train.spec import GroupSpec

STREAM_BYTES = 1 << 30  # a chunk's streamed batches, at most (on the host and each device)


def chunk_steps(spec_chunk: int, batch_size: int, seeds: int, example_bytes: int) -> int:
    """The chunk length that keeps one chunk's streamed batches within STREAM_BYTES."""
    per_step = max(batch_size * seeds * example_bytes, 1)
    return max(1, min(spec_chunk, STREAM_BYTES // per_step))


def example_bytes(arrays: dict[str, np.ndarray]) -> int:
    """Bytes of one training example over all of the task's arrays."""
    return sum(a.dtype.itemsize * int(np.prod(a.shape[1:])) for a in arrays.values())


def abstract(spec: GroupSpec, arrays: dict[str, np.ndarray], num_seeds: int, mesh: Mesh) -> Any:
    """Shapes of one chunk's streamed batches, for compiling ahead and the memory analysis."""
    everywhere = replicated(mesh)
    return {k: jax.ShapeDtypeStruct((num_seeds, spec.chunk_steps, spec.batch_size, *a.shape[1:]),
                                    a.dtype, sharding=everywhere) for k, a in arrays.items()}


class HostStream:
    """The batches of one group's seeds, chunk by chunk, prefetched one chunk ahead.

    `new_perm(key, epoch)` is the program's own permutation function; it runs here on the CPU
    with the runs' data keys (split from their seeds as the engine splits them).
    """

    def __init__(self, spec: GroupSpec, arrays: dict[str, np.ndarray], seeds: list[int],
                 new_perm: Callable[[jax.Array, jax.Array], jax.Array], mesh: Mesh) -> None:
        self.spec, self.arrays, self.mesh = spec, arrays, mesh
        self.seeds = sorted(set(seeds))
        self.cpu = jax.devices("cpu")[0]
        with jax.default_device(self.cpu):
            self.keys = [jax.random.split(jax.random.key(s))[1] for s in self.seeds]
        self.new_perm = jax.jit(new_perm)
        self.perms: dict[tuple[int, int], np.ndarray] = {}
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self.ahead: dict[int, concurrent.futures.Future] = {}

    def slots(self, seeds: list[int]) -> np.ndarray:
        """Each group slot's index among this stream's seeds."""
        return np.asarray([self.seeds.index(s) for s in seeds], np.int32)

    def perm(self, seed_index: int, epoch: int) -> np.ndarray:
        """The epoch's padded order for one seed, as the device path computes it."""
        key = (seed_index, epoch)
        if key not in self.perms:
            with jax.default_device(self.cpu):
                self.perms[key] = np.asarray(self.new_perm(self.keys[seed_index], epoch))
            for old in [k for k in self.perms if k[0] == seed_index and k[1] < epoch - 1]:
                del self.perms[old]
        return self.perms[key]

    def indices(self, first: int) -> np.ndarray:
        """(seeds, chunk_steps, batch) example indices of the chunk starting at step `first`;
        steps past the end of training take example 0 (no run trains there)."""
        spec, size, per_epoch = self.spec, self.spec.batch_size, self.spec.data.steps_per_epoch
        out = np.zeros((len(self.seeds), spec.chunk_steps, size), np.int64)
        for t, step in enumerate(range(first, min(first + spec.chunk_steps, spec.last_step))):
            start = (step % per_epoch) * size
            for i in range(len(self.seeds)):
                out[i, t] = self.perm(i, step // per_epoch)[start:start + size]
        return out

    def _build(self, first: int) -> Any:
        idx = self.indices(first)
        flat = idx.reshape(-1)
        batches = {k: np.ascontiguousarray(a[flat]).reshape(*idx.shape, *a.shape[1:])
                   for k, a in self.arrays.items()}
        return put_replicated(self.mesh, batches)

    def get(self, first: int) -> Any:
        """The chunk at `first` on the devices; starts the next one on the background thread."""
        current = self.ahead.pop(first, None) or self.pool.submit(self._build, first)
        following = first + self.spec.chunk_steps
        if following < self.spec.last_step and following not in self.ahead:
            self.ahead[following] = self.pool.submit(self._build, following)
        return current.result()

    def close(self) -> None:
        for future in self.ahead.values():
            future.cancel()
        self.pool.shutdown(wait=True)


class WindowStream(HostStream):
    """The batches of one group's seeds for a task that draws windows (task.host_windows):
    per step, `task.starts(fold_in(data_key, step))` on the CPU, as the device draws them, and
    the windows at those starts from `task.host_batch`. The chunk's starts are drawn by one
    jitted call per seed."""

    def __init__(self, spec: GroupSpec, task: Task, seeds: list[int], mesh: Mesh) -> None:
        draw = lambda key, step: task.starts(jax.random.fold_in(key, step), spec.batch_size)
        super().__init__(spec, {}, seeds, jax.vmap(draw, (None, 0)), mesh)
        self.task = task

    def _build(self, first: int) -> Any:
        steps = np.arange(first, first + self.spec.chunk_steps)
        with jax.default_device(self.cpu):
            starts = np.stack([np.asarray(self.new_perm(key, steps)) for key in self.keys])
        return put_replicated(self.mesh, self.task.host_batch(starts))


def open_stream(spec: GroupSpec, task: Task, seeds: list[int],
                new_perm: Callable[[jax.Array, jax.Array], jax.Array], mesh: Mesh) -> HostStream:
    """The host stream of a group: of examples by the program's permutation (`new_perm`) for
    a finite training set, else of the windows the task draws."""
    if task.finite_data:
        return HostStream(spec, task.train_arrays(), seeds, new_perm, mesh)
    return WindowStream(spec, task, seeds, mesh)
