"""`scaling import`: runs from other training code written as a results folder
(scaling.store.imports reads and checks them, scaling.store.import_write writes them)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from scaling.cli.parser import UsageError
from scaling.store.import_runs import read_import
from scaling.store.import_write import import_record, write_import
from scaling.store.imports import ImportOptions, parse_column


def _columns(items: list[str]) -> dict[str, str]:
    columns: dict[str, str] = {}
    for item in items:
        key, name = parse_column(item)
        if key in columns:
            raise UsageError(f"--column: {key} is mapped twice ({columns[key]!r} and {name!r}); "
                             "expected one column per field")
        columns[key] = name
    return columns


def _command(args: argparse.Namespace) -> str:
    """The command line that makes this import again (recorded in sweep.yaml)."""
    words = ["scaling", "import", *args.files, "--out", args.out]
    for flag in ("column", "unit", "tokens_per_example", "metric", "targets", "name",
                 "batch_size", "learning_rate", "seed", "runs_table"):
        value = getattr(args, flag)
        for item in value if isinstance(value, list) else [value]:
            if item is not None:
                words += [f"--{flag.replace('_', '-')}", f"{item:g}" if isinstance(item, float)
                          else str(item)]
    return shlex.join(words)


def run(args: argparse.Namespace) -> int:
    columns = _columns(args.column)
    options = ImportOptions(columns, args.unit, args.tokens_per_example, args.batch_size,
                            args.learning_rate, args.seed,
                            Path(args.runs_table) if args.runs_table else None)
    imported = read_import(args.files, options)
    out = Path(args.out)
    cells = write_import(out, imported, import_record(imported, columns, _command(args)),
                         args.name or out.resolve().name, args.metric, args.targets or [],
                         args.force)
    if not args.quiet:
        where = f"{len(cells)} cells (cells.json)" if len(cells) > 1 else "one results folder"
        print(f"imported {len(imported.runs)} runs ({imported.kind}, batch sizes in "
              f"{imported.unit}) as {where}; next: scaling analyze {out}")
    print(f"wrote {out}")
    return 0
