"""`scaling sweep --launcher slurm`: a sweep's shards as one SLURM job array, through submitit.

The command checks everything first (the config, the whole grid, the results folder), then
submits --jobs tasks. Task i runs `scaling sweep CONFIG ... --shard i/N --no-analyze --progress
lines` in its own process, so a task is exactly a manual shard: it writes its runs into the
shared folder and, resubmitted, resumes. submitit is optional (pip install 'scaling[slurm]').

With --nodes K a task is K processes, one per node, that train their shard together: each
learns the coordinator (the first node), the process count and its rank from submitit and
joins through jax.distributed (scaling.train.mesh.maybe_initialize_distributed).

SCALING_SUBMITIT_CLUSTER (for tests) picks another submitit executor: `local` runs each task
as local subprocesses (a task's K processes on this machine).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from scaling.config import ConfigError

CLUSTER_ENV = "SCALING_SUBMITIT_CLUSTER"
MAX_DEFAULT_JOBS = 16
DEFAULT_TIME_MIN = 60

@dataclass(frozen=True)
class Resources:
    """What each task asks SLURM for; None leaves the cluster's default."""

    time_min: int = DEFAULT_TIME_MIN
    nodes: int = 1
    partition: str | None = None
    gpus_per_task: int | None = None
    cpus_per_task: int | None = None
    mem_gb: float | None = None


def import_submitit() -> ModuleType:
    """submitit, an optional dependency (scaling[slurm]), or a ConfigError saying how to get it."""
    try:
        import submitit
    except ImportError:
        raise ConfigError("--launcher slurm needs submitit: pip install 'scaling[slurm]'") from None
    return submitit


def task_count(requested: int | None, num_units: int) -> int:
    """--jobs, or one task per vmapped group up to 16; never more tasks than groups."""
    if requested is None:
        return max(1, min(num_units, MAX_DEFAULT_JOBS))
    return max(1, min(requested, num_units))


def shard_argvs(config: str, overrides: list[str], out: Path, jobs: int, force: bool) -> list[list[str]]:
    """One `scaling sweep` command line per task; absolute paths, since a task may start elsewhere."""
    base = ["sweep", str(Path(config).resolve()), *overrides, "--out", str(out.resolve()),
            "--no-analyze", "--progress", "lines", *(["--force"] if force else [])]
    return [[*base, "--shard", f"{i}/{jobs}"] for i in range(jobs)]


def run_shard(entry: Callable[[list[str]], int], argv: list[str], processes: int = 1) -> None:
    """The body of one task (pickled by submitit): `entry(argv)`, the command line's main,
    runs the shard's sweep; a failure fails the task."""
    if processes > 1:
        join_processes()
    status = entry(argv)
    if status != 0:
        raise RuntimeError(f"scaling {' '.join(argv)} exited with status {status}")


def join_processes() -> None:
    """Point jax.distributed at this task's first host; the port is a function of the job id,
    so every process of the task picks the same one (as submitit's torch helper does)."""
    import submitit

    env = submitit.JobEnvironment()
    port = random.Random(env.job_id).randint(20000, 60000)
    os.environ.update(SCALING_COORDINATOR=f"{env.hostnames[0]}:{port}",
                      SCALING_NUM_PROCESSES=str(env.num_tasks),
                      SCALING_PROCESS_ID=str(env.global_rank))


def make_executor(folder: Path, name: str, res: Resources) -> Any:
    """submitit's executor for SLURM (or SCALING_SUBMITIT_CLUSTER), one process per node."""
    submitit = import_submitit()
    cluster = os.environ.get(CLUSTER_ENV, "slurm")
    try:
        executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
    except ValueError as exc:
        raise ConfigError(f"{CLUSTER_ENV}: got {cluster!r}: {exc}") from None
    except RuntimeError as exc:
        raise ConfigError(f"--launcher slurm: {exc} Submit from a machine with SLURM's srun and "
                          "sbatch (a login node), or train here without --launcher") from None
    # The local executor has one node: a task's processes run side by side on it.
    nodes, per_node = (1, res.nodes) if executor.cluster == "local" else (res.nodes, 1)
    executor.update_parameters(
        name=name, timeout_min=res.time_min, nodes=nodes, tasks_per_node=per_node,
        cpus_per_task=res.cpus_per_task, gpus_per_node=res.gpus_per_task, mem_gb=res.mem_gb,
        slurm_partition=res.partition)
    return executor


def submit(executor: Any, entry: Callable[[list[str]], int], argvs: list[list[str]],
           processes: int) -> list[Any]:
    """One job-array task per command line in `argvs`, each running `entry(argv)`."""
    from submitit.core.utils import FailedSubmissionError

    n = len(argvs)
    try:
        return executor.map_array(run_shard, [entry] * n, argvs, [processes] * n)
    except FailedSubmissionError as exc:
        raise ConfigError(f"--launcher slurm: submission failed: {exc}") from None


def wait(jobs: list[Any]) -> list[str]:
    """Block until every task ends; one line per failed task, naming its log."""
    from submitit.core.utils import UncompletedJobError

    failed = []
    for i, job in enumerate(jobs):
        try:
            job.results()
        except UncompletedJobError as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            failed.append(f"task {i} (job {job.job_id}) failed: {reason}; log {job.paths.stderr}")
    return failed
