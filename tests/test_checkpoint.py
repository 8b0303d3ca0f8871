"""Mid-run checkpoints: a group killed or stopped mid-way resumes from its newest intact
checkpoint and writes exactly the metric rows of a group that was never interrupted."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from scaling import config as config_mod, store
from scaling.store import claims
from scaling.sweep import runner
from scaling.train.repack import Packing
from tests.helpers import xla_flags

# Digits, three learning rates (0.05 and 0.2 reach the target and stop, 3.0 trains to the end,
# so the group is repacked mid-way), 30 chunks of 10 steps, a checkpoint at every boundary.
CKPT = {
    "name": "ck", "task": {"name": "digits"}, "model": {"name": "mlp", "hidden": [32]},
    "optimizer": {"name": "momentum"}, "batch": {"sizes": [64]},
    "learning_rate": {"values": [0.05, 0.2, 3.0], "search": False}, "budget": {"max_steps": 300},
    "targets": ["eval_loss<=0.3"], "eval": {"every": 10, "points_per_decade": 0},
    "train": {"chunk_steps": 10, "checkpoint_minutes": 1e-9, "keep_checkpoints": True},
}


def _cfg(steps: int = 300, **train) -> config_mod.Config:
    data = json.loads(json.dumps(CKPT))
    data["train"].update(train)
    data["budget"]["max_steps"] = steps
    return config_mod.from_dict(data)


def _rows(out: Path) -> dict[str, list[dict]]:
    """Every run's metric rows, wall-clock seconds left out (the only field allowed to differ)."""
    return {p.parent.name: [{k: v for k, v in json.loads(line).items() if k != "wall_s"}
                            for line in p.read_text().splitlines()]
            for p in sorted(out.glob("runs/*/metrics.jsonl"))}


def _unfinish(out: Path) -> None:
    for summary in out.glob("runs/*/summary.json"):
        summary.unlink()


def _checkpoints(out: Path) -> list[Path]:
    """The group's checkpoint JSONs, newest first."""
    return sorted(out.glob("checkpoints/*/step_*.json"), key=lambda p: -int(p.stem.split("_")[1]))


def _corrupt(meta: Path) -> None:
    """Flip one byte in the middle of the checkpoint's largest file."""
    folder = meta.with_suffix("")
    target = max((f for f in folder.rglob("*") if f.is_file()), key=lambda f: f.stat().st_size)
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, list[dict]]:
    """The uninterrupted group, no checkpoints."""
    out = tmp_path_factory.mktemp("reference")
    runner.run(_cfg(checkpoint_minutes=0), out, quiet=True)
    assert not (out / "checkpoints").exists()
    return _rows(out)


@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory, reference) -> Path:
    """The same group saving at every chunk boundary, its last two checkpoints kept."""
    out = tmp_path_factory.mktemp("checkpointed")
    runner.run(_cfg(), out, quiet=True)
    assert _rows(out) == reference, "saving checkpoints must not change a single row"
    return out


def _resume(source: Path, dest: Path, scaling_log, damage=lambda metas: None) -> list[str]:
    """Copy a finished checkpointed sweep, mark its runs unfinished, damage its checkpoints,
    run it again; the log messages of the second run."""
    shutil.copytree(source, dest)
    _unfinish(dest)
    damage(_checkpoints(dest))
    scaling_log.clear()
    runner.run(_cfg(), dest, quiet=True)
    return [r.getMessage() for r in scaling_log.records]


@pytest.mark.slow
def test_a_group_resumes_from_its_newest_checkpoint_with_identical_rows(checkpointed, reference,
                                                                        tmp_path, scaling_log):
    metas = _checkpoints(checkpointed)
    assert [int(m.stem.split("_")[1]) for m in metas] == [290, 280]
    assert json.loads(metas[0].read_text())["packing"]["finals"], "the group was repacked"
    messages = _resume(checkpointed, tmp_path / "o", scaling_log)
    assert any("resumed from the checkpoint at step 290" in m for m in messages), messages
    assert _rows(tmp_path / "o") == reference


@pytest.mark.slow
def test_rows_written_after_the_checkpoint_are_dropped_on_resume(checkpointed, reference,
                                                                 tmp_path, scaling_log):
    """A killed process may have written rows past its last checkpoint: they go, once."""
    def older_only(metas):
        for m in metas[:1]:
            m.unlink()  # as if killed while saving the newest: its JSON is written last
    messages = _resume(checkpointed, tmp_path / "o", scaling_log, older_only)
    assert any("at step 280" in m for m in messages), messages
    assert _rows(tmp_path / "o") == reference


@pytest.mark.slow
def test_a_corrupt_checkpoint_falls_back_to_the_one_before_with_a_warning(checkpointed, reference,
                                                                          tmp_path, scaling_log):
    messages = _resume(checkpointed, tmp_path / "o", scaling_log, lambda metas: _corrupt(metas[0]))
    assert any("step_290 is unusable" in m and "digests" in m for m in messages), messages
    assert any("at step 280" in m for m in messages), messages
    assert _rows(tmp_path / "o") == reference


@pytest.mark.slow
def test_with_every_checkpoint_corrupt_the_group_starts_again(checkpointed, reference, tmp_path,
                                                              scaling_log):
    def ruin(metas):
        _corrupt(metas[0])
        metas[1].write_text("{not json")
    messages = _resume(checkpointed, tmp_path / "o", scaling_log, ruin)
    assert sum("is unusable" in m for m in messages) == 2, messages
    assert not any("resumed" in m for m in messages)
    assert _rows(tmp_path / "o") == reference


@pytest.mark.slow
def test_a_group_resumed_mid_way_stops_the_same_dominated_runs(tmp_path, scaling_log):
    """With a fourth, slow learning rate (0.01: not a neighbour of the best once 0.05 is
    tried), stopping dominated runs is decided from the rows, one chunk behind: a group resumed
    from a checkpoint in the middle stops the same run at the same step, row for row."""
    data = json.loads(json.dumps(CKPT))
    data["learning_rate"]["values"] = [0.01, 0.05, 0.2, 3.0]
    cfg = config_mod.from_dict(data)
    data["train"]["checkpoint_minutes"] = 0
    runner.run(config_mod.from_dict(data), tmp_path / "reference", quiet=True)
    reference = _rows(tmp_path / "reference")
    statuses = {r["run_id"]: r["summary"]["status"] for r in store.load(tmp_path / "reference")}
    assert list(statuses.values()).count("dominated") == 1, statuses
    stopped_at = min(r["summary"]["steps"] for r in store.load(tmp_path / "reference")
                     if r["summary"]["status"] == "dominated")
    keep = (stopped_at - 20,)  # saved, and kept, a chunk before the run's last decided chunk
    saving = dataclasses.replace(runner.prepare(cfg, tmp_path / "saved"),
                                 checkpoint_at={size: keep for size in cfg.batch.sizes})
    runner.run(cfg, tmp_path / "saved", quiet=True, prepared=saving)
    shutil.copytree(tmp_path / "saved", tmp_path / "o")
    _unfinish(tmp_path / "o")
    for meta in _checkpoints(tmp_path / "o"):  # resume from the one before the stop
        if int(meta.stem.split("_")[1]) != keep[0]:
            meta.unlink()
    scaling_log.clear()
    runner.run(cfg, tmp_path / "o", quiet=True)
    assert any(f"resumed from the checkpoint at step {keep[0]}" in r.getMessage()
               for r in scaling_log.records)
    assert _rows(tmp_path / "o") == reference
    assert {r["run_id"]: r["summary"]["status"] for r in store.load(tmp_path / "o")} == statuses


@pytest.mark.slow
def test_checkpoints_of_a_finished_group_are_removed_unless_kept(tmp_path):
    runner.run(_cfg(steps=30, keep_checkpoints=False), tmp_path, quiet=True)
    assert store.load(tmp_path) and not list((tmp_path / "checkpoints").iterdir())


def test_checkpoint_minutes_must_not_be_negative():
    with pytest.raises(config_mod.ConfigError, match="train.checkpoint_minutes"):
        _cfg(checkpoint_minutes=-1)


def test_the_packing_survives_its_json_round_trip():
    packing = Packing(5, 8, True, 2)
    packing.update(np.array([True, False, True, False, True, False, False, False]),
                   packing.slots)
    take, pad = packing.plan()
    packing.repacked(take, pad, {"status": np.arange(8, dtype=np.int32),
                                 "steps": np.full(8, 7, np.int32)})
    back = Packing.from_dict(json.loads(json.dumps(packing.to_dict())))
    assert back.to_dict() == packing.to_dict()
    np.testing.assert_array_equal(back.final({"status": np.zeros(4, np.int32),
                                              "steps": np.ones(4, np.int32)})["steps"],
                                  packing.final({"status": np.zeros(4, np.int32),
                                                 "steps": np.ones(4, np.int32)})["steps"])


# ---------------------------------------------------------------- kill -9 in another process


def _sweep(config: Path, out: Path, devices: int) -> subprocess.Popen:
    env = dict(os.environ, XLA_FLAGS=xla_flags(devices))
    return subprocess.Popen([sys.executable, "-m", "scaling.cli", "sweep", str(config), "--out",
                             str(out), "--no-analyze"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
@pytest.mark.parametrize("devices", [1, 8])
def test_a_group_killed_with_sigkill_resumes_to_identical_rows(tmp_path, devices):
    data = json.loads(json.dumps(CKPT))
    data["train"]["keep_checkpoints"] = False
    data["parallel"] = {"runs": 2 if devices == 8 else 1}
    config = tmp_path / "c.yaml"
    config.write_text(config_mod.to_yaml(config_mod.from_dict(data)))
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    data["train"]["checkpoint_minutes"] = 0
    uninterrupted = tmp_path / "u.yaml"
    uninterrupted.write_text(config_mod.to_yaml(config_mod.from_dict(data)))
    proc = _sweep(uninterrupted, clean, devices)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()

    proc = _sweep(config, killed, devices)
    deadline = time.monotonic() + 300
    while len(_checkpoints(killed)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not list(killed.glob("runs/*/summary.json")), "the kill must land mid-group"
    (lock,) = (killed / "claims").glob("*.lock")  # the dead holder's claim, no longer live
    assert claims.live_claims(killed) == {}
    dead = proc.pid
    proc = _sweep(config, killed, devices)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert f"warning: claim on group {lock.stem}: taking over from pid {dead} on " in err
    assert err.split(f"taking over from pid {dead} on ")[1].split("\n")[0].endswith(
        ": that process is gone")
    resumed = [line for line in err.splitlines() if "resumed from the checkpoint at step" in line]
    assert resumed and 0 < int(resumed[0].split()[-1]) < 300, err
    assert _rows(killed) == _rows(clean)
    assert not list((killed / "checkpoints").iterdir())
