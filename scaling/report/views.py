"""The report's reading of the view registry (scaling.config.names.VIEW_TABLE): each view's
`REPORT` (scaling.analysis.view.ViewReport: its report.md sections, notes, figures and
captions), from the module its line names, imported when first read. report.md and the
figures of a folder hold those of every view whose sections its analysis.json holds.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from scaling.analysis import contract, views
from scaling.analysis.contract import Analysis
from scaling.analysis.view import ViewReport
from scaling.config.names import VIEW_TABLE


def report(name: str) -> ViewReport:
    """The report of the view registered as `name`."""
    return importlib.import_module(VIEW_TABLE[name].report_module).REPORT


def present(analysis: Analysis) -> list[ViewReport]:
    """The reports of the views whose sections an analysis.json holds, in the registry's
    order (the views a view builds on come first)."""
    return [report(v.name) for v in views.present(analysis)]


def sections(analysis: Analysis) -> list[str]:
    """Every present view's report.md sections, a view's own before those of the views it
    builds on (the fixed-budget reading leads, the steps view's detail follows)."""
    return [line for r in reversed(present(analysis)) for line in r.section(analysis)]


def conclusion(analysis: Analysis) -> list[str]:
    """Every present view's sentences for the notes, in the registry's order."""
    return [s for r in present(analysis) for s in r.conclusion(analysis)]


def caption(stem: str) -> str:
    """A figure's caption by its file stem (the stem itself for a figure with none)."""
    reports = (report(v.name) for v in views.distinct())
    return next((r.captions[stem] for r in reports if stem in r.captions), stem)


def write_figures(analysis: dict, records: list[dict], folder: Path) -> list[Path]:
    """Every present view's figures whose data exist, written under `folder`; returns the
    paths written. The analysis is read through the contract (contract.filled)."""
    analysis, written = contract.filled(analysis), []
    for each in present(analysis):
        for name, draw in each.figures.items():
            path = draw(analysis, records, Path(folder) / name)
            if path is not None:
                written.append(path)
    return written
