"""The report's side of the analysis views, a registry: each view's name
(scaling.analysis.views) -> its report.md sections, its notes, its figures and their captions.
report.md and the figures of a folder hold those of every view whose sections its
analysis.json holds; a new view adds its entry here (tests/test_views.py holds the two
registries to the same views).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from scaling.analysis import contract, views
from scaling.analysis.contract import Analysis
from scaling.report import budget_figures, budget_report, figures, steps_report
from scaling.report.captions import CAPTIONS

Figure = Callable[[Analysis, list[dict], Path], "Path | None"]


@dataclass(frozen=True)
class ViewReport:
    """A view in report.md: its sections, its sentences among the notes, its figures (each
    draws from analysis.json and the runs, or returns None without data) and their
    captions by file stem."""

    section: Callable[[Analysis], list[str]]
    conclusion: Callable[[Analysis], list[str]]
    figures: dict[str, Figure]
    captions: dict[str, str]


REPORTS: dict[str, ViewReport] = {
    "steps": ViewReport(steps_report.section, steps_report.conclusion, figures.FIGURES, CAPTIONS),
    "fixed_budget": ViewReport(budget_report.section, budget_report.conclusion,
                               budget_figures.FIGURES,
                               {"landscape": budget_report.LANDSCAPE_CAPTION}),
}


def present(analysis: Analysis) -> list[ViewReport]:
    """The reports of the views whose sections an analysis.json holds, in the registry's
    order (the views a view builds on come first)."""
    return [REPORTS[v.name] for v in views.present(analysis)]


def sections(analysis: Analysis) -> list[str]:
    """Every present view's report.md sections, a view's own before those of the views it
    builds on (the fixed-budget reading leads, the steps view's detail follows)."""
    return [line for r in reversed(present(analysis)) for line in r.section(analysis)]


def conclusion(analysis: Analysis) -> list[str]:
    """Every present view's sentences for the notes, in the registry's order."""
    return [s for r in present(analysis) for s in r.conclusion(analysis)]


def caption(stem: str) -> str:
    """A figure's caption by its file stem (the stem itself for a figure with none)."""
    return next((r.captions[stem] for r in REPORTS.values() if stem in r.captions), stem)


def write_figures(analysis: dict, records: list[dict], folder: Path) -> list[Path]:
    """Every present view's figures whose data exist, written under `folder`; returns the
    paths written. The analysis is read through the contract (contract.filled)."""
    analysis, written = contract.filled(analysis), []
    for report in present(analysis):
        for name, draw in report.figures.items():
            path = draw(analysis, records, Path(folder) / name)
            if path is not None:
                written.append(path)
    return written
