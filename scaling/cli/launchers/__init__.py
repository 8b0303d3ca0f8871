"""Launchers: how `scaling sweep` carries out the sweep it prepared once (scaling.cli.train).

`LAUNCHERS` is the one place launchers are named: `--launcher`'s choices are its keys, and
each names its launcher by import path, so the parser loads none of them (nor jax). `OPTIONS`
holds each launcher's own command-line options, which every other launcher refuses. The
launchers: `local` (train in this process: the whole grid, or with --shard I/N one shard of
it) and `slurm` (one SLURM job array of shards, through scaling.sweep.launch and
scaling.sweep.watch). `work` holds what a launcher is handed: a prepared sweep (a grid, a scale
sweep's cells, a cooldown sweep's cells) and how to analyse it after training.
"""

from __future__ import annotations

import argparse
import importlib
from typing import TYPE_CHECKING, Callable, Protocol

from scaling.errors import ConfigError

if TYPE_CHECKING:  # the kinds of work import jax; the registry must not
    from scaling.cli.launchers.work import Work


class Launcher(Protocol):
    """What a launcher does with a sweep scaling.cli.train prepared for it."""

    splits: bool  # makes the grid's shards itself (a sweep that cannot be split refuses it)
    trains_here: bool  # trains in this process (it joins the job's processes before preparing)

    def check(self, args: argparse.Namespace) -> None:
        """Refuse options it would ignore, before the config is read or anything computed."""

    def launch(self, work: Work, args: argparse.Namespace) -> int:
        """Carry out the prepared sweep (scaling.cli.launchers.work); the exit status."""


# name -> the launcher's class, by import path ("module:Class"), or a factory (tests).
LAUNCHERS: dict[str, str | Callable[[], Launcher]] = {
    "local": "scaling.cli.launchers.local:Local",
    "slurm": "scaling.cli.launchers.slurm:Slurm",
}
DEFAULT = "local"  # --launcher's default

# Each launcher's own options (argparse dest -> flag); any other launcher refuses them.
OPTIONS: dict[str, dict[str, str]] = {
    "slurm": {"jobs": "--jobs", "nodes": "--nodes", "partition": "--partition", "time": "--time",
              "gpus_per_task": "--gpus-per-task", "cpus_per_task": "--cpus-per-task",
              "mem": "--mem", "slurm_folder": "--slurm-folder"},
}


def get(name: str) -> Launcher:
    """The launcher registered as `name`, its module imported only now."""
    entry = LAUNCHERS[name]
    if callable(entry):
        return entry()
    module, attr = entry.split(":")
    return getattr(importlib.import_module(module), attr)()


def refuse_others_options(name: str, args: argparse.Namespace) -> None:
    """A ConfigError naming the first option given that belongs to another launcher than
    `name`: it would be ignored."""
    for other, options in OPTIONS.items():
        given = [flag for dest, flag in options.items()
                 if other != name and getattr(args, dest, None) not in (None, False)]
        if given:
            raise ConfigError(f"{given[0]}: an option of --launcher {other}; add --launcher "
                              f"{other} or leave it out")
