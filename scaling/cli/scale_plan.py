"""`scaling plan` of a config with scale axes: the cells and their cost (N, D, C and the FLOPs
of each cell's grid, scaling.sweep.scale), then each cell's run arithmetic; nothing trained or
written."""

from __future__ import annotations

import argparse
import json
from typing import Any

from scaling.config import Config
from scaling.config.arithmetic import for_config, format_table, sweep_warnings
from scaling.sweep import scale


def run(cfg: Config, args: argparse.Namespace) -> int:
    cells = scale.prepare_cells(cfg, f"runs/{cfg.name}", force=True)  # no folder to check
    shards = cfg.parallel.data or 1
    arith = {c.name: [for_config(c.cfg, size, shards) for size in c.cfg.batch.sizes]
             for c in cells}
    if args.json:
        print(json.dumps([_json(c, arith[c.name]) for c in cells], indent=2))
        return 0
    lines = [scale.cells_table(cells)]
    for c in cells:
        lines += ["", f"== cell {c.name}", format_table(arith[c.name])]
        lines += [f"warning: {w}" for w in sweep_warnings(c.cfg)]
    print("\n".join(lines))
    return 0


def _json(cell: scale.ScaleCell, arith: list[Any]) -> dict[str, Any]:
    return {**cell.entry, "runs": len(cell.prepared.planned),
            "grid_flops": cell.cost(cell.prepared.units),
            "arithmetic": [a.to_dict() for a in arith]}
