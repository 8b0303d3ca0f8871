"""One group's run folders: config.json at the start, metrics rows once per chunk, summary.json
(steps and examples to each target, read under the config's `reached` rule) at the end; the
same to the experiment trackers the config turns on."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from scaling import config as config_mod, store
from scaling.config import Config, targets
from scaling.sweep.grid import PlannedRun
from scaling.sweep.plan import Arithmetic
from scaling.sweep.trackers import Tracker
from scaling.tasks.base import Task
from scaling.train import precision
from scaling.train.loop import RunResult
from scaling.train.mesh import is_leader

OnRecords = Callable[[list[list[dict]], float], None]  # per run, its new rows; wall seconds


class Writer:
    """Streams one group's metrics into its run folders and writes the summaries at the end."""

    def __init__(self, cfg: Config, out: Path, runs: list[PlannedRun], arith: Arithmetic,
                 task: Task, on_progress: Callable[[int], None],
                 on_records: OnRecords | None = None, resume_step: int | None = None,
                 trackers: list[Tracker] | None = None) -> None:
        """`resume_step`: the group continues from a checkpoint at that step, so each run keeps
        its rows up to it; else every run folder starts afresh. `trackers` hear the same (on
        the leader only)."""
        self.cfg, self.out, self.runs, self.arith, self.task = cfg, out, runs, arith, task
        self.on_progress, self.on_records = on_progress, on_records
        self.trackers = (trackers or []) if is_leader() else []
        self.rows: list[list[dict[str, Any]]] = [[] for _ in runs]
        if resume_step is not None:
            self.rows = [store.rows_until(out, r.run_id, resume_step) for r in runs]
        self.wall_s = 0.0
        self.tokens_per_example = task.tokens_per_example(cfg.task.options)
        if is_leader():
            for r, rows in zip(runs, self.rows):
                if resume_step is None:
                    store.start_run(out, r.run_id, self.run_config(r))
                else:
                    store.resume_run(out, r.run_id, self.run_config(r), rows)
        for tracker in self.trackers:
            for r in runs:
                tracker.start(r.run_id, self.run_config(r), resume_step)

    def run_config(self, r: PlannedRun) -> dict[str, Any]:
        c = config_mod.to_dict(self.cfg)
        return {"run_id": r.run_id, "task": c["task"], "model": c["model"],
                "optimizer": {"name": self.cfg.optimizer.name, **asdict(r.spec)},
                "schedule": c["schedule"], "batch_size": r.batch_size,
                "accumulation": self.cfg.batch.accumulation, "drop_last": self.cfg.batch.drop_last,
                "budget": c["budget"], "total_steps": self.arith.total_steps,
                "warmup_steps": self.arith.warmup_steps, "targets": self.cfg.targets,
                "learning_rate": r.spec.learning_rate, "seed": r.spec.seed,
                "reached": c["reached"], "eval": c["eval"], "gns": c["gns"],
                "precision": precision.here(self.cfg.train.precision),
                "data": self.task.describe(),
                **({"batch_schedule": asdict(self.schedule(r.schedule))} if r.schedule else {})}

    def schedule(self, name: str) -> Any:
        """The batch.schedules entry called `name`."""
        return next(s for s in self.cfg.batch.schedules if s.label == name)

    def counts(self, steps: int) -> tuple[int, int | None]:
        examples = self.arith.examples_at(steps)
        return examples, None if self.tokens_per_example is None else examples * self.tokens_per_example

    def __call__(self, records: list[list[dict]], wall_s: float) -> None:
        self.wall_s = wall_s
        furthest = 0
        for i, rows in enumerate(records):
            for row in rows:
                if "examples" not in row:  # a scheduled run's rows come counted
                    row["examples"], row["tokens"] = self.counts(row["step"])
                row["wall_s"] = round(wall_s, 3)
                furthest = max(furthest, row["step"])
            if rows:
                self.rows[i].extend(rows)
                if is_leader():
                    store.append_metrics(self.out, self.runs[i].run_id, rows)
                for tracker in self.trackers:
                    tracker.log(self.runs[i].run_id, rows)
        self.on_progress(furthest)
        if self.on_records is not None:
            self.on_records(records, wall_s)

    def finish(self, results: list[RunResult], compile_s: float,
               speed: dict[str, Any] | None = None,
               extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Every run's summary.json; `speed` is the group's throughput (the same for its runs).
        `extra` (a scheduled group's): per run, its examples and tokens and the keys to add."""
        summaries = []
        reach = self.cfg.reached.reach
        for i, (r, res, rows) in enumerate(zip(self.runs, results, self.rows)):
            more = dict(extra[i]) if extra else {}
            examples, tokens = (more.pop("examples"), more.pop("tokens")) if extra \
                else self.counts(res.steps)
            last = rows[-1] if rows else {}
            to_steps = {t: None if res.status == "diverged" else targets.crossing(rows, t, reach)
                        for t in self.cfg.targets}
            summary = {
                "run_id": r.run_id, "status": res.status, "task": self.cfg.task.name,
                "batch_size": r.batch_size, "learning_rate": r.spec.learning_rate,
                "seed": r.spec.seed, "optimizer": self.cfg.optimizer.name, "steps": res.steps,
                "examples": examples, "tokens": tokens, "steps_to_target": to_steps,
                "examples_to_target": {t: None if s is None else
                                       store.examples_at(rows, s, r.batch_size)
                                       for t, s in to_steps.items()},
                "final": last, "b_simple": last.get("b_simple"), "wall_s": round(self.wall_s, 3),
                "compile_s": round(compile_s, 3), "group_size": len(self.runs),
                "throughput": speed, "noise_scale_undefined": store.undefined_noise_points(rows),
                **more}
            summaries.append(summary)
            if is_leader():
                store.finish_run(self.out, r.run_id, summary)
            for tracker in self.trackers:
                tracker.finish(r.run_id, summary)
        return summaries

    def close(self) -> None:
        """End the trackers' runs still open (the group stopped early with an error)."""
        for tracker in self.trackers:
            tracker.close()
