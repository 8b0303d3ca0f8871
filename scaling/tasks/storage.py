"""Where task data live on disk and how runs name them: the data folder every task shares,
sha256 digests of files and arrays, read-only cached arrays, and an on-disk cache of data
sets that are costly to generate (kept only while its digest matches).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, TypeVar

import numpy as np

log = logging.getLogger(__name__)
T = TypeVar("T")


def user_cache() -> Path:
    """($XDG_CACHE_HOME or ~/.cache)/scaling: what this user's runs on this machine share."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "scaling"


def data_dir() -> Path:
    """$SCALING_DATA, else the user cache: one copy of the data per machine, shared by runs."""
    if os.environ.get("SCALING_DATA"):
        return Path(os.environ["SCALING_DATA"]).expanduser()
    return user_cache()


def arrays_sha256(arrays: dict[str, np.ndarray]) -> str:
    """Digest of named arrays (names, dtypes, shapes and bytes) so runs record their exact data."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])  # no copy of a contiguous (memory-mapped) array
        digest.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        digest.update(a.data)
    return digest.hexdigest()


@functools.lru_cache(maxsize=32)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: str | Path) -> str | dict[str, str]:
    """sha256 of a data file (of each file in a data folder), cached while the file is unchanged."""
    p = Path(path)
    if p.is_dir():
        return {f.name: file_sha256(f) for f in sorted(p.iterdir()) if f.is_file()}
    return _digest(str(p.resolve()), *_stat(p))


def read_only(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Freeze cached arrays so no caller can corrupt the copy other runs share."""
    for a in arrays.values():
        a.flags.writeable = False
    return arrays


def ordinary_mode() -> int:
    """0o666 less the process umask: the mode open() gives a new file. A temporary file from
    mkstemp is private (0o600); it gets this mode before its rename, so collaborators and web
    servers can read results as they could any file the user writes."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomically(path: Path, write: Callable[[BinaryIO], T]) -> T:
    """`write(handle)` into a temporary file beside `path`, flushed to disk, given the mode an
    ordinary write gives, then renamed to `path`: a killed or failed write (an exception from
    `write`, e.g. a digest that does not match) never leaves a file under the name. Returns
    what `write` returns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            result = write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, ordinary_mode())
        os.replace(tmp, path)
        return result
    finally:
        Path(tmp).unlink(missing_ok=True)


def cached(name: str, key: str, build: Callable[[], dict[str, np.ndarray]]
           ) -> dict[str, np.ndarray]:
    """The arrays `build` makes (deterministic in `key`), kept in data_dir()/generated/ as
    NAME-KEY.npz with its sha256 beside it. A file whose digest does not match is generated
    again (with a warning); where the folder cannot be written, the arrays are just returned."""
    path = data_dir() / "generated" / f"{name}-{key}.npz"
    digest = path.with_name(path.name + ".sha256")
    if path.is_file() and digest.is_file():
        if _digest(str(path), *_stat(path)) == digest.read_text().strip():
            with np.load(path) as stored:  # the digest vouches for the bytes
                return {k: stored[k] for k in stored.files}
        log.warning("%s does not match its sha256 in %s; generating it again", path, digest)
    arrays = build()
    try:
        write_atomically(path, lambda handle: np.savez(handle, **arrays))
        write_atomically(digest, lambda handle: handle.write(
            _digest(str(path), *_stat(path)).encode()))
    except OSError as err:
        log.warning("cannot keep %s on disk (%s); it is generated again next time", path, err)
    return arrays


def _stat(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns
