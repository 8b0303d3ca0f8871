"""Batch ramps for a decaying learning rate: the seesaw schedule's doublings where the rate
would halve (against the multiplier's own values), its run as trained, its refusals, and the
NQM's closed form of a ramp against the decay it stands in for."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from scaling import store
from scaling.analysis.nqm_reference import ramp_against_decay
from scaling.config import ConfigError
from scaling.config.arithmetic import for_config
from scaling.sweep import runner
from scaling.sweep.segments import as_static
from scaling.tasks.nqm import NQMOptions
from tests.helpers import NQM, config

SEESAW = ("budget.max_steps=null", "budget.max_examples=16000", "seeds=[0]",
          "batch.schedules=[{kind: seesaw, start: 8, max: 64}]", "eval.every=10")


def _doublings(*overrides: str) -> list[float]:
    cfg = config(NQM, *SEESAW, *overrides)
    (sched,) = cfg.batch.schedules
    return as_static(cfg, sched, for_config(cfg, 8)).at


def test_on_cosine_the_batch_doubles_where_the_rate_falls_to_a_half_a_quarter_an_eighth():
    """cosine to 0: (1 + cos(pi p)) / 2 = 2^-k at p = arccos(2^(1-k) - 1) / pi: 0.5, 2/3, 0.770
    of the 2,000 steps (one step of slack: the first step at or below the level)."""
    want = [math.acos(2.0 ** (1 - k) - 1) / math.pi for k in (1, 2, 3)]
    assert _doublings("schedule.name=cosine") == pytest.approx(want, abs=1 / 2000)


def test_on_wsd_the_doublings_fall_in_the_decay():
    """A linear 20% decay to 0 over the last 400 of 2,000 steps: at step s the decay stands at
    q = (s - 1600 + 1) / 400, so the rate is halved at q = 1/2, 3/4, 7/8: steps 1799, 1899, 1949."""
    got = _doublings("schedule.name=wsd", "schedule.decay_fraction=0.2")
    assert got == pytest.approx([1799 / 2000, 1899 / 2000, 1949 / 2000], abs=1e-12)


def test_a_seesaw_run_doubles_there_and_its_rate_falls_by_sqrt_two_less(tmp_path):
    cfg = config(NQM, *SEESAW, "schedule.name=cosine", "batch.sizes=[8]")
    runner.run(cfg, tmp_path, quiet=True)
    (sched,) = cfg.batch.schedules
    at = as_static(cfg, sched, for_config(cfg, 8)).at
    folder = next(p for p in (tmp_path / "runs").iterdir() if "seesaw" in p.name)
    summary = store.read_summary(tmp_path, folder.name)
    path = summary["batch_path"]
    assert [b for _, _, b in path] == [8, 16, 32, 64]
    for (_, examples, _), before, a in zip(path[1:], [8, 16, 32], at):
        assert a * 16000 <= examples < a * 16000 + before  # the first whole step at or past it
    rows = store.read_metrics(folder / "metrics.jsonl")
    for (_, examples, batch), before in zip(path[1:], [8, 16, 32]):
        last = max((r for r in rows if r["examples"] <= examples), key=lambda r: r["examples"])
        first = min((r for r in rows if r["examples"] > examples), key=lambda r: r["examples"])
        cosine = lambda r: (1 + math.cos(math.pi * r["examples"] / 16000)) / 2  # within a step
        jump = (first["lr"] / cosine(first)) / (last["lr"] / cosine(last))
        assert jump == pytest.approx(math.sqrt(batch / before), rel=0.01)


@pytest.mark.parametrize("overrides, message", [
    (("schedule.name=constant",), "schedule.name: got 'constant', expected a decaying"),
    (("schedule.name=cosine", "schedule.final_fraction=0.5"), "schedule.final_fraction: got 0.5"),
    (("schedule.name=cosine", "batch.schedules=[{kind: seesaw, start: 8, max: 64, at: [0.5]}]"),
     r"batch.schedules\[0\].at: got \[0.5\], expected unset with kind: seesaw"),
])
def test_a_seesaw_ramp_without_a_decay_to_follow_is_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        config(NQM, *SEESAW, *overrides)


def test_a_seesaw_schedule_takes_the_sqrt_rule_unless_told():
    assert config(NQM, *SEESAW, "schedule.name=cosine").batch.schedules[0].lr_rule == "sqrt"
    other = "batch.schedules=[{kind: seesaw, start: 8, max: 64, lr_rule: linear}]"
    assert config(NQM, *SEESAW, "schedule.name=cosine", other).batch.schedules[0].lr_rule == "linear"
    doubling = "batch.schedules=[{kind: doubling, start: 8, max: 16, at: [0.5]}]"
    assert config(NQM, *SEESAW, doubling).batch.schedules[0].lr_rule == "linear"


# ---------------------------------------------------------------- the NQM's closed form


def test_keeping_the_rate_and_doubling_the_batch_is_the_decay_where_noise_sets_the_loss():
    """SGD at lr 0.02 on the 100-dimensional NQM, 5 phases of 4,096 examples from batch 4:
    the ramp that keeps its rate is within 0.5% of halving it at every phase end; Seesaw's
    sqrt(2) cut is not (above 10% by the third phase): the closed form tells the two apart."""
    options = NQMOptions()
    keep = ramp_against_decay(options, 0.02, 4, 4096, 5, 1.0)
    seesaw = ramp_against_decay(options, 0.02, 4, 4096, 5, 2**-0.5)
    assert len(keep) == 4 and np.allclose(keep, 1.0, atol=0.005)
    assert max(abs(r - 1) for r in seesaw) > 0.10


def test_near_the_stability_limit_the_ramp_lags_the_decay():
    """At lr 1 (lr x h_max = 1) the ramp's fewer steps leave the loss 15-25% above the decay's."""
    keep = ramp_against_decay(NQMOptions(), 1.0, 4, 2**16, 5, 1.0)
    assert min(keep) > 1.1


def test_a_ramp_phase_without_a_step_is_refused():
    with pytest.raises(ValueError, match="phase 4 of the ramp has no step"):
        ramp_against_decay(NQMOptions(), 0.1, 64, 512, 5, 1.0)


def test_the_committed_closed_form_study_is_what_its_command_writes():
    path = Path(__file__).resolve().parents[1] / "experiments" / "seesaw_nqm.py"
    spec = importlib.util.spec_from_file_location("seesaw_nqm", path)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    committed = (study.OUT / "README.md").read_text()
    assert committed == study.markdown(study.cases())
