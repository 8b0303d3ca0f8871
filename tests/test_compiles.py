"""scaling.train.compiles: a width compiles once however many threads ask for it, and a width
already compiled runs while another width of the same program compiles on another thread (a
narrower width's compile must not hold up the group training at its own)."""

from __future__ import annotations

import threading

from scaling.train.compiles import CompiledChunks


class _Lowered:
    def __init__(self, width: int, log: list[int], gates: dict[int, threading.Event]) -> None:
        self.width, self.log, self.gates = width, log, gates

    def compile(self):
        self.log.append(self.width)
        if self.width in self.gates:
            assert self.gates[self.width].wait(10)
        return lambda *args: ("ran", self.width)


class _Chunk:
    """A jitted chunk's stand-in: lowering takes the width as its first argument."""

    def __init__(self, gates: dict[int, threading.Event] | None = None) -> None:
        self.log: list[int] = []
        self.gates = gates or {}

    def lower(self, width: int, *rest):
        return _Lowered(width, self.log, self.gates)


def _in_thread(fn, *args) -> threading.Thread:
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


def test_a_compiled_width_runs_while_another_width_compiles():
    gate = threading.Event()
    chunk = _Chunk({2: gate})
    chunks = CompiledChunks(chunk, host_data=False)
    assert chunks._run_compiled(4, (4, None)) == ("ran", 4)
    slow = _in_thread(chunks._compile, 2, (2, None), True)
    while 2 not in chunk.log:  # the narrower width is compiling now
        slow.join(0.01)
    result = []
    fast = _in_thread(lambda: result.append(chunks._run_compiled(4, (4, None))))
    fast.join(5)
    assert result == [("ran", 4)] and slow.is_alive()
    gate.set()
    slow.join(5)
    assert chunks._run_compiled(2, (2, None)) == ("ran", 2)
    assert chunk.log == [4, 2] and chunks.ahead == {2} and chunks.chunks_at == {4: 2, 2: 1}


def test_a_width_asked_for_by_two_threads_compiles_once():
    gate = threading.Event()
    chunk = _Chunk({3: gate})
    chunks = CompiledChunks(chunk, host_data=False)
    ahead = _in_thread(chunks._compile, 3, (3, None), True)
    while 3 not in chunk.log:
        ahead.join(0.01)
    result = []
    waiting = _in_thread(lambda: result.append(chunks._run_compiled(3, (3, None))))
    waiting.join(0.2)
    assert waiting.is_alive() and not result  # it waits for the compile under way
    gate.set()
    for thread in (ahead, waiting):
        thread.join(5)
    assert result == [("ran", 3)] and chunk.log == [3]
