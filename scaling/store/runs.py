"""The results folder: <out>/sweep.yaml, <out>/runs/<run_id>/{config.json, metrics.jsonl,
summary.json} and rounds.json (docs/results-format.md).

A run without summary.json is not done and is trained again from scratch on resume; metrics
are appended one chunk at a time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from scaling.errors import ConfigError
from scaling.store import archive
from scaling.store.files import atomic_write, dumps, write_json
from scaling.store.layout import (ARITHMETIC, METRICS, ROUNDS, RUN_CONFIG, RUNS, SUMMARY,
                                  record_lock, run_dir, runs_dir)

TAIL_BYTES = 1 << 16  # read from a metrics file's end to find its last step


def is_done(out: Path, run_id: str) -> bool:
    return (run_dir(out, run_id) / SUMMARY).is_file()


def start_run(out: Path, run_id: str, config: dict[str, Any]) -> None:
    """Fresh run folder: config.json, an empty metrics.jsonl, no summary (not done yet)."""
    folder = run_dir(out, run_id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SUMMARY).unlink(missing_ok=True)
    write_json(folder / RUN_CONFIG, config)
    atomic_write(folder / METRICS, "")


def rows_until(out: Path, run_id: str, step: int) -> list[dict[str, Any]]:
    """A run's rows up to `step` (a checkpoint's): rows written after it are not kept."""
    return [r for r in read_metrics(run_dir(out, run_id) / METRICS) if r["step"] <= step]


def resume_run(out: Path, run_id: str, config: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """A run continued from a checkpoint: config.json, metrics.jsonl holding only `rows` (those
    up to the checkpoint, so rows a killed process wrote after it are dropped), no summary."""
    folder = run_dir(out, run_id)
    (folder / SUMMARY).unlink(missing_ok=True)
    write_json(folder / RUN_CONFIG, config)
    atomic_write(folder / METRICS, "".join(dumps(r) + "\n" for r in rows))


def append_metrics(out: Path, run_id: str, rows: list[dict[str, Any]]) -> None:
    """Append rows (one JSON object per line) after checking that their steps go on from the
    last step on disk: a row that repeats or goes back (a second writer) is refused, naming
    the file and the step. A torn last line is ignored when reading."""
    if not rows:
        return
    path = run_dir(out, run_id) / METRICS
    previous = last_step(path)
    for row in rows:
        if previous is not None and row["step"] <= previous:
            raise ConfigError(f"{path}: refusing a row at step {row['step']} after step "
                              f"{previous}: another process is writing this run")
        previous = row["step"]
    with open(path, "a") as f:
        f.write("".join(dumps(r) + "\n" for r in rows))
        f.flush()


def finish_run(out: Path, run_id: str, summary: dict[str, Any]) -> None:
    """summary.json is written last: its presence is what marks the run as done."""
    write_json(run_dir(out, run_id) / SUMMARY, summary)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """A run's rows. A torn last line (a writer killed mid-write) is left out; a damaged line
    before it, or a step that repeats or goes back, is a ConfigError naming the file, the line
    and the step (repair: scaling.store.repair)."""
    return parse_metrics(Path(path).read_text(), path)


def parse_metrics(text: str, path: Any) -> list[dict[str, Any]]:
    """read_metrics on the text of a metrics.jsonl (`path` names it in errors)."""
    lines = text.splitlines()
    try:  # every line whole: one parse of them all, several times faster than a parse per line
        rows = json.loads(f"[{','.join(lines)}]")
    except json.JSONDecodeError:
        rows = _parse_lines(lines, path)
    for number, (before, row) in enumerate(zip(rows, rows[1:]), 2):
        if not row["step"] > before["step"]:
            raise ConfigError(f"{path}: step {row['step']} at line {number} does not follow step "
                              f"{before['step']}: rows repeat or are out of order (two processes "
                              f"wrote this run?){_repair_hint(path)}")
    return rows


def _parse_lines(lines: list[str], path: Any) -> list[dict[str, Any]]:
    """The rows line by line, where some line is not whole: a torn last line is left out, a
    damaged one before it refused naming its number."""
    rows = []
    for number, line in enumerate(lines, 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise ConfigError(f"{path}: line {number} is not a JSON row{_repair_hint(path)}") from None
    return rows


def _repair_hint(path: Any) -> str:
    """'; `scaling repair OUT` ...' for a run's metrics.jsonl (OUT/runs/<run_id>/)."""
    path = Path(path)
    if path.parent.parent.name != RUNS or not path.is_file():
        return ""
    return f"; `scaling repair {path.parents[2]}` keeps one clean pass (docs/results-format.md)"


def last_step(path: Path) -> int | None:
    """The step of the last whole row of a metrics.jsonl (None if it has none), read from its
    end; a file ending in a torn line is refused (rows appended after it would be lost)."""
    if not Path(path).is_file():
        return None
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - TAIL_BYTES))
        tail = f.read()
    if tail and not tail.endswith(b"\n"):
        raise ConfigError(f"{path}: ends in a torn line; refusing to append after it")
    lines = tail.splitlines()[1:] if size > TAIL_BYTES else tail.splitlines()
    if not lines:
        return read_metrics(path)[-1]["step"] if size else None
    return json.loads(lines[-1])["step"]


def load(out: str | Path) -> list[dict[str, Any]]:
    """Finished runs as plain records: {'run_id', 'config', 'summary', 'metrics'}, sorted by id;
    from runs/, else from the folder's run archive (scaling.store.archive) where it has one."""
    records = []
    if not any(runs_dir(out).glob(f"*/{SUMMARY}")) and archive.has_archive(out):
        return archive.records(out, parse_metrics)
    for folder in sorted(runs_dir(out).glob("*")):
        summary = folder / SUMMARY
        if not summary.is_file():
            continue
        records.append({"run_id": folder.name,
                        "config": json.loads((folder / RUN_CONFIG).read_text()),
                        "summary": json.loads(summary.read_text()),
                        "metrics": read_metrics(folder / METRICS)})
    return records


def mean_throughput(summaries: list[dict[str, Any]], key: str) -> float | None:
    """The mean of a throughput figure (summary.json's `throughput`) over the summaries that
    recorded it; None when none did (runs from before it existed)."""
    values = [s["throughput"][key] for s in summaries
              if (s.get("throughput") or {}).get(key) is not None]
    return sum(values) / len(values) if values else None


def training_seconds(records: list[dict[str, Any]]) -> float:
    """Training time recorded in run records: the sum over vmapped groups of each group's wall
    time (compile included), whatever invocations the runs were trained in. A group's runs
    share batch size, wall and compile seconds, so those identify it."""
    groups = {(r["summary"]["batch_size"], r["summary"]["wall_s"], r["summary"]["compile_s"])
              for r in records}
    return round(sum(wall for _, wall, _ in groups), 1)


def read_summary(out: Path, run_id: str) -> dict[str, Any] | None:
    """A run's summary, or None while it is not done."""
    path = run_dir(out, run_id) / SUMMARY
    return json.loads(path.read_text()) if path.is_file() else None


# ---------------------------------------------------------------- the sweep's own files


def read_arithmetic(out: Path) -> list[dict[str, Any]] | None:
    """The run arithmetic a sweep recorded (config.arithmetic.Arithmetic fields per batch
    size); None for a folder from before it was recorded."""
    path = Path(out) / ARITHMETIC
    return json.loads(path.read_text()) if path.is_file() else None


# ---------------------------------------------------------------- records of the grid's growth


def read_records(out: Path, name: str) -> list[dict[str, Any]]:
    """An append-only record file of the folder (ROUNDS), oldest first."""
    path = Path(out) / name
    return json.loads(path.read_text()) if path.is_file() else []


def _append(out: Path, name: str, record: dict[str, Any],
            same: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Append `record` to the record file `name` unless one it calls `same` is there; the
    record that stands is returned. Safe across processes.

    The read-modify-write holds an exclusive lock, and the file is replaced atomically, so
    shards writing different batch sizes at once lose nothing and a reader never sees half.
    """
    import fcntl  # POSIX only, so imported where the lock is taken

    Path(out).mkdir(parents=True, exist_ok=True)
    with open(record_lock(out, name), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        records = read_records(out, name)
        standing = next((r for r in records if same(r)), None)
        if standing is not None:
            return standing
        write_json(Path(out) / name, records + [record])
        return record


def read_rounds(out: Path) -> list[dict[str, Any]]:
    """The recorded learning-rate search rounds (scaling.sweep.search.round_record), oldest
    first."""
    return read_records(out, ROUNDS)


def add_round(out: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Record a search round unless its batch size already has a round of that number; the
    round that stands is returned (another process may have planned it first: train that)."""
    key = (record["batch_size"], record["round"])
    return _append(out, ROUNDS, record, lambda r: (r["batch_size"], r["round"]) == key)


# ---------------------------------------------------------------- pandas view


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict):
            flat.update(_flatten(item, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = item
    return flat


def frame(out: str | Path) -> Any:
    """One row per finished run, summary fields flattened (steps_to_target.<target>, final.<key>).

    pandas is optional: install it (pip install pandas) to use this view.
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("scaling.store.frame needs pandas, which scaling does not install; "
                          "pip install pandas (or use scaling.store.load for plain records)") from None
    rows = []
    for folder in sorted(runs_dir(out).glob("*")):
        summary = folder / SUMMARY
        if summary.is_file():
            rows.append(_flatten(json.loads(summary.read_text())))
    return pd.DataFrame(rows)
