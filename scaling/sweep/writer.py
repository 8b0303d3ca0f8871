"""One group's run folders as a sink (scaling.train.sinks): config.json when a run starts,
its rows once per chunk, counted in examples and tokens, and summary.json at the end.

The same writer serves a sweep's groups, a batch-size schedule's cohorts and `scaling branch`;
what differs is how a row's step is counted (`count`) and where the folders stand when the
group starts (`mode`): new folders, a group resumed from its checkpoint (rows after it are
dropped), or runs that go on in folders already started (a schedule's next cohort).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from scaling import store
from scaling.config.arithmetic import Arithmetic
from scaling.train.mesh import is_leader
from scaling.train.sinks import Records, Sink

Count = Callable[[dict[str, Any]], None]  # fills a row's step, examples and tokens in place
MODES = ("new", "resume", "append")


def arithmetic_count(arith: Arithmetic, tokens_per_example: int | None) -> Count:
    """A fixed batch size's rows: examples from the run arithmetic (partial batches exact)."""
    def count(row: dict[str, Any]) -> None:
        row["examples"] = arith.examples_at(row["step"])
        row["tokens"] = None if tokens_per_example is None else row["examples"] * tokens_per_example
    return count


class Writer(Sink):
    """Streams one group's rows into its run folders; `written` keeps each run's rows."""

    def __init__(self, out: Path, run_ids: list[str], configs: list[dict[str, Any]],
                 count: Count, mode: str = "new") -> None:
        self.out, self.run_ids, self.configs, self.count, self.mode = out, run_ids, configs, count, mode
        self.written: list[list[dict[str, Any]]] = [[] for _ in run_ids]
        self.wall_s = 0.0  # the group's wall seconds at its last rows

    def start(self, first_step: int) -> None:
        if self.mode == "resume":
            self.written = [store.rows_until(self.out, r, first_step) for r in self.run_ids]
        if not is_leader() or self.mode == "append":
            return
        for run_id, config, rows in zip(self.run_ids, self.configs, self.written):
            if self.mode == "new":
                store.start_run(self.out, run_id, config)
            else:
                store.resume_run(self.out, run_id, config, rows)

    def rows(self, records: Records, wall_s: float, running: int) -> None:
        self.wall_s = wall_s
        for i, rows in enumerate(records):
            for row in rows:
                self.count(row)
                row["wall_s"] = round(wall_s, 3)
            if rows:
                self.written[i].extend(rows)
                if is_leader():
                    store.append_metrics(self.out, self.run_ids[i], rows)

    def finish(self, summaries: list[dict[str, Any]]) -> None:
        if is_leader():
            for run_id, summary in zip(self.run_ids, summaries):
                store.finish_run(self.out, run_id, summary)
