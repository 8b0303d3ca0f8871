"""Parsed rows into runs for `scaling import` (scaling.store.imports reads the files): the batch
unit and tokens per example agreed across rows, examples and tokens filled in from each
other, a table's rows one run each, curves grouped into runs, TensorBoard folders matched to
their batch size and learning rate. Every refusal names the file, the row and the column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scaling.errors import ConfigError
from scaling.store.imports import (EXPECTED, FIELDS, STATUSES, UNITS, Imported, ImportedRun,
                                   ImportOptions, read_file, read_tensorboard)

SAME = 1e-6  # relative tolerance of tokens = examples x tokens per example
RUN_FIELDS = ("batch_size", "learning_rate", "seed", "params", "run")  # a runs table's fields


def batch_unit(rows: list[dict[str, Any]], options: ImportOptions) -> str:
    """--unit, or the unit column: one unit throughout, else "mixed units"."""
    unit = options.unit
    for row in rows:
        given = row.get("unit")
        if given is None:
            continue
        if given not in UNITS:
            raise ConfigError(f"{row['place']}, column {row['columns']['unit']!r}: got {given!r}, "
                              f"expected one of {', '.join(UNITS)}")
        if unit is not None and given != unit:
            raise ConfigError(f"{row['place']}, column {row['columns']['unit']!r}: mixed units: "
                              f"got {given!r} where the batch sizes are in {unit}; expected one "
                              "unit for every run")
        unit = given
    return unit or "examples"


def tokens_per_example(rows: list[dict[str, Any]], unit: str, given: float | None) -> float | None:
    """Tokens per example: 1 with the batch in tokens; else --tokens-per-example, or read off
    rows with both counts; every row with both must agree, else "mixed units"."""
    if unit == "tokens":
        if given is not None and given != 1:
            raise ConfigError(f"--tokens-per-example: got {given:g} with --unit tokens; expected "
                              "it unset (the batch and every count are in tokens)")
        given = 1.0
    for row in rows:
        examples, tokens = row.get("examples"), row.get("tokens")
        if examples is None or tokens is None or examples <= 0:
            continue
        if given is None:
            given = tokens / examples
        elif abs(tokens - examples * given) > SAME * tokens:
            raise ConfigError(f"{row['place']}, column {row['columns']['tokens']!r}: mixed "
                              f"units: tokens {tokens:g} is not examples {examples:g} x "
                              f"{given:g} tokens per example")
    return given


def counts(examples: float | None, tokens: float | None, per: float | None
           ) -> tuple[float | None, float | None]:
    """(examples, tokens), each filled in from the other where tokens per example is known."""
    if per:
        if tokens is None and examples is not None:
            tokens = examples * per
        if examples is None and tokens is not None:
            examples = tokens / per
    return examples, tokens


def _identity(row: dict[str, Any], options: ImportOptions) -> tuple[int, float, int, float | None]:
    """(batch size, learning rate, seed, params) of a row, the flags filling what it lacks."""
    size = row.get("batch_size") if row.get("batch_size") is not None else options.batch_size
    lr = row.get("learning_rate") if row.get("learning_rate") is not None else options.learning_rate
    for name, value in (("batch_size", size), ("learning_rate", lr)):
        if value is None:
            column = row["columns"].get(name, name)
            raise ConfigError(f"{row['place']}, column {column!r}: got a blank, expected "
                              f"{EXPECTED[name]} (or --{name.replace('_', '-')} for every run)")
    seed = row.get("seed") if row.get("seed") is not None else options.seed or 0
    return int(size), float(lr), int(seed), row.get("params")


def _status(row: dict[str, Any]) -> str | None:
    status = row.get("status")
    if status is not None and status not in STATUSES:
        raise ConfigError(f"{row['place']}, column {row['columns']['status']!r}: got {status!r}, "
                          f"expected one of {', '.join(STATUSES)}")
    return status


def _metric_row(step: float | None, examples: float | None, tokens: float | None,
                metrics: dict[str, float | None]) -> dict[str, Any]:
    return {"step": step, "examples": examples, "tokens": tokens,
            **{k: v for k, v in metrics.items() if v is not None}}


def _source(row: dict[str, Any]) -> dict[str, Any]:
    return {"place": row["place"], "values": row["text"]}


def table_runs(rows: list[dict[str, Any]], options: ImportOptions, per: float | None
               ) -> list[ImportedRun]:
    """One run per row; (params, tokens, batch size, learning rate, seed) must not repeat."""
    runs, seen = [], {}
    for row in rows:
        size, lr, seed, params = _identity(row, options)
        examples, tokens = counts(row.get("examples"), row.get("tokens"), per)
        key = (params, tokens if tokens is not None else examples, size, lr, seed)
        if key in seen:
            raise ConfigError(f"{row['place']}: repeats (params, tokens, batch size, learning "
                              f"rate, seed) = {key} of {seen[key]}; expected one row per run")
        seen[key] = row["place"]
        step = None if examples is None else examples / size
        runs.append(ImportedRun(size, lr, seed, params,
                                [_metric_row(step, examples, tokens, row["metrics"])],
                                row.get("run"), _status(row), _source(row)))
    return runs


def _group(rows: list[dict[str, Any]], options: ImportOptions) -> dict[Any, list[dict[str, Any]]]:
    """Curve rows by run: the run column's value, else the run's hyperparameters."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        key = row.get("run") if "run" in row["columns"] else _identity(row, options)
        if key is None:
            raise ConfigError(f"{row['place']}, column {row['columns']['run']!r}: got a blank; "
                              "expected the run's name")
        groups.setdefault(key, []).append(row)
    return groups


def _check_run(name: Any, rows: list[dict[str, Any]], options: ImportOptions) -> None:
    """One identity per run, and steps that never go back."""
    first = _identity(rows[0], options)
    for prev, row in zip(rows, rows[1:]):
        for i, field in enumerate(("batch_size", "learning_rate", "seed", "params")):
            if _identity(row, options)[i] != first[i]:
                raise ConfigError(f"{row['place']}, column {row['columns'][field]!r}: "
                                  f"{field} changes within run {name!r} (from {first[i]} to "
                                  f"{_identity(row, options)[i]}); expected one value per run")
        if row["step"] is not None and prev["step"] is not None and row["step"] < prev["step"]:
            raise ConfigError(f"{row['place']}, column {row['columns']['step']!r}: step "
                              f"{row['step']:g} goes back from {prev['step']:g} within run "
                              f"{name!r}; expected each run's rows in step order")


def _curve_rows(rows: list[dict[str, Any]], size: int, per: float | None) -> list[dict[str, Any]]:
    """A run's metric rows; rows at the same step merged (later values win)."""
    out: list[dict[str, Any]] = []
    for row in rows:
        if row["step"] is None:
            raise ConfigError(f"{row['place']}, column {row['columns']['step']!r}: got a blank; "
                              "expected the row's step")
        examples = row.get("examples") if row.get("examples") is not None else row["step"] * size
        metric_row = _metric_row(row["step"], *counts(examples, row.get("tokens"), per),
                                 row["metrics"])
        if out and out[-1]["step"] == row["step"]:
            out[-1].update({k: v for k, v in metric_row.items() if v is not None})
        else:
            out.append(metric_row)
    return out


def curve_runs(rows: list[dict[str, Any]], options: ImportOptions, per: float | None
               ) -> list[ImportedRun]:
    """One run per group of rows; two runs may not share (params, batch size, lr, seed)."""
    runs, seen = [], {}
    for name, group in _group(rows, options).items():
        _check_run(name, group, options)
        size, lr, seed, params = _identity(group[0], options)
        if (params, size, lr, seed) in seen:
            raise ConfigError(f"{group[0]['place']}: run {name!r} repeats (params, batch size, "
                              f"learning rate, seed) = {(params, size, lr, seed)} of run "
                              f"{seen[params, size, lr, seed]!r}; expected one run each (curves "
                              "hold one budget per model size: import each budget on its own)")
        seen[params, size, lr, seed] = name
        runs.append(ImportedRun(size, lr, seed, params, _curve_rows(group, size, per),
                                group[0].get("run"), _status(group[-1]), _source(group[0])))
    return runs


# ---------------------------------------------------------------- TensorBoard folders


def _runs_table(options: ImportOptions) -> dict[str, dict[str, Any]]:
    """The runs table's rows by run name (empty without one)."""
    if options.runs_table is None:
        return {}
    rows, _ = read_file(Path(options.runs_table), ImportOptions(
        {k: v for k, v in options.columns.items() if k in RUN_FIELDS},
        batch_size=options.batch_size, learning_rate=options.learning_rate))
    table = {}
    for row in rows:
        if row.get("run") is None:
            raise ConfigError(f"{row['place']}: no run name; expected a column run (or --column "
                              "run=NAME) naming each TensorBoard folder")
        table[row["run"]] = row
    return table


def _tensorboard_rows(scalars: dict[str, list[tuple[int, float]]], options: ImportOptions
                      ) -> list[dict[str, float]]:
    """Per step, every tag's value under its metric name (or field: examples, tokens)."""
    names = {tag: key for key, tag in options.columns.items() if key not in FIELDS or
             key in ("examples", "tokens")}
    by_step: dict[int, dict[str, float]] = {}
    for tag, events in scalars.items():
        for step, value in events:
            by_step.setdefault(step, {})[names.get(tag, tag)] = value
    return [{"step": step, **values} for step, values in sorted(by_step.items())]


def tensorboard_run(entry: dict[str, Any], row: dict[str, Any], options: ImportOptions,
                    per: float | None) -> ImportedRun:
    """One TensorBoard folder as a run; `row` its runs-table row (or the flags alone)."""
    size, lr, seed, params = _identity(row, options)
    rows = []
    for values in _tensorboard_rows(entry["scalars"], options):
        step = values.pop("step")
        examples = values.pop("examples", None)
        tokens = values.pop("tokens", None)
        examples = step * size if examples is None else examples
        rows.append(_metric_row(step, *counts(examples, tokens, per), values))
    if not rows:
        raise ConfigError(f"{entry['place']}: holds no scalars; expected the run's metrics")
    return ImportedRun(size, lr, seed, params, rows, entry["name"], None,
                       {"place": entry["place"], "values": row.get("text") or {}})


def tensorboard_runs(paths: list[Path], options: ImportOptions, unit: str
                     ) -> tuple[list[ImportedRun], float | None]:
    """Every run folder under the paths, matched by name to the runs table or the flags."""
    table = _runs_table(options)
    per = tokens_per_example(list(table.values()), unit, options.tokens_per_example)
    runs = []
    for path in paths:
        for entry in read_tensorboard(path):
            row = table.get(entry["name"])
            if row is None and (table and options.batch_size is None):
                raise ConfigError(f"{options.runs_table}: no row for run folder "
                                  f"{entry['name']!r}; expected one row per folder")
            row = row or {"place": entry["place"], "columns": {}, "text": {}}
            runs.append(tensorboard_run(entry, row, options, per))
    return runs, per


# ---------------------------------------------------------------- every input


def _metric_names(runs: list[ImportedRun]) -> list[str]:
    names = {k: None for r in runs for row in r.rows for k in row}
    return [k for k in names if k not in ("step", "examples", "tokens")]


def read_import(paths: list[str | Path], options: ImportOptions) -> Imported:
    """Every run of the inputs, checked: files (tables or curves, one kind) or TensorBoard
    folders (not both)."""
    paths = [Path(p) for p in paths]
    folders = [p for p in paths if p.is_dir()]
    if folders and len(folders) != len(paths):
        raise ConfigError(f"{folders[0]}: a TensorBoard folder among files; expected files "
                          "only or TensorBoard folders only")
    if folders:
        unit = options.unit or "examples"
        runs, per = tensorboard_runs(folders, options, unit)
        return Imported("tensorboard", runs, unit, per, _metric_names(runs), folders)
    parsed = [read_file(p, options) for p in paths]
    kinds = {p: "curves" if "step" in (rows[0]["columns"]) else "table"
             for p, (rows, _) in zip(paths, parsed)}
    if len(set(kinds.values())) > 1:
        raise ConfigError(f"{paths[-1]}: a {kinds[paths[-1]]} file among "
                          f"{kinds[paths[0]]} files; expected one kind of input at a time")
    rows = [row for file_rows, _ in parsed for row in file_rows]
    unit = batch_unit(rows, options)
    per = tokens_per_example(rows, unit, options.tokens_per_example)
    kind = kinds[paths[0]]
    runs = (curve_runs if kind == "curves" else table_runs)(rows, options, per)
    return Imported(kind, runs, unit, per, _metric_names(runs), paths)
