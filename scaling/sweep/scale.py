"""A scale sweep (a config with `scale`, scaling.config.scale): one ordinary sweep per cell in
OUT/cells/<cell>/, OUT/cells.json naming the cells with their N, D and C, OUT/sweep.yaml the
config as given. `scaling analyze OUT` then fits the laws across the cells.

- Before any compute, every cell is checked as a sweep is (its config, devices, batch sizes and
  folder: scaling.sweep.prepare) and measured: N, the parameters the model initialises (their
  shapes only, nothing run); D, the examples (and tokens) every run of the cell trains on, the
  least over its batch sizes; C = D x the FLOPs per example of a run's gradient (XLA's cost
  analysis of the step, GroupProgram.model_flops, at the smallest batch size), or 6 N per
  token for a token task where XLA gives no count. The cell's sweep.yaml records them in its
  `cell` section.
- Each cell trains through runner.run, so it resumes, shards and writes as any sweep does; a
  cell (or piece of one) with nothing left to do is skipped.
- Shards (--shard I/N): each cell's groups are cut into N pieces as runner.run cuts a sweep's
  (grid.partition), and the pieces of all cells are dealt to the hosts by their FLOPs, the
  largest first to the least-loaded host, so that cells of very different cost balance.
  Every host computes the same deal from the configs alone.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from scaling import config as config_mod, store
from scaling.config import Config
from scaling.config.arithmetic import for_config
from scaling.config.scale import Cell, cells as scale_cells
from scaling.formatting import number, text_table
from scaling.store import layout
from scaling.store.cells import TOKENS_PER_PARAM_FLOPS, cell_entry, write_cells
from scaling.sweep import grid, runner
from scaling.sweep.prepare import Prepared, prepare
from scaling.tasks import build_task, task_class
from scaling.train.mesh import is_leader, make_mesh
from scaling.train.program import GroupProgram
from scaling.train.sinks import Sink
from scaling.train.spec import group_spec

log = logging.getLogger(__name__)
XLA = "XLA's cost analysis of a run's gradient step, per example x D"
SIX_ND = "6 N D (6 FLOPs per parameter per token)"
SOURCE = "scale"  # cells.json's source


@dataclass
class ScaleCell:
    """One cell, checked and measured: its config (with its `cell` section), its folder, its
    manifest entry and its sweep as prepared (every group: a shard takes a piece later)."""

    name: str
    cfg: Config
    out: Path
    entry: dict[str, Any]
    prepared: Prepared

    def pieces(self, shards: int) -> list[list[grid.Unit]]:
        """The groups runner.run trains with --shard j/`shards`, for each j."""
        return grid.partition(self.prepared.units, shards)

    def cost(self, units: list[grid.Unit]) -> float:
        """FLOPs of these groups' runs (examples where the FLOPs are unknown)."""
        return (self.entry.get("flops_per_example") or 1.0) * sum(u.cost for u in units)


# ---------------------------------------------------------------- N, D and C


def flops_per_example(cfg: Config, task: Any) -> float | None:
    """XLA's FLOPs of one run's gradient at the smallest batch size, per example; None where
    the backend gives no count."""
    size = min(cfg.batch.sizes)
    spec, _ = group_spec(cfg, size, 1)
    program = GroupProgram(task, spec, make_mesh(1, 1, jax.devices()))
    flops = program.model_flops(task.train_arrays() or {})
    return None if flops is None else flops / size


def compute(params: int, tokens: float | None, examples: float,
            per_example: float | None) -> tuple[float | None, str]:
    """C and how it was counted: XLA's count per example x D, else 6 N per token."""
    if per_example is not None:
        return per_example * examples, XLA
    if tokens:
        return TOKENS_PER_PARAM_FLOPS * params * tokens, SIX_ND
    return None, "unknown: XLA gives no count and the task counts no tokens"


def budget(cfg: Config) -> tuple[int, int | None]:
    """D: (examples, tokens) that every run of the cell trains on, the least over its batch
    sizes (a budget in examples or tokens rounds up to whole steps at each)."""
    arith = [for_config(cfg, size) for size in cfg.batch.sizes]
    tokens = [a.tokens for a in arith]
    return min(a.examples for a in arith), None if None in tokens else min(tokens)


def measure(cell: Cell) -> dict[str, Any]:
    """The cell's manifest entry: N, D, C (and how), the FLOPs per example, its values."""
    task = build_task(cell.cfg)
    sizes = task.param_counts()
    params = sizes["params"]
    examples, tokens = budget(cell.cfg)
    per_example = flops_per_example(cell.cfg, task)
    entry = cell_entry(params, tokens, examples, cell.values,
                       compute(params, tokens, examples, per_example), cell.name)
    return {**entry, "params_non_embedding": sizes["params_non_embedding"],
            "flops_per_example": per_example}


def _record(entry: dict[str, Any]) -> dict[str, Any]:
    """The cell section of the cell's sweep.yaml."""
    keys = ("name", "params", "params_non_embedding", "tokens", "examples", "budget_unit",
            "compute", "compute_source", "flops_per_example", "values")
    return {k: entry[k] for k in keys}


def prepare_cells(cfg: Config, out: str | Path, force: bool = False) -> list[ScaleCell]:
    """Every cell checked (config, then its N, D and C, then its sweep and folder), before any
    training; a ConfigError names the first problem."""
    out = Path(out)
    found = []
    for cell in scale_cells(cfg):
        entry = measure(cell)
        cell_cfg = dataclasses.replace(cell.cfg, cell=_record(entry))
        folder = out / entry["folder"]
        found.append(ScaleCell(cell.name, cell_cfg, folder, entry,
                               prepare(cell_cfg, folder, None, force, None)))
    return found


# ---------------------------------------------------------------- shards and training


def assigned(cells: list[ScaleCell], shard: tuple[int, int] | None
             ) -> list[tuple[ScaleCell, tuple[int, int] | None]]:
    """(cell, the --shard it trains with) for each piece this host trains, in cell order."""
    if shard is None:
        return [(c, None) for c in cells]
    index, count = shard
    pieces = [(i, j, c.cost(units)) for i, c in enumerate(cells)
              for j, units in enumerate(c.pieces(count)) if units]
    load, mine = [0.0] * count, []
    for i, j, cost in sorted(pieces, key=lambda p: (-p[2], p[0], p[1])):
        host = min(range(count), key=lambda h: (load[h], h))
        load[host] += cost
        if host == index:
            mine.append((i, j))
    return [(cells[i], (j, count)) for i, j in sorted(mine)]


def _units(cell: ScaleCell, piece: tuple[int, int] | None) -> list[grid.Unit]:
    return cell.prepared.units if piece is None else cell.pieces(piece[1])[piece[0]]


def shards_with_work(cells: list[ScaleCell], jobs: int) -> list[int]:
    """The shards of `jobs` that hold a group with work left (Prepared.has_work)."""
    return [i for i in range(jobs) if any(c.prepared.has_work(_units(c, piece))
                                          for c, piece in assigned(cells, (i, jobs)))]


def write_parent(cfg: Config, out: str | Path, cells: list[ScaleCell], source: str = SOURCE
                 ) -> None:
    """OUT/sweep.yaml (the config with its scale section) and OUT/cells.json (`source`: what
    made the cells)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store.atomic_write(out / layout.SWEEP_YAML, config_mod.to_yaml(cfg))
    task = task_class(cfg.task.name)
    per = {task.tokens_per_example(c.cfg.task.options) for c in cells}
    write_cells(out, [c.entry for c in cells], "sequences" if per != {None} else "examples",
                per.pop() if len(per) == 1 else None, source)


def run(cfg: Config, out: str | Path, force: bool = False, quiet: bool = False,
        shard: tuple[int, int] | None = None, hooks: list[Sink] | None = None,
        shown: str = "auto", cells: list[ScaleCell] | None = None, wait: bool = False
        ) -> list[dict[str, Any]]:
    """Train this shard's pieces of every cell (all of them without --shard), skipping those
    with nothing left to do (`wait`: for the groups other processes hold, as runner.run);
    returns the summaries of the runs trained."""
    cells = cells or prepare_cells(cfg, out, force)
    if is_leader():
        write_parent(cfg, out, cells)
    summaries = []
    for cell, piece in assigned(cells, shard):
        where = "" if piece is None else f" (piece {piece[0]}/{piece[1]})"
        if not cell.prepared.has_work(_units(cell, piece)):
            log.info("cell %s%s: every run finished", cell.name, where)
            continue
        log.info("cell %s%s: N %s, D %s %s", cell.name, where, number(cell.entry["params"]),
                 number(_budget(cell.entry)), cell.entry["budget_unit"])
        summaries += runner.run(cell.cfg, cell.out, None, force, quiet, piece, hooks, shown,
                                wait)
    return summaries


# ---------------------------------------------------------------- what the terminal shows


def _budget(entry: dict[str, Any]) -> float:
    return entry["tokens"] if entry["budget_unit"] == "tokens" else entry["examples"]


def cells_table(cells: list[ScaleCell]) -> str:
    """The cells and their cost: N, D, C of one run and the FLOPs of the cell's whole grid."""
    rows = [[c.name, c.entry["params"], _budget(c.entry), c.entry["budget_unit"],
             _sci(c.entry["compute"]), len(c.prepared.planned), _sci(c.cost(c.prepared.units))]
            for c in cells]
    total = sum(c.cost(c.prepared.units) for c in cells)
    known = all(c.entry.get("flops_per_example") for c in cells)
    return "\n".join([
        f"{len(cells)} cells; C per run: {cells[0].entry['compute_source']}",
        text_table(["cell", "N", "D", "unit", "C per run", "runs", "grid FLOPs"], rows),
        f"total: {sum(len(c.prepared.planned) for c in cells)} runs, "
        + (f"{_sci(total)} FLOPs" if known else f"{number(total)} examples")])


def _sci(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def describe(cells: list[ScaleCell], shard: tuple[int, int] | None, force: bool) -> str:
    """--dry-run: the cells, then each piece this host trains as runner.describe shows it."""
    lines = [cells_table(cells)]
    for cell, piece in assigned(cells, shard):
        where = "" if piece is None else f", piece {piece[0]}/{piece[1]}"
        lines += ["", f"== cell {cell.name}{where}",
                  runner.describe(prepare(cell.cfg, cell.out, None, force, piece))]
    return "\n".join(lines)


def runs_done(cells: list[ScaleCell]) -> tuple[int, int]:
    """(finished, planned) runs of every cell on disk."""
    planned = [(c, r) for c in cells for r in c.prepared.planned]
    return sum(store.is_done(c.out, r.run_id) for c, r in planned), len(planned)


def final_table(cells: list[ScaleCell]) -> str:
    """Per cell its runs finished, as they stand on disk."""
    rows = []
    for c in cells:
        done = sum(store.is_done(c.out, r.run_id) for r in c.prepared.planned)
        rows.append([c.name, done, len(c.prepared.planned), str(c.out)])
    return text_table(["cell", "finished", "planned", "folder"], rows)
