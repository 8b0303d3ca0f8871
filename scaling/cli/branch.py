"""`scaling branch`: the base run, its branches, then the branch analysis and report."""

from __future__ import annotations

import argparse
from pathlib import Path

from scaling.cli.analyze import after_training, analyze_branch_folder
from scaling.config import load
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
    prepared = branch.run(cfg, out, args.force, args.quiet, args.progress, args.wait)
    if args.base_run and is_leader():
        print(branch.check_base(prepared, Path(args.base_run)))
    if args.no_analyze or not is_leader():
        return 0
    return after_training(out, args.partial, lambda: analyze_branch_folder(
        out, args.bootstrap, False, args.quiet, args.partial))

