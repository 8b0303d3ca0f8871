"""--launcher slurm: option checks, the missing-submitit error, and a job array run through
submitit's local executor that must equal the plain local sweep."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import pytest

from scaling import store
from scaling.cli.main import main
from scaling.cli.parser import build_parser
from scaling.sweep import launch

try:  # imported here, not under capsys: submitit's logging keeps the sys.stdout of its import
    import submitit
    from submitit.core.utils import DelayedSubmission
except ImportError:
    submitit = None

needs_submitit = pytest.mark.skipif(submitit is None, reason="pip install 'scaling[slurm]'")

TINY = {"batch": {"sizes": [8, 16]}, "learning_rate": {"values": [0.1, 0.5]}, "seeds": [0],
        "train": {"max_group_size": None}}


def _sweep(config: str, out: Path, *extra: str) -> int:
    return main(["sweep", config, "--out", str(out), *extra])


def test_missing_submitit_is_refused_before_any_compute(tmp_path, capsys, monkeypatch,
                                                        write_config):
    monkeypatch.setitem(sys.modules, "submitit", None)  # `import submitit` now raises ImportError
    out = tmp_path / "o"
    assert _sweep(write_config(tmp_path, **TINY), out, "--launcher", "slurm") == 2
    assert capsys.readouterr().err == \
        "error: --launcher slurm needs submitit: pip install 'scaling[slurm]'\n"
    assert not out.exists()


@pytest.mark.parametrize("extra, flag", [
    (["--launcher", "slurm", "--jobs", "0"], "--jobs"),
    (["--launcher", "slurm", "--time", "-5"], "--time"),
    (["--launcher", "pbs"], "--launcher"),
    (["--launcher", "slurm", "--shard", "0/2"], "--shard"),
    (["--partition", "gpu"], "--partition"),
    (["--jobs", "2"], "--jobs"),
    (["--wait"], "--wait"),
])
def test_bad_launcher_options_are_refused(tmp_path, capsys, extra, flag, write_config):
    out = tmp_path / "o"
    assert _sweep(write_config(tmp_path, **TINY), out, *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and flag in err and err.count("\n") == 1, err
    assert not out.exists()


def test_task_count_is_one_per_group_up_to_16_and_never_more_than_the_groups():
    assert launch.task_count(None, 40) == 16
    assert launch.task_count(None, 3) == 3
    assert launch.task_count(8, 3) == 3
    assert launch.task_count(2, 5) == 2


def test_each_task_runs_one_shard_of_the_same_sweep(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argvs = launch.shard_argvs("c.yaml", ["seeds=[3]"], Path("o"), 3, force=True)
    parsed = [build_parser().parse_args(argv) for argv in argvs]
    assert [a.shard for a in parsed] == [(0, 3), (1, 3), (2, 3)]
    for a in parsed:
        assert a.command == "sweep" and a.launcher == "local" and a.overrides == ["seeds=[3]"]
        assert a.config == str(tmp_path / "c.yaml") and a.out == str(tmp_path / "o")
        assert a.force and a.progress == "lines" and a.no_analyze and not a.wait


def test_a_failing_task_raises(tmp_path):
    with pytest.raises(RuntimeError, match="exited with status 2"):
        launch.run_shard(main, ["sweep", str(tmp_path / "missing.yaml")])


@needs_submitit
def test_without_srun_the_launcher_says_so_and_writes_nothing(tmp_path, capsys, monkeypatch,
                                                              write_config):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv(launch.CLUSTER_ENV, raising=False)
    out = tmp_path / "o"
    assert _sweep(write_config(tmp_path, **TINY), out, "--launcher", "slurm") == 2
    assert "srun" in capsys.readouterr().err
    assert not (out / "runs").exists()


@needs_submitit
def test_dry_run_names_the_tasks_and_submits_nothing(tmp_path, capsys, write_config):
    out = tmp_path / "o"
    assert _sweep(write_config(tmp_path, **TINY), out, "--launcher", "slurm", "--dry-run") == 0
    text = capsys.readouterr().out
    assert "would submit 2 tasks (shards 0/2 .. 1/2)" in text and "bs16-lr0.5-seed0" in text
    assert not out.exists()


def _metrics(out: Path) -> dict[str, list[dict]]:
    """Each run's metric rows without timing; None (absent metrics) as NaN, so approx compares."""
    return {r["run_id"]: [{k: float("nan") if v is None else v for k, v in row.items()
                           if k != "wall_s"} for row in r["metrics"]] for r in store.load(out)}


def _assert_same_metrics(one: Path, other: Path) -> None:
    m_one, m_other = _metrics(one), _metrics(other)
    assert m_one.keys() == m_other.keys()
    for rid, rows in m_one.items():
        assert len(rows) == len(m_other[rid]) > 1
        for a, b in zip(rows, m_other[rid]):
            assert b == pytest.approx(a, rel=1e-5, abs=1e-7, nan_ok=True), rid


@pytest.fixture(scope="module")
def reference(tmp_path_factory, write_config) -> tuple[str, Path]:
    """TINY's config and its plain local sweep (8 devices), trained once for this module."""
    folder = tmp_path_factory.mktemp("reference")
    config = write_config(folder, **TINY)
    assert _sweep(config, folder / "local", "--quiet", "--no-analyze") == 0
    return config, folder / "local"


@needs_submitit
@pytest.mark.slow
def test_a_job_array_on_the_local_executor_equals_the_local_sweep(reference, tmp_path, capsys,
                                                                  monkeypatch, assert_same, on_disk):
    monkeypatch.setenv(launch.CLUSTER_ENV, "local")
    config, local_out = reference
    out = tmp_path / "array"
    assert _sweep(config, out, "--launcher", "slurm", "--jobs", "2", "--wait", "--time", "10") == 0
    printed = capsys.readouterr().out
    assert "submitted 2 tasks" in printed and (out / "analysis.json").is_file()
    tasks = [DelayedSubmission.load(p).args[1] for p in (out / "slurm").glob("*_submitted.pkl")]
    assert sorted(argv[-1] for argv in tasks) == ["0/2", "1/2"]
    logs = list((out / "slurm").glob("*_log.out"))
    assert len(logs) == 2 and all("shard done" in p.read_text() for p in logs)
    local = on_disk(local_out)
    assert len(local) == 4 and {s["status"] for s in local.values()} == {"completed"}
    assert_same(local, on_disk(out))
    _assert_same_metrics(local_out, out)


@needs_submitit
@pytest.mark.devices(8)
@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_task_over_two_processes_joins_them_and_equals_the_local_sweep(reference, tmp_path,
                                                                         monkeypatch, assert_same, on_disk):
    monkeypatch.setenv(launch.CLUSTER_ENV, "local")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")  # 2 x 4 = 8
    config, local_out = reference
    out = tmp_path / "nodes"
    assert _sweep(config, out, "--launcher", "slurm", "--jobs", "1", "--nodes", "2", "--wait",
                  "--no-analyze") == 0
    logs = sorted((out / "slurm").glob("*_log.out"))
    assert len(logs) == 2, logs  # one log per process of the one task
    # Joined, only process 0 (the leader) prints the end table; alone, each would.
    assert ["results in" in p.read_text() for p in logs] == [True, False]
    assert_same(on_disk(local_out), on_disk(out))
    _assert_same_metrics(local_out, out)


@needs_submitit
def test_a_failed_task_fails_the_wait_and_names_its_log(tmp_path, capsys, monkeypatch,
                                                        write_config):
    jax.device_count()  # this process's backend is up; only the tasks see the bad platform below
    monkeypatch.setenv(launch.CLUSTER_ENV, "local")
    monkeypatch.setenv("JAX_PLATFORMS", "no_such_platform")
    out = tmp_path / "o"
    assert _sweep(write_config(tmp_path, **TINY), out, "--launcher", "slurm", "--jobs", "1",
                  "--wait") == 1
    err = capsys.readouterr().err
    assert "task 0 (job " in err and "_log.err" in err and "1 of 1 tasks failed" in err
    assert not (out / "analysis.json").exists()
