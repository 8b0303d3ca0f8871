"""scaling.store.repair and `scaling repair`: a folder two processes wrote at once gets back one
clean pass per run, exactly the rows one process writes, and every doubtful case is refused
with its reason and left untouched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scaling import store
from scaling.cli.main import main
from scaling.errors import ConfigError
from scaling.store import claims
from scaling.store.repair import repair_folder, repair_run
from tests.helpers import write_config

CONFIG = {"run_id": "r", "total_steps": 100, "eval": {"every": 10, "points_per_decade": 0}}


def _row(step: int, writer: str = "a", loss: float | None = None) -> dict:
    """A row as training writes it; the two writers differ only in wall_s."""
    return {"step": step, "eval_loss": loss if loss is not None else 1.0 / (step + 1),
            "wall_s": step * (0.1 if writer == "a" else 0.2)}


def _two_writers(b_stops_after: int = 100, b_loss: float | None = None) -> list[dict]:
    """Writer a has trained to step 50 when writer b starts the run afresh (emptying the file);
    then their chunks of 3 points interleave: a 60-80, b 0-20, a 90-100, b 30-50, b 60-80, ..."""
    a = [_row(s) for s in (60, 70, 80)], [_row(s) for s in (90, 100)]
    b = [[_row(s, "b", b_loss) for s in range(i, min(i + 30, 110), 10) if s <= b_stops_after]
         for i in (0, 30, 60, 90)]
    return [*a[0], *b[0], *a[1], *b[1], *b[2], *b[3]]


def _plant(out: Path, rows: list[dict], config: dict = CONFIG, finished: bool = True,
           run_id: str = "r") -> Path:
    folder = out / "runs" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**config, "run_id": run_id}))
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if finished:
        (folder / "summary.json").write_text(json.dumps({"run_id": run_id, "final": _row(100, "b")}))
    return folder


def test_two_interleaved_writers_give_back_one_clean_pass(tmp_path):
    folder = _plant(tmp_path, _two_writers())
    with pytest.raises(ConfigError, match="step 0 at line 4 does not follow step 80"):
        store.read_metrics(folder / "metrics.jsonl")
    result = repair_run(folder)
    assert result.refused is None and result.kept == 11 and result.dropped == [60, 70, 80, 90, 100]
    rows = store.read_metrics(folder / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(0, 101, 10))
    assert [r["wall_s"] for r in rows[:6]] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]  # b's, kept first
    assert rows[6:] == [_row(s) for s in (60, 70, 80, 90, 100)]  # a's copies came first there
    assert repair_run(folder).changed is False  # a second repair finds it clean


def test_rows_lost_to_the_second_writers_fresh_start_are_refused(tmp_path):
    """b died after its first chunk: steps 30-50 were only ever in a's rows, which b's start
    emptied; no clean pass is on disk."""
    folder = _plant(tmp_path, _two_writers(b_stops_after=20))
    before = (folder / "metrics.jsonl").read_text()
    result = repair_run(folder)
    assert result.refused == ("no row at evaluation steps 30, 40, 50: a writer's rows were lost; "
                              "train the run again (remove its folder)")
    assert (folder / "metrics.jsonl").read_text() == before


def test_copies_that_differ_are_refused(tmp_path):
    folder = _plant(tmp_path, _two_writers(b_loss=0.25))
    result = repair_run(folder)
    assert result.refused == ("step 60 holds two different rows (eval_loss: "
                              f"{1 / 61!r} and 0.25): two different trainings wrote this run; "
                              "train it again")


@pytest.mark.parametrize("config, final, reason", [
    ({**CONFIG, "batch_schedule": {"kind": "doubling"}}, 100, "does not lay out"),
    ({"run_id": "r", "start_step": 50}, 100, "does not lay out"),  # a branch's config
    (CONFIG, 90, "summary.json's final row is not the last row"),
])
def test_what_cannot_be_checked_is_refused(tmp_path, config, final, reason):
    folder = _plant(tmp_path, _two_writers(), config)
    (folder / "summary.json").write_text(json.dumps({"final": _row(final)}))
    result = repair_run(folder)
    assert reason in result.refused and not result.changed


def test_a_torn_last_line_alone_is_dropped_and_a_clean_file_left_alone(tmp_path):
    folder = _plant(tmp_path, [_row(s) for s in range(0, 101, 10)])
    clean = (folder / "metrics.jsonl").read_text()
    assert not repair_run(folder).changed
    (folder / "metrics.jsonl").write_text(clean + '{"step": 1')
    result = repair_run(folder, write=False)
    assert result.torn and result.changed
    repair_run(folder)
    assert (folder / "metrics.jsonl").read_text() == clean


def test_a_folder_in_use_is_refused(tmp_path):
    _plant(tmp_path, _two_writers())
    with claims.claimed(tmp_path, "batch8-0123") as claim:
        assert claim is not None
        with pytest.raises(ConfigError, match="in use: group batch8-0123 is claimed by pid"):
            repair_folder(tmp_path)
    assert len(repair_folder(tmp_path)) == 1


def test_the_command_repairs_what_it_can_says_why_not_and_exits_1(tmp_path, capsys):
    _plant(tmp_path, _two_writers(), run_id="good")
    _plant(tmp_path, _two_writers(b_stops_after=20), run_id="lost")
    _plant(tmp_path, [_row(s) for s in range(0, 101, 10)], run_id="clean")
    assert main(["repair", str(tmp_path), "--dry-run"]) == 1
    said = capsys.readouterr()
    assert said.out.splitlines() == [
        f"would repair: {tmp_path}/runs/good/metrics.jsonl: kept 11 rows, one per step; dropped "
        "5 repeated rows (steps 60, 70, 80, 90, 100)",
        f"{tmp_path}: 3 runs, 1 would repair, 1 refused, 1 clean"]
    assert said.err == (f"{tmp_path}/runs/lost/metrics.jsonl: not repaired: no row at evaluation "
                        "steps 30, 40, 50: a writer's rows were lost; train the run again "
                        "(remove its folder)\n")
    with pytest.raises(ConfigError):
        store.load(tmp_path)
    assert main(["repair", str(tmp_path)]) == 1
    shutil.rmtree(tmp_path / "runs" / "lost")
    assert main(["repair", str(tmp_path)]) == 0
    assert [r["run_id"] for r in store.load(tmp_path)] == ["clean", "good"]
    assert main(["repair", str(tmp_path / "nothing")]) == 2


@pytest.mark.slow
def test_a_real_sweep_written_twice_is_repaired_to_its_own_rows(tmp_path, capsys):
    """A real sweep's rows, written as two processes interleave them (the second writer's
    wall_s differ): the repair gives back exactly the first's rows, and the folder analyses."""
    config = write_config(tmp_path, "seeds=[0]", "learning_rate.values=[0.1, 0.5]")
    out = tmp_path / "o"
    assert main(["sweep", config, "--out", str(out), "--quiet", "--no-analyze"]) == 0
    originals = {}
    for path in sorted(out.glob("runs/*/metrics.jsonl")):
        rows = store.read_metrics(path)
        originals[path] = path.read_text()
        other = [{**r, "wall_s": r["wall_s"] + 7.0} for r in rows]
        half, third = len(rows) // 2, len(rows) // 3
        planted = rows[half:] + other[:third] + other[third:]  # a's rows after b's fresh start
        path.write_text("".join(store.dumps(r) + "\n" for r in planted))
    with pytest.raises(ConfigError, match="does not follow"):
        store.load(out)
    assert main(["repair", str(out)]) == 0
    assert f"{len(originals)} runs, {len(originals)} repaired, 0 refused" in capsys.readouterr().out
    for path, text in originals.items():
        repaired = store.read_metrics(path)
        original = [json.loads(line) for line in text.splitlines()]
        assert [{k: v for k, v in r.items() if k != "wall_s"} for r in repaired] == \
            [{k: v for k, v in r.items() if k != "wall_s"} for r in original]
    assert main(["analyze", str(out), "--bootstrap", "10", "--quiet"]) == 0
