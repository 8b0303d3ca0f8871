"""What a sweep shows: each group's progress while it trains, a per-batch-size progress table
after each group, and the end table.

A group's progress suits where it goes (`--progress`): a live bar on a terminal, or plain lines
for files and cluster logs (one when the group starts, at most one a minute while it trains,
one when it ends; no carriage returns), or nothing. Lines and tables are log messages (the
`scaling` logger), so library users route them as they like. The tables are pure functions of
the planned runs and their summaries (None while a run is not done), tested on synthetic
summaries and reused by `--dry-run`.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TextIO

from tqdm import tqdm

from scaling import store
from scaling.formatting import duration, number, percent, text_table
from scaling.sweep.grid import PlannedRun, best_lr
from scaling.train.sinks import Records, Sink

if TYPE_CHECKING:  # the sweep's prepare imports jax; the progress tables must not
    from scaling.sweep.prepare import Prepared

log = logging.getLogger(__name__)
MODES = ("auto", "bar", "lines", "none")
LINE_EVERY_S = 60.0  # plain lines: at most one progress line per group this often


def resolve(mode: str, stream: TextIO | None = None) -> str:
    """auto: a bar where the bar's stream (stderr) is a terminal, else plain lines."""
    if mode != "auto":
        return mode
    stream = stream or sys.stderr
    return "bar" if hasattr(stream, "isatty") and stream.isatty() else "lines"


class GroupProgress(Sink):
    """One group's progress while it trains, as a bar, as plain lines, or not at all.

    As a sink it hears each chunk's rows (the furthest step, or examples for a scheduled
    group, any run has recorded, and how many runs still train); `close()` ends it, once.
    """

    def __init__(self, mode: str, desc: str, total_steps: int, batch_size: int, runs: int,
                 first_step: int = 0, every_s: float = LINE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic, unit: str = "step",
                 last_step: int | None = None) -> None:
        """`unit`: what is counted (a scheduled group counts examples, batch_size 1);
        `last_step`: past the budget's `total_steps`, where a reading extension may end."""
        self.mode, self.desc, self.total, self.batch_size = mode, desc, total_steps, batch_size
        self.unit = unit
        self.runs = self.left = runs
        self.first = self.at = first_step
        self.every_s, self.clock = every_s, clock
        self.started = self.last_line = clock()
        self.bar, self.closed = None, False
        if mode == "bar":
            self.bar = tqdm(total=total_steps, desc=desc, unit=unit, leave=False,
                            dynamic_ncols=True, initial=first_step)
        elif mode == "lines":
            begin = f" from step {first_step:,}" if first_step else ""
            past = (f" (up to {last_step:,} to confirm a reading)"
                    if last_step and last_step > total_steps else "")
            log.info("%s: started%s, %s %ss%s", desc, begin, f"{total_steps:,}", unit, past)

    def rows(self, records: Records, wall_s: float, running: int) -> None:
        key = "examples" if self.unit == "example" else "step"
        self.step(max((row[key] for rows in records for row in rows), default=0))
        self.running(running)

    def finish(self, summaries: list[dict[str, Any]]) -> None:
        self.close()

    def step(self, furthest: int) -> None:
        if furthest <= self.at:
            return
        self.at = furthest
        if self.bar is not None:
            self.bar.update(furthest - self.bar.n)
        elif self.mode == "lines" and self.clock() - self.last_line >= self.every_s:
            self.last_line = self.clock()
            log.info("%s", self.line())

    def running(self, left: int) -> None:
        self.left = left
        if self.bar is not None:
            self.bar.set_postfix_str(f"{left} running", refresh=False)

    def line(self) -> str:
        """steps done, runs left, examples per second, time left (at the rate so far)."""
        elapsed = max(self.clock() - self.started, 1e-9)
        rate = (self.at - self.first) / elapsed
        left_s = max(self.total - self.at, 0) / rate if rate > 0 else None
        return (f"{self.desc}: {self.unit} {self.at:,}/{self.total:,}, {self.left} of {self.runs} runs "
                f"training, {number(rate * self.batch_size * self.left)} examples/s, about "
                f"{duration(left_s)} left")

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.bar is not None:
            self.bar.close()
        elif self.mode == "lines":
            log.info("%s: done in %s", self.desc, duration(self.clock() - self.started))


@dataclass
class BatchRow:
    """One batch size's (or batch-size schedule's) standing for the primary target."""

    batch_size: int | str  # a schedule's name
    runs: int
    done: int
    diverged: int
    stopped: int  # stopped as dominated (train.stop_dominated)
    missed: int  # done, neither diverged nor stopped, primary target not reached
    left: int  # no summary yet
    best_lr: float | None
    steps: float | None  # mean over seeds at the best learning rate
    examples: float | None
    examples_per_s: float | None = None  # training throughput, mean over the finished runs
    mfu: float | None = None  # model-FLOPs utilisation, likewise


def batch_rows(planned: list[PlannedRun], summaries: dict[str, dict[str, Any] | None],
               target: str | None) -> list[BatchRow]:
    rows = []
    key = lambda r: r.batch_size if r.schedule is None else r.schedule
    sizes = sorted({r.batch_size for r in planned if r.schedule is None})
    keys = sizes + list(dict.fromkeys(r.schedule for r in planned if r.schedule is not None))
    for size in keys:
        done = [summaries[r.run_id] for r in planned
                if key(r) == size and summaries.get(r.run_id) is not None]
        total = sum(key(r) == size for r in planned)
        diverged = sum(s["status"] == "diverged" for s in done)
        stopped = sum(s["status"] == "dominated" for s in done)
        missed = sum(s["status"] not in ("diverged", "dominated") and target is not None
                     and s["steps_to_target"].get(target) is None for s in done)
        best = best_lr(done, target) if target is not None else None
        lr, steps, examples = None, None, None
        if best is not None:
            lr, steps = best
            at_best = [s["examples_to_target"][target] for s in done if s["learning_rate"] == lr]
            examples = sum(at_best) / len(at_best)
        rows.append(BatchRow(size, total, len(done), diverged, stopped, missed, total - len(done), lr,
                             steps, examples, store.mean_throughput(done, "examples_per_s"),
                             store.mean_throughput(done, "mfu")))
    return rows


class Tally:
    """A sweep's standing for the table after each group: the runs left of this shard, the
    groups done and left, and the time left at the rate so far (budgeted examples)."""

    def __init__(self, p: "Prepared", finished: dict[str, dict[str, Any]]) -> None:
        self.p = p
        self.pending = {r.run_id: r for u in p.units for r in p.runs_of(u)
                        if r.run_id not in finished}
        self.started, self.cost_done, self.groups_done = time.perf_counter(), 0, 0
        self.widths: dict[tuple[int, str | None], int] = {}  # group width per (batch, schedule)

    def done(self, group: list[PlannedRun]) -> None:
        for r in group:
            self.pending.pop(r.run_id, None)
            self.cost_done += self.p.cost(r)
        self.groups_done += 1

    def table(self, finished: dict[str, dict[str, Any]]) -> str:
        """The progress table over this shard's runs."""
        p = self.p
        target = p.cfg.targets[0] if p.cfg.targets else None
        shard_runs = [r for u in p.units for r in p.runs_of(u)]
        limit = p.cfg.train.max_group_size
        left: dict[tuple, int] = {}
        for r in self.pending.values():
            left[(r.batch_size, r.schedule)] = left.get((r.batch_size, r.schedule), 0) + 1
        groups_left = sum(-(-n // self.widths.get(key, limit or n)) for key, n in left.items())
        eta_s = eta(time.perf_counter() - self.started, self.cost_done,
                    sum(p.cost(r) for r in self.pending.values()))
        rows = batch_rows(shard_runs, {r.run_id: finished.get(r.run_id) for r in shard_runs},
                          target)
        return format_progress(rows, target, self.groups_done, groups_left, eta_s)


def eta(elapsed_s: float, cost_done: int, cost_left: int) -> float | None:
    """Time left at the rate so far: elapsed seconds per budgeted example x examples left."""
    return None if cost_done <= 0 else elapsed_s / cost_done * cost_left


def format_progress(rows: list[BatchRow], target: str | None, groups_done: int,
                    groups_left: int, eta_s: float | None) -> str:
    header = ["batch", "runs", "done", "diverged", "left", "best lr", f"steps to {target or '-'}"]
    body = [[r.batch_size, r.runs, r.done, r.diverged, r.left, r.best_lr, r.steps] for r in rows]
    return (text_table(header, body) + f"\ngroups: {groups_done} done, {groups_left} left; "
            f"time left: about {duration(eta_s)}")


def format_final(rows: list[BatchRow], target: str | None, out: str) -> str:
    """The end table: per batch size the best LR and its cost to the primary target."""
    name = target or "-"
    header = ["batch", "best lr", f"steps to {name}", "examples", "diverged", "stopped", "missed",
              "unfinished", "examples/s", "MFU"]
    body = [[r.batch_size, r.best_lr, r.steps, r.examples, r.diverged, r.stopped, r.missed, r.left,
             r.examples_per_s, percent(r.mfu)] for r in rows]
    return text_table(header, body) + f"\nresults in {out}"
