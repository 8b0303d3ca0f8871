"""A multi-cell folder (cells.json, one results folder per cell: scaling.store.cells): each
cell analysed as any results folder is, then the laws fitted across the cells
(scaling.analysis.laws). The parent's analysis.json holds the cells' fixed-budget entries
(their grids left out: each cell's own analysis.json has it) and the laws.
"""

from __future__ import annotations

import logging
from pathlib import Path

from scaling import store
from scaling.analysis.analyze import _sweep_yaml, analyze, view_reading
from scaling.analysis.budget_folder import section
from scaling.store.cells import read_cells

log = logging.getLogger("scaling.analysis")
PARENT_KEYS = ("grid",)  # left out of a parent's cell entries


def analyze_cells(out: str | Path, bootstrap: int = 1000, seed: int = 0,
                  view: str | None = None, metric: str | None = None
                  ) -> tuple[dict, dict[str, dict], dict[str, list[dict]]]:
    """(the parent's analysis.json, each cell's analysis.json by cell name, each cell's runs
    as read for it, which its figures draw)."""
    out = Path(out)
    manifest = read_cells(out)
    per_cell, loaded, entries, draws = {}, {}, [], []
    for cell in manifest["cells"]:
        folder = out / cell["folder"]
        cfg = _sweep_yaml(folder)
        cell_view, cell_metric = view_reading(cfg, view, metric)
        loaded[cell["name"]], cell_draws = store.load(folder), {}
        result = analyze(folder, bootstrap=bootstrap, seed=seed, metric=cell_metric,
                         view=cell_view.name if cell_view.at_budget else "fixed_budget",
                         records=loaded[cell["name"]], draws=cell_draws)
        per_cell[cell["name"]] = result
        entry = result["fixed_budget"]["cells"][0]
        entries.append({"name": cell["name"], "folder": cell["folder"],
                        "compute": cell.get("compute"),
                        **{k: v for k, v in entry.items() if k not in ("name", *PARENT_KEYS)}})
        draws.append(cell_draws.get("fixed_budget"))
        log.info("cell %s: %d runs", cell["name"], entry["num_runs"])
    first = per_cell[manifest["cells"][0]["name"]]
    parent = {"version": 2, "kind": "cells",
              "sweep": {"name": _sweep_yaml(out).get("name", out.name),
                        "cells": len(entries), "num_runs": sum(e["num_runs"] for e in entries),
                        "unit": first["sweep"]["unit"]},
              "manifest": {"source": manifest.get("source"),
                           "batch_unit": manifest.get("batch_unit"),
                           "tokens_per_example": manifest.get("tokens_per_example"),
                           "compute_source": manifest["cells"][0].get("compute_source")},
              "fixed_budget": section(entries, draws, manifest.get("batch_unit") or "examples",
                                      bootstrap, seed),
              "cooldowns": (cooldown_cost(loaded) if manifest.get("source") == "cooldowns"
                            else None)}
    return parent, per_cell, loaded


def cooldown_cost(loaded: dict[str, list[dict]]) -> dict[str, float]:
    """What a cooldown sweep trained (each cooldown run from its start, config.json's
    `cooldown`) against what separate runs per budget would have (every run from step 0):
    examples as the runs' summaries count them, extensions and early stops included."""
    trained = separate = 0
    for records in loaded.values():
        for r in records:
            examples = r["summary"].get("examples") or 0
            separate += examples
            trained += examples - (r["config"].get("cooldown") or {}).get("from_examples", 0)
    return {"examples_trained": trained, "examples_separate": separate,
            "ratio": trained / separate if separate else None}
