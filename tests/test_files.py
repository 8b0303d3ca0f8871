"""scaling.store.files: atomic writes go through a private temporary file, yet the results get
the mode an ordinary write gives (the run files, and the data cache of scaling.tasks.storage)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from scaling.store import files
from scaling.sweep import runner
from scaling.tasks import storage
from tests.helpers import SWEEP, config


@pytest.fixture(params=[0o022, 0o077])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_results_get_the_mode_an_ordinary_write_gives(tmp_path, umask, monkeypatch):
    """Atomic writes go through a private temporary file; the result must not stay 0o600."""
    expected = 0o666 & ~umask
    runner.run(config(SWEEP, "seeds=[0]", "batch.sizes=[8]", "learning_rate.values=[0.1]"),
               tmp_path / "out", quiet=True)
    files = [tmp_path / "out" / "sweep.yaml", *(tmp_path / "out" / "runs").glob("*/*")]
    assert len(files) == 4  # sweep.yaml, config.json, metrics.jsonl, summary.json
    assert {f.name: f.stat().st_mode & 0o777 for f in files} == {f.name: expected for f in files}
    monkeypatch.setenv("SCALING_DATA", str(tmp_path / "data"))
    storage.cached("thing", "k", lambda: {"a": np.ones(2)})
    kept = list((tmp_path / "data" / "generated").iterdir())
    assert len(kept) == 2 and all(f.stat().st_mode & 0o777 == expected for f in kept)


@pytest.mark.parametrize("value, line", [
    ({"step": 3, "loss": 0.5, "b_simple": None}, '{"step": 3, "loss": 0.5, "b_simple": null}'),
    ({"step": 3, "loss": float("nan"), "g": [1.0, float("inf")]},
     '{"step": 3, "loss": null, "g": [1.0, null]}'),
    ({"final": {"b_noise": float("-inf"), "steps": (1, 2)}},
     '{"final": {"b_noise": null, "steps": [1, 2]}}'),
])
def test_json_lines_write_non_finite_floats_as_null(value, line):
    assert files.dumps(value) == line
