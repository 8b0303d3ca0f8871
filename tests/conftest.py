"""Tests run with 8 simulated CPU devices (README's test command); set before jax is imported.

Only what must be a fixture or a hook lives here: the device flags, the `devices` marker and
`scaling_log`. The builders the test files share are plain functions in tests/helpers.py.
"""

from __future__ import annotations

import logging
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402  (after the device flags)
import pytest  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "devices(n): needs n devices; skipped, saying why, on "
                                       "a machine with fewer (e.g. one GPU)")


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
