"""Stopping runs that can no longer be their batch size's best learning rate (train.stop_dominated).

A `Dominance` is a sink of one group (it keeps its runs' rows, counted) and the group's stopper
(scaling.train.loop.Stopper): after each chunk the loop folds in, it reads every run of the
batch size, this group's from their rows (the series its reach rule reads, kept as rows
arrive: `columns`, `from_series`) and the others' from their summaries, and names the running
runs `dominated` says may stop: those whose rate's mean steps, at every target they have not
yet decided, can no longer come within a margin of the best's, and that are no neighbour of a
rate that still may there. Runs are compared only with runs of the same optimizer scalars
(grid axes other than the learning rate), as the analysis does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from scaling import store
from scaling.config import Config
from scaling.config.names import OPTIMIZER_AXES
from scaling.config.targets import (Censored, Reach, crossing_in, parse_target, series,
                                    undecided_bound)
from scaling.lr_curve import Curve
from scaling.sweep import search
from scaling.sweep.grid import PlannedRun
from scaling.train.sinks import Records, Sink
from scaling.train.step import blown


Columns = dict[str, tuple[np.ndarray, np.ndarray]]


def _kept(curve: Curve, margin: float, near: float | None) -> set[str]:
    """The rates one target needs to go on: every cell whose lower bound is within the margin
    of the best's mean (it may still win), and each one's neighbours (the parabola's points
    around whichever wins) within a factor `near` in rate of it (None: any); every rate while
    no cell has reached the target."""
    lrs, best = curve.lrs, curve.best()
    if best is None:
        return {search.rate_key(lr) for lr in lrs}
    alive = np.nonzero(curve.bounds <= curve.means[best] * (1 + margin))[0]
    close = lambda i, j: near is None or max(lrs[i] / lrs[j], lrs[j] / lrs[i]) <= near
    kept = {j for i in alive for j in (i - 1, i, i + 1) if 0 <= j < len(lrs) and close(i, j)}
    return {search.rate_key(lrs[j]) for j in kept}


def dominated(runs: list[search.RunReading], targets: list[str], margin: float,
              near: float | None = None) -> list[bool]:
    """Per run of `runs` (every run of one batch size, finished ones included, so the cells
    and their neighbours are whole), whether it may stop now: it is running, and at every
    target it has not yet decided, a lower bound of its rate's mean steps over seeds (seeds
    not yet there counted at their Censored bound) exceeds the best rate's mean by more than
    `margin` (relative), and it is no neighbour of a rate that may still win there. A target
    the run has decided needs nothing more of it, so a rate that is the best at an easy target
    stops once no hard one can use it. Never the best or its neighbours at a target still
    open; with `near`, neighbours count only within that factor in rate: a search with rounds
    left places rates between a farther one and the best, whose bound is enough to place
    them."""
    keep = {target: _kept(search.cells(runs, target), margin, near) for target in targets}

    def may_stop(run: search.RunReading) -> bool:
        still_open = [t for t in targets if isinstance(run.steps.get(t), Censored)]
        rate = search.rate_key(run.learning_rate)
        return run.running and bool(still_open) and all(rate not in keep[t] for t in still_open)

    return [may_stop(r) for r in runs]


def censored_steps(reading: search.RunReading) -> dict[str, float]:
    """summary.json's steps_censored of a run stopped as dominated: per target it had not
    reached, the bound its steps exceed."""
    return {t: v.steps for t, v in reading.steps.items() if isinstance(v, Censored)}


def columns(rows: list[dict[str, Any]], targets: list[str], reach: Reach) -> Columns:
    """The (steps, values) series of the columns `reach` reads for `targets`, from metric rows;
    a stopper keeps these as rows arrive (`extend`) rather than scanning every row again."""
    return {c: series(rows, c) for c in {reach.column(parse_target(t)[0]) for t in targets}}


def extend(kept: Columns, new: Columns) -> Columns:
    """`kept` with the series of later rows appended."""
    return {c: tuple(np.concatenate([a, b]) for a, b in zip(kept[c], new[c])) for c in kept}


def from_series(learning_rate: float, seed: int, series_of: Columns, targets: list[str],
                reach: Reach, status: str) -> search.RunReading:
    """A run's reading from its series so far (`columns` of its rows, at a chunk boundary):
    `status` running gives Censored steps where a target is not yet decided, any other status
    None there."""
    running = status == "running"
    steps: dict[str, search.Steps] = {}
    for t in targets:
        target = parse_target(t)
        column = series_of[reach.column(target[0])]
        value = None if status == "diverged" else crossing_in(*column, target, reach)
        if value is None and running:
            value = Censored(undecided_bound(column[0], reach))
        steps[t] = value
    return search.RunReading(learning_rate, seed, steps, status == "diverged", running)


def axes_key(run: PlannedRun) -> tuple:
    """The optimizer scalars a run shares with the runs it is compared with: every one in the
    optimizer table but the learning rate (names.OPTIMIZER_AXES)."""
    return tuple(getattr(run.spec, name) for name in OPTIMIZER_AXES)


def diverged(rows: list[dict[str, Any]], factor: float) -> bool:
    """The engine's divergence test on the rows so far (its eval_loss not finite, or above
    `factor` times its first)."""
    losses = [r.get("eval_loss") for r in rows if "eval_loss" in r]
    if not losses:
        return False
    last = np.float64(np.nan if losses[-1] is None else losses[-1])
    return bool(blown(last, losses[0], factor, np))


def neighbours_needed_within(cfg: Config, out: Any, batch_size: int) -> float | None:
    """How close in rate a neighbour of a rate that may still win must be to be kept running:
    learning_rate.resolution while the batch size's search has rounds left (the next round
    places rates between it and the best), else None (every neighbour: the last bracket's parabola
    needs them)."""
    if not search.searched(cfg):
        return None
    done = len(search.rounds_of(store.read_rounds(out), batch_size))
    return cfg.learning_rate.resolution if done < cfg.learning_rate.max_rounds else None


class Dominance(Sink):
    """One group's runs watched for domination; `others` are the summaries of the batch size's
    runs that trained in other groups (earlier rounds, other groups of a split batch size)."""

    def __init__(self, cfg: Config, out: Any, group: list[PlannedRun],
                 others: list[tuple[PlannedRun, dict[str, Any]]]) -> None:
        self.cfg, self.out, self.group = cfg, out, group
        self.kept: list[list[dict[str, Any]]] = [[] for _ in group]
        self.series = [self._columns([]) for _ in group]
        self.stopped = np.zeros(len(group), bool)
        self.read: list[tuple[tuple, search.RunReading] | None] = [None] * len(group)
        self.others = [(axes_key(r), search.reading(s, cfg.targets)) for r, s in others]
        self.near = neighbours_needed_within(cfg, out, group[0].batch_size)

    def start(self, first_step: int) -> None:
        """A group resumed from a checkpoint reads its rows up to it, as its writer does."""
        if first_step > 0:
            self.kept = [store.rows_until(self.out, r.run_id, first_step) for r in self.group]
            self.series = [self._columns(rows) for rows in self.kept]

    def rows(self, records: Records, wall_s: float, running: int) -> None:
        for i, rows in enumerate(records):
            self.kept[i].extend(rows)
            self.series[i] = extend(self.series[i], self._columns(rows))

    def _columns(self, rows: list[dict[str, Any]]) -> Columns:
        return columns(rows, self.cfg.targets, self.cfg.reached.reach)

    def reading(self, i: int, running: bool) -> search.RunReading:
        """Run i of the group as the search reads it now: read again only when rows arrived
        or its state changed since the last time (an ended run's rows stop arriving)."""
        key = (len(self.kept[i]), running, bool(self.stopped[i]))
        if self.read[i] is None or self.read[i][0] != key:
            self.read[i] = (key, self._read(i, running))
        return self.read[i][1]

    def _read(self, i: int, running: bool) -> search.RunReading:
        r, cfg = self.group[i], self.cfg
        status = ("running" if running or self.stopped[i] else
                  "diverged" if diverged(self.kept[i], cfg.train.divergence_factor) else "ended")
        reading = from_series(r.spec.learning_rate, r.spec.seed, self.series[i],
                              cfg.targets, cfg.reached.reach, status)
        return reading if running else dataclasses.replace(reading, running=False)

    def decide(self, running: np.ndarray) -> np.ndarray:
        running, stop = np.asarray(running, bool), np.zeros(len(self.group), bool)
        for key in {axes_key(r) for r in self.group}:
            mine = [i for i, r in enumerate(self.group) if axes_key(r) == key]
            readings = [self.reading(i, bool(running[i])) for i in mine]
            others = [reading for k, reading in self.others if k == key]
            verdict = dominated(others + readings, self.cfg.targets,
                                self.cfg.train.dominated_margin, self.near)[len(others):]
            stop[mine] = np.asarray(verdict, bool) & running[mine]
        self.stopped |= stop
        return stop

    def censored(self, i: int) -> dict[str, float]:
        """summary.json's steps_censored of run i, stopped as dominated: per target it had
        not reached, the steps its own would have exceeded."""
        return censored_steps(self.reading(i, True))
