"""Group widths cut to fit device memory: the arithmetic, XLA's estimate, and a sweep split by it."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import pytest

from scaling.config import ConfigError
from scaling.sweep import batches, runner
from scaling.train import memory
from scaling.sweep import session as session_mod
from scaling.sweep import prepare as prepare_mod
from tests.helpers import SWEEP, assert_same, comparable, config, write_config

ONE_BATCH = ("batch.sizes=[8]", "train.max_group_size=null")


@pytest.mark.parametrize("limit, per_run, axis, fixed, fraction, width", [
    (1000, 100, 1, 0, 0.8, 8),  # 800 // 100
    (1000, 100, 1, 0, 1.0, 10),
    (1000, 99, 1, 0, 1.0, 10),  # 10.1 runs -> 10
    (1000, 100, 1, 300, 0.8, 5),  # (800 - 300) // 100
    (1000, 100, 4, 300, 0.8, 20),  # 5 runs per device on each of 4 run shards
    (1000, 900, 2, 0, 0.8, 2),  # not even one fits: still one run per device
    (1000, 10, 1, 2000, 0.8, 1),  # the fixed data alone is over the limit
])
def test_max_width(limit, per_run, axis, fixed, fraction, width):
    assert memory.max_width(limit, per_run, axis, fixed, fraction) == width


def test_max_width_refuses_a_non_positive_estimate():
    with pytest.raises(ValueError, match="per_run"):
        memory.max_width(1000, 0, 1)


def test_chunk_bytes_and_the_width_line():
    stats = SimpleNamespace(argument_size_in_bytes=1000, output_size_in_bytes=600,
                            temp_size_in_bytes=400, alias_size_in_bytes=500)
    assert memory.chunk_bytes(stats) == 1500
    assert memory.chunk_bytes(SimpleNamespace(**{**vars(stats), "temp_size_in_bytes": None})) is None
    assert memory.chunk_bytes(None) is None
    # 500 at one run per device, 1,100 at 4 per device (width 8 on 2 run shards): 200 a run,
    # 300 that no width changes.
    assert memory.width_line(500, 1100, width=8, runs_axis=2) == (300, 200)


class LineProgram:
    """A chunk whose bytes per device are 5,000 that no width changes plus 1,000 a run."""

    def memory_at(self, width, data, eval_data):
        return SimpleNamespace(argument_size_in_bytes=5000 + 1000 * width, output_size_in_bytes=0,
                               temp_size_in_bytes=0, alias_size_in_bytes=0)


def test_group_width_cuts_on_the_line_through_two_widths():
    # 80% of 10,000 is 8,000. At width 8: 13,000, too much. Through widths 1 and 8: 5,000 + 1,000
    # a run, so 3 runs (8,000). Charging all of width 8's bytes to its runs (1,625 each) would
    # say 4, whose chunk holds 9,000.
    assert memory.group_width(LineProgram(), 8, {}, {}, 10_000, 1) == (3, 13_000)
    assert memory.group_width(LineProgram(), 2, {}, {}, 10_000, 1) == (2, 7_000)  # it fits
    assert memory.group_width(LineProgram(), 1, {}, {}, 1_000, 1) == (1, 6_000)  # nothing less


def test_device_limit(monkeypatch):
    assert memory.device_limit(2.5) == 2_500_000_000
    reported = (jax.local_devices()[0].memory_stats() or {}).get("bytes_limit")
    assert memory.device_limit(None) == reported  # None on CPU, which reports no memory stats
    device = SimpleNamespace(memory_stats=lambda: {"bytes_limit": 16_000_000_000})
    monkeypatch.setattr(memory.jax, "local_devices", lambda: [device])
    assert memory.device_limit(None) == 16_000_000_000
    assert memory.device_limit(1.0) == 1_000_000_000  # the config caps it


def test_memory_limit_must_be_positive():
    for bad in (0, -1.0):
        with pytest.raises(ConfigError, match="train.memory_limit_gb"):
            config(SWEEP, f"train.memory_limit_gb={bad}")


def _session(cfg, folder) -> session_mod.Session:
    return session_mod.Session(prepare_mod.prepare(cfg, folder), quiet=True)


def test_estimate_is_positive_and_grows_with_width(tmp_path):
    session = _session(config(SWEEP, *ONE_BATCH), tmp_path)
    program = session.program(8)
    data, eval_data = session.context.data, session.context.eval_data
    total = {w: memory.chunk_bytes(program.memory_at(w, data, eval_data)) for w in (1, 8)}
    assert total[8] > total[1] > memory.tree_bytes(data, eval_data)
    fixed, per_run = memory.width_line(total[1], total[8], 8, 1)
    assert per_run > 0 and fixed > 0  # the program's own scratch does not grow with the width
    assert sorted(program.compile_s) == [1, 8]


def test_the_chunk_compiled_for_the_estimate_trains_the_group(tmp_path):
    session = _session(config(SWEEP, *ONE_BATCH, "train.memory_limit_gb=1000.0",
                              "train.min_chunks=1"), tmp_path)
    summaries = batches.train(session, session.p.batch_runs(8))
    program = session.program(8)
    assert [s["group_size"] for s in summaries] == [4] * 4
    assert list(program.compile_s) == [4] and program.chunks_at[4] > 0  # compiled once, reused


def test_a_tiny_memory_limit_splits_the_batch_size_into_smaller_groups(tmp_path, scaling_log):
    limit_gb = _limit_for(config(SWEEP, *ONE_BATCH), tmp_path, 2.5)  # room for 2 runs, not 3
    whole = runner.run(config(SWEEP, *ONE_BATCH), tmp_path / "whole", quiet=True)
    split = runner.run(config(SWEEP, *ONE_BATCH, f"train.memory_limit_gb={limit_gb}"),
                       tmp_path / "split")
    assert [s["group_size"] for s in whole] == [4] * 4
    assert [s["group_size"] for s in split] == [2] * 4
    assert [(s["status"], s["steps"]) for s in split] == [(s["status"], s["steps"]) for s in whole]
    assert_same(comparable(whole), comparable(split))
    out = scaling_log.text
    assert "batch 8: 4 runs need about" in out and "GB: groups of 2" in out


def _limit_for(cfg, tmp_path, runs: float) -> float:
    """memory_limit_gb with room for `runs` runs of ONE_BATCH's group beside what no width
    changes, on the line through its chunk's bytes at widths 1 and 4."""
    probe = _session(cfg, tmp_path / "probe")
    program = probe.program(8)
    data, eval_data = probe.context.data, probe.context.eval_data
    fixed, per_run = memory.width_line(
        *(memory.chunk_bytes(program.memory_at(w, data, eval_data)) for w in (1, 4)), 4, 1)
    return (fixed + runs * per_run) / memory.SAFETY / memory.GB


def test_progress_counts_the_groups_left_after_the_memory_cut(tmp_path, scaling_log):
    # Room for 2 runs by the engine's estimate: 2 groups, not 1. (A limit below one run's
    # chunk, XLA's analysis at one run per device, is refused by the memory plan instead:
    # tests/test_memory_plan.py.)
    limit_gb = _limit_for(config(SWEEP, *ONE_BATCH), tmp_path, 2.5)
    split = runner.run(config(SWEEP, *ONE_BATCH, f"train.memory_limit_gb={limit_gb}"),
                       tmp_path / "split")
    assert [s["group_size"] for s in split] == [2] * 4
    out = scaling_log.text
    assert "groups: 1 done, 1 left" in out and "groups: 2 done, 0 left" in out


def test_dry_run_says_groups_may_be_cut_to_fit_memory(tmp_path, capsys):
    from scaling.cli.main import main

    args = ["sweep", write_config(tmp_path, *ONE_BATCH), "--out", str(tmp_path / "o"), "--dry-run"]
    assert main(args) == 0
    # CPU reports no limit, so the dry run says nothing of memory; a GPU reports its own
    assert ("memory:" in capsys.readouterr().out) == (memory.device_limit(None) is not None)
    path = write_config(tmp_path, *ONE_BATCH, "train.memory_limit_gb=2.0")
    assert main(["sweep", path, "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    assert "memory: 2 GB per device; the sweep compiles" in capsys.readouterr().out
    assert not (tmp_path / "o").exists()
