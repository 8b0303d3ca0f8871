"""Tests run with 8 simulated CPU devices (README's test command); set before jax is imported.

Only what must be a fixture or a hook lives here: the device flags, the run's own cache
folder, the `devices` marker and `scaling_log`. The builders the test files share are plain
functions in tests/helpers.py.

The run's caches (compiled programs, generated data) live in a fresh folder that the test
workers share and that is removed at the end: the suite neither reads nor fills the user's
~/.cache, so it runs here as it does on a new machine, and a program one test compiled is
loaded by the next test (or worker) that builds the same one. SCALING_TEST_RUN_CACHE names a
folder to use instead and keep (warm caches while developing).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# On an accelerator (JAX_PLATFORMS=cuda) the tests' subprocesses share the device with pytest's
# own process: each taking 75% of its memory up front, as JAX does by default, starves them.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
RUN_CACHE = "SCALING_TEST_RUN_CACHE"  # a folder to keep between runs; the test workers inherit it
_MADE_HERE = not os.environ.get(RUN_CACHE)
if _MADE_HERE:
    os.environ[RUN_CACHE] = tempfile.mkdtemp(prefix="scaling-tests-")
os.environ["XDG_CACHE_HOME"] = os.environ[RUN_CACHE]

import jax  # noqa: E402  (after the device flags)
import pytest  # noqa: E402

from scaling.train import compile_cache  # noqa: E402

compile_cache.enable(None)  # the run's folder (XDG_CACHE_HOME above), as `scaling sweep` does


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "devices(n): needs n devices; skipped, saying why, on "
                                       "a machine with fewer (e.g. one GPU)")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _MADE_HERE:
        shutil.rmtree(os.environ[RUN_CACHE], ignore_errors=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked devices(n) where jax sees fewer than n devices."""
    mark = item.get_closest_marker("devices")
    if mark is not None and jax.device_count() < mark.args[0]:
        pytest.skip(f"needs {mark.args[0]} devices, found {jax.device_count()}; on CPU, "
                    f"XLA_FLAGS=--xla_force_host_platform_device_count={mark.args[0]} "
                    "simulates them")


@pytest.fixture
def scaling_log(caplog):
    """caplog that hears the `scaling` logger at INFO even after the CLI stopped it propagating
    to the root logger (scaling.cli.main.configure_logging)."""
    logger = logging.getLogger("scaling")
    level, propagate = logger.level, logger.propagate
    logger.addHandler(caplog.handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # caplog's handler sits on the root too: each record once
    yield caplog
    logger.removeHandler(caplog.handler)
    logger.setLevel(level)
    logger.propagate = propagate
