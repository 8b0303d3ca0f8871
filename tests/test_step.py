"""One run's pieces of the program (scaling.train.step), here the end of a run: a run whose
target is crossed before its budget, but whose reading's window closes after it, goes on past
the budget to confirm it (budget.reading_extension) or, with the extension off, is read with
its window cut at the budget and flagged; it is never reported as not reached."""

from __future__ import annotations

import pytest

from scaling.analysis import analyze as A
from scaling.sweep import runner
from tests.helpers import config

TARGET = "eval_loss<=0.1"
# At batch 8 and lr 0.1 this NQM crosses 0.1 near step 58: the smoothed reading (window 1.5)
# needs rows to about step 88, past the 80-step budget.
LATE = {"task": {"name": "nqm", "dim": 10}, "optimizer": {"name": "sgd"},
        "batch": {"sizes": [8]}, "learning_rate": {"values": [0.1], "search": False},
        "budget": {"max_steps": 80}, "targets": [TARGET], "seeds": [0],
        "eval": {"every": 2, "points_per_decade": 0}, "train": {"chunk_steps": 10}}


@pytest.mark.slow
def test_a_late_crossing_is_confirmed_past_the_budget(tmp_path):
    (s,) = runner.run(config(LATE), tmp_path, quiet=True)
    assert s["status"] == "completed" and s["steps_to_target"][TARGET] is not None
    assert 0 < s["extension_steps"] <= 40 and s["steps"] == 80 + s["extension_steps"]
    assert 1.5 * (1 + s["steps_to_target"][TARGET]) - 1 <= s["steps"] + 2  # the window closed
    a = A.analyze(tmp_path, bootstrap=0)
    assert a["runs"][0]["reading"][TARGET] == "reached" and not a["targets"][0]["unreached_batch_sizes"]
    assert a["cost"]["extension_examples"] == 8 * s["extension_steps"]


@pytest.mark.slow
def test_without_the_extension_a_late_crossing_is_read_clipped_and_flagged(tmp_path):
    cfg = config(LATE, "budget.reading_extension=false")
    (s,) = runner.run(cfg, tmp_path, quiet=True)
    assert s["steps"] == 80 and s["extension_steps"] == 0
    assert s["steps_to_target"][TARGET] is not None and s["reading_clipped"] == [TARGET]
    a = A.analyze(tmp_path, bootstrap=0)
    assert a["runs"][0]["reading"][TARGET] == "clipped"
    assert not a["targets"][0]["unreached_batch_sizes"], "never reported as not reached"
