"""--launcher slurm: option checks, the missing-submitit error, the flags each task gets, a job
array run through submitit's local executor that must equal the plain local sweep, and, where a
SLURM cluster is up (SCALING_TEST_SLURM, as .ci/run provides), the same through real sbatch:
equal to local, a cancelled task reported and resumed, a refusal in one line."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jax
import pytest

from scaling import store
from scaling.cli.main import main
from scaling.cli import train as train_cli
from scaling.cli.parser import build_parser
from scaling.config import load
from scaling.sweep import grid, launch, runner, watch
from tests.helpers import assert_same, on_disk, write_config, xla_flags

try:  # imported here, not under capsys: submitit's logging keeps the sys.stdout of its import
    import submitit
    from submitit.core.utils import DelayedSubmission
except ImportError:
    submitit = None

needs_submitit = pytest.mark.skipif(submitit is None, reason="pip install 'scaling[slurm]'")

TINY = ("batch.sizes=[8, 16]", "learning_rate.values=[0.1, 0.5]", "seeds=[0]",
        "train.max_group_size=null")


def _sweep(config: str, out: Path, *extra: str) -> int:
    return main(["sweep", config, "--out", str(out), *extra])


def test_missing_submitit_is_refused_before_any_compute(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # `import submitit` now raises ImportError
    out = tmp_path / "o"
    assert _sweep(write_config(tmp_path, *TINY), out, "--launcher", "slurm") == 2
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
])
def test_bad_launcher_options_are_refused(tmp_path, capsys, extra, flag):
    out = tmp_path / "o"
    assert _sweep(write_config(tmp_path, *TINY), out, *extra) == 2
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
    flags = launch.task_flags(True, False, "cache", False, True)
    argvs = launch.shard_argvs("c.yaml", ["seeds=[3]"], Path("o"), 3, flags)
    parsed = [build_parser().parse_args(argv) for argv in argvs]
    assert [a.shard for a in parsed] == [(0, 3), (1, 3), (2, 3)]
    for a in parsed:
        assert a.command == "sweep" and a.launcher == "local" and a.overrides == ["seeds=[3]"]
        assert a.config == str(tmp_path / "c.yaml") and a.out == str(tmp_path / "o")
        assert a.force and a.progress == "lines" and a.no_analyze and not a.wait
        assert a.compile_cache == str(tmp_path / "cache") and not a.no_compile_cache
        assert not a.quiet


@pytest.mark.parametrize("flags, expected", [
    (["--compile-cache", "cc"], {"compile_cache": "ABS/cc"}),
    (["--no-compile-cache"], {"no_compile_cache": True}),
    (["--force", "--quiet"], {"force": True, "quiet": True}),
    (["--wait"], {"no_analyze": True}),  # the submitter analyses: no hint in the task's log
    (["--no-analyze"], {"no_analyze": True}),
    ([], {"no_analyze": False, "compile_cache": None, "quiet": False, "force": False}),
])
def test_every_flag_that_shapes_a_task_is_on_its_command_line(flags, expected, tmp_path,
                                                              monkeypatch, capsys):
    """Through the command itself: the submitted pickles' command lines, as parsed."""
    monkeypatch.chdir(tmp_path)
    captured = []
    monkeypatch.setattr(launch, "make_executor", lambda folder, name, res: _Recorder(folder))
    monkeypatch.setattr(launch, "submit", lambda ex, entry, argvs, n: captured.extend(argvs) or [])
    monkeypatch.setattr(train_cli, "analyze_folder", lambda *a, **k: 0)  # nothing trained here
    config = write_config(tmp_path, *TINY)
    assert _sweep(config, tmp_path / "o", "--launcher", "slurm", *flags) == 0
    parsed = [build_parser().parse_args(argv) for argv in captured]
    assert [a.shard for a in parsed] == [(0, 2), (1, 2)]
    for a in parsed:
        for key, value in expected.items():
            value = value.replace("ABS", str(tmp_path)) if isinstance(value, str) else value
            assert getattr(a, key) == value, key


class _Recorder:
    cluster = "slurm"

    def __init__(self, folder: Path) -> None:
        self.folder = folder


def test_a_failing_task_raises(tmp_path):
    with pytest.raises(RuntimeError, match="exited with status 2"):
        launch.run_shard(main, ["sweep", str(tmp_path / "missing.yaml")])


@needs_submitit
def test_without_srun_the_launcher_says_so_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv(launch.CLUSTER_ENV, raising=False)
    out = tmp_path / "o"
    assert _sweep(write_config(tmp_path, *TINY), out, "--launcher", "slurm") == 2
    assert "srun" in capsys.readouterr().err
    assert not (out / "runs").exists()


@needs_submitit
def test_dry_run_names_the_tasks_and_submits_nothing(tmp_path, capsys):
    out = tmp_path / "o"
    assert _sweep(write_config(tmp_path, *TINY), out, "--launcher", "slurm", "--dry-run") == 0
    text = capsys.readouterr().out
    assert "would submit 2 of 2 tasks (shards 0/2, 1/2)" in text and "bs16-lr0.5-seed0" in text
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
def reference(tmp_path_factory) -> tuple[str, Path]:
    """TINY's config and its plain local sweep (8 devices), trained once for this module."""
    folder = tmp_path_factory.mktemp("reference")
    config = write_config(folder, *TINY)
    assert _sweep(config, folder / "local", "--quiet", "--no-analyze") == 0
    return config, folder / "local"


@needs_submitit
@pytest.mark.slow
def test_a_job_array_on_the_local_executor_equals_the_local_sweep(reference, tmp_path, capsys,
                                                                  monkeypatch):
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


def test_a_rerun_submits_only_the_shards_with_work_left(reference, tmp_path):
    config, local_out = reference
    out = tmp_path / "o"
    shutil.copytree(local_out, out)
    cfg = load(config, [])
    prepared = runner.prepare(cfg, out)
    assert prepared.shards_with_work(2) == []
    holder = grid.partition(prepared.units, 2)[1][0].runs[0].run_id
    (out / "runs" / holder / "summary.json").unlink()
    assert prepared.shards_with_work(2) == [1]
    assert runner.prepare(cfg, tmp_path / "new").shards_with_work(2) == [0, 1]


@needs_submitit
@pytest.mark.devices(8)
@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_task_over_two_processes_joins_them_and_equals_the_local_sweep(reference, tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv(launch.CLUSTER_ENV, "local")
    monkeypatch.setenv("XLA_FLAGS", xla_flags(4))  # 2 x 4 = 8
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


@pytest.mark.slow
@needs_submitit
def test_a_failed_task_fails_the_wait_and_names_its_log(tmp_path, capsys, monkeypatch):
    jax.device_count()  # this process's backend is up; only the tasks see the bad platform below
    monkeypatch.setenv(launch.CLUSTER_ENV, "local")
    monkeypatch.setenv("JAX_PLATFORMS", "no_such_platform")
    out = tmp_path / "o"
    assert _sweep(write_config(tmp_path, *TINY), out, "--launcher", "slurm", "--jobs", "1",
                  "--wait") == 1
    err = capsys.readouterr().err
    assert "task 0 of 1 (job " in err and "_log.err" in err
    assert "1 of 1 task ended without success" in err
    assert not (out / "analysis.json").exists()


def test_submitits_sacct_warning_shows_once(caplog):
    """Without accounting sacct fails at every state check; submitit would warn each time."""
    launch.quiet_sacct()
    launch.quiet_sacct()  # installed once however often executors are made
    logger = logging.getLogger("submitit")
    with caplog.at_level(logging.WARNING, logger="submitit"):
        for call in range(1, 4):
            logger.warning(f"Call #{call} - Bypassing sacct error Command 'sacct' returned 1.")
        logger.warning("another warning")
    messages = [r.getMessage() for r in caplog.records if r.name == "submitit"]
    assert len(messages) <= 2 and "another warning" in messages
    assert sum("Bypassing sacct error" in m for m in messages) <= 1


# ---------------------------------------------------------------- a real SLURM cluster
#
# .ci/run starts a single-node cluster (.ci/slurm.sh: Debian's slurmctld, slurmd, munge; no
# accounting) and exports SLURM_CONF and SCALING_TEST_SLURM (its partition). By hand:
#   .ci/slurm.sh start /tmp/slurm && . /tmp/slurm/env && pytest tests/test_launch.py
#   .ci/slurm.sh stop /tmp/slurm

PARTITION = os.environ.get("SCALING_TEST_SLURM")
needs_cluster = pytest.mark.skipif(
    submitit is None or not PARTITION or shutil.which("sbatch") is None,
    reason="no SLURM cluster: SCALING_TEST_SLURM unset or sbatch missing (.ci/run starts one "
           "with .ci/slurm.sh where it can, and says so when it cannot)")
# Long enough that a task is caught while it trains: batch 16 trains 3,000 steps (4 to 15 s on
# 2 cores), appending rows every 50 steps.
DIGITS = ("task={name: digits}", "model.name=mlp", "model.hidden=[64]", "optimizer.name=momentum",
          "optimizer.momentum=0.9", "batch.sizes=[16, 64]", "learning_rate.values=[0.03, 0.1]", "learning_rate.search=false",
          "budget.max_examples=48000", "targets=['eval_accuracy>=0.9']", "eval.every=10",
          "eval.points_per_decade=20", "train.chunk_steps=50", "train.stop_at_targets=false",
          "train.max_group_size=null", "seeds=[0]")


@pytest.fixture(scope="module")
def digits_reference(tmp_path_factory) -> tuple[str, Path]:
    """DIGITS's config and its plain local sweep, trained once for this module."""
    folder = tmp_path_factory.mktemp("digits")
    config = write_config(folder, *DIGITS)
    assert _sweep(config, folder / "local", "--quiet", "--no-analyze") == 0
    return config, folder / "local"


def _same_as(local: Path, out: Path) -> None:
    """Every run's summary and metric rows equal, timing fields aside."""
    assert len(on_disk(local)) == 4
    assert_same(on_disk(local), on_disk(out))
    _assert_same_metrics(local, out)


@needs_cluster
@pytest.mark.slow
def test_a_sweep_through_sbatch_equals_the_local_sweep_and_its_tasks_get_the_flags(
        digits_reference, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(launch.CLUSTER_ENV, raising=False)
    config, local_out = digits_reference
    out, cache = tmp_path / "sbatch", tmp_path / "cache"
    assert _sweep(config, out, "--launcher", "slurm", "--jobs", "2", "--wait", "--time", "10",
                  "--partition", PARTITION, "--compile-cache", str(cache)) == 0
    printed = capsys.readouterr().out
    assert "submitted 2 tasks" in printed and (out / "analysis.json").is_file()
    _same_as(local_out, out)
    argvs = [DelayedSubmission.load(p).args[1] for p in (out / "slurm").glob("*_submitted.pkl")]
    parsed = sorted((build_parser().parse_args(argv) for argv in argvs), key=lambda a: a.shard)
    assert [a.shard for a in parsed] == [(0, 2), (1, 2)]
    assert all(a.compile_cache == str(cache) and a.no_analyze for a in parsed)
    assert any(cache.iterdir())  # the tasks compiled into the cache they were given
    logs = list((out / "slurm").glob("*_log.out"))
    assert len(logs) == 2 and all("shard done\n" in p.read_text() for p in logs)
    assert not any("scaling analyze" in p.read_text() for p in logs)  # --wait analyses itself
    # A rerun has nothing to submit: it says so and analyses.
    assert _sweep(config, out, "--launcher", "slurm", "--jobs", "2", "--wait",
                  "--partition", PARTITION) == 0
    assert "shards 0/2, 1/2 have nothing left to do; nothing to submit" in capsys.readouterr().out
    assert len(list((out / "slurm").glob("*_submitted.pkl"))) == 2


def _command(config: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "scaling.cli", "sweep", config, "--out", str(out),
            "--launcher", "slurm", "--jobs", "2", "--wait", "--no-analyze", "--time", "10",
            "--partition", PARTITION]


def _until(check, timeout_s: float = 240.0):
    """Poll `check()` until it returns something true; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout_s:.0f} s")


def _training_task(out: Path) -> str | None:
    """The job id of the task training batch 16, once it has rows on disk but is not done."""
    runs = list((out / "runs").glob("bs16-*"))
    if not runs or any((r / "summary.json").is_file() for r in runs) \
            or not all((r / "metrics.jsonl").is_file() and
                       (r / "metrics.jsonl").read_text().count("\n") > 20 for r in runs):
        return None
    for log in (out / "slurm").glob("*_0_log.err"):
        if "batch 16: 2 runs: started" in log.read_text():
            return log.name.removesuffix("_0_log.err")
    return None


@needs_cluster
@pytest.mark.slow
def test_a_task_cancelled_mid_way_is_reported_and_the_rerun_gives_identical_results(
        digits_reference, tmp_path, monkeypatch):
    monkeypatch.delenv(launch.CLUSTER_ENV, raising=False)
    config, local_out = digits_reference
    out = tmp_path / "cancelled"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with subprocess.Popen(_command(config, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env) as waiting:
        job = _until(lambda: _training_task(out))
        # Suspended first, so that it stops right here: submitit ignores the SIGTERM of a
        # cancel and SLURM kills only after KillWait, which a fast machine might outrun.
        subprocess.run(["scontrol", "suspend", job], check=True)
        subprocess.run(["scancel", job], check=True)
        stdout, stderr = waiting.communicate(timeout=120 + watch.RESULT_GRACE_S)
    assert waiting.returncode == 1, stderr
    assert f"(job {job}) ended without a result (CANCELLED)" in stderr
    assert "rerun the same command to resume" in stderr and "Traceback" not in stderr
    assert not all((r / "summary.json").is_file() for r in (out / "runs").glob("bs16-*"))
    rerun = subprocess.run(_command(config, out), capture_output=True, text=True, env=env,
                           timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "has nothing left to do; not submitted" in rerun.stdout
    assert "submitted 1 task " in rerun.stdout
    _same_as(local_out, out)


@needs_cluster
def test_an_sbatch_refusal_is_one_line_and_leaves_no_files(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(launch.CLUSTER_ENV, raising=False)
    out = tmp_path / "o"
    assert _sweep(write_config(tmp_path, *TINY), out, "--launcher", "slurm",
                  "--partition", "nosuch") == 2
    captured = capsys.readouterr()
    assert captured.err == ("error: --launcher slurm: sbatch refused the job array: invalid "
                            "partition specified: nosuch; Batch job submission failed: Invalid "
                            "partition name specified\n")
    assert not out.exists()
    (out / "slurm").mkdir(parents=True)  # a folder that was there stays, and stays empty
    assert _sweep(write_config(tmp_path, *TINY), out, "--launcher", "slurm", "--mem",
                  "100000000") == 2
    assert "sbatch refused the job array: Memory specification" in capsys.readouterr().err
    assert list(out.rglob("*")) == [out / "slurm"]
