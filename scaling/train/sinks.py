"""What hears about a group as it trains: one protocol for the run files, the experiment
trackers, the progress display and any caller's own hook (flax's metric writers and hooks, in
one). `run_group` calls `start` once and `rows` once per chunk the host reads; the driver that
built the summaries calls `finish`; `close` ends whatever is still open after an error.

Sinks hear a chunk in list order, so a sink earlier in the list may fill in columns (examples,
tokens, wall seconds) that later ones read.
"""

from __future__ import annotations

from typing import Any, Sequence

Records = list[list[dict[str, Any]]]  # per run of the group (in run order), its new rows


class Sink:
    """Every method does nothing unless a sink overrides it."""

    def start(self, first_step: int) -> None:
        """The group starts at `first_step` (0, or a checkpoint's step when it resumes)."""

    def rows(self, records: Records, wall_s: float, running: int) -> None:
        """A chunk's new rows per run, the group's wall seconds so far, and how many of its
        runs still train after the chunk."""

    def finish(self, summaries: list[dict[str, Any]]) -> None:
        """Every run of the group ended; `summaries` are their summary.json, in run order."""

    def close(self) -> None:
        """The group stopped with an error: end anything still open."""


def start_all(sinks: Sequence[Sink], first_step: int) -> None:
    for sink in sinks:
        sink.start(first_step)


def rows_all(sinks: Sequence[Sink], records: Records, wall_s: float, running: int) -> None:
    for sink in sinks:
        sink.rows(records, wall_s, running)


def finish_all(sinks: Sequence[Sink], summaries: list[dict[str, Any]]) -> None:
    for sink in sinks:
        sink.finish(summaries)


def close_all(sinks: Sequence[Sink]) -> None:
    for sink in sinks:
        sink.close()
