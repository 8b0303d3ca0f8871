"""scaling.sweep.watch: waiting for a job array's tasks ends for every way a task can end,
with a bound, and shows progress at most once a minute. Fake tasks on a fake clock, so the
bounds are checked to the second without waiting for them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from scaling.sweep import watch


class FakeJob:
    """A submitit job as the wait sees it: an id, its files, a state, an outcome."""

    def __init__(self, folder: Path, job_id: str, states: list[str], error: str | None = None,
                 result_after: int | None = None) -> None:
        self.job_id, self.states, self.error, self.result_after = job_id, states, error, result_after
        self.polls = 0
        self.num_tasks = 1
        self.paths = type("Paths", (), {"result_pickle": folder / f"{job_id}_result.pkl",
                                        "stderr": folder / f"{job_id}_log.err"})()

    @property
    def state(self) -> str:
        """The next scripted state (the last one repeats); writes the result file on cue."""
        self.polls += 1
        if self.result_after is not None and self.polls >= self.result_after:
            self.paths.result_pickle.write_text("")
        return self.states[min(self.polls, len(self.states)) - 1]

    def exception(self) -> Exception | None:
        return None if self.error is None else RuntimeError(f"trace\n{self.error}\n")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _wait(tasks: list[watch.ArrayTask], clock: Clock, runs=lambda: (1, 4)) -> list[str]:
    return watch.wait(tasks, runs, slurm=False, clock=clock, sleep=clock.sleep)


def test_a_task_whose_state_stays_unknown_is_reported_after_the_stated_time(tmp_path):
    clock = Clock()
    job = FakeJob(tmp_path, "7_1", ["RUNNING", "RUNNING", "UNKNOWN"])
    failed = _wait([watch.ArrayTask(1, 2, job)], clock)
    assert failed == [f"task 1 of 2 (job 7_1) ended without a result (its state unknown for "
                      f"5m00s); log {tmp_path}/7_1_log.err; rerun the same command to resume"]
    # Unknown from the third poll (t = 2 x POLL_S) on; reported at the first poll past the limit.
    assert clock.now == 2 * watch.POLL_S + watch.UNKNOWN_LIMIT_S


@pytest.mark.parametrize("state", ["CANCELLED", "FAILED", "OUT_OF_MEMORY", "TIMEOUT",
                                   "NO PROCESS AND NO RESULT"])
def test_a_task_that_ended_without_a_result_is_reported_after_the_grace(tmp_path, state):
    clock = Clock()
    failed = _wait([watch.ArrayTask(0, 1, FakeJob(tmp_path, "3", [state]))], clock)
    assert len(failed) == 1 and f"ended without a result ({state.split()[0]})" in failed[0]
    assert clock.now == watch.RESULT_GRACE_S


def test_a_result_that_lands_within_the_grace_is_a_success(tmp_path):
    """SLURM may report COMPLETED before a shared file system shows the result file."""
    clock = Clock()
    job = FakeJob(tmp_path, "3", ["RUNNING", "COMPLETED"], result_after=4)
    assert _wait([watch.ArrayTask(0, 1, job)], clock) == []
    assert clock.now == 3 * watch.POLL_S < watch.RESULT_GRACE_S  # found at the fourth poll


def test_a_task_that_raised_is_reported_with_its_last_line_and_log(tmp_path):
    clock = Clock()
    ok = FakeJob(tmp_path, "9_0", ["RUNNING"], result_after=3)
    bad = FakeJob(tmp_path, "9_1", ["RUNNING"], error="RuntimeError: exited with status 2",
                  result_after=2)
    failed = _wait([watch.ArrayTask(0, 2, ok), watch.ArrayTask(1, 2, bad)], clock)
    assert failed == [f"task 1 of 2 (job 9_1) failed: RuntimeError: exited with status 2; "
                      f"log {tmp_path}/9_1_log.err"]


def test_progress_shows_at_most_once_a_minute_with_runs_and_the_tasks_latest_lines(tmp_path,
                                                                                  caplog):
    clock = Clock()
    job = FakeJob(tmp_path, "5_0", ["RUNNING"], result_after=int(200 / watch.POLL_S))
    job.paths.stderr.write_text("batch 16: 2 runs: started, 1,753 steps\n"
                                "batch  runs  done\n"  # a progress table: not a group line
                                "batch 16: 2 runs: step 900/1,753, 2 of 2 runs training\n")
    with caplog.at_level(logging.INFO, logger="scaling.sweep.watch"):
        assert _wait([watch.ArrayTask(0, 1, job)], clock, runs=lambda: (2, 6)) == []
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == int(clock.now // watch.PROGRESS_EVERY_S) == 3
    assert lines[0] == ("waiting (1m00s): 2 of 6 runs finished, 4 left; task 0: batch 16: 2 runs: "
                        "step 900/1,753, 2 of 2 runs training")


def test_squeue_lines_are_read_per_array_task(monkeypatch):
    """squeue -r lists each array task as ID_INDEX|STATE; a plain job as ID|STATE."""
    out = "12_0|RUNNING\n12_1|CANCELLED\n13|PENDING\n"
    monkeypatch.setattr(watch.subprocess, "run",
                        lambda *a, **k: type("Done", (), {"stdout": out})())
    assert watch.squeue_states(["12_0", "12_1", "13"]) == {
        "12_0": "RUNNING", "12_1": "CANCELLED", "13": "PENDING"}
    monkeypatch.setattr(watch.subprocess, "run", _missing)
    assert watch.squeue_states(["12_0"]) == {}


def _missing(*args, **kwargs):
    raise FileNotFoundError("squeue")
