"""`scaling sweep --launcher slurm --wait`: follow a job array's tasks until each has ended,
reading their states with a bound, so that the command never hangs.

A task has ended when its result file is there (it succeeded or raised), or when SLURM says it
ended (cancelled, failed, out of memory, timed out, ...) and no result file followed within
RESULT_GRACE_S, or when SLURM has not known its state for UNKNOWN_LIMIT_S. States come from
`squeue` first (it answers without accounting, and keeps an ended job for the controller's
MinJobAge), then from submitit's own reading (sacct, or the local executor's processes).
While waiting, one line at most every PROGRESS_EVERY_S: the sweep's runs finished and left
(summary.json files on disk) and each running task's latest progress line from its log.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from scaling.formatting import duration

log = logging.getLogger(__name__)

POLL_S = 5.0  # how often the tasks' states are read
RESULT_GRACE_S = 30.0  # after SLURM says a task ended: how long its result file may take to show
UNKNOWN_LIMIT_S = 300.0  # a task whose state nobody knows (no accounting, job gone from squeue)
PROGRESS_EVERY_S = 60.0  # at most one progress line this often
# States in which a task may still write its result (SLURM's job states, submitit's local ones).
LIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
        "REQUEUE_FED", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "READY", "PREEMPTED"}
PROGRESS_LINE = re.compile(r"^batch \S+: .*")  # scaling.sweep.progress's group lines


@dataclass
class ArrayTask:
    """One submitted shard and what the wait has seen of it."""

    index: int  # the shard's number, i of --shard i/N
    shards: int  # N
    job: Any  # submitit's Job
    since: float | None = None  # when it was first seen ended (or unknown) without a result
    seen: str = ""  # that state
    failure: str | None = None  # why it ended without a result, once it has

    @property
    def name(self) -> str:
        return f"task {self.index} of {self.shards} (job {self.job.job_id})"


def squeue_states(job_ids: list[str]) -> dict[str, str]:
    """{array task id like '12_0': state} for the jobs SLURM's controller still holds; {} where
    squeue is missing or fails (then submitit's reading decides)."""
    arrays = sorted({j.split("_")[0] for j in job_ids})
    try:
        text = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T", "-j", ",".join(arrays)],
                              capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(line.split("|", 1) for line in text.split() if "|" in line)


def submitit_state(job: Any) -> str:
    """submitit's reading of a job's state (sacct for SLURM), upper case, its first word
    ('CANCELLED by 0' -> 'CANCELLED'); UNKNOWN where it has none."""
    try:
        state = str(job.state)
    except Exception:  # submitit's own readers may raise on a job they lost; unknown then
        state = ""
    return (state.split() or ["UNKNOWN"])[0].upper()


def parts(job: Any) -> list[Any]:
    """A task's processes (one per node with --nodes K), each with its own result file."""
    return [job.task(k) for k in range(job.num_tasks)] if job.num_tasks > 1 else [job]


def has_result(job: Any) -> bool:
    return all(p.paths.result_pickle.exists() for p in parts(job))


def outcome(job: Any) -> str | None:
    """None if the task succeeded, else the last line of what it raised (its result file)."""
    exc = job.exception()
    if exc is None:
        return None
    return (str(exc).strip().splitlines() or [type(exc).__name__])[-1].strip()


def check(task: ArrayTask, state: str, now: float) -> bool:
    """Whether `task` has ended, given its state now; sets task.failure where it ended badly."""
    if has_result(task.job):
        reason = outcome(task.job)
        if reason is not None:
            task.failure = f"{task.name} failed: {reason}; log {task.job.paths.stderr}"
        return True
    if state in LIVE:
        task.since, task.seen = None, state
        return False
    if task.since is None or task.seen != state:
        task.since, task.seen = now, state
    limit = UNKNOWN_LIMIT_S if state == "UNKNOWN" else RESULT_GRACE_S
    if now - task.since < limit:
        return False
    why = f"its state unknown for {duration(now - task.since)}" if state == "UNKNOWN" else state
    task.failure = (f"{task.name} ended without a result ({why}); log {task.job.paths.stderr}; "
                    "rerun the same command to resume")
    return True


def last_progress(job: Any) -> str | None:
    """The latest group progress line in a task's log (its standard error), if any."""
    path = Path(job.paths.stderr)
    if not path.is_file():
        return None
    lines = [line for line in path.read_text(errors="replace").splitlines() if PROGRESS_LINE.match(line)]
    return lines[-1] if lines else None


def progress_line(tasks: list[ArrayTask], runs_done: int, runs_total: int,
                  elapsed_s: float) -> str:
    """'waiting (3 min): 5 of 9 runs finished, 4 left; task 0: batch 16: ...; ...'"""
    text = (f"waiting ({duration(elapsed_s)}): {runs_done} of {runs_total} runs finished, "
            f"{runs_total - runs_done} left")
    for t in tasks:
        latest = last_progress(t.job)
        if latest:
            text += f"; task {t.index}: {latest}"
    return text


def wait(tasks: list[ArrayTask], runs_done: Callable[[], tuple[int, int]], slurm: bool,
         clock: Callable[[], float] = time.monotonic,
         sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """Poll every POLL_S until each task has ended; one line per task that ended without
    success. `runs_done()`: (finished, planned) runs of the sweep on disk; `slurm`: ask squeue."""
    started = last_line = clock()
    running = list(tasks)
    while running:
        states = squeue_states([t.job.job_id for t in running]) if slurm else {}
        now = clock()
        running = [t for t in running
                   if not check(t, states.get(t.job.job_id) or submitit_state(t.job), now)]
        if running and now - last_line >= PROGRESS_EVERY_S:
            last_line = now
            log.info("%s", progress_line(running, *runs_done(), now - started))
        if running:
            sleep(POLL_S)
    return [t.failure for t in tasks if t.failure is not None]
