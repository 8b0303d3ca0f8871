"""Console entry point (`scaling`): parse, then run the subcommand's module.

Each subcommand's module is imported when that subcommand runs (RUNNERS), so `scaling plan`
never loads jax and `scaling --help` answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from tqdm import tqdm

from scaling.cli.parser import UsageError, build_parser
from scaling.errors import ConfigError

RUNNERS = {
    "plan": "scaling.cli.plan:run",
    "train": "scaling.cli.train:run_train",
    "sweep": "scaling.cli.train:run_sweep",
    "analyze": "scaling.cli.analyze:run",
    "gns": "scaling.cli.gns:run_command",
    "prepare-text": "scaling.cli.prepare:run",
    "bench": "scaling.cli.bench:run",
    "compare": "scaling.cli.compare:run",
    "branch": "scaling.cli.branch:run",
    "import": "scaling.cli.imports:run",
    "repair": "scaling.cli.repair:run",
}


class _Handler(logging.Handler):
    """Plain messages on stderr (warnings and errors say so), written above any live progress
    bar rather than through it."""

    scaling_cli = True

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.levelno >= logging.WARNING:
            text = f"{record.levelname.lower()}: {text}"
        tqdm.write(text, file=sys.stderr)


def configure_logging(quiet: bool) -> None:
    """The package's messages on stderr: information unless --quiet, warnings always. Library
    users who call scaling's functions route the `scaling` logger as they like instead."""
    logger = logging.getLogger("scaling")
    if not any(getattr(h, "scaling_cli", False) for h in logger.handlers):
        logger.addHandler(_Handler())
    logger.propagate = False  # a root handler some dependency installs would print them twice
    logger.setLevel(logging.WARNING if quiet else logging.INFO)


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line; `section.key=value` overrides may also follow the options
    (`scaling sweep cfg.yaml --out X train.chunk_steps=25`), which argparse alone refuses."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and (not hasattr(args, "overrides")
                  or any(e.startswith("-") or "=" not in e for e in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    return args


def main(argv: list[str] | None = None) -> int:
    """Run `scaling ARGV`; returns the exit status (2, with one line on stderr, for bad input)."""
    try:
        args = parse(argv)
        configure_logging(getattr(args, "quiet", False))
        module, name = RUNNERS[args.command].split(":")
        return getattr(importlib.import_module(module), name)(args)
    except (UsageError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
