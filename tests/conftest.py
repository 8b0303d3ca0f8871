"""Tests run with 8 simulated CPU devices (README's test command); set before jax is imported.

The builders several test files share are fixtures here: configs of the small NQM and digits
tasks, one group trained through the engine, a sweep config on disk, and comparisons of run
summaries. A test asks for a builder by naming it as an argument.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402  (after the device flags)
import pytest  # noqa: E402

from scaling import (
    config as config_mod,  # noqa: E402
    store,
)
from scaling.tasks import build_task  # noqa: E402
from scaling.train.loop import run_group  # noqa: E402
from scaling.train.mesh import make_mesh, put_replicated  # noqa: E402
from scaling.train.program import GroupProgram  # noqa: E402
from scaling.train.sinks import Sink  # noqa: E402
from scaling.train.spec import RunSpec, group_spec  # noqa: E402
from scaling.train.start import fresh  # noqa: E402


class Collect(Sink):
    """Every run's rows, as a group's sinks hear them."""

    def __init__(self, runs: int) -> None:
        self.records: list[list[dict]] = [[] for _ in range(runs)]

    def rows(self, records, wall_s, running) -> None:
        for mine, rows in zip(self.records, records):
            mine.extend(rows)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "devices(n): needs n devices; skipped, saying why, on "
                                       "a machine with fewer (e.g. one GPU)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked devices(n) where jax sees fewer than n devices."""
    mark = item.get_closest_marker("devices")
    if mark is not None and jax.device_count() < mark.args[0]:
        pytest.skip(f"needs {mark.args[0]} devices, found {jax.device_count()}; on CPU, "
                    f"XLA_FLAGS=--xla_force_host_platform_device_count={mark.args[0]} "
                    "simulates them")


# ---------------------------------------------------------------- one group through the engine


def _with_overrides(data: dict, over: dict) -> config_mod.Config:
    return config_mod.from_dict(config_mod.apply_overrides(data, [f"{k}={v}" for k, v in over.items()]))


def _nqm_cfg(**over) -> config_mod.Config:
    """A 20-dimensional NQM, SGD at 0.3, batch 8, 100 steps, every step evaluated."""
    return _with_overrides({
        "task": {"name": "nqm", "dim": 20}, "optimizer": {"name": "sgd"},
        "batch": {"sizes": [8]}, "learning_rate": {"values": [0.3]},
        "budget": {"max_steps": 100}, "eval": {"every": 1, "points_per_decade": 0},
        "train": {"chunk_steps": 25}}, over)


def _digits_cfg(**over) -> config_mod.Config:
    """sklearn's digits, a one-layer MLP, momentum, batch 64, 60 steps."""
    return _with_overrides({
        "task": {"name": "digits"}, "model": {"name": "mlp", "hidden": [32]},
        "optimizer": {"name": "momentum"}, "batch": {"sizes": [64]},
        "learning_rate": {"values": [0.05, 0.2]}, "budget": {"max_steps": 60},
        "eval": {"every": 10, "points_per_decade": 0}, "train": {"chunk_steps": 16}}, over)


def _train_program(cfg: config_mod.Config, runs: list[RunSpec], mesh=None, runs_axis: int = 1):
    """Train one group of `runs` at the config's first batch size; (results, per-run metric
    rows, the GroupProgram with its per-width compile records)."""
    mesh = mesh or make_mesh(1, 1, jax.devices())
    spec, _ = group_spec(cfg, cfg.batch.sizes[0], mesh.shape["data"])
    task = build_task(cfg)
    program = GroupProgram(task, spec, mesh)
    collect = Collect(len(runs))
    data = put_replicated(mesh, task.train_arrays() or {})
    eval_data = put_replicated(mesh, task.eval_arrays())
    end = run_group(program, fresh(program, runs, data, eval_data, runs_axis), data, eval_data,
                    [collect])
    return end.results, collect.records, program


def _train(cfg: config_mod.Config, runs: list[RunSpec], mesh=None, runs_axis: int = 1):
    """`train_program` without the program: (results, per-run metric rows)."""
    results, records, _ = _train_program(cfg, runs, mesh, runs_axis)
    return results, records


@pytest.fixture(scope="session")
def nqm_cfg():
    return _nqm_cfg


@pytest.fixture(scope="session")
def digits_cfg():
    return _digits_cfg


@pytest.fixture(scope="session")
def train_program():
    return _train_program


@pytest.fixture(scope="session")
def train():
    return _train


@pytest.fixture
def scaling_log(caplog):
    """caplog that hears the `scaling` logger at INFO even after the CLI stopped it propagating
    to the root logger (scaling.cli.main.configure_logging)."""
    logger = logging.getLogger("scaling")
    level, propagate = logger.level, logger.propagate
    logger.addHandler(caplog.handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # caplog's handler sits on the root too: each record once
    yield caplog
    logger.removeHandler(caplog.handler)
    logger.setLevel(level)
    logger.propagate = propagate


# ---------------------------------------------------------------- sweeps and their run files

TIMING = {"wall_s", "compile_s", "group_size"}
SWEEP = {
    "name": "t", "task": {"name": "nqm", "dim": 10}, "optimizer": {"name": "sgd"},
    "batch": {"sizes": [8, 16]}, "learning_rate": {"values": [0.1, 0.5]},
    "budget": {"max_examples": 800}, "targets": ["eval_loss<=0.3"], "seeds": [0, 1],
    "train": {"max_group_size": 2},
}


def _config_from(base: dict, **changes) -> config_mod.Config:
    """The config `base` with `section=value` or `section__key=value` changes."""
    data = json.loads(json.dumps(base))
    for key, value in changes.items():
        section, _, name = key.partition("__")
        if name:
            data.setdefault(section, {})[name] = value
        else:
            data[section] = value
    return config_mod.from_dict(data)


def _cfg_of(**changes) -> config_mod.Config:
    """SWEEP with `section=value` or `section__key=value` changes."""
    return _config_from(SWEEP, **changes)


def _write_config(folder: Path, **changes) -> str:
    path = folder / "c.yaml"
    path.write_text(config_mod.to_yaml(_cfg_of(**changes)))
    return str(path)


def _flat(value, prefix=""):
    if isinstance(value, dict):
        return {k2: v2 for k, v in value.items() for k2, v2 in _flat(v, f"{prefix}{k}.").items()}
    return {prefix.rstrip("."): value}


def _comparable(summaries) -> dict[str, dict]:
    """Summaries by run id without timing fields (final.wall_s and throughput included)."""
    return {s["run_id"]: {k: v for k, v in _flat(s).items()
                          if k.split(".")[-1] not in TIMING and not k.startswith("throughput")}
            for s in summaries}


def _assert_same(a: dict[str, dict], b: dict[str, dict]) -> None:
    """Same runs, same discrete fields, floats to float32 tolerance (vmap width may differ);
    NaN (an undefined noise scale, in summaries still in memory) equals NaN."""
    assert a.keys() == b.keys()
    for rid in a:
        assert a[rid].keys() == b[rid].keys(), rid
        for key, value in a[rid].items():
            if isinstance(value, float):
                assert b[rid][key] == pytest.approx(value, rel=1e-5, abs=1e-7, nan_ok=True), (rid, key)
            else:
                assert b[rid][key] == value, (rid, key)


def _on_disk(out: Path) -> dict[str, dict]:
    return _comparable([r["summary"] for r in store.load(out)])


def _assert_throughput(out: Path, resumed: bool = False) -> int:
    """The throughput invariants on every group of a finished sweep folder (a group's runs
    share its figures): training seconds > 0, examples per second x training seconds = the
    examples it trained (with `resumed` False: the sum of its runs' examples), MFU in (0, 1]
    where known, and compile-ahead seconds not negative. The number of groups checked."""
    groups: dict[str, list[dict]] = {}
    for record in store.load(out):
        speed = record["summary"].get("throughput")
        if speed is not None:
            groups.setdefault(json.dumps(speed, sort_keys=True), []).append(record["summary"])
    for key, summaries in groups.items():
        speed = summaries[0]["throughput"]
        assert len(summaries) <= summaries[0]["group_size"], key
        assert speed["train_s"] > 0, key
        assert speed["examples_per_s"] * speed["train_s"] == pytest.approx(speed["examples"],
                                                                           rel=1e-9), key
        if not resumed:
            assert speed["examples"] == sum(s["examples"] for s in summaries), key
        assert speed["mfu"] is None or 0 < speed["mfu"] <= 1, key
        assert speed["compile_ahead_s"] >= 0, key
    return len(groups)


@pytest.fixture(scope="session")
def assert_throughput():
    return _assert_throughput


@pytest.fixture(scope="session")
def cfg_of():
    return _cfg_of


@pytest.fixture(scope="session")
def config_from():
    return _config_from


@pytest.fixture(scope="session")
def write_config():
    return _write_config


@pytest.fixture(scope="session")
def comparable():
    return _comparable


@pytest.fixture(scope="session")
def assert_same():
    return _assert_same


@pytest.fixture(scope="session")
def on_disk():
    return _on_disk
