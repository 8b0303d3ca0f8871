"""From a config to finished run folders: the grid, the groups that share a program, the writing.

The grid is batch sizes x learning rates x seeds. Runs at one batch size share a compiled
program and train as vmapped groups (at most train.max_group_size runs each). Finished runs
(summary.json present) are skipped, so running the same command again resumes a killed sweep.
`shard=(i, n)` trains only this host's share of the groups (scaling.sweep.grid.partition); a
centred learning-rate grid grows at its edges after a batch size finishes (extensions.json).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from scaling import config as config_mod, store
from scaling.config import Config
from scaling.config import optimizer_rules
from scaling.config.arithmetic import for_config, format_table
from scaling.sweep import grid, progress, segments
from scaling.sweep.grid import expand
from scaling.sweep.prepare import Prepared, prepare
from scaling.sweep.session import Session
from scaling.train import memory
from scaling.train.mesh import is_leader
from scaling.train.sinks import Sink

log = logging.getLogger(__name__)


def describe(p: Prepared) -> str:
    """The --dry-run report: the plan arithmetic, this shard's groups and runs; nothing written."""
    arith = [p.specs[size][1] for size in sorted(p.specs)]
    schedules = [segments.describe(p.cfg, s, p.data_shards) for s in p.cfg.batch.schedules
                 if p.batch_sizes is None]
    lines = [format_table(arith), *schedules, *optimizer_rules.describe(p.cfg), "",
             f"groups ({len(p.units)}) and runs in {p.out}:"]
    for unit in p.units:
        runs = p.runs_of(unit)
        done = [store.is_done(p.out, r.run_id) for r in runs]
        lines.append(f"{unit.label} group {unit.index}: {len(runs)} runs, "
                     f"{sum(done)} done, {len(runs) - sum(done)} to train")
        lines += [f"  {'done ' if d else 'to do'}  {r.run_id}{ruled_text(p.cfg, r)}"
                  for r, d in zip(runs, done)]
    lines += [f"extension: batch {e['batch_size']} {e['side']} side, learning rates "
              + ", ".join(f"{lr:.4g}" for lr in e["learning_rates"]) for e in p.extensions]
    device = memory.device_limit(p.cfg.train.memory_limit_gb)
    if device is not None:
        lines.append(f"memory: {device / memory.GB:.3g} GB per device; the sweep compiles each "
                     "batch size's chunk first and cuts its groups further if they do not fit")
    return "\n".join(lines)


def ruled_text(cfg: Config, run: grid.PlannedRun) -> str:
    """The scalars the optimizer's rules gave a run (scaling.config.optimizer_rules), for
    the --dry-run listing; empty without rules."""
    return "".join(f", {k} {getattr(run.spec, k):.6g}" for k in cfg.optimizer.ruled)


def final_table(p: Prepared) -> str:
    """The end table over the whole grid (every shard's runs) as it stands on disk."""
    target = p.cfg.targets[0] if p.cfg.targets else None
    planned = expand(p.cfg, p.batch_sizes, store.read_extensions(p.out) if p.centered else [])
    summaries = {r.run_id: store.read_summary(p.out, r.run_id) for r in planned}
    return progress.format_final(progress.batch_rows(planned, summaries, target), target, str(p.out))


def run(cfg: Config, out: str | Path, batch_sizes: list[int] | None = None, force: bool = False,
        quiet: bool = False, shard: tuple[int, int] | None = None,
        hooks: list[Sink] | None = None, shown: str = "auto") -> list[dict[str, Any]]:
    """Train every unfinished run of this shard of the grid (optionally only some batch sizes).

    `hooks`, sinks of the caller's (scaling.train.sinks), hear each group's rows once per
    chunk, after they are written (examples and tokens filled in). `shown`: how each group's
    progress shows (scaling.sweep.progress.MODES; `quiet` shows none and no tables).
    """
    p = prepare(cfg, out, batch_sizes, force, shard)
    if is_leader():
        p.out.mkdir(parents=True, exist_ok=True)
        store.atomic_write(p.out / "sweep.yaml", config_mod.to_yaml(cfg))
        store.write_json(p.out / store.ARITHMETIC, [for_config(cfg, b, p.data_shards).to_dict()
                                                    for b in cfg.batch.sizes])
    session = Session(p, quiet, hooks, shown)
    summaries = []
    todo = lambda unit: [r for r in p.runs_of(unit) if r.run_id not in session.finished]
    try:
        for i, unit in enumerate(p.units):
            runs = todo(unit)
            if i + 1 < len(p.units):
                session.compile_ahead(todo(p.units[i + 1]), runs)
            summaries += session.train(runs)
            if p.centered:
                summaries += _extend(session, unit.batch_size)
    finally:
        session.close()
    return summaries


def _extend(session: Session, size: int) -> list[dict[str, Any]]:
    """Grow a centred grid at the edge holding the optimum, train the new points, repeat."""
    p, summaries = session.p, []
    while p.cfg.targets:
        runs = p.batch_runs(size)
        todo = [r for r in runs if r.run_id not in session.finished]
        if todo:
            summaries += session.train(todo)
            continue
        side = grid.extension_due(p.cfg, size, [session.finished[r.run_id] for r in runs],
                                  p.extensions)
        if side is None:
            break
        record = grid.extension(p.cfg, size, side, p.extensions)
        p.extensions.append(record)
        if is_leader():
            store.add_extension(p.out, record)
            session.say(f"batch {size}: best learning rate at the {side} edge of the grid; "
                        "extending with " + ", ".join(f"{lr:.4g}" for lr in record["learning_rates"]))
    return summaries


