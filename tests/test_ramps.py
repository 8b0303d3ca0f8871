"""The switch and linear_examples batch schedules: their phases worked by hand, a switch run
as trained, and their refusals before compute."""

from __future__ import annotations

import pytest

from scaling import store
from scaling.config import ConfigError
from scaling.sweep import runner
from scaling.sweep.segments import phase_plan
from tests.helpers import NQM, config

BASE = ("budget.max_steps=null", "budget.max_examples=16000", "seeds=[0]", "eval.every=10")


def _schedule(entry: str):
    return config(NQM, *BASE, f"batch.schedules=[{entry}]").batch.schedules[0]


def test_a_switch_goes_from_start_to_max_at_its_fraction():
    sched = _schedule("{kind: switch, start: 8, max: 64, at: [0.7]}")
    assert sched.batch_sizes == [8, 64] and sched.label == "switch8"
    assert phase_plan(sched, 16000) == [(0, 8), (11200, 64)]


def test_a_linear_ramp_steps_through_the_multiples_of_start_as_it_reaches_them():
    """8 to 32 reached at 30% of 16,000 examples: the ramp passes 16 at a third of 4,800
    examples (1,600), 24 at two thirds (3,200), 32 at 4,800."""
    sched = _schedule("{kind: linear_examples, start: 8, max: 32, at: [0.3]}")
    assert phase_plan(sched, 16000) == [(0, 8), (1600, 16), (3200, 24), (4800, 32)]


def test_a_switch_run_trains_at_start_then_at_max(tmp_path):
    cfg = config(NQM, *BASE, "batch.schedules=[{kind: switch, start: 8, max: 64, at: [0.5], "
                              "lr_rule: sqrt}]")  # linear: 0.3 x 8 diverges on this NQM
    runner.run(cfg, tmp_path, quiet=True)
    folder = next(p for p in (tmp_path / "runs").iterdir() if "switch" in p.name)
    summary = store.read_summary(tmp_path, folder.name)
    path = summary["batch_path"]
    assert summary["status"] != "diverged"
    assert [b for *_, b in path] == [8, 64] and path[1][:2] == [1000, 8000]
    rows = store.read_metrics(folder / "metrics.jsonl")
    assert rows[-1]["examples"] > 16000 - 64


@pytest.mark.parametrize("entry, message", [
    ("{kind: switch, start: 8, max: 64, at: [0.0]}", r"\.at: got \[0\.0\], expected one fraction"),
    ("{kind: switch, start: 8, max: 64, at: [1.0]}", r"\.at: got \[1\.0\], expected one fraction"),
    ("{kind: switch, start: 8, max: 64, at: [0.3, 0.6]}", r"\.at: .*expected one fraction"),
    ("{kind: switch, start: 8, max: 8, at: [0.5]}", r"\.max: got 8, expected a batch size > start"),
    ("{kind: linear_examples, start: 8, max: 20, at: [0.5]}", r"\.max: got 20, expected a multiple"),
])
def test_a_ramp_with_bad_keys_is_refused_before_compute(entry, message):
    with pytest.raises(ConfigError, match=message):
        config(NQM, *BASE, f"batch.schedules=[{entry}]")
