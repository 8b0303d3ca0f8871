"""Whole files written atomically: a temporary name in the same folder, fsync, the mode an
ordinary write would give (0o666 less the umask), rename; and JSON without NaN (non-finite
floats become null)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from scaling.tasks.storage import ordinary_mode


def atomic_write(path: Path, text: str | bytes) -> None:
    """Write `text` (or bytes) to `path` via a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, ordinary_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _clean(value: Any) -> Any:
    """JSON has no NaN: non-finite floats are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def dumps(value: Any) -> str:
    return json.dumps(_clean(value), allow_nan=False)


def write_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(_clean(value), indent=2, allow_nan=False) + "\n")
