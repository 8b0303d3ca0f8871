"""Whole files written atomically (a temporary name in the same folder, fsync, the mode an
ordinary write would give, rename: scaling.tasks.storage.write_atomically, which lives in the
tasks layer because the data cache and the engine's checkpoints, below the store, write
through it too); and JSON without NaN (non-finite floats become null)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from scaling.tasks.storage import write_atomically


def atomic_write(path: Path, text: str | bytes) -> None:
    """Write `text` (UTF-8) or bytes to `path` atomically
    (scaling.tasks.storage.write_atomically)."""
    data = text.encode() if isinstance(text, str) else text
    write_atomically(path, lambda handle: handle.write(data))


def _clean(value: Any) -> Any:
    """JSON has no NaN: non-finite floats are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


_ENCODE = json.JSONEncoder(allow_nan=False).encode  # one encoder: json.dumps builds one per call


def dumps(value: Any) -> str:
    """One JSON line; a value with no non-finite float (nearly every metrics row) is written
    without the cleaning walk, which cost more than the encoding itself."""
    try:
        return _ENCODE(value)
    except ValueError:  # a NaN or infinity somewhere: written as null
        return _ENCODE(_clean(value))


def write_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(_clean(value), indent=2, allow_nan=False) + "\n")
