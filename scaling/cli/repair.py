"""`scaling repair`: one clean pass of rows per run after two processes wrote a folder."""

from __future__ import annotations

import argparse
import sys

from scaling.store.repair import repair_folder


def run(args: argparse.Namespace) -> int:
    """One line per run that needed (or refused) a repair; 1 if any was refused."""
    results = repair_folder(args.dir, write=not args.dry_run)
    verb = "would repair" if args.dry_run else "repaired"
    for r in results:
        if r.refused is not None:
            print(r.describe(), file=sys.stderr)
        elif r.changed:
            print(r.describe() if not args.dry_run else f"{verb}: {r.describe()}")
    changed = sum(r.changed for r in results)
    refused = sum(r.refused is not None for r in results)
    print(f"{args.dir}: {len(results)} runs, {changed} {verb}, {refused} refused, "
          f"{len(results) - changed - refused} clean")
    return 1 if refused else 0
