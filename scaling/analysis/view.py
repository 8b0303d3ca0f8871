"""The one small interface every analysis view meets (their registry: the view lines of
scaling.config.names.VIEW_TABLE, read by scaling.analysis.views and scaling.report.views).

A view is a way of reading a results folder: the steps view (steps to each target, the S(B)
fit, B_crit) and the fixed-budget view (the final metric at the budget, its optima). Its module
holds `VIEW`, a `View`: its `analyse` function, the analysis.json sections it adds and its lines
of the terminal digest; and `REPORT`, a `ViewReport`: its part of report.md and its figures,
in the same module or, for a report that needs the report layer, in the one its registry line
names. A view that builds on another (the fixed-budget view reads the steps view's B_crit) is
read after it, on the sections it wrote. `Folder` is what `scaling.analysis.analyze` reads once
and hands to every view, so a view reads no files of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

from scaling.config.names import VIEW_TABLE
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
    """One view: its name in the registry, its `analyse` (the folder, and the sections the
    views before it wrote -> what it adds), the top-level sections it adds beyond the
    contract's Analysis with their types (scaling.analysis.contract checks them), its lines of
    the terminal digest, and the views it builds on (read first)."""

    name: str
    analyse: Callable[[Folder, dict], Added]
    sections: dict[str, type]
    summary: Callable[[dict], list[str]]
    builds_on: tuple[View, ...] = ()

    @property
    def at_budget(self) -> bool:
        """Whether it reads every run at its budget, as its registry line says (the config
        reads it there, without the analysis)."""
        return VIEW_TABLE[self.name].at_budget

    def chain(self) -> list[View]:
        """The views to read, in order: those it builds on, then itself."""
        return [v for base in self.builds_on for v in base.chain()] + [self]

    def present(self, analysis: dict) -> bool:
        """Whether an analysis.json holds this view's sections (the steps view's are in every
        one: they are the contract's Analysis)."""
        return all(key in analysis for key in self.sections)


Figure = Callable[[dict, list[dict], Path], "Path | None"]


@dataclass(frozen=True)
class ViewReport:
    """A view in report.md: its sections, its sentences among the notes, its figures by file
    name (each draws from analysis.json and the runs into a path, or returns None without
    data) and their captions by file stem (scaling.report.views reads them)."""

    section: Callable[[dict], list[str]]
    conclusion: Callable[[dict], list[str]]
    figures: dict[str, Figure]
    captions: dict[str, str]
