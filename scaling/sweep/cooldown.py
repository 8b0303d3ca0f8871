"""Cooldown branches (budget.cooldowns): the loss at many budgets from one run per setting.

Under a wsd schedule whose warm-up is given in steps, a run of budget D and a run of a
larger budget take the same steps until D's decay starts (their rates are the same function
of the step there), so the larger run's state at that step is the smaller run's too. The
sweep is a scale sweep over the budget, one cell per budget in OUT/cells/<cell>/ and
OUT/cells.json (scaling.sweep.scale), trained in this order:

- the stable cell, the largest budget: an ordinary sweep, each group saving its state at
  every smaller budget's decay start (the last chunk boundary at or before it) and keeping it;
- each smaller budget's cell: every group starts from the stable group of the same runs at
  its decay start (scaling.sweep.fixed: its rows up to there copied, its state restored as
  a checkpoint of its own) and trains its decay. Its run folders are then what separate runs
  of that budget would have written (config.json names where it started: `cooldown`).

Killed, it resumes as any sweep: a finished cell is skipped, a cooldown group starts again
from the stable state or its own newest checkpoint. `scaling analyze OUT` reads every cell
at its budget and fits the laws in D; the parent's analysis.json gives the examples trained
against what separate runs per budget would have trained.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from scaling.config import Config
from scaling.config.arithmetic import Arithmetic
from scaling.sweep import runner, scale
from scaling.sweep.prepare import Stable
from scaling.sweep.scale import ScaleCell
from scaling.train.mesh import is_leader
from scaling.train.sinks import Sink

log = logging.getLogger(__name__)
SOURCE = "cooldowns"  # cells.json's source


def decay_start(arith: Arithmetic, chunk_steps: int) -> int:
    """The step a cooldown starts from: the last chunk boundary at or before its budget's
    decay (0: the decay starts within the first chunk, so the run trains from the start)."""
    return (arith.total_steps - arith.decay_steps) // chunk_steps * chunk_steps


def prepare_cells(cfg: Config, out: str | Path, force: bool = False) -> list[ScaleCell]:
    """Every budget's cell checked and measured (scale.prepare_cells), the stable cell last;
    the stable cell saving its state at each cooldown's start, each cooldown starting there."""
    cells = scale.prepare_cells(cfg, out, force)
    stable = cells[-1].prepared
    points: dict[int, set[int]] = {}
    for cell in cells[:-1]:
        steps = {}
        for size, (_, arith) in cell.prepared.specs.items():
            step = decay_start(arith, stable.specs[size][0].chunk_steps)
            if step > 0:
                steps[size] = step
                points.setdefault(size, set()).add(step)
        cell.prepared.stable = Stable(stable.out, steps)
    stable.checkpoint_at = {size: tuple(sorted(s)) for size, s in points.items()}
    return cells


def run(cfg: Config, out: str | Path, cells: list[ScaleCell], force: bool = False,
        quiet: bool = False, hooks: list[Sink] | None = None, shown: str = "auto",
        wait: bool = False) -> list[dict[str, Any]]:
    """The stable cell, then each cooldown cell; the summaries of the runs trained."""
    if is_leader():
        scale.write_parent(cfg, out, cells, SOURCE)
    summaries = []
    for cell in [cells[-1], *cells[:-1]]:
        log.info("cell %s: %s", cell.name,
                 "the stable runs" if cell is cells[-1] else "cooldowns from the stable runs")
        summaries += runner.run(cell.cfg, cell.out, None, force, quiet, None, hooks, shown,
                                wait, prepared=cell.prepared)
    return summaries


def planned_examples(cells: list[ScaleCell]) -> tuple[int, int]:
    """(examples the cooldown protocol trains, examples separate runs per budget would), if
    every run trains to its budget: the stable cell's runs whole, each cooldown from its start."""
    separate = protocol = 0
    for cell in cells:
        p = cell.prepared
        for r in p.planned:
            arith = p.specs[r.batch_size][1]
            start = p.stable.steps.get(r.batch_size, 0) if p.stable else 0
            separate += arith.examples
            protocol += arith.examples - arith.examples_at(start)
    return protocol, separate


def describe(cells: list[ScaleCell], force: bool) -> str:
    """--dry-run: the cells, each cooldown's start per batch size, and the examples saved."""
    lines = [scale.describe(cells, None, force), ""]
    for cell in cells[:-1]:
        starts = ", ".join(f"batch {b}: step {s}" for b, s in sorted(cell.prepared.stable.steps.items()))
        lines.append(f"cell {cell.name}: cooldowns start from the stable runs at "
                     + (starts or "step 0 (every decay starts within the first chunk)"))
    lines.append(cost_line(*planned_examples(cells)))
    return "\n".join(lines)


def cost_line(protocol: int, separate: int) -> str:
    return (f"cooldowns: {protocol:,} examples to train, against {separate:,} for separate runs "
            f"per budget ({protocol / separate:.2f}x)")
