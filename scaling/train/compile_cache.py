"""The persistent compilation cache: a sweep resumed, extended or repeated loads its compiled
programs from disk instead of compiling them again (XLA keys each by the program and the
backend, so a changed config or jax version simply compiles anew)."""

from __future__ import annotations

import logging
from pathlib import Path

import jax

from scaling.tasks.storage import user_cache

log = logging.getLogger(__name__)

MIN_COMPILE_S = 0.2  # programs compiling faster than this are not worth a disk read


def default_folder() -> Path:
    return user_cache() / "jax-compile"


def enable(folder: str | None, off: bool = False) -> None:
    """Cache compiled programs in `folder` (default_folder() when None); `off`: leave jax's
    setting alone (no cache unless jax was told otherwise)."""
    if off:
        return
    folder = Path(folder) if folder else default_folder()
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_S)
    log.debug("compilation cache in %s", folder)
