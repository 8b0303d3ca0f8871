"""Tests run with 8 simulated CPU devices (README's test command); set before jax is imported.

Only what must be a fixture or a hook lives here: the device and compile flags, the run's own
cache folder, the `devices` and `optimised` markers and `scaling_log`. The builders the test
files share are plain functions in tests/helpers.py.

The run's caches (compiled programs, generated data) live in a fresh folder that the test
workers share and that is removed at the end: the suite neither reads nor fills the user's
~/.cache, so it runs here as it does on a new machine, and a program one test compiled is
loaded by the next test (or worker) that builds the same one. SCALING_TEST_RUN_CACHE names a
folder to use instead and keep (warm caches while developing).
"""

from __future__ import annotations

import collections
import logging
import os
import shutil
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Most tests' programs are tiny and compile far longer than they train: on CPU, LLVM's
# optimisation is off for them (XLA's program and its semantics are unchanged; code generation
# takes about half the time, the code runs slower). Tests marked `optimised` train far longer
# than they compile and get level 1, which trains as fast as the default. A level named in
# XLA_FLAGS is kept. The tests' subprocesses inherit the flag (tests.helpers.xla_flags).
OPT_LEVEL = "xla_backend_optimization_level"
_LEVEL_HERE = os.environ["JAX_PLATFORMS"] == "cpu" and OPT_LEVEL not in os.environ["XLA_FLAGS"]
if _LEVEL_HERE:
    os.environ["XLA_FLAGS"] += f" --{OPT_LEVEL}=0"
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

from scaling.train import compile_cache, program  # noqa: E402

compile_cache.enable(None)  # the run's folder (XDG_CACHE_HOME above), as `scaling sweep` does


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "devices(n): needs n devices; skipped, saying why, on "
                                       "a machine with fewer (e.g. one GPU)")
    config.addinivalue_line("markers", "optimised: its runs train far longer than they "
                                       "compile: compiled with LLVM's optimisation on (CPU)")
    # pytest-xdist's --dist loadfile hands out the files with the most tests first, which put the
    # longest files (one or two tests of a minute each) last, trained by one worker while the
    # other idled; the order of the collection below decides instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with an `optimised` test first (the longest, so that they do not end the run on one
    worker), then the files with the most tests, as pytest-xdist orders them by default."""
    file_of = lambda item: item.nodeid.split("::")[0]
    counts = collections.Counter(file_of(item) for item in items)
    long = {file_of(item) for item in items if item.get_closest_marker("optimised")}
    items.sort(key=lambda item: (file_of(item) not in long, -counts[file_of(item)], file_of(item)))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _MADE_HERE:
        shutil.rmtree(os.environ[RUN_CACHE], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before the module's fixtures, whose sweeps it compiles
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked devices(n) where jax sees fewer than n devices; compile an `optimised`
    test's programs at LLVM's level 1 where level 0 is this file's (the engine's CPU compiler
    options override XLA_FLAGS per program, so a level the caller named is left alone)."""
    if _LEVEL_HERE and item.get_closest_marker("optimised") is not None:
        program.CPU_COMPILER_OPTIONS[OPT_LEVEL] = 1
    else:
        program.CPU_COMPILER_OPTIONS.pop(OPT_LEVEL, None)
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
