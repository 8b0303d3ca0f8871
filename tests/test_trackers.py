"""Experiment trackers: TensorBoard events and W&B offline files read back and checked against
the run folders, resume semantics, no added device reads, and the config checks."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import jax
import pytest

from scaling import store
from scaling.config import ConfigError
from scaling.sweep import runner
from scaling.sweep.trackers import TensorBoard, WandB, wandb_id
from scaling.train.program import GroupProgram
from tests.helpers import SWEEP, config

pytest.importorskip("tensorboardX")
wandb_pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

ONE_GROUP = ("batch.sizes=[8]", "seeds=[0]")


def _events(folder: Path) -> event_accumulator.EventAccumulator:
    """What TensorBoard itself reads from a run's event files."""
    acc = event_accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0,
                                                                         "tensors": 0})
    acc.Reload()
    return acc


def _wandb_records(path: Path) -> list:
    """The records of a .wandb file: a 7-byte header, then LevelDB-log blocks of 32 KiB whose
    records (7-byte header: checksum, length, kind) carry protobuf Records, whole or in parts."""
    data, pos, part, records = path.read_bytes(), 7, b"", []
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if (length, kind) == (0, 0):
            pos += left
            continue
        part += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last part of one
            record = wandb_pb.Record()
            record.ParseFromString(part)
            records.append(record)
            part = b""
    return records


def _wandb_run(out: Path, run_id: str) -> dict:
    """One run's offline files: its run record, history by step, the final summary and exit."""
    (path,) = (out / "wandb").glob(f"offline-run-*-{wandb_id(out, run_id)}/*.wandb")
    run, history, summary, exit_code = None, {}, {}, None
    for record in _wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
        elif kind == "history":
            items = {"/".join(i.nested_key) or i.key: json.loads(i.value_json)
                     for i in record.history.item}
            history[items["_step"]] = items
        elif kind == "summary":
            for u in record.summary.update:
                summary["/".join(u.nested_key) or u.key] = json.loads(u.value_json)
        elif kind == "exit":
            exit_code = record.exit.exit_code
    return {"run": run, "history": history, "summary": summary, "exit_code": exit_code}


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """A two-run sweep logged to TensorBoard and to W&B offline."""
    out = tmp_path_factory.mktemp("tracked")
    cfg = config(SWEEP, *ONE_GROUP, "log.tensorboard=true", "log.wandb.project=proj",
                 "log.wandb.mode=offline", "log.wandb.tags=[t1]")
    runner.run(cfg, out, quiet=True)
    return out, {r["run_id"]: r for r in store.load(out)}


def test_tensorboard_holds_every_metric_row(tracked):
    out, runs = tracked
    assert len(runs) == 2
    for run_id, run in runs.items():
        acc = _events(out / "tensorboard" / run_id)
        for key in ("eval_loss", "train_loss", "b_simple", "examples"):
            written = [(r["step"], r[key]) for r in run["metrics"] if store.finite(r.get(key))]
            read = [(e.step, e.value) for e in acc.Scalars(key)]
            assert [s for s, _ in read] == [s for s, _ in written], key
            assert [v for _, v in read] == pytest.approx([v for _, v in written], rel=1e-6)
        assert "config" in str(acc.Tags()) and "summary" in str(acc.Tags())


def test_wandb_offline_run_has_config_history_and_summary(tracked):
    out, runs = tracked
    for run_id, run in runs.items():
        wb = _wandb_run(out, run_id)
        assert wb["run"].project == "proj" and wb["run"].run_group == "t"
        assert wb["run"].display_name == run_id and list(wb["run"].tags) == ["t1"]
        config = {u.key: json.loads(u.value_json) for u in wb["run"].config.update}
        assert config["learning_rate"] == run["config"]["learning_rate"]
        assert config["batch_size"] == 8
        rows = [r for r in run["metrics"] if store.finite(r.get("eval_loss"))]
        assert sorted(wb["history"]) == [r["step"] for r in rows]
        for r in rows:
            assert wb["history"][r["step"]]["eval_loss"] == pytest.approx(r["eval_loss"])
        assert wb["summary"]["status"] == run["summary"]["status"]
        assert wb["summary"]["steps_to_target"] == run["summary"]["steps_to_target"]
        assert wb["exit_code"] == 0


def test_trackers_add_no_chunk_call_and_no_device_read(tmp_path, monkeypatch):
    counts = {"chunk": 0, "device_get": 0}
    chunk, device_get = GroupProgram.chunk, jax.device_get

    def counted_chunk(self, *args, **kwargs):
        counts["chunk"] += 1
        return chunk(self, *args, **kwargs)

    def counted_get(*args, **kwargs):
        counts["device_get"] += 1
        return device_get(*args, **kwargs)

    monkeypatch.setattr(GroupProgram, "chunk", counted_chunk)
    monkeypatch.setattr(jax, "device_get", counted_get)
    seen = []
    for log in ((), ("log.tensorboard=true", "log.wandb.project=p", "log.wandb.mode=offline")):
        counts.update(chunk=0, device_get=0)
        runner.run(config(SWEEP, *ONE_GROUP, *log, "train.chunk_steps=20"),
                   tmp_path / str(len(seen)), quiet=True)
        seen.append(dict(counts))
    assert seen[0] == seen[1] and seen[0]["chunk"] > 1


def test_tensorboard_resume_replaces_the_steps_after_the_checkpoint(tmp_path):
    board = TensorBoard(tmp_path)
    board.start("r", {"a": 1}, None)
    board.log("r", [{"step": s, "loss": 1.0} for s in range(10)])
    board.close()  # killed: never finished
    board.start("r", {"a": 1}, 4)
    board.log("r", [{"step": s, "loss": 2.0} for s in range(5, 10)])
    board.finish("r", {"steps": 9})
    read = [(e.step, e.value) for e in _events(tmp_path / "r").Scalars("loss")]
    assert read == [(s, 1.0) for s in range(5)] + [(s, 2.0) for s in range(5, 10)]
    board.start("r", {"a": 1}, None)  # started afresh: the earlier attempt's events go
    board.log("r", [{"step": 0, "loss": 3.0}])
    board.close()
    assert [(e.step, e.value) for e in _events(tmp_path / "r").Scalars("loss")] == [(0, 3.0)]


def test_a_failed_group_ends_its_wandb_runs_with_an_error(tmp_path):
    cfg = config(SWEEP, *ONE_GROUP, "log.wandb.project=p", "log.wandb.mode=offline")
    wb = WandB(cfg.log.wandb, "t", tmp_path)
    wb.start("r", {"a": 1}, None)
    wb.log("r", [{"step": 0, "loss": 1.0, "note": None}])
    wb.close()
    run = _wandb_run(tmp_path, "r")
    for _ in range(50):  # wandb's service may write the exit record just after finish returns
        if run["exit_code"] is not None:
            break
        time.sleep(0.2)
        run = _wandb_run(tmp_path, "r")
    assert run["exit_code"] == 1 and run["history"][0]["loss"] == 1.0


def test_tracker_settings_are_checked_before_compute(monkeypatch):
    with pytest.raises(ConfigError, match="log.wandb.mode"):
        config(SWEEP, "log.wandb.project=p", "log.wandb.mode=cloud")
    with pytest.raises(ConfigError, match="log.wandb.project"):
        config(SWEEP, "log.wandb.entity=me")
    real = __import__("importlib").util.find_spec
    monkeypatch.setattr("importlib.util.find_spec",
                        lambda name, *a: None if name == "tensorboardX" else real(name, *a))
    with pytest.raises(ConfigError, match=r"log.tensorboard.*pip install tensorboardX"):
        config(SWEEP, "log.tensorboard=true")
