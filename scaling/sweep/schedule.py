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
from typing import Any, Callable

import numpy as np

from scaling.config import BatchScheduleConfig
from scaling.config.arithmetic import Arithmetic
from scaling.config.optimizer_rules import rule_values
from scaling.config.targets import crossing
from scaling.sweep import group as group_mod, progress
from scaling.sweep.grid import PlannedRun
from scaling.sweep.segments import Segment, as_static, phase_learning_rate, static_segments
from scaling.sweep.session import Session
from scaling.train import start as start_mod
from scaling.train import precision
from scaling.train.loop import GroupEnd, RunResult
from scaling.train.program import GroupProgram
from scaling.train.step import RunState
from scaling.train.spec import RunSpec



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
    phases: list[dict[str, Any]] = field(default_factory=list)  # the step and RunSpec per change
    rows: list[dict[str, Any]] = field(default_factory=list)


class ScheduledGroup:
    """One schedule's runs from the first step to the budget, into their run folders."""

    def __init__(self, session: Session, sched: BatchScheduleConfig, group: list[PlannedRun],
                 arith: Arithmetic) -> None:
        self.session, self.sched, self.group, self.arith = session, sched, group, arith
        self.cfg, self.budget = session.p.cfg, arith.examples
        self.tracks = [_Track() for _ in group]
        self.compile_s = 0.0
        self.started = time.perf_counter()
        self.tokens_per_example = session.context.task.tokens_per_example(self.cfg.task.options)
        self.bar = progress.GroupProgress(session.shown_here(),
                                          f"schedule {sched.label}: {len(group)} runs",
                                          self.budget, 1, len(group), unit="example")

    def programs(self, batch_size: int) -> tuple[GroupProgram, Arithmetic]:
        return self.session.phase_program(batch_size, self.budget)

    def first_cohort(self) -> _Cohort:
        if self.sched.kind == "noise_scale":
            b = self.sched.start
            arith = self.programs(b)[1]
            return _Cohort(list(range(len(self.group))), Segment(b, 0, arith.total_steps, 0, 0, arith))
        arith = {b: self.programs(b)[1] for b in self.sched.batch_sizes}
        static = as_static(self.cfg, self.sched, arith[self.sched.first_batch])
        self.static = static_segments(static, self.budget, arith, self.tokens_per_example)
        return _Cohort(list(range(len(self.group))), self.static[0])

    def train(self) -> list[dict[str, Any]]:
        """Every cohort in turn, then every run's summary."""
        stack = [self.first_cohort()]
        try:
            while stack:
                stack += self._train_cohort(stack.pop())
        except BaseException:
            self.bar.close()
            raise
        results = [self._final(RunResult(t.status, t.steps), t.rows) for t in self.tracks]
        extra = [{"examples": t.examples,
                  "tokens": None if self.tokens_per_example is None
                  else t.examples * self.tokens_per_example,
                  "batch_schedule": self.sched.label, "batch_path": t.path,
                  **({"phases": t.phases} if self.cfg.optimizer.ruled else {})}
                 for t in self.tracks]
        return self._folders(self.group, None, "append").finish(group_mod.summaries(
            self.cfg, self.arith, self.tokens_per_example, self.group, results,
            [t.rows for t in self.tracks],
            group_mod.Timing(time.perf_counter() - self.started, self.compile_s), extra))

    def _folders(self, members: list[PlannedRun], count: Callable[[dict[str, Any]], None] | None,
                 mode: str) -> group_mod.GroupFolders:
        """The run folders of `members` (a cohort's, or the whole group's to finish it)."""
        configs = group_mod.run_configs(self.cfg, self.session.context.task, members,
                                        self.arith, precision.here(self.cfg.train.precision))
        return group_mod.GroupFolders(self.session.outlet, [r.run_id for r in members], configs,
                                      count, self.bar, mode)

    def _final(self, res: RunResult, rows: list[dict]) -> RunResult:
        """A run that trained to the budget: completed when it reached every target (or there
        are none), else budget_exhausted; as the sweep's own runs are read."""
        if res.status == "diverged":
            return res
        reach = self.cfg.reached.reach
        hit = all(crossing(rows, t, reach) is not None for t in self.cfg.targets)
        return RunResult("completed" if hit else "budget_exhausted", res.steps)

    def _train_cohort(self, cohort: _Cohort) -> list[_Cohort]:
        """Train one cohort through its segment (a noise_scale cohort: one chunk of it); the
        cohorts that go on after it."""
        seg = cohort.segment
        program = self.programs(seg.batch_size)[0]
        end = seg.end
        if self.sched.kind == "noise_scale":  # one chunk, then the runs decide
            end = min(seg.end, seg.first + program.spec.chunk_steps)
        runs = [self.phase_spec(self.group[m].spec, seg.batch_size) for m in cohort.members]
        for m, run in zip(cohort.members, runs):
            if not self.tracks[m].path or self.tracks[m].path[-1][2] != seg.batch_size:
                self.tracks[m].path.append([seg.steps_before, seg.examples_before, seg.batch_size])
                self.tracks[m].phases.append({"step": seg.steps_before, **dataclasses.asdict(run)})
        members = [self.group[m] for m in cohort.members]
        mode = "new" if cohort.source is None else "append"
        folders = self._folders(members, self.session.outlet.count(seg.examples, seg.step), mode)
        ctx = self.session.context
        start = self._start(program, cohort, runs)
        start.wall_s = time.perf_counter() - self.started
        done = folders.train(program, start, ctx.data, ctx.eval_data, until=end)
        self.compile_s += done.compile_s
        return self._next(cohort, end, self._fold(cohort, seg, done, folders.rows), done)

    def phase_spec(self, spec: RunSpec, batch_size: int) -> RunSpec:
        """A run's scalars at one of its batch sizes: the learning rate by the schedule's rule,
        beta2 and the weight decay by the optimizer's rules (D: the run's budget)."""
        lr = phase_learning_rate(self.sched, spec.learning_rate, batch_size)
        return dataclasses.replace(spec, learning_rate=lr,
                                   **rule_values(self.cfg, batch_size, lr, self.budget))

    def _fold(self, cohort: _Cohort, seg: Segment, done: GroupEnd,
              rows: list[list[dict]]) -> list[tuple[int, int]]:
        """Fold a cohort's results and rows into its runs' tracks; (index, member) of the runs
        still training at its end."""
        alive = []
        for i, (m, res) in enumerate(zip(cohort.members, done.results)):
            track = self.tracks[m]
            track.steps, track.examples = seg.step(res.steps), seg.examples(res.steps)
            track.status = "diverged" if res.status == "diverged" else track.status
            track.rows += rows[i]
            if res.status == "running":
                alive.append((i, m))
        return alive

    def _next(self, cohort: _Cohort, end: int, alive: list[tuple[int, int]], done: GroupEnd
              ) -> list[_Cohort]:
        """The cohorts that continue after `end`: a static schedule's next phase; a noise_scale
        cohort split into those that double and those that stay."""
        seg = cohort.segment
        if not alive or end >= self.programs(seg.batch_size)[1].total_steps:
            return []
        slot_of = done.slots()
        source = lambda part, stream: (done.state, [slot_of[i] for i, _ in part], stream)
        if self.sched.kind != "noise_scale":
            j = self.static.index(seg)
            if j + 1 >= len(self.static):
                return []
            nxt = self.static[j + 1]
            return [_Cohort([m for _, m in alive], nxt, source(alive, nxt.batch_size))]
        grow = [(i, m) for i, m in alive
                if self._wants_to_grow(self.tracks[m].rows, seg.batch_size)]
        stay = [(i, m) for i, m in alive if (i, m) not in grow]
        out = []
        if stay:
            here = dataclasses.replace(seg, first=end, steps_before=seg.step(end),
                                       examples_before=seg.examples(end))
            out.append(_Cohort([m for _, m in stay], here, source(stay, 0)))
        if grow:
            batch = 2 * seg.batch_size
            nxt = seg.following(end, batch, self.programs(batch)[1])
            if nxt.end > nxt.first:
                out.append(_Cohort([m for _, m in grow], nxt, source(grow, batch)))
        return out

    def _wants_to_grow(self, rows: list[dict], batch: int) -> bool:
        """B_simple (the run's moving average, last recorded) above multiple x the batch, and
        room to double."""
        values = [r["b_simple"] for r in rows if isinstance(r.get("b_simple"), float)
                  and np.isfinite(r["b_simple"])]
        return (2 * batch <= self.sched.max and bool(values)
                and values[-1] > self.sched.multiple * batch)

    def _start(self, program: GroupProgram, cohort: _Cohort, runs: list[RunSpec]
               ) -> start_mod.Start:
        """The cohort's first state: fresh for the group's first, else cut from its source's
        (the same batch: every leaf as it was; a larger one: a new segment)."""
        ctx, runs_axis = self.session.context, self.session.p.runs_axis
        if cohort.source is None:
            return start_mod.fresh(program, runs, ctx.data, ctx.eval_data, runs_axis)
        state, slots, stream = cohort.source
        return start_mod.from_slots(program, state, slots, runs, cohort.segment.first, runs_axis,
                                    stream=stream, carry_noise=True, same_program=stream == 0)


def train(session: Session, sched: BatchScheduleConfig, group: list[PlannedRun],
          arith: Arithmetic) -> list[dict[str, Any]]:
    """Train one scheduled group into its run folders; the summaries."""
    return ScheduledGroup(session, sched, group, arith).train()
