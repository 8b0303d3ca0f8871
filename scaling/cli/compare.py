"""`scaling compare`: finished sweeps overlaid, one table (scaling.report.compare)."""

from __future__ import annotations

import argparse
from pathlib import Path

from scaling import store
from scaling.store import layout
from scaling.store.archive import has_archive
from scaling.analysis import contract, in_use
from scaling.analysis.analyze import analyze
from scaling.cli.parser import UsageError
from scaling.report import compare


def _sweep(folder: str, label: str, partial: bool) -> compare.Sweep:
    """A sweep's analysis.json as `scaling analyze` wrote it, else analysed now; refused while
    live processes train in it, unless `partial`. A folder that kept only its analysis.json (a
    committed study) compares without the noise-scale figure, which needs the runs' metrics."""
    path = Path(folder)
    saved, runs = path / layout.ANALYSIS, layout.runs_dir(path)
    if not saved.is_file() and not runs.is_dir():
        raise UsageError(f"{folder}: not a results folder (neither runs/ nor analysis.json "
                         "inside); expected the --out folder of scaling sweep")
    groups = in_use.check(path, partial)
    analysis = contract.read(path) if saved.is_file() else analyze(path)
    return compare.Sweep(label, path, in_use.mark(analysis, groups),
                         store.load(path) if runs.is_dir() or has_archive(path) else [])


def run(args: argparse.Namespace) -> int:
    labels = args.labels or [Path(d).name for d in args.dirs]
    if len(labels) != len(args.dirs):
        raise UsageError(f"--labels: got {len(labels)}, expected one per folder ({len(args.dirs)})")
    if len(set(labels)) != len(labels):
        raise UsageError(f"--labels: {', '.join(labels)} repeat a name; give each sweep its own")
    sweeps = [_sweep(d, label, args.partial) for d, label in zip(args.dirs, labels)]
    names = compare.choose_targets(sweeps, args.target)
    for path in compare.write(sweeps, names, Path(args.out)):
        print(f"wrote {path}")
    return 0
