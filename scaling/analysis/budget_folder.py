"""The fixed-budget view: the `fixed_budget` section of one results folder's analysis.json.
The folder is one cell (a model size N and a budget D), measured by
scaling.analysis.budget_cell; its laws are empty (one cell fits none: a parent folder of
several cells fits them, scaling.analysis.cells). It builds on the steps view (each target's
B_crit beside the cell's optimum). Its `VIEW` is registered in scaling.config.names.VIEW_TABLE,
its report in scaling.report.budget_report.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scaling.analysis.budget_cell import analyze_cell
from scaling.analysis.laws import fit_laws
from scaling.analysis.sections import FixedBudget
from scaling.analysis.steps_view import VIEW as STEPS
from scaling.analysis.view import Added, Folder, View
from scaling.formatting import interval, number, text_table
from scaling.store import finite

CELL_STREAM = 7919  # the bootstrap's random stream for a cell, beside the targets' [seed, i]
LAW_STREAM = 7920


def batch_unit(cfg: dict, records: list[dict]) -> str:
    """What a batch size counts: the import's unit, else sequences for token tasks, else
    examples."""
    unit = (cfg.get("import") or {}).get("unit")
    if unit:
        return unit
    tokens = any(finite(row.get("tokens")) for r in records for row in r["metrics"])
    return "sequences" if tokens else "examples"


def cell_identity(cfg: dict, records: list[dict]) -> dict:
    """params (N, and N without the embeddings), tokens, examples and budget_unit of the
    folder: its sweep.yaml `cell` section (an import or a scale sweep writes it), else the
    largest final counts of its runs."""
    if cfg.get("cell"):
        cell = cfg["cell"]
        return {k: cell.get(k) for k in ("params", "params_non_embedding", "tokens", "examples",
                                         "budget_unit")}

    def largest(key: str) -> float | None:
        values = [r["summary"].get(key) for r in records]
        return max(values) if values and all(finite(v) for v in values) else None

    tokens = largest("tokens")
    return {"params": None, "params_non_embedding": None, "tokens": tokens,
            "examples": largest("examples"),
            "budget_unit": "tokens" if tokens else "examples"}


def _b_crit(targets: list[dict]) -> dict | None:
    """The primary target's B_crit (the steps view), where the folder has targets."""
    first = targets[0] if targets else None
    if not first or first.get("b_crit") is None:
        return None
    return {"target": first["name"], "value": first["b_crit"], "ci": first.get("b_crit_ci"),
            "identified": _identified(first)}


def _identified(target: dict) -> bool:
    """Whether a target's B_crit is pinned by its batch sizes (scaling.analysis.intervals)."""
    return bool(target.get("fit") and target["fit"]["identification"]["identified"])


def _b_crit_targets(targets: list[dict]) -> list[dict]:
    """Every target's B_crit beside E_min, the fewest examples that reach it (the data D the
    target needs: scaling.analysis.laws fits B_crit against it)."""
    return [{"target": t["name"], "e_min": t["e_min"], "value": t["b_crit"],
             "ci": t.get("b_crit_ci"), "identified": _identified(t)}
            for t in targets if t.get("b_crit") is not None]


def measure(cfg: dict, records: list[dict], metric: str, bootstrap: int, seed: int,
            targets: list[dict], method: str) -> tuple[dict, np.ndarray | None]:
    """The folder's cell entry (identity, B_crit and the fixed-budget reading) and its draws."""
    entry, draws = analyze_cell(records, metric, bootstrap,
                                np.random.default_rng([seed, CELL_STREAM]), method)
    return {**cell_identity(cfg, records), "b_crit": _b_crit(targets),
            "b_crit_targets": _b_crit_targets(targets), **entry}, draws


def section(cells: list[dict], draws: list[np.ndarray | None], unit: str, bootstrap: int,
            seed: int) -> dict:
    """analysis.json's `fixed_budget`: the cells and the laws across them."""
    return {"metric": cells[0]["metric"], "lower_is_better": cells[0]["lower_is_better"],
            "batch_unit": unit, "budget_unit": cells[0]["budget_unit"], "cells": cells,
            "laws": fit_laws(cells, draws, bootstrap, np.random.default_rng([seed, LAW_STREAM]))}


def budget_section(out: Path, cfg: dict, records: list[dict], metric: str, bootstrap: int,
                   seed: int, targets: list[dict], method: str
                   ) -> tuple[dict, np.ndarray | None]:
    """The `fixed_budget` section of a single results folder, and its cell's draws."""
    entry, draws = measure(cfg, records, metric, bootstrap, seed, targets, method)
    return section([{"name": Path(out).name, **entry}], [draws], batch_unit(cfg, records),
                   bootstrap, seed), draws


def analyse(folder: Folder, steps: dict) -> Added:
    """The view's section, and its cell's draws, on the steps view's `targets`."""
    fixed, draws = budget_section(folder.out, folder.cfg, folder.records, folder.metric,
                                  folder.bootstrap, folder.seed, steps["targets"], folder.method)
    return Added({"fixed_budget": fixed}, draws)


def summary_lines(analysis: dict) -> list[str]:
    """The fixed-budget view for the terminal: per batch size its optimal learning rate, and
    the optimum (nothing without the view)."""
    cells = (analysis.get("fixed_budget") or {}).get("cells") or []
    if len(cells) != 1:
        return []
    cell, opt = cells[0], cells[0]["optimum"]
    rows = [[p["batch_size"], p["best_lr"], p["learning_rate"], p["at_edge"] or "", p["value"]]
            for p in cell["per_batch"]]
    table = text_table(["batch", "best grid lr", "optimal lr", "edge", cell["metric"]], rows)
    lines = [f"fixed budget: final {cell['metric']}"] + ["  " + row for row in table.splitlines()]
    return lines + [
        f"  B_opt {number(opt['batch_size'], 4)} {interval(opt['batch_size_ci'])}"
        f"{' (at the ' + opt['at_edge'] + ' edge)' if opt['at_edge'] else ''}, learning rate "
        f"{number(opt['learning_rate'], 4)} {interval(opt['learning_rate_ci'])}, "
        f"{cell['metric']} {number(opt['value'], 4)}"]


VIEW = View("fixed_budget", analyse, {"fixed_budget": FixedBudget}, summary_lines,
            builds_on=(STEPS,))
