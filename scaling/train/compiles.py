"""A program's chunk compiled once per key (the group's width, and host-streamed the number of
seeds whose batches it receives): at its first call, or ahead from shapes alone on another
thread (the next group's chunk while a group trains, a fresh group's while its first state
compiles), with each key's compile seconds and chunks run. GroupProgram inherits it."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any, Callable

import jax


class CompiledChunks:
    """The compiled chunks of one program: `chunk` is its jitted chunk function (the state
    donated), and the program's `_abstract_args` the chunk's arguments at a width from shapes
    alone; `host_data`: the chunk receives each step's batches (scaling.train.stream)."""

    def __init__(self, chunk: Any, host_data: bool) -> None:
        self._chunk, self._host_data = chunk, host_data
        self._locks_guard = threading.Lock()
        self._locks: dict[Any, threading.Lock] = {}
        self._background: concurrent.futures.ThreadPoolExecutor | None = None
        # Per compile_key (the group width, and the streamed seeds): compiled chunk, its
        # compile seconds, chunks run.
        self.compiled: dict[Any, Callable] = {}
        self.compile_s: dict[Any, float] = {}
        self.chunks_at: dict[Any, int] = {}
        self.ahead: set[Any] = set()  # keys compiled ahead (compile_ahead), before a group ran them
        self.slot_s: float | None = None  # the latest chunk's training seconds per slot (loop)
        self.compile_wait_s = 0.0  # seconds chunk() spent compiling, or waiting for a compile

    def _abstract_args(self, width: int, data: Any, eval_data: Any) -> tuple:
        raise NotImplementedError

    def compile_cost(self) -> float:
        """What compiling the chunk at a new width is taken to cost: the longest compile of
        this program's chunks so far (0 before any; a compile read from the persistent cache
        counts as the seconds it took)."""
        return max(self.compile_s.values(), default=0.0)

    def compile_key(self, width: int, data: Any) -> Any:
        """What a compiled chunk is specific to: its width, and host-streamed the number of
        seeds whose batches it receives."""
        if not self._host_data:
            return width
        return width, int(jax.tree.leaves(data)[0].shape[0])

    def _run_compiled(self, width: int, args: tuple) -> Any:
        """The chunk at `width` called on `args`, compiled first (or waited for, where a
        compile started ahead on another thread), the wait counted apart."""
        key = self.compile_key(width, args[1])
        began = time.perf_counter()
        self._compile(key, args)
        self.compile_wait_s += time.perf_counter() - began
        self.chunks_at[key] = self.chunks_at.get(key, 0) + 1
        return self.compiled[key](*args)

    def _compile(self, key: Any, args: tuple, ahead: bool = False) -> Any:
        """The chunk for `key`, compiled once; `args` may hold abstract (shape-only) state. A
        compile started ahead on another thread is waited for, not repeated."""
        if key in self.compiled:  # no lock: another width may be compiling meanwhile
            return self.compiled[key]
        with self._lock(key):
            if key not in self.compiled:
                start = time.perf_counter()
                self.compiled[key] = self._chunk.lower(*args).compile()
                self.compile_s[key] = time.perf_counter() - start
                if ahead:
                    self.ahead.add(key)
            return self.compiled[key]

    def _lock(self, key: Any) -> threading.Lock:
        """The lock of one key's compile: a key compiles once, two keys at once."""
        with self._locks_guard:
            return self._locks.setdefault(key, threading.Lock())

    def memory_at(self, width: int, data: Any, eval_data: Any) -> Any:
        """XLA's memory analysis of the chunk at `width` (per device), compiled ahead from the
        state's shapes alone, so no state is allocated; the group that trains at this width
        reuses the compiled chunk. None where the backend gives no analysis."""
        return self.compile_ahead(width, data, eval_data).memory_analysis()

    def compile_ahead(self, width: int, data: Any, eval_data: Any) -> Any:
        """The chunk at `width` compiled from shapes alone (e.g. on a background thread while
        another group trains); the group that trains at this width reuses it."""
        return self._compile(self.compile_key(width, data),
                             self._abstract_args(width, data, eval_data), ahead=True)

    def compile_in_background(self, width: int, data: Any, eval_data: Any) -> None:
        """Start compiling the chunk at `width` on a thread of this program's own, unless it is
        compiled already: a group's chunk then compiles while its first state does (XLA
        compiles each program on one core). A failure is left for the chunk's first call."""
        if self.compile_key(width, data) in self.compiled:
            return
        if self._background is None:
            self._background = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._background.submit(self.compile_ahead, width, data, eval_data)

    def close(self) -> None:
        """Wait for the compiles started in the background."""
        if self._background is not None:
            self._background.shutdown(wait=True)
            self._background = None
