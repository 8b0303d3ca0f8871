"""scaling.store.runs: rows cannot repeat. Appends are checked against the last step on disk,
and a file whose steps repeat or go back is refused on read, naming the file and the step. A
folder's runs as a pandas frame, one row per run."""

from __future__ import annotations

import json
import sys

import pytest

from scaling import store
from scaling.errors import ConfigError
from scaling.store.runs import last_step
from scaling.sweep import runner
from tests.helpers import SWEEP, config


def _rows(*steps: int) -> list[dict]:
    return [{"step": s, "eval_loss": 1.0 / (s + 1), "wall_s": 0.5 * s} for s in steps]


@pytest.fixture
def run(tmp_path):
    store.start_run(tmp_path, "r", {"run_id": "r"})
    return tmp_path, tmp_path / "runs" / "r" / "metrics.jsonl"


def test_appends_go_on_from_the_last_step_on_disk(run):
    out, path = run
    store.append_metrics(out, "r", _rows(0, 10))
    store.append_metrics(out, "r", _rows(20, 30))
    assert [r["step"] for r in store.read_metrics(path)] == [0, 10, 20, 30]
    for bad, step in ((_rows(30, 40), 30), (_rows(20), 20), (_rows(40, 35), 35)):
        with pytest.raises(ConfigError, match=f"{path}: refusing a row at step {step} after step"):
            store.append_metrics(out, "r", bad)
    assert [r["step"] for r in store.read_metrics(path)] == [0, 10, 20, 30]  # nothing written


def test_a_resumed_run_rewrites_its_rows_then_appends(run):
    out, path = run
    store.append_metrics(out, "r", _rows(0, 10, 20, 30))
    kept = store.rows_until(out, "r", 10)
    store.resume_run(out, "r", {"run_id": "r"}, kept)
    store.append_metrics(out, "r", _rows(20, 30))  # the steps after the checkpoint, again
    assert store.read_metrics(path) == _rows(0, 10, 20, 30)


def test_a_torn_last_line_is_left_out_on_read_but_refused_before_an_append(run):
    out, path = run
    store.append_metrics(out, "r", _rows(0, 10))
    with open(path, "a") as f:
        f.write('{"step": 20, "eval_lo')
    assert store.read_metrics(path) == _rows(0, 10)
    with pytest.raises(ConfigError, match="ends in a torn line"):
        store.append_metrics(out, "r", _rows(20))


@pytest.mark.parametrize("steps, line, step, before", [
    ((0, 10, 20, 10, 20, 30), 4, 10, 20),  # a second writer's rows after the first's
    ((0, 10, 10), 3, 10, 10),  # a row twice
    ((0, 20, 10), 3, 10, 20),  # out of order
])
def test_a_repeated_or_out_of_order_step_is_an_error_naming_the_file_and_step(
        run, steps, line, step, before):
    out, path = run
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(*steps)))
    message = (f"{path}: step {step} at line {line} does not follow step {before}: rows repeat "
               f"or are out of order (two processes wrote this run?); `scaling repair {out}` "
               "keeps one clean pass (docs/results-format.md)")
    with pytest.raises(ConfigError) as err:
        store.read_metrics(path)
    assert str(err.value) == message
    store.finish_run(out, "r", {"run_id": "r"})
    with pytest.raises(ConfigError, match="does not follow"):
        store.load(out)  # what every analysis reads through


def test_a_damaged_line_before_the_last_is_an_error(run):
    out, path = run
    path.write_text(json.dumps(_rows(0)[0]) + "\n{damaged\n" + json.dumps(_rows(10)[0]) + "\n")
    with pytest.raises(ConfigError, match=f"{path}: line 2 is not a JSON row"):
        store.read_metrics(path)


def test_the_last_step_is_read_from_the_end_of_a_long_file(run, monkeypatch):
    out, path = run
    assert last_step(path) is None
    store.append_metrics(out, "r", _rows(*range(0, 5000, 5)))
    assert path.stat().st_size > store.runs.TAIL_BYTES
    assert last_step(path) == 4995
    monkeypatch.setattr(store.runs, "TAIL_BYTES", 10)  # the tail holds no whole line
    assert last_step(path) == 4995


# ---------------------------------------------------------------- pandas view


def test_frame_has_one_row_per_run_with_flattened_fields(tmp_path):
    pd = pytest.importorskip("pandas")
    out = tmp_path / "o"
    runner.run(config(SWEEP, "batch.sizes=[8]", "seeds=[0]"), out, quiet=True)
    df = store.frame(out)
    assert isinstance(df, pd.DataFrame) and len(df) == 2
    assert sorted(df["run_id"]) == ["bs8-lr0.1-seed0", "bs8-lr0.5-seed0"]
    row = df.set_index("run_id").loc["bs8-lr0.1-seed0"]
    summary = json.loads((out / "runs" / "bs8-lr0.1-seed0" / "summary.json").read_text())
    assert row["steps_to_target.eval_loss<=0.3"] == summary["steps_to_target"]["eval_loss<=0.3"]
    assert row["final.eval_loss"] == summary["final"]["eval_loss"]


def test_frame_without_pandas_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        store.frame(tmp_path)
