"""scaling.sweep.group: the one lifecycle of a group's run folders. Rows counted by hand, the
sinks' order and their closing on an error seen through a real sweep, a schedule and the
branches, and no other driver building a sink list."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scaling.sweep import group as group_mod, runner, session as session_mod
from scaling.sweep.claiming import GroupClaims
from scaling.train.sinks import Sink
from tests.helpers import NQM, config

PACKAGE = Path(__file__).resolve().parents[1] / "scaling"


def _outlet(tmp_path, tokens=None) -> group_mod.Outlet:
    return group_mod.Outlet(tmp_path, [], [], GroupClaims(tmp_path), tokens)


def test_a_row_is_counted_in_examples_and_tokens_of_its_own_step(tmp_path):
    count = _outlet(tmp_path, tokens=16).count(lambda s: 32 * s + 5)
    row = {"step": 3}
    count(row)
    assert row == {"step": 3, "examples": 101, "tokens": 1616}
    no_tokens = {"step": 3}
    _outlet(tmp_path).count(lambda s: 32 * s)(no_tokens)
    assert no_tokens == {"step": 3, "examples": 96, "tokens": None}


def test_a_later_cohorts_row_is_moved_to_the_runs_own_step(tmp_path):
    """A schedule's cohort at batch 64 that began after 100 steps and 3,200 examples: its
    program's step 60 (10 steps in) is the run's step 110, at 3,200 + 10 x 64 examples."""
    count = _outlet(tmp_path).count(lambda s: 3200 + (s - 50) * 64, lambda s: 100 + s - 50)
    row = {"step": 60}
    count(row)
    assert row == {"step": 110, "examples": 3840, "tokens": None}


class _Hook(Sink):
    """A caller's hook: what it hears, and an error once it has heard `fail_after` chunks."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.rows_seen, self.closed, self.finished, self.fail_after = [], 0, 0, fail_after

    def rows(self, records, wall_s, running):
        self.rows_seen += [r for rows in records for r in rows]
        if self.fail_after is not None and len(self.rows_seen) >= self.fail_after:
            raise RuntimeError("the hook fails")

    def finish(self, summaries):
        self.finished += len(summaries)

    def close(self):
        self.closed += 1


class _Tracker:
    def __init__(self):
        self.closed = 0

    def start(self, run_id, config, resume_step):
        pass

    def log(self, run_id, rows):
        pass

    def finish(self, run_id, summary):
        pass

    def close(self):
        self.closed += 1


SMALL = ("batch.sizes=[8]", "seeds=[0]", "learning_rate.values=[0.1]")


def test_the_hook_hears_rows_the_writer_has_counted(tmp_path):
    hook = _Hook()
    runner.run(config(NQM, *SMALL), tmp_path, quiet=True, hooks=[hook])
    assert hook.rows_seen and all(r["examples"] == 8 * r["step"] for r in hook.rows_seen)
    assert hook.finished == 1 and hook.closed == 0


@pytest.mark.parametrize("extra", [(), ("batch.sizes=[8, 16]", "batch.schedules=[{kind: doubling, "
                                        "start: 8, at: [0.5], max: 16}]")],
                         ids=["fixed", "schedule"])
def test_an_error_closes_every_sink_and_leaves_no_summary(tmp_path, monkeypatch, extra):
    tracker = _Tracker()
    monkeypatch.setattr(session_mod, "open_trackers", lambda cfg, out: [tracker])
    hook = _Hook(fail_after=2)
    cfg = config(NQM, *SMALL, *extra)
    with pytest.raises(RuntimeError, match="the hook fails"):
        runner.run(cfg, tmp_path, quiet=True, hooks=[hook])
    assert hook.closed == 1 and tracker.closed == 1 and hook.finished == 0
    assert not list(tmp_path.glob("runs/*/summary.json"))


def test_no_driver_but_the_group_builds_sinks_or_trains_a_group():
    """Writer(, TrackerSink( and run_group( appear in scaling/sweep only in group.py: a new
    driver cannot forget the trackers, the hooks or the closing on an error. `scaling bench`
    times the engine alone and writes no run folder."""
    found = []
    for path in sorted((PACKAGE / "sweep").glob("*.py")):
        if path.name == "bench.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if name in {"Writer", "TrackerSink", "run_group", "finish_all", "close_all"}:
                    found.append(f"{path.name}:{node.lineno} {name}")
    assert found and all(f.startswith("group.py:") for f in found), found
