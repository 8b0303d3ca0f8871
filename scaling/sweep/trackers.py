"""Experiment trackers: one W&B run and one TensorBoard run per training run.

They are fed on the host from the metric rows each chunk already hands to the run folders, so
they add no device read and no host sync inside a chunk. Training is deterministic, so a run
started again (from a checkpoint or from scratch) logs the same values at the same steps: W&B
keeps the first copy of a step (its run id is fixed per sweep folder and run), TensorBoard
drops the earlier attempt's events past the point the run resumes from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Protocol

from scaling import store
from scaling.config import Config
from scaling.config.schema import WandbConfig
from scaling.store import layout
from scaling.train.sinks import Records, Sink

log = logging.getLogger(__name__)


class Tracker(Protocol):
    """What the writer tells a tracker about each run of a group."""

    def start(self, run_id: str, config: dict[str, Any], resume_step: int | None) -> None:
        """A run starts (afresh, or from a checkpoint at `resume_step`)."""

    def log(self, run_id: str, rows: list[dict[str, Any]]) -> None:
        """A chunk's new metric rows of a run (host values)."""

    def finish(self, run_id: str, summary: dict[str, Any]) -> None:
        """A run ended; `summary` is its summary.json."""

    def close(self) -> None:
        """End every run still open (its group stopped with an error)."""


def open_trackers(cfg: Config, out: Path) -> list[Tracker]:
    """The trackers `cfg.log` turns on (none by default)."""
    trackers: list[Tracker] = []
    if cfg.log.tensorboard:
        trackers.append(TensorBoard(out / layout.TENSORBOARD))
    if cfg.log.wandb.project is not None:
        trackers.append(WandB(cfg.log.wandb, cfg.name, out))
    return trackers


class TrackerSink(Sink):
    """A group's runs to the trackers: started with the group (afresh, or at a checkpoint's
    step when it resumes; not again for a schedule's next cohort, `mode` append), fed each
    chunk's counted rows, finished with their summaries."""

    def __init__(self, trackers: list[Tracker], run_ids: list[str],
                 configs: list[dict[str, Any]], mode: str = "new") -> None:
        self.trackers, self.run_ids, self.configs, self.mode = trackers, run_ids, configs, mode

    def start(self, first_step: int) -> None:
        if self.mode == "append":
            return
        resume_step = first_step if self.mode == "resume" else None
        for tracker in self.trackers:
            for run_id, config in zip(self.run_ids, self.configs):
                tracker.start(run_id, config, resume_step)

    def rows(self, records: Records, wall_s: float, running: int) -> None:
        for tracker in self.trackers:
            for run_id, rows in zip(self.run_ids, records):
                if rows:
                    tracker.log(run_id, rows)

    def finish(self, summaries: list[dict[str, Any]]) -> None:
        for tracker in self.trackers:
            for run_id, summary in zip(self.run_ids, summaries):
                tracker.finish(run_id, summary)

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()


def scalars(row: dict[str, Any]) -> dict[str, float]:
    """A row's finite numbers other than the step: what metrics.jsonl holds as numbers (it
    writes NaN, such as a noise scale not measured yet, as null)."""
    return {k: float(v) for k, v in row.items()
            if k != "step" and store.finite(v) and not isinstance(v, bool)}


class TensorBoard:
    """Event files under `root`/<run_id>/, readable by TensorBoard (written by tensorboardX)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.writers: dict[str, Any] = {}

    def start(self, run_id: str, config: dict[str, Any], resume_step: int | None) -> None:
        from tensorboardX import SummaryWriter

        folder = self.root / run_id
        if resume_step is None:
            shutil.rmtree(folder, ignore_errors=True)  # an earlier attempt's events
        writer = SummaryWriter(str(folder), purge_step=None if resume_step is None
                               else resume_step + 1,
                               filename_suffix=f".{time.time_ns()}")  # unique within a second
        if resume_step is None:
            writer.add_text("config", _code_block(config), 0)
        self.writers[run_id] = writer

    def log(self, run_id: str, rows: list[dict[str, Any]]) -> None:
        writer = self.writers[run_id]
        for row in rows:
            for key, value in scalars(row).items():
                writer.add_scalar(key, value, row["step"])
        writer.flush()

    def finish(self, run_id: str, summary: dict[str, Any]) -> None:
        writer = self.writers.pop(run_id)
        writer.add_text("summary", _code_block(summary), summary["steps"])
        writer.close()

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        self.writers.clear()


class WandB:
    """One Weights & Biases run per training run, grouped by sweep, config and summary attached;
    offline mode writes under <out>/wandb/ for `wandb sync`."""

    def __init__(self, settings: WandbConfig, sweep_name: str, out: Path) -> None:
        self.settings, self.group, self.out = settings, settings.group or sweep_name, out
        self.runs: dict[str, Any] = {}

    def start(self, run_id: str, config: dict[str, Any], resume_step: int | None) -> None:
        import wandb

        s = self.settings
        run = wandb.init(
            project=s.project, entity=s.entity, group=self.group, name=run_id,
            id=wandb_id(self.out, run_id), config=config, tags=s.tags or None, mode=s.mode,
            dir=str(self.out), resume="allow", reinit="create_new",
            settings=wandb.Settings(console="off", silent=True, x_disable_stats=True,
                                    save_code=False))
        if not self.runs and s.mode == "online":
            log.info("W&B: group %s of project %s (%s)", self.group, s.project, run.url)
        self.runs[run_id] = run

    def log(self, run_id: str, rows: list[dict[str, Any]]) -> None:
        run = self.runs[run_id]
        for row in rows:
            run.log(scalars(row), step=row["step"])

    def finish(self, run_id: str, summary: dict[str, Any]) -> None:
        run = self.runs.pop(run_id)
        run.summary.update(summary)
        run.finish()

    def close(self) -> None:
        for run in self.runs.values():
            run.finish(exit_code=1)
        self.runs.clear()


def wandb_id(out: Path, run_id: str) -> str:
    """A run's W&B id: fixed per sweep folder and run, so a restarted run continues its W&B run."""
    return hashlib.sha256(f"{out.resolve()}|{run_id}".encode()).hexdigest()[:20]


def _code_block(data: dict[str, Any]) -> str:
    """A dict as TensorBoard's text plugin shows it: indented JSON in a Markdown code block."""
    return "    " + json.dumps(data, indent=2, default=str).replace("\n", "\n    ")
