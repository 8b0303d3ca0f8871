"""`scaling import`: runs from any training code, read into memory and checked before anything
is written (scaling.store.import_write writes them in the project's own format).

Three inputs (docs/import.md):
- a table, one row per run (its final values): a CSV or JSON-lines file without a step column;
- curves, several rows per run: a file with a step column, rows grouped by the run column or,
  without one, by the run's hyperparameters (params, batch size, learning rate, seed);
- TensorBoard event folders, one run per folder, its batch size and learning rate given by
  flags or by a small table (`--runs-table`) whose run column names the folder.

Columns are read by field (FIELDS), each from the column of its own name unless `--column
FIELD=NAME` names another; any other name mapped that way is a metric. Columns left over are
metrics when every value is a number (blank: not measured), else text kept in the run's
config.json as its source.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaling.errors import ConfigError
from scaling.store.sources import Table, event_folders, read_scalars, read_table

FIELDS = ("batch_size", "learning_rate", "seed", "step", "examples", "tokens", "params", "run",
          "status", "unit")
TEXT_FIELDS = ("run", "status", "unit")
UNITS = ("examples", "sequences", "tokens")
STATUSES = ("completed", "diverged", "budget_exhausted")
METRIC_NAME = re.compile(r"[A-Za-z_][\w./-]*$")
EXPECTED = {"batch_size": "a positive integer", "learning_rate": "a positive number",
            "seed": "an integer", "params": "a positive number", "step": "a number >= 0",
            "examples": "a number >= 0", "tokens": "a number >= 0"}
CHECKS = {"batch_size": lambda v: v > 0 and v == int(v), "learning_rate": lambda v: v > 0,
          "seed": lambda v: v == int(v), "params": lambda v: v > 0,
          "step": lambda v: v >= 0, "examples": lambda v: v >= 0, "tokens": lambda v: v >= 0}


@dataclass
class ImportOptions:
    """What the command line says: column mappings (field or metric -> column, or TensorBoard
    tag), the batch unit, tokens per example, and for TensorBoard runs the values every folder
    shares and the runs table."""

    columns: dict[str, str] = field(default_factory=dict)
    unit: str | None = None
    tokens_per_example: float | None = None
    batch_size: int | None = None
    learning_rate: float | None = None
    seed: int | None = None
    runs_table: Path | None = None


@dataclass
class ImportedRun:
    """One run as the project stores it: its identity, metric rows and where it came from."""

    batch_size: int
    learning_rate: float
    seed: int
    params: float | None
    rows: list[dict[str, Any]]
    name: str | None
    status: str | None
    source: dict[str, Any]


@dataclass
class Imported:
    """Everything read: the kind of input, the runs, the batch unit, tokens per example, the
    metric names and the source files."""

    kind: str
    runs: list[ImportedRun]
    unit: str
    tokens_per_example: float | None
    metrics: list[str]
    sources: list[Path]


def parse_column(text: str) -> tuple[str, str]:
    """`FIELD=NAME` (NAME may hold spaces or '='); FIELD a field of FIELDS or a metric name."""
    key, sep, name = text.partition("=")
    key = key.strip()
    if not sep or not name or not METRIC_NAME.match(key):
        raise ConfigError(f"--column: got {text!r}, expected FIELD=NAME with FIELD one of "
                          f"{', '.join(FIELDS)} or a metric name such as eval_loss")
    return key, name


def _number(raw: Any) -> float | None:
    """A cell's number; None when blank; ValueError when it is not a number."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise ValueError(raw)
    return float(raw)


def _is_number(raw: Any) -> bool:
    try:
        _number(raw)
    except ValueError:
        return False
    return True


def resolve_columns(table: Table, mapping: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Field or metric -> column for this file, and the text columns kept as the source."""
    for key, column in mapping.items():
        if column not in table.columns:
            raise ConfigError(f"{table.path}: missing column {column!r} (--column {key}="
                              f"{column}); columns: {', '.join(table.columns)}")
    resolved = dict(mapping)
    for name in FIELDS:
        if name not in resolved and name in table.columns and name not in mapping.values():
            resolved[name] = name
    text = []
    for column in table.columns:
        if column in resolved.values():
            continue
        if all(_is_number(row.get(column)) for row in table.rows):
            resolved[column] = column
        else:
            text.append(column)
    return resolved, text


def read_field(table: Table, i: int, column: str, name: str) -> Any:
    """Row i's value of field `name` (text fields as strings), checked; None when blank."""
    raw = table.rows[i].get(column)
    if name in TEXT_FIELDS:
        return None if raw is None or str(raw).strip() == "" else str(raw).strip()
    try:
        value = _number(raw)
        ok = value is None or (math.isfinite(value) and CHECKS[name](value))
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"{table.where(i)}, column {column!r}: got {raw!r}, expected "
                          f"{EXPECTED[name]}")
    return None if value is None else int(value) if name in ("batch_size", "seed") else value


def read_metric(table: Table, i: int, column: str) -> float | None:
    raw = table.rows[i].get(column)
    try:
        return _number(raw)
    except ValueError:
        raise ConfigError(f"{table.where(i)}, column {column!r}: got {raw!r}, expected a "
                          "number (blank where not measured)") from None


def parse_rows(table: Table, resolved: dict[str, str], text: list[str]) -> list[dict[str, Any]]:
    """Every row as {field: value, 'metrics': {...}, 'text': {...}, 'place': where it is,
    'columns': field -> the column it came from}."""
    fields = {k: c for k, c in resolved.items() if k in FIELDS}
    metrics = {k: c for k, c in resolved.items() if k not in FIELDS}
    out = []
    for i, row in enumerate(table.rows):
        parsed = {name: read_field(table, i, column, name) for name, column in fields.items()}
        parsed["metrics"] = {k: read_metric(table, i, c) for k, c in metrics.items()}
        parsed["text"] = {c: row.get(c) for c in text}
        parsed["place"], parsed["columns"] = table.where(i), fields
        out.append(parsed)
    return out


def _required(table: Table, resolved: dict[str, str], options: ImportOptions) -> None:
    for name in ("batch_size", "learning_rate"):
        if name not in resolved and getattr(options, name) is None:
            raise ConfigError(f"{table.path}: missing column {name!r} (give --column {name}="
                              f"NAME); columns: {', '.join(table.columns)}")


def read_file(path: Path, options: ImportOptions) -> tuple[list[dict[str, Any]], list[str]]:
    """A table or curves file's parsed rows and its metric names."""
    table = read_table(path)
    resolved, text = resolve_columns(table, options.columns)
    _required(table, resolved, options)
    metrics = [k for k in resolved if k not in FIELDS]
    return parse_rows(table, resolved, text), metrics


def read_tensorboard(path: Path) -> list[dict[str, Any]]:
    """One entry per run folder under `path`: {'name' (the folder's name), 'place', 'scalars'}."""
    folders = event_folders(path)
    names = [f.name for f in folders]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ConfigError(f"{path}: two run folders are called {twice[0]!r}; expected one name "
                          "per run (the runs table matches them by name)")
    return [{"name": f.name, "place": str(f), "scalars": read_scalars(f)} for f in folders]
