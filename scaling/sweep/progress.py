"""What a sweep prints: a per-batch-size progress table after each group, and the end table.

Pure functions of the planned runs and their summaries (None while a run is not done), so
they are tested on synthetic summaries and reused by `--dry-run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scaling.formatting import duration, text_table
from scaling.sweep.grid import PlannedRun, best_lr


@dataclass
class BatchRow:
    """One batch size's standing for the primary target."""

    batch_size: int
    runs: int
    done: int
    diverged: int
    missed: int  # done, not diverged, primary target not reached
    left: int  # no summary yet
    best_lr: float | None
    steps: float | None  # mean over seeds at the best learning rate
    examples: float | None
    examples_per_s: float | None = None  # training throughput, mean over the finished runs
    mfu: float | None = None  # model-FLOPs utilisation, likewise


def mean_throughput(summaries: list[dict[str, Any]], key: str) -> float | None:
    """The mean of a throughput figure over runs that recorded it (scaling.train.throughput)."""
    values = [s["throughput"][key] for s in summaries
              if (s.get("throughput") or {}).get(key) is not None]
    return sum(values) / len(values) if values else None


def batch_rows(planned: list[PlannedRun], summaries: dict[str, dict[str, Any] | None],
               target: str | None) -> list[BatchRow]:
    rows = []
    for size in sorted({r.batch_size for r in planned}):
        done = [summaries[r.run_id] for r in planned
                if r.batch_size == size and summaries.get(r.run_id) is not None]
        total = sum(r.batch_size == size for r in planned)
        diverged = sum(s["status"] == "diverged" for s in done)
        missed = sum(s["status"] != "diverged" and (target is None or s["steps_to_target"].get(target) is None)
                     for s in done)
        best = best_lr(done, target) if target is not None else None
        lr, steps, examples = None, None, None
        if best is not None:
            lr, steps = best
            at_best = [s["examples_to_target"][target] for s in done if s["learning_rate"] == lr]
            examples = sum(at_best) / len(at_best)
        rows.append(BatchRow(size, total, len(done), diverged, missed, total - len(done), lr,
                             steps, examples, mean_throughput(done, "examples_per_s"),
                             mean_throughput(done, "mfu")))
    return rows


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
    header = ["batch", "best lr", f"steps to {name}", "examples", "diverged", "missed",
              "unfinished", "examples/s", "MFU"]
    body = [[r.batch_size, r.best_lr, r.steps, r.examples, r.diverged, r.missed, r.left,
             r.examples_per_s, None if r.mfu is None else f"{100 * r.mfu:.2g}%"] for r in rows]
    return text_table(header, body) + f"\nresults in {out}"
