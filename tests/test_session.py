"""scaling.sweep.session: the next group's program compiles on a thread while this group
trains (and a fresh group's chunk on its program's thread while its first state compiles),
and its compile seconds are recorded apart from the seconds a group waited."""

from __future__ import annotations

import threading

from scaling.sweep import runner
from scaling.train.program import GroupProgram
from tests.helpers import SWEEP, assert_throughput, config


def test_the_next_group_compiles_on_a_thread_while_this_one_trains(tmp_path, monkeypatch):
    """Two batch sizes, one group each: batch 16's chunk is compiled on the background thread
    and its group reuses it (one compile of each chunk, none repeated), its compile seconds
    recorded apart from the seconds the group waited for compiles. Batch 8's chunk compiles
    ahead too, on its program's thread while the group's first state compiles (start.fresh)."""
    compiled = []
    original = GroupProgram._compile
    locks: dict[int, threading.Lock] = {}  # per program: the check and the compile together

    def spy(self, key, args, ahead=False):
        with locks.setdefault(id(self), threading.Lock()):
            if key not in self.compiled:
                compiled.append((self.spec.batch_size, key, threading.current_thread().name))
            return original(self, key, args, ahead)

    monkeypatch.setattr(GroupProgram, "_compile", spy)
    done = runner.run(config(SWEEP, "seeds=[0]", "train.min_chunks=1"), tmp_path, quiet=True)
    assert len(done) == 4
    assert sorted((b, k) for b, k, _ in compiled) == [(8, 2), (16, 2)]
    (thread,) = [t for b, _, t in compiled if b == 16]
    assert thread != threading.main_thread().name
    assert assert_throughput(tmp_path) == 2
    ahead = {s["batch_size"]: s["throughput"]["compile_ahead_s"] for s in done}
    assert ahead[8] > 0 and ahead[16] > 0
    waited = {s["batch_size"]: s["compile_s"] for s in done}  # on the training thread
    # At most the rest of the compile started ahead (batch 8's may be done when its first
    # state is, a wait of 0).
    assert all(waited[b] <= ahead[b] + 0.1 for b in (8, 16)), (waited, ahead)
