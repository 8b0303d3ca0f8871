"""The one small interface every analysis view meets (their registry: scaling.analysis.views).

A view is a way of reading a results folder: the steps view (steps to each target, the S(B)
fit, B_crit) and the fixed-budget view (the final metric at the budget, its optima). Each is
a module with an `analyse` function; the registry names it, with the analysis.json sections
it adds, its lines of the terminal digest, and whether it reads every run at its budget. A
view that builds on another (the fixed-budget view reads the steps view's B_crit) is read
after it, on the sections it wrote. `Folder` is what `scaling.analysis.analyze` reads once
and hands to every view, so a view reads no files of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

from scaling.config.targets import Reach


@dataclass(frozen=True)
class Folder:
    """A results folder as every view reads it, read once (scaling.analysis.analyze)."""

    out: Path
    cfg: dict  # its sweep.yaml
    records: list[dict]  # its finished runs at fixed batch sizes
    scheduled: list[dict]  # its batch-size schedules' runs
    arithmetic: list[dict]  # the run arithmetic the sweep recorded
    targets: list[str]
    reach: Reach
    how: str  # the learning-rate selection
    method: str  # how intervals resample the seeds
    table: list[dict]  # every run at every target (scaling.analysis.table.run_table)
    metric: str  # the fixed-budget view's metric
    bootstrap: int
    seed: int


class Added(NamedTuple):
    """What a view adds: analysis.json's sections, and any bootstrap draws a parent folder
    reads rather than measure the folder a second time (scaling.analysis.cells)."""

    sections: dict[str, Any]
    draws: Any = None


@dataclass(frozen=True, eq=False)  # compared by identity: one View may go by two names
class View:
    """One view: its `analyse` (the folder, and the sections the views before it wrote ->
    what it adds), the top-level sections it adds beyond the contract's Analysis with their
    types (scaling.analysis.contract checks them), its lines of the terminal digest, whether
    it reads every run at its budget (then runs do not stop at their targets, and targets are
    optional), and the views it builds on (read first)."""

    name: str
    analyse: Callable[[Folder, dict], Added]
    sections: dict[str, type]
    summary: Callable[[dict], list[str]]
    at_budget: bool
    builds_on: tuple[View, ...] = ()

    def chain(self) -> list[View]:
        """The views to read, in order: those it builds on, then itself."""
        return [v for base in self.builds_on for v in base.chain()] + [self]

    def present(self, analysis: dict) -> bool:
        """Whether an analysis.json holds this view's sections (the steps view's are in every
        one: they are the contract's Analysis)."""
        return all(key in analysis for key in self.sections)
