"""What a launcher is handed: one sweep, prepared once by scaling.cli.train, with what it is to
a launcher (describe it, train it here, count its shards with work, its end table) and how to
analyse it after training. Three kinds: `GridWork` (an ordinary sweep's grid), `ScaleWork`
(a scale sweep's cells) and `CooldownWork` (budget.cooldowns: trained in one process only)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

from scaling import store
from scaling.config import Config
from scaling.sweep import cooldown, runner, scale
from scaling.sweep.prepare import Prepared
from scaling.sweep.scale import ScaleCell

Shard = tuple[int, int] | None


@dataclass
class GridWork:
    """An ordinary sweep (or `scaling train`'s batch size): its grid, this shard's groups."""

    cfg: Config
    out: str  # as given (messages quote it so)
    prepared: Prepared
    analyze: Callable[[], int] | None = None  # after training here, unless --no-analyze

    @property
    def groups(self) -> int:
        """Vmapped groups of the whole grid (prepared without --shard): at most one task each."""
        return len(self.prepared.units)

    def describe(self, shard: Shard, force: bool) -> str:
        """--dry-run (prepared with its shard already)."""
        return runner.describe(self.prepared)

    def train(self, args: argparse.Namespace) -> bool:
        """Train here; whether there was anything to do."""
        summaries = runner.run(self.cfg, self.out, self.prepared.batch_sizes, args.force,
                               args.quiet, args.shard, shown=args.progress, wait=args.wait,
                               prepared=self.prepared)
        if summaries:
            return True
        done, planned = self.done()
        return done < planned

    def todo(self, jobs: int) -> list[int]:
        return self.prepared.shards_with_work(jobs)

    def done(self) -> tuple[int, int]:
        """(finished, planned) runs of the whole grid on disk (the search's rounds recorded
        when it was prepared included)."""
        p = self.prepared
        return sum(store.is_done(p.out, r.run_id) for r in p.planned), len(p.planned)

    def table(self) -> str:
        return runner.final_table(self.prepared)


@dataclass
class ScaleWork:
    """A scale sweep: every cell checked and measured, each with its whole grid."""

    cfg: Config
    out: str
    cells: list[ScaleCell]
    analyze: Callable[[], int]

    @property
    def groups(self) -> int:
        return sum(len(c.prepared.units) for c in self.cells)

    def describe(self, shard: Shard, force: bool) -> str:
        return scale.describe(self.cells, shard, force)

    def train(self, args: argparse.Namespace) -> bool:
        """Train this shard's pieces of every cell here; whether there was anything to do."""
        return bool(scale.run(self.cfg, self.out, args.force, args.quiet, args.shard,
                              shown=args.progress, cells=self.cells, wait=args.wait))

    def todo(self, jobs: int) -> list[int]:
        return scale.shards_with_work(self.cells, jobs)

    def done(self) -> tuple[int, int]:
        return scale.runs_done(self.cells)

    def table(self) -> str:
        return scale.final_table(self.cells)


@dataclass
class CooldownWork:
    """A sweep with budget.cooldowns: one cell per budget, the stable cell's runs first, each
    cooldown from their saved states, so it trains in one process (no launcher splits it)."""

    cfg: Config
    out: str
    cells: list[ScaleCell]
    analyze: Callable[[], int]

    def describe(self, shard: Shard, force: bool) -> str:
        return cooldown.describe(self.cells, force)

    def train(self, args: argparse.Namespace) -> bool:
        return bool(cooldown.run(self.cfg, self.out, self.cells, args.force, args.quiet,
                                 shown=args.progress, wait=args.wait))

    def table(self) -> str:
        """The cells' end table and what the cooldowns saved."""
        return "\n".join([scale.final_table(self.cells),
                          cooldown.cost_line(*cooldown.planned_examples(self.cells))])


Work = GridWork | ScaleWork | CooldownWork
SplitWork = GridWork | ScaleWork  # what a launcher that splits the grid takes
