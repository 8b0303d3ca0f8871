"""`--launcher local` (the default): train in this process, the whole grid or with --shard I/N
one shard of it (its other shards trained by other processes, by hand or by another launcher),
then analyse, unless --no-analyze, --dry-run or --shard."""

from __future__ import annotations

import argparse

from scaling.cli.launchers import refuse_others_options
from scaling.cli.launchers.work import Work
from scaling.train.mesh import is_leader


class Local:
    """Trains here; --shard I/N makes this process one shard of the grid."""

    splits = False
    trains_here = True

    def check(self, args: argparse.Namespace) -> None:
        refuse_others_options("local", args)

    def launch(self, work: Work, args: argparse.Namespace) -> int:
        train_here(work, args)
        return finish(work, args)


def train_here(work: Work, args: argparse.Namespace) -> int:
    """Train (or, with --dry-run, only describe), then print the end table."""
    if args.dry_run:
        print(work.describe(args.shard, args.force))
        return 0
    if not work.train(args) and is_leader():
        print(f"nothing to do: every run is already finished in {work.out}")
    if is_leader():
        print(work.table())
    return 0


def finish(work: Work, args: argparse.Namespace) -> int:
    """After training here: the analysis, unless --no-analyze, --dry-run or --shard (a shard
    says it is done, and how to analyse once every shard is)."""
    if args.no_analyze or args.dry_run or args.shard is not None or not is_leader():
        if args.shard is not None and not args.dry_run:
            hint = "" if args.no_analyze else \
                f"; once every shard is, run: scaling analyze {work.out}"
            print(f"shard done{hint}")
        return 0
    print()
    return work.analyze()
