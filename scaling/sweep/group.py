"""Training one group of runs into its run folders: the one lifecycle every driver shares.

A fixed batch size's group (scaling.sweep.fixed), a search round (the same, at new learning
rates), a batch-size schedule's cohorts (scaling.sweep.schedule) and a branch group
(scaling.sweep.branch) all train through `GroupFolders`: it lists the group's sinks in the
order they hear a chunk, closes them all when training raises, and finishes them with the
summaries, which every driver builds with `summaries` (store/records.py's run_summary). What
differs between drivers is only how a row is counted (`Outlet.count`) and where the folders
stand when the group starts (the writer's mode).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from scaling.config import Config
from scaling.config.arithmetic import Arithmetic
from scaling.store.records import run_config, run_summary
from scaling.sweep.claiming import GroupClaims
from scaling.sweep.grid import PlannedRun
from scaling.sweep.progress import GroupProgress
from scaling.sweep.trackers import Tracker, TrackerSink
from scaling.sweep.writer import Count, Writer
from scaling.tasks.base import Task
from scaling.train.loop import GroupEnd, RunResult, Stopper, run_group
from scaling.train.program import GroupProgram
from scaling.train.sinks import Sink, close_all, finish_all
from scaling.train.start import Start


@dataclass
class Outlet:
    """What every group of one folder writes to: the folder, the trackers, the caller's hooks,
    this process's claims there, and the task's tokens per example (None without tokens)."""

    out: Path
    trackers: list[Tracker]
    hooks: list[Sink]
    claims: GroupClaims
    tokens_per_example: int | None

    def count(self, examples: Callable[[int], int],
              step: Callable[[int], int] | None = None) -> Count:
        """Rows counted in their run's own terms: `examples` of the program's step and, where
        the program's steps are not the run's (a schedule's later cohort), `step` to map them."""
        tpe = self.tokens_per_example

        def count(row: dict[str, Any]) -> None:
            own = row["step"]
            if step is not None:
                row["step"] = step(own)
            row["examples"] = examples(own)
            row["tokens"] = None if tpe is None else row["examples"] * tpe
        return count


class GroupFolders:
    """One group's sinks in the order they hear a chunk: the writer first (it counts the rows'
    steps, examples and tokens, which the rest read), the trackers, the progress display, the
    stopper, the caller's hooks, and the renewal of the group's claim last."""

    def __init__(self, outlet: Outlet, run_ids: list[str], configs: list[dict[str, Any]],
                 count: Count | None, bar: GroupProgress, mode: str = "new",
                 stopper: Stopper | None = None) -> None:
        """`count` None: a group that only finishes (a schedule's runs, counted by cohort)."""
        self.writer = Writer(outlet.out, run_ids, configs, count or _uncounted, mode)
        self.stopper = stopper
        self.sinks: list[Sink] = [self.writer, TrackerSink(outlet.trackers, run_ids, configs, mode),
                                  bar, *([stopper] if stopper else []), *outlet.hooks,
                                  *outlet.claims.sinks()]

    @property
    def rows(self) -> list[list[dict[str, Any]]]:
        """Each run's rows as counted and written (with a resumed group's earlier ones)."""
        return self.writer.written

    @property
    def wall_s(self) -> float:
        """The group's wall seconds at its last rows."""
        return self.writer.wall_s

    def train(self, program: GroupProgram, start: Start, data: Any, eval_data: Any,
              **engine: Any) -> GroupEnd:
        """run_group with these sinks (`engine`: its stream, checkpoints, until); every sink
        closed when it raises, so no tracker run or progress bar is left open."""
        try:
            return run_group(program, start, data, eval_data, self.sinks, stopper=self.stopper,
                             **engine)
        except BaseException:
            close_all(self.sinks)
            raise

    def finish(self, summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every sink finished with the runs' summaries (the writer writes summary.json)."""
        finish_all(self.sinks, summaries)
        return summaries


def _uncounted(row: dict[str, Any]) -> None:
    """A group that writes no rows of its own."""


def run_configs(cfg: Config, task: Task, group: list[PlannedRun], arith: Arithmetic,
                precision: str) -> list[dict[str, Any]]:
    """Each sweep run's config.json (a scheduled run's names its schedule): the task's data and
    its model's N, with and without embeddings."""
    data, sizes, out = task.describe(), task.param_counts(), []
    for r in group:
        extra = {}
        if r.schedule:
            extra["batch_schedule"] = asdict(next(s for s in cfg.batch.schedules
                                                  if s.label == r.schedule))
        out.append(run_config(cfg, r.run_id, r.batch_size, r.spec, total_steps=arith.total_steps,
                              warmup_steps=arith.warmup_steps, precision=precision, data=data,
                              accumulation=arith.accumulation, **sizes, **extra))
    return out


@dataclass
class Timing:
    """A group's seconds and throughput, as every summary of it records them."""

    wall_s: float
    compile_s: float
    throughput: dict[str, Any] | None = None


def summaries(cfg: Config, arith: Arithmetic, tokens_per_example: int | None,
              group: list[PlannedRun], results: list[RunResult], rows: list[list[dict[str, Any]]],
              timing: Timing, extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every sweep run's summary.json from its result and rows; `extra` (a scheduled group's):
    per run, its examples and tokens and the keys to add."""
    out = []
    for i, (r, res) in enumerate(zip(group, results)):
        more = dict(extra[i]) if extra else {}
        examples = more.pop("examples") if "examples" in more else arith.examples_at(res.steps)
        tokens = (more.pop("tokens") if "tokens" in more
                  else None if tokens_per_example is None else examples * tokens_per_example)
        if not r.schedule:
            more["extension_steps"] = max(res.steps - arith.total_steps, 0)
        out.append(run_summary(
            r.run_id, res.status, rows[i], batch_size=r.batch_size, spec=r.spec,
            steps=res.steps, examples=examples, tokens=tokens, targets=cfg.targets,
            reach=cfg.reached.reach, clip=cfg.reading_extension <= 1,
            task=cfg.task.name, optimizer=cfg.optimizer.name,
            wall_s=round(timing.wall_s, 3), compile_s=round(timing.compile_s, 3),
            group_size=len(group), throughput=timing.throughput, **more))
    return out
