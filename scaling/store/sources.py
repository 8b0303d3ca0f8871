"""Reading other training code's records for `scaling import`: tables (CSV, or JSON lines: one
object a line) as raw rows, and TensorBoard event folders as per-tag scalar series, read with
tensorboard's own reader. scaling.store.imports turns them into runs."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaling.errors import ConfigError

EVENT_FILES = "events.out.tfevents.*"
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")


@dataclass
class Table:
    """A file's rows as read (CSV: strings; JSON lines: JSON values), with each row's place
    in the file as a person finds it: a CSV's `row N` counts as a spreadsheet does (the
    header is row 1), a JSON-lines file's `line N` is the line."""

    path: Path
    columns: list[str]
    rows: list[dict[str, Any]]
    places: list[str]

    def where(self, i: int) -> str:
        return f"{self.path}: {self.places[i]}"


def _read_csv(path: Path) -> Table:
    with open(path, newline="", encoding="utf-8-sig") as handle:  # a spreadsheet's BOM too
        reader = csv.DictReader(handle)
        columns = list(reader.fieldnames or [])
        if len(set(columns)) != len(columns):
            twice = sorted({c for c in columns if columns.count(c) > 1})
            raise ConfigError(f"{path}: row 1 names column {twice[0]!r} twice; expected each "
                              "column once")
        rows = list(reader)
    for i, row in enumerate(rows):
        if None in row:
            raise ConfigError(f"{path}: row {i + 2} has more values than the header's "
                              f"{len(columns)} columns")
    return Table(path, columns, rows, [f"row {i + 2}" for i in range(len(rows))])


def _read_json_lines(path: Path) -> Table:
    rows, places, columns = [], [], {}
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path}: line {n} is not JSON ({err.msg}); expected one object "
                              "a line") from None
        if not isinstance(row, dict):
            raise ConfigError(f"{path}: line {n}: got {line[:40]!r}, expected a JSON object")
        columns.update(dict.fromkeys(row))
        rows.append(row)
        places.append(f"line {n}")
    return Table(path, list(columns), rows, places)


def read_table(path: str | Path) -> Table:
    """A CSV file, or JSON lines (by the suffix .jsonl, .ndjson or .json)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file; expected a CSV or JSON-lines file, or a "
                          "TensorBoard folder")
    table = _read_json_lines(path) if path.suffix in JSON_SUFFIXES else _read_csv(path)
    if not table.rows:
        raise ConfigError(f"{path}: holds no rows; expected one row per run, or per "
                          "evaluation point of each run")
    return table


def event_folders(path: str | Path) -> list[Path]:
    """The run folders under a TensorBoard folder: it, if it holds event files itself, else
    each folder below it that does."""
    path = Path(path)
    folders = sorted({f.parent for f in path.rglob(EVENT_FILES)})
    if not folders:
        raise ConfigError(f"{path}: holds no TensorBoard event files ({EVENT_FILES})")
    return [path] if path in folders else folders


def read_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of one run folder: (step, value) in the order written, every event
    kept (tensorboard's reader samples 10,000 per tag unless told not to)."""
    try:  # heavy, and optional: only here
        from tensorboard.backend.event_processing.event_accumulator import (SCALARS,
                                                                             EventAccumulator)
    except ImportError:
        raise ImportError("reading TensorBoard folders needs tensorboard, which scaling does "
                          "not install; pip install tensorboard (or 'scaling[trackers]')") from None

    events = EventAccumulator(str(folder), size_guidance={SCALARS: 0})
    events.Reload()
    return {tag: [(int(e.step), float(e.value)) for e in events.Scalars(tag)]
            for tag in events.Tags()["scalars"]}
