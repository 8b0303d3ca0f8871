"""Console entry point (`scaling`): parse, then run the subcommand's module.

Each subcommand's module is imported when that subcommand runs (RUNNERS), so `scaling plan`
never loads jax and `scaling --help` answers at once.
"""

from __future__ import annotations

import importlib
import sys

from scaling.cli.parser import UsageError, build_parser
from scaling.errors import ConfigError

RUNNERS = {
    "plan": "scaling.cli.plan:run",
    "train": "scaling.cli.train:run_train",
    "sweep": "scaling.cli.train:run_sweep",
    "analyze": "scaling.cli.analyze:run",
    "gns": "scaling.cli.gns:run_command",
    "prepare-text": "scaling.cli.prepare:run",
}


def main(argv: list[str] | None = None) -> int:
    """Run `scaling ARGV`; returns the exit status (2, with one line on stderr, for bad input)."""
    try:
        args = build_parser().parse_args(argv)
        module, name = RUNNERS[args.command].split(":")
        return getattr(importlib.import_module(module), name)(args)
    except (UsageError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
