"""A results folder's run files packed for reading: <out>/runs.tar.xz.

A study committed for others to read keeps its runs in one compressed archive beside its
analysis, so `scaling analyze` redoes its numbers without retraining. The archive is read in
place, never unpacked into runs/: a folder committed for reading then carries no state a
sweep resumes from (a sweep into it trains afresh, and its own runs/ is what is read from then
on). The search's rounds.json travels inside the archive for the same reason.

Packing is deterministic (sorted members, zero times and owners), so packing the same runs
twice gives the same bytes and a commit shows only real changes.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

from scaling.errors import ConfigError
from scaling.store.files import atomic_write
from scaling.store.layout import (ARCHIVE, CHECKPOINTS, CLAIMS, METRICS, ROUNDS, RUN_CONFIG,
                                  RUN_FILES, RUNS, SUMMARY, record_lock, runs_dir)

EXTRA = (ROUNDS,)  # read by reports of the search (experiments/search_cost.py)


def archive_path(out: str | Path) -> Path:
    return Path(out) / ARCHIVE


def _members(out: Path) -> list[tuple[str, Path]]:
    """(name in the archive, file) of every finished run's files and the extras, sorted."""
    files = []
    for folder in sorted(runs_dir(out).glob("*")):
        if (folder / SUMMARY).is_file():
            files += [(f"{RUNS}/{folder.name}/{name}", folder / name) for name in RUN_FILES]
    return files + [(name, out / name) for name in EXTRA if (out / name).is_file()]


def pack(out: str | Path) -> Path:
    """Write <out>/runs.tar.xz from the finished runs under <out>/runs (and rounds.json)."""
    out = Path(out)
    members = _members(out)
    if not members:
        raise ConfigError(f"{out}: no finished runs to pack (no runs/*/summary.json)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=6) as tar:
        for name, path in members:
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    atomic_write(archive_path(out), buffer.getvalue())
    return archive_path(out)


def seal(out: str | Path) -> Path:
    """Pack `out`'s finished runs (`pack`), then remove what a sweep would resume from (runs/,
    rounds.json and its lock, checkpoints/, claims/), so the folder is committed for reading
    only. Refused while a run there has no summary: it would be lost."""
    out = Path(out)
    unfinished = [f.name for f in runs_dir(out).glob("*") if not (f / SUMMARY).is_file()]
    if unfinished:
        raise ConfigError(f"{out}: {len(unfinished)} run(s) not finished ({unfinished[0]}, ...); "
                          "finish the sweep before sealing its folder")
    path = pack(out)
    for name in (RUNS, CHECKPOINTS, CLAIMS):
        shutil.rmtree(out / name, ignore_errors=True)
    (out / ROUNDS).unlink(missing_ok=True)
    record_lock(out, ROUNDS).unlink(missing_ok=True)
    return path


def has_archive(out: str | Path) -> bool:
    return archive_path(out).is_file()


def read(out: str | Path) -> dict[str, bytes]:
    """Every member of <out>/runs.tar.xz by name; a damaged archive is a ConfigError naming it."""
    path = archive_path(out)
    try:
        with tarfile.open(path, mode="r:xz") as tar:
            return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    except (tarfile.TarError, EOFError, OSError) as err:
        raise ConfigError(f"{path}: not a readable run archive ({err}); pack it again with "
                          "`scaling.store.archive.pack` from the folder's runs/") from None


def read_member(out: str | Path, name: str) -> Any | None:
    """One JSON file packed beside the runs (rounds.json), None where the archive lacks it."""
    if not has_archive(out):
        return None
    data = read(out).get(name)
    return None if data is None else json.loads(data)


def records(out: str | Path, parse: Any) -> list[dict[str, Any]]:
    """The finished runs packed in <out>/runs.tar.xz as store.load gives them, sorted by id;
    `parse(text, where)` reads a metrics.jsonl's rows."""
    files = read(out)
    ids = sorted({name.split("/")[1] for name in files
                  if name.startswith(f"{RUNS}/") and name.endswith(f"/{SUMMARY}")})
    where = archive_path(out)
    return [{"run_id": run_id,
             "config": json.loads(files[f"{RUNS}/{run_id}/{RUN_CONFIG}"]),
             "summary": json.loads(files[f"{RUNS}/{run_id}/{SUMMARY}"]),
             "metrics": parse(files[f"{RUNS}/{run_id}/{METRICS}"].decode(),
                              f"{where}:{RUNS}/{run_id}/{METRICS}")} for run_id in ids]
