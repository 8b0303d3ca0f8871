"""Training a group of runs whose batch size grows (batch.schedules, docs/schedules.md).

The runs of one schedule (its learning rates x seeds) train as one vmapped group that moves
from one batch size's program to the next, the whole state carried over
(GroupProgram.start_from): parameters, optimizer state, keys and the noise-scale estimates;
at each change the learning rate follows the schedule's rule, and the data key is folded with
the new batch size so no draws are replayed. A static schedule (steps, doubling) changes every
run at the same examples. A noise_scale schedule decides per run at every chunk boundary: the
runs whose B_simple has passed `multiple` x their batch go on, together, at twice the batch,
the others where they are, so a group splits into cohorts that each train on.

Every phase trains its whole budget (no target stops a scheduled run): steps and examples to
each target are read from the rows afterwards, in the run's own optimizer steps and examples.
A scheduled group has no mid-run checkpoints: killed, it trains again from the start.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from scaling.config import BatchScheduleConfig, Config
from scaling.config.targets import crossing
from scaling.sweep import progress
from scaling.sweep.grid import PlannedRun
from scaling.sweep.plan import Arithmetic
from scaling.sweep.segments import Segment, phase_learning_rate, static_segments
from scaling.sweep.trackers import Tracker
from scaling.sweep.writer import OnRecords, Writer
from scaling.tasks.base import Task
from scaling.train.checkpoint import Resume
from scaling.train.loop import RunResult, run_group
from scaling.train.program import GroupProgram, RunState
from scaling.train.repack import PAD, Packing, width_for
from scaling.train.spec import GroupSpec


@dataclass
class _Cohort:
    """Runs (group indices, in slot order) that train on together in one segment, and the
    state they continue from: None for the group's first, else (state, slots, stream)."""

    members: list[int]
    segment: Segment
    source: tuple[RunState, list[int], int] | None = None


@dataclass
class _Track:
    """What the host knows of one scheduled run as its cohorts train."""

    status: str = "running"
    steps: int = 0
    examples: int = 0
    path: list[list[int]] = field(default_factory=list)  # [step, examples, batch] per change


class ScheduledGroup:
    """One schedule's runs from the first step to the budget, into their run folders."""

    def __init__(self, cfg: Config, sched: BatchScheduleConfig, group: list[PlannedRun],
                 programs: Callable[[int], tuple[GroupProgram, Arithmetic]], task: Task,
                 data: Any, eval_data: Any, runs_axis: int, budget: int) -> None:
        self.cfg, self.sched, self.group, self.programs = cfg, sched, group, programs
        self.task, self.data, self.eval_data, self.runs_axis = task, data, eval_data, runs_axis
        self.budget = budget
        self.tracks = [_Track() for _ in group]
        self.compile_s = 0.0
        self.started = time.perf_counter()
        self.tokens_per_example = task.tokens_per_example(cfg.task.options)

    def first_cohort(self) -> _Cohort:
        if self.sched.kind == "noise_scale":
            b = self.sched.start
            arith = self.programs(b)[1]
            return _Cohort(list(range(len(self.group))), Segment(b, 0, arith.total_steps, 0, 0, arith))
        arith = {b: self.programs(b)[1] for b in self.sched.batch_sizes}
        self.static = static_segments(self.sched, self.budget, arith, self.tokens_per_example)
        return _Cohort(list(range(len(self.group))), self.static[0])

    def train(self, writer: Writer, bar: progress.GroupProgress) -> list[dict[str, Any]]:
        stack = [self.first_cohort()]
        while stack:
            stack += self._train_cohort(stack.pop(), writer, bar)
        results = [RunResult(t.status, t.steps) for t in self.tracks]
        extra = [{"examples": t.examples,
                  "tokens": None if self.tokens_per_example is None
                  else t.examples * self.tokens_per_example,
                  "batch_schedule": self.sched.label, "batch_path": t.path}
                 for t in self.tracks]
        return writer.finish([self._final(r, rows) for r, rows in zip(results, writer.rows)],
                             self.compile_s, None, extra)

    def _final(self, res: RunResult, rows: list[dict]) -> RunResult:
        """A run that trained to the budget: completed when it reached every target (or there
        are none), else budget_exhausted; as the sweep's own runs are read."""
        if res.status == "diverged":
            return res
        reach = self.cfg.reached.reach
        hit = all(crossing(rows, t, reach) is not None for t in self.cfg.targets)
        return RunResult("completed" if hit else "budget_exhausted", res.steps)

    def _train_cohort(self, cohort: _Cohort, writer: Writer, bar: progress.GroupProgress
                      ) -> list[_Cohort]:
        """Train one cohort through its segment (a noise_scale cohort: one chunk of it); the
        cohorts that go on after it."""
        seg = cohort.segment
        program = self.programs(seg.batch_size)[0]
        end = seg.end
        if self.sched.kind == "noise_scale":  # one chunk, then the runs decide
            end = min(seg.end, seg.first + program.spec.chunk_steps)
        runs = [dataclasses.replace(self.group[m].spec,
                                    learning_rate=phase_learning_rate(
                                        self.sched, self.group[m].spec.learning_rate,
                                        seg.batch_size)) for m in cohort.members]
        for m in cohort.members:
            if not self.tracks[m].path or self.tracks[m].path[-1][2] != seg.batch_size:
                self.tracks[m].path.append([seg.steps_before, seg.examples_before, seg.batch_size])
        last: dict[str, Any] = {}
        rows_now: dict[int, list[dict]] = {m: [] for m in cohort.members}

        def on_records(records: list[list[dict]], wall_s: float) -> None:
            full: list[list[dict]] = [[] for _ in self.group]
            for m, rows in zip(cohort.members, records):
                for row in rows:
                    own = row["step"]
                    row["step"], row["examples"] = seg.step(own), seg.examples(own)
                    row["tokens"] = (None if self.tokens_per_example is None
                                     else row["examples"] * self.tokens_per_example)
                full[m] = rows
                rows_now[m] += rows
            writer(full, time.perf_counter() - self.started)
            bar.step(max((r["examples"] for rows in records for r in rows), default=0))

        def on_end(rs: RunState, packing: Packing) -> None:
            last["state"], last["slots"] = rs, packing.slots.copy()

        resume = self._resume(program, cohort, runs)
        results, compile_s = run_group(program, runs, self.data, self.eval_data, on_records,
                                       self.runs_axis, resume=resume, until=end, on_end=on_end)
        self.compile_s += compile_s
        alive = []
        for i, (m, res) in enumerate(zip(cohort.members, results)):
            track = self.tracks[m]
            track.steps, track.examples = seg.step(res.steps), seg.examples(res.steps)
            track.status = "diverged" if res.status == "diverged" else track.status
            if res.status == "running":
                alive.append((i, m))
        slot_of = {run: j for j, run in enumerate(last["slots"]) if run != PAD}
        return self._next(cohort, end, alive, slot_of, last["state"], rows_now)

    def _next(self, cohort: _Cohort, end: int, alive: list[tuple[int, int]],
              slot_of: dict[int, int], state: RunState, rows_now: dict[int, list[dict]]
              ) -> list[_Cohort]:
        """The cohorts that continue after `end`: a static schedule's next phase; a noise_scale
        cohort split into those that double and those that stay."""
        seg = cohort.segment
        if not alive or end >= self.programs(seg.batch_size)[1].total_steps:
            return []
        if self.sched.kind != "noise_scale":
            j = self.static.index(seg)
            if j + 1 >= len(self.static):
                return []
            nxt = self.static[j + 1]
            return [_Cohort([m for _, m in alive], nxt,
                            (state, [slot_of[i] for i, _ in alive], nxt.batch_size))]
        grow = [(i, m) for i, m in alive if self._wants_to_grow(rows_now[m], seg.batch_size)]
        stay = [(i, m) for i, m in alive if (i, m) not in grow]
        out = []
        if stay:
            here = dataclasses.replace(seg, first=end, steps_before=seg.step(end),
                                       examples_before=seg.examples(end))
            out.append(_Cohort([m for _, m in stay], here, (state, [slot_of[i] for i, _ in stay], 0)))
        if grow:
            batch = 2 * seg.batch_size
            nxt = seg.following(end, batch, self.programs(batch)[1])
            if nxt.end > nxt.first:
                out.append(_Cohort([m for _, m in grow], nxt,
                                   (state, [slot_of[i] for i, _ in grow], batch)))
        return out

    def _wants_to_grow(self, rows: list[dict], batch: int) -> bool:
        """B_simple (the run's moving average, last recorded) above multiple x the batch, and
        room to double."""
        values = [r["b_simple"] for r in rows if isinstance(r.get("b_simple"), float)
                  and np.isfinite(r["b_simple"])]
        return (2 * batch <= self.sched.max and bool(values)
                and values[-1] > self.sched.multiple * batch)

    def _resume(self, program: GroupProgram, cohort: _Cohort, runs: list) -> Resume | None:
        """The cohort's first state, cut from its source's (None: the group's very start)."""
        if cohort.source is None:
            return None
        state, slots, stream = cohort.source
        n = len(slots)
        width = width_for(n, self.runs_axis)  # powers of two: cohorts reuse compiled chunks
        take = np.asarray(slots + [slots[0]] * (width - n))
        pad = np.arange(width) >= n
        lrs = np.asarray([r.learning_rate for r in runs] + [runs[0].learning_rate] * (width - n))
        seg = cohort.segment
        if stream == 0:  # the same batch: every leaf as it was, the slots cut
            rs = program.take(state, take, pad)
        else:
            rs = program.start_from(state, take, pad, lrs, seg.first, stream, carry_noise=True)
        packing = Packing(n, width, program.spec.repack, self.runs_axis)
        return Resume(rs, packing, seg.first, 0.0, (np.ones(width, bool), packing.slots.copy()))


def phase_spec(spec: GroupSpec) -> GroupSpec:
    """A phase's program: no targets (a scheduled run trains its whole budget)."""
    return dataclasses.replace(spec, targets=(), stop_at_targets=False)


def train(cfg: Config, out: Path, sched: BatchScheduleConfig, group: list[PlannedRun],
          programs: Callable[[int], tuple[GroupProgram, Arithmetic]], task: Task, data: Any,
          eval_data: Any, runs_axis: int, budget: int, arith: Arithmetic, shown: str,
          on_records: OnRecords | None, trackers: list[Tracker]) -> list[dict[str, Any]]:
    """Train one scheduled group into its run folders; the summaries."""
    trainer = ScheduledGroup(cfg, sched, group, programs, task, data, eval_data, runs_axis,
                             budget)
    bar = progress.GroupProgress(shown, f"schedule {sched.label}: {len(group)} runs", budget, 1,
                                 len(group), unit="example")
    writer = Writer(cfg, out, group, arith, task, lambda _: None, on_records, None, trackers)
    try:
        return trainer.train(writer, bar)
    except BaseException:
        writer.close()
        raise
    finally:
        bar.close()
