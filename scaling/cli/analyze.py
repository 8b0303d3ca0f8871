"""`scaling analyze`: fits, figures and report.md for a results folder."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from scaling import store
from scaling.analysis import contract, in_use
from scaling.analysis.analyze import analyze, sweep_reading
from scaling.analysis.views import summary_table
from scaling.analysis.branching import analyze_branches, is_branch_folder
from scaling.analysis.cells import analyze_cells
from scaling.cli.parser import UsageError
from scaling.config.targets import Reach
from scaling.report import branch_report, cells_report, markdown, sheet, views
from scaling.store import layout
from scaling.store.archive import has_archive
from scaling.store.cells import is_cells_folder


def run(args: argparse.Namespace) -> int:
    out = Path(args.dir)
    if is_branch_folder(out):
        return analyze_branch_folder(out, args.bootstrap, args.json, args.quiet, args.partial)
    if is_cells_folder(out):
        return analyze_cells_folder(out, args.bootstrap, args.json, args.quiet, args.view,
                                    args.metric, args.partial)
    if not layout.runs_dir(out).is_dir() and not has_archive(out):
        raise UsageError(f"{args.dir}: not a results folder (no runs/ nor runs.tar.xz inside); "
                         "expected the --out folder of scaling sweep or scaling train")
    reach = None
    if args.rule is not None or args.window is not None:
        own = sweep_reading(out)
        reach = Reach(args.rule or own.rule, args.window or own.window)
    return analyze_folder(out, args.targets, args.bootstrap, args.json, args.quiet, reach,
                          args.lr_selection, args.view, args.metric, args.partial,
                          args.interval)


def after_training(out: Path, partial: bool, analyse: Callable[[], int]) -> int:
    """A command's own analysis after it trained: `analyse()`, unless live processes still
    hold groups of `out` (and not `partial`): then one line saying so, and status 0 (this
    process did its share; the analysis waits for theirs)."""
    busy = None if partial else in_use.refusal(out)
    if busy is None:
        return analyse()
    print(f"not analysed: {busy}; it analyses when it finishes, if it is a sweep; else run "
          f"scaling analyze {out} then (--partial analyses what is there now)", file=sys.stderr)
    return 0


def _sweep_drawing(out: Path, result: dict, records: list[dict]
                   ) -> Callable[[], tuple[list[Path], Path]]:
    def draw() -> tuple[list[Path], Path]:
        drawn = views.write_figures(result, records, out / layout.FIGURES_DIR)
        return drawn, markdown.write(out, result, drawn)

    return draw


def analyze_folder(out: Any, targets: list[str] | None = None, bootstrap: int = 1000,
                   as_json: bool = False, quiet: bool = False, reach: Any = None,
                   lr_selection: str | None = None, view: str | None = None,
                   metric: str | None = None, partial: bool = False,
                   interval: str | None = None) -> int:
    """Analyse, draw, report a sweep folder (refused while in use, unless `partial`)."""
    groups = in_use.check(out, partial)
    records = store.load(out)  # read once: the analysis and the figures share it
    result = in_use.mark(analyze(out, targets, bootstrap, reach=reach, lr_selection=lr_selection,
                                 view=view, metric=metric, records=records,
                                 interval=interval), groups)
    return _publish(out, result, _sweep_drawing(out, result, records), summary_table, as_json,
                    quiet)


def analyze_cells_folder(out: Path, bootstrap: int, as_json: bool, quiet: bool,
                         view: str | None, metric: str | None, partial: bool = False) -> int:
    """Each cell analysed, drawn and reported as a sweep folder is; then the laws across them
    in the parent's own analysis.json, figures and report.md."""
    groups = in_use.check(out, partial)
    parent, per_cell, loaded = analyze_cells(out, bootstrap, view=view, metric=metric)
    in_use.mark(parent, groups)
    for cell in parent["fixed_budget"]["cells"]:
        folder = out / cell["folder"]
        in_use.mark(per_cell[cell["name"]], [g for g in groups
                                             if g["group"].startswith(f"{cell['folder']}/")])
        result = per_cell[cell["name"]]
        _write(folder, result, _sweep_drawing(folder, result, loaded[cell["name"]]))

    def draw() -> tuple[list[Path], Path]:
        drawn = cells_report.write_figures(parent, out / layout.FIGURES_DIR)
        return drawn, cells_report.write(out, parent, drawn)

    return _publish(out, parent, draw, cells_report.summary_table, as_json, quiet)


def analyze_branch_folder(out: Path, bootstrap: int, as_json: bool, quiet: bool,
                          partial: bool = False) -> int:
    """Analyse, draw, report a `scaling branch` folder (refused while in use, unless
    `partial`)."""
    groups = in_use.check(out, partial)
    result = in_use.mark(analyze_branches(out, bootstrap), groups)

    def draw() -> tuple[list[Path], Path]:
        drawn = branch_report.write_figures(result, out / layout.FIGURES_DIR)
        return drawn, branch_report.write(out, result, drawn)

    return _publish(out, result, draw, branch_report.summary_table, as_json, quiet)


def _write(out: Path, result: dict, draw: Callable[[], tuple[list[Path], Path]]) -> list[Path]:
    """analysis.json, then the figures and report.md (`draw`), figures.pdf and index.html."""
    written = [contract.write(out, result)]
    drawn, report = draw()
    pdf = sheet.write_pdf(drawn, out / layout.FIGURES_PDF)
    page = sheet.write_html(report, out / layout.INDEX_HTML)
    return written + drawn + [report] + ([pdf] if pdf else []) + [page]


def _publish(out: Path, result: dict, draw: Callable[[], tuple[list[Path], Path]],
             summary: Callable[[dict], str], as_json: bool, quiet: bool) -> int:
    """analysis.json, then the figures and report.md (`draw`), figures.pdf and index.html; the
    summary (or the JSON) on stdout, file locations on stderr under --json so stdout stays
    JSON."""
    written = _write(out, result, draw)
    if as_json:
        print(json.dumps(result, indent=2))
    elif not quiet:
        print(summary(result))
    where = sys.stderr if as_json else sys.stdout
    for path in written:
        print(f"wrote {path}", file=where)
    return 0
