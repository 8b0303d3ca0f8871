"""`scaling train` and `scaling sweep`: read the config, prepare the sweep once, and hand it to
the launcher --launcher names (scaling.cli.launchers): trained here, or submitted as a SLURM
job array."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

from scaling.cli import launchers
from scaling.cli.analyze import after_training, analyze_cells_folder, analyze_folder
from scaling.cli.launchers.local import train_here
from scaling.cli.launchers.work import CooldownWork, GridWork, ScaleWork, Work
from scaling.cli.parser import UsageError
from scaling.config import Config, load
from scaling.sweep import cooldown, prepare as prepare_mod, scale
from scaling.train import compile_cache
from scaling.train.mesh import maybe_initialize_distributed


def run_train(args: argparse.Namespace) -> int:
    cfg = load(args.config, args.overrides)
    if cfg.scale or cfg.budget.cooldowns:
        raise UsageError(f"{'scale' if cfg.scale else 'budget.cooldowns'}: scaling train trains "
                         "one batch size of one sweep; a config with scale axes or cooldowns "
                         "trains with scaling sweep")
    if args.batch_size is None and len(cfg.batch.sizes) > 1:
        raise UsageError(f"--batch-size: missing; the config lists batch sizes {cfg.batch.sizes}, "
                         "train runs one of them (scaling sweep runs them all)")
    _start(args)
    out = _out(cfg, args)
    batch_sizes = [args.batch_size or cfg.batch.sizes[0]]
    return train_here(GridWork(cfg, out, prepare_mod.prepare(cfg, out, batch_sizes, args.force,
                                                             args.shard)), args)


def run_sweep(args: argparse.Namespace) -> int:
    """Train the grid (or submit it: --launcher slurm), then analyse unless --no-analyze/--shard."""
    launcher = launchers.get(args.launcher)
    launcher.check(args)
    cfg = load(args.config, args.overrides)
    return launcher.launch(prepare(cfg, args, launcher), args)


def prepare(cfg: Config, args: argparse.Namespace, launcher: launchers.Launcher) -> Work:
    """The sweep of `cfg`, every check before compute done, once: a scale sweep's cells
    (scaling.sweep.scale), a cooldown sweep's (scaling.sweep.cooldown) or a grid."""
    out = _out(cfg, args)
    if cfg.scale:
        _start(args)  # its cells are measured by compiling
        return ScaleWork(cfg, out, scale.prepare_cells(cfg, out, args.force),
                         _analysis(out, args, _cells_analysis(out, args)))
    if cfg.budget.cooldowns:
        _refuse_split(args, launcher)
        _start(args)
        return CooldownWork(cfg, out, cooldown.prepare_cells(cfg, out, args.force),
                            _analysis(out, args, _cells_analysis(out, args)))
    if launcher.trains_here:
        _start(args)
    return GridWork(cfg, out, prepare_mod.prepare(cfg, out, None, args.force, args.shard),
                    _analysis(out, args, lambda: analyze_folder(
                        Path(out), quiet=args.quiet, partial=args.partial)))


def _refuse_split(args: argparse.Namespace, launcher: launchers.Launcher) -> None:
    """A sweep with budget.cooldowns trains in one process: no launcher splits it, no --shard."""
    for given, flag in ((launcher.splits, f"--launcher {args.launcher}"),
                        (args.shard is not None, "--shard")):
        if given:
            raise UsageError(f"{flag}: a sweep with budget.cooldowns trains in one process (its "
                             "cooldowns wait for the stable runs' saved states)")


def _start(args: argparse.Namespace) -> None:
    """Join a multi-host job's processes and turn on the compilation cache, before anything
    compiles or trains here."""
    maybe_initialize_distributed()
    compile_cache.enable(args.compile_cache, args.no_compile_cache)


def _analysis(out: str, args: argparse.Namespace, analyse: Callable[[], int]
              ) -> Callable[[], int]:
    """The analysis after training: `analyse()`, unless other processes still train in `out`."""
    return lambda: after_training(Path(out), args.partial, analyse)


def _cells_analysis(out: str, args: argparse.Namespace) -> Callable[[], int]:
    """A multi-cell folder's analysis, as `scaling analyze` runs it by default."""
    return lambda: analyze_cells_folder(Path(out), bootstrap=1000, as_json=False,
                                        quiet=args.quiet, view=None, metric=None,
                                        partial=args.partial)


def _out(cfg: Config, args: argparse.Namespace) -> str:
    return args.out or f"runs/{cfg.name}"
