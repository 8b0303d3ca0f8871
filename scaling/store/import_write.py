"""Imported runs written in the project's own results format (docs/results-format.md), so
`scaling analyze`, `scaling compare`, the figures and the report read them unchanged.

Runs of one cell (a model size N and budget D) make an ordinary results folder: sweep.yaml
(the analysis settings, the cell, and the import's record: its kind, units, columns and the
sha256 of every source) and runs/<run_id>/{config.json, metrics.jsonl, summary.json}. Runs of
several cells make a parent folder: cells.json, sweep.yaml and one such folder per cell under
cells/. Everything is written into a staging folder and moved into place at the end.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from scaling.config import AnalysisConfig, parse_target
from scaling.config.targets import Reach, crossing
from scaling.errors import ConfigError
from scaling.store.cells import cell_entry, write_cells
from scaling.store.files import atomic_write, dumps
from scaling.store.imports import Imported, ImportedRun
from scaling.store.layout import (ANALYSIS, CELLS, CELLS_MANIFEST, FIGURES_DIR, FIGURES_PDF,
                                  INDEX_HTML, METRICS, REPORT, RUN_CONFIG, RUNS, SUMMARY,
                                  SWEEP_YAML, run_dir)
from scaling.store.rows import examples_at
from scaling.tasks.storage import file_sha256

# What an import replaces (with --force): its own files and what `scaling analyze` wrote.
OUTPUTS = (RUNS, CELLS, SWEEP_YAML, CELLS_MANIFEST, ANALYSIS, REPORT, FIGURES_DIR, FIGURES_PDF,
           INDEX_HTML)


def _final(run: ImportedRun, key: str) -> float | None:
    values = [row[key] for row in run.rows if row.get(key) is not None]
    return values[-1] if values else None


def group_cells(imported: Imported) -> list[tuple[dict[str, Any], list[ImportedRun]]]:
    """(manifest entry, runs) per cell: a table's distinct (params, D) pairs; for curves and
    TensorBoard runs, one cell per params, D the largest final count among its runs."""
    groups: dict[Any, list[ImportedRun]] = {}
    for run in imported.runs:
        budget = _final(run, "tokens") or _final(run, "examples")
        key = (run.params, budget) if imported.kind == "table" else run.params
        groups.setdefault(key, []).append(run)
    cells = []
    for runs in groups.values():
        tokens = [_final(r, "tokens") for r in runs]
        examples = [_final(r, "examples") for r in runs]
        cells.append((cell_entry(runs[0].params, None if None in tokens else max(tokens),
                                 None if None in examples else max(examples)), runs))
    return sorted(cells, key=lambda c: (c[0]["params"] or 0, c[0]["tokens"] or 0,
                                        c[0]["examples"] or 0))


def _run_ids(runs: list[ImportedRun]) -> list[str]:
    """The run's own name where it has one, else bs<B>-lr<lr>-seed<s>; unique in the cell."""
    ids, seen = [], set()
    for r in runs:
        text = r.name or f"bs{r.batch_size}-lr{r.learning_rate:.6g}-seed{r.seed}"
        base = text = re.sub(r"[^A-Za-z0-9.+_-]", "_", text)
        n = 1
        while text in seen:
            n += 1
            text = f"{base}-{n}"
        seen.add(text)
        ids.append(text)
    return ids


def _status(run: ImportedRun) -> str:
    """As given, else diverged where the last row holds a value that is not finite."""
    if run.status:
        return run.status
    last = run.rows[-1]
    bad = any(isinstance(v, float) and not math.isfinite(v) for v in last.values())
    return "diverged" if bad else "completed"


def _run_files(run: ImportedRun, run_id: str, targets: list[str], reach: Reach,
               source: str) -> tuple[dict, dict]:
    """(config.json, summary.json) of one run."""
    status = _status(run)
    steps = {t: None if status == "diverged" else crossing(run.rows, t, reach) for t in targets}
    config = {"run_id": run_id, "batch_size": run.batch_size,
              "learning_rate": run.learning_rate, "seed": run.seed, "params": run.params,
              "optimizer": {}, "targets": targets,
              "reached": {"rule": reach.rule, "window": reach.window},
              "source": {"file": source, **run.source}}
    last = run.rows[-1]
    summary = {"run_id": run_id, "status": status, "task": "import",
               "batch_size": run.batch_size, "learning_rate": run.learning_rate,
               "seed": run.seed, "optimizer": None, "params": run.params,
               "steps": last.get("step"), "examples": last.get("examples"),
               "tokens": last.get("tokens"), "steps_to_target": steps,
               "examples_to_target": {t: None if s is None else
                                      examples_at(run.rows, s, run.batch_size)
                                      for t, s in steps.items()},
               "final": last, "b_simple": last.get("b_simple"), "wall_s": None,
               "compile_s": None}
    return config, summary


def _write_runs(folder: Path, runs: list[ImportedRun], targets: list[str], source: str) -> None:
    """Plain writes into the staging folder (it is moved into place whole)."""
    reach = Reach()
    for run, run_id in zip(runs, _run_ids(runs)):
        path = run_dir(folder, run_id)
        path.mkdir(parents=True)
        config, summary = _run_files(run, run_id, targets, reach, source)
        (path / RUN_CONFIG).write_text(dumps(config) + "\n")
        (path / METRICS).write_text("".join(dumps(r) + "\n" for r in run.rows))
        (path / SUMMARY).write_text(dumps(summary) + "\n")


def import_record(imported: Imported, columns: dict[str, str], command: str) -> dict[str, Any]:
    """sweep.yaml's `import` section: what was read, how, and each source's sha256."""
    return {"kind": imported.kind, "unit": imported.unit,
            "tokens_per_example": imported.tokens_per_example, "columns": dict(columns),
            "metrics": imported.metrics, "runs": len(imported.runs), "command": command,
            "sources": [{"path": str(p), "sha256": file_sha256(p)} for p in imported.sources]}


def _sweep_yaml(name: str, targets: list[str], view: str, metric: str,
                cell: dict[str, Any] | None, record: dict[str, Any]) -> str:
    reach = Reach()
    data = {"name": name, "targets": targets,
            "reached": {"rule": reach.rule, "window": reach.window},
            "analysis": {"lr_selection": AnalysisConfig.lr_selection,
                         "interval": AnalysisConfig.interval, "view": view, "metric": metric},
            **({"cell": {k: cell[k] for k in ("params", "tokens", "examples", "budget_unit")}}
               if cell else {}),
            "import": record}
    return yaml.safe_dump(data, sort_keys=False)


def check_analysis(imported: Imported, metric: str, targets: list[str]) -> None:
    """The metric and the targets name imported metrics; targets need curves."""
    names = ", ".join(imported.metrics) or "none"
    if metric not in imported.metrics:
        raise ConfigError(f"--metric: got {metric!r}, which no column holds; expected one of "
                          f"{names} (map one with --column {metric}=NAME)")
    for text in targets:
        if imported.kind == "table":
            raise ConfigError(f"--targets: got {text!r}, but a table holds only final values; "
                              "expected curves (a step column) or TensorBoard runs")
        target_metric, _, _ = parse_target(text)
        if target_metric not in imported.metrics:
            raise ConfigError(f"--targets: {text!r} needs {target_metric!r}, which no column "
                              f"holds; expected one of {names}")


def _clear(out: Path, force: bool) -> None:
    there = [name for name in OUTPUTS if (out / name).exists()]
    if there and not force:
        raise ConfigError(f"--out: {out} holds results already ({', '.join(there)}); give "
                          "--force to replace them, or another folder")
    for name in there:
        target = out / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()


def write_import(out: str | Path, imported: Imported, record: dict[str, Any], name: str,
                 metric: str, targets: list[str], force: bool) -> list[dict[str, Any]]:
    """Write the import under `out` (one results folder, or a parent of one per cell);
    returns the cells' manifest entries."""
    out = Path(out)
    check_analysis(imported, metric, targets)
    _clear(out, force)
    view = "both" if targets else "fixed_budget"
    cells = group_cells(imported)
    single = len(cells) == 1
    stage = out / f".import-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    source = ", ".join(str(p) for p in imported.sources)
    for cell, runs in cells:
        folder = stage if single else stage / cell["folder"]
        _write_runs(folder, runs, targets, source)
        atomic_write(folder / SWEEP_YAML, _sweep_yaml(
            name if single else f"{name} {cell['name']}", targets, view, metric, cell, record))
    moved = RUNS if single else CELLS
    os.replace(stage / moved, out / moved)
    if single:
        os.replace(stage / SWEEP_YAML, out / SWEEP_YAML)
    else:
        write_cells(out, [c for c, _ in cells], imported.unit, imported.tokens_per_example,
                    "import")
        atomic_write(out / SWEEP_YAML, _sweep_yaml(name, targets, view, metric, None, record))
    shutil.rmtree(stage, ignore_errors=True)
    return [c for c, _ in cells]
