"""A multi-cell results folder: one ordinary results folder per cell (a model size N and a
budget D) under <out>/cells/, and <out>/cells.json, the manifest that names them
(docs/results-format.md). `scaling import` writes it when its runs span several cells; a
sweep over scale axes writes the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scaling.errors import ConfigError
from scaling.formatting import short_number
from scaling.store.archive import has_archive
from scaling.store.files import write_json
from scaling.store.layout import CELLS_MANIFEST, cell_folder, runs_dir
from scaling.store.rows import positive

VERSION = 1
TOKENS_PER_PARAM_FLOPS = 6  # training FLOPs per token per parameter (forward and backward)


def is_cells_folder(out: str | Path) -> bool:
    return (Path(out) / CELLS_MANIFEST).is_file()


def cell_name(params: float | None, budget: float | None) -> str:
    """N2.147e8-D1e11: the folder of a cell (N or D left out where unknown)."""
    parts = ([f"N{short_number(params)}"] if positive(params) else []) + \
        ([f"D{short_number(budget)}"] if positive(budget) else [])
    return "-".join(parts) or "cell"


def compute(params: float | None, tokens: float | None) -> tuple[float | None, str]:
    """Training compute C of a cell and how it was counted (6 N per token, Kaplan et al. 2020)."""
    if positive(params) and positive(tokens):
        return TOKENS_PER_PARAM_FLOPS * params * tokens, "6 N D (6 FLOPs per parameter per token)"
    return None, "unknown (needs params and tokens)"


def cell_entry(params: float | None, tokens: float | None, examples: float | None,
               values: dict[str, Any] | None = None,
               measured: tuple[float | None, str] | None = None,
               name: str | None = None) -> dict[str, Any]:
    """One cell of the manifest: its folder, N, D in tokens and examples, C and the scale-axis
    values that made it (empty for an import). `measured`: C counted otherwise (e.g. XLA's
    cost analysis of the step times the steps) and how, in place of 6 N D. `name`: the
    folder's name (a scale sweep's, from its values), else one from N and D."""
    budget = tokens if positive(tokens) else examples
    c, source = measured or compute(params, tokens)
    name = name or cell_name(params, budget)
    return {"name": name, "folder": cell_folder(name), "params": params, "tokens": tokens,
            "examples": examples, "budget_unit": "tokens" if positive(tokens) else "examples",
            "compute": c, "compute_source": source, "values": dict(values or {})}


def write_cells(out: str | Path, cells: list[dict[str, Any]], batch_unit: str,
                tokens_per_example: float | None, source: str) -> Path:
    """Write <out>/cells.json (atomically)."""
    path = Path(out) / CELLS_MANIFEST
    write_json(path, {"version": VERSION, "source": source, "batch_unit": batch_unit,
                      "tokens_per_example": tokens_per_example, "cells": cells})
    return path


def read_cells(out: str | Path) -> dict[str, Any]:
    """The manifest, its cells checked: each names a folder under `out` that holds runs (its
    runs/, or their archive runs.tar.xz, which the analysis reads as well)."""
    path = Path(out) / CELLS_MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path}: cannot be read ({err}); expected the manifest of a "
                          "multi-cell results folder") from None
    cells = manifest.get("cells") if isinstance(manifest, dict) else None
    if not cells:
        raise ConfigError(f"{path}: names no cells; expected a list under 'cells'")
    for cell in cells:
        folder = Path(out) / str(cell.get("folder"))
        if not runs_dir(folder).is_dir() and not has_archive(folder):
            raise ConfigError(f"{path}: cell {cell.get('name')!r} has no runs/ nor runs.tar.xz "
                              f"in {folder}; expected one results folder per cell")
    return manifest

