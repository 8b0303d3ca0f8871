"""A folder's run files packed for reading (scaling.store.archive): read in place exactly as
runs/ reads, the same bytes when packed twice, and never state a sweep resumes from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scaling import store
from scaling.config import ConfigError
from scaling.store import archive


def _folder(tmp_path: Path) -> Path:
    out = tmp_path / "study"
    for i, steps in enumerate((3, 5)):
        run = f"r{i}"
        store.start_run(out, run, {"batch_size": 8 * (i + 1), "learning_rate": 0.1, "seed": 0})
        store.append_metrics(out, run, [{"step": s, "eval_loss": 1.0 / (s + 1)}
                                        for s in range(steps)])
        store.finish_run(out, run, {"run_id": run, "status": "completed"})
    store.start_run(out, "unfinished", {"batch_size": 64})  # no summary: not packed
    (out / "rounds.json").write_text(json.dumps([{"batch_size": 8, "round": 1}]))
    return out


def test_a_packed_folder_reads_as_its_runs_did(tmp_path):
    out = _folder(tmp_path)
    before = store.load(out)
    archive.pack(out)
    shutil.rmtree(out / "runs")
    (out / "rounds.json").unlink()
    assert store.load(out) == before and [r["run_id"] for r in before] == ["r0", "r1"]
    assert archive.read_member(out, "rounds.json") == [{"batch_size": 8, "round": 1}]
    assert store.read_rounds(out) == []  # a sweep into the folder does not resume the rounds


def test_packing_twice_gives_the_same_bytes(tmp_path):
    out = _folder(tmp_path)
    first = archive.pack(out).read_bytes()
    assert archive.pack(out).read_bytes() == first


def test_runs_on_disk_are_read_before_the_archive(tmp_path):
    out = _folder(tmp_path)
    archive.pack(out)
    shutil.rmtree(out / "runs" / "r1")
    assert [r["run_id"] for r in store.load(out)] == ["r0"]


def test_a_damaged_archive_is_refused_naming_it(tmp_path):
    out = _folder(tmp_path)
    archive.pack(out)
    shutil.rmtree(out / "runs")
    path = archive.archive_path(out)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ConfigError, match="runs.tar.xz: not a readable run archive"):
        store.load(out)


def test_sealing_leaves_the_archive_alone_and_refuses_an_unfinished_run(tmp_path):
    out = _folder(tmp_path)
    with pytest.raises(ConfigError, match="1 run\\(s\\) not finished \\(unfinished"):
        archive.seal(out)
    assert (out / "runs" / "r0").is_dir() and not archive.has_archive(out)  # nothing touched
    shutil.rmtree(out / "runs" / "unfinished")
    before = store.load(out)
    (out / "checkpoints" / "g").mkdir(parents=True)
    (out / "claims").mkdir()
    store.add_round(out, {"batch_size": 16, "round": 1})  # as a search does: rounds.json's lock
    assert archive.seal(out) == archive.archive_path(out)
    assert sorted(p.name for p in out.iterdir()) == ["runs.tar.xz"]
    assert store.load(out) == before


def test_nothing_to_pack_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="no finished runs to pack"):
        archive.pack(tmp_path)


@pytest.mark.slow
def test_scaling_analyze_redoes_a_packed_folders_numbers(tmp_path):
    """A study committed as runs.tar.xz alone (no runs/) is re-analysed by `scaling analyze`
    to the same analysis.json as from its runs; a cells manifest accepts such a cell."""
    from scaling.cli.main import main
    from scaling.store.cells import read_cells, write_cells
    from tests.helpers import write_config

    out = tmp_path / "sweep"
    assert main(["sweep", write_config(tmp_path), "--out", str(out), "--quiet"]) == 0
    assert main(["analyze", str(out), "--quiet", "--bootstrap", "50"]) == 0
    before = json.loads((out / "analysis.json").read_text())
    archive.pack(out)
    shutil.rmtree(out / "runs")
    assert main(["analyze", str(out), "--quiet", "--bootstrap", "50"]) == 0
    assert json.loads((out / "analysis.json").read_text()) == before
    write_cells(tmp_path, [{"name": "c", "folder": "sweep", "params": 1.0, "tokens": 2.0}],
                "examples", None, "test")
    assert read_cells(tmp_path)["cells"][0]["folder"] == "sweep"
