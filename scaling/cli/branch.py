"""`scaling branch`: the base run, its branches, then the branch analysis and report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scaling.analysis.branching import analyze_branches
from scaling.analysis.analyze import write as write_analysis
from scaling.config import load
from scaling.report import branch_report, sheet
from scaling.sweep import branch
from scaling.train import compile_cache
from scaling.train.mesh import is_leader, maybe_initialize_distributed


def run(args: argparse.Namespace) -> int:
    cfg = load(args.config, args.overrides)
    if args.base_run:
        cfg = branch.from_run(cfg, Path(args.base_run))
    maybe_initialize_distributed()
    compile_cache.enable(args.compile_cache, args.no_compile_cache)
    out = Path(args.out or f"runs/{cfg.name}-branch")
    if args.dry_run:
        print(branch.describe(branch.prepare(cfg, out, args.force)))
        return 0
    prepared = branch.run(cfg, out, args.force, args.quiet, args.progress)
    if args.base_run and is_leader():
        print(branch.check_base(prepared, Path(args.base_run)))
    if args.no_analyze or not is_leader():
        return 0
    return analyze_branch_folder(out, args.bootstrap, False, args.quiet)


def analyze_branch_folder(out: Path, bootstrap: int, as_json: bool, quiet: bool) -> int:
    """analysis.json, the figures, report.md, figures.pdf and index.html of a branch folder."""
    result = analyze_branches(out, bootstrap)
    written = [write_analysis(out, result)]
    drawn = branch_report.write_figures(result, out / "figures")
    report = branch_report.write(out, result, drawn)
    pdf = sheet.write_pdf(drawn, out / "figures.pdf")
    written += drawn + [report] + ([pdf] if pdf else []) + [sheet.write_html(report, out / "index.html")]
    if as_json:
        print(json.dumps(result, indent=2))
    elif not quiet:
        print(branch_report.summary_table(result))
    where = sys.stderr if as_json else sys.stdout
    for path in written:
        print(f"wrote {path}", file=where)
    return 0
