"""Marks for tests that need several devices.

The suite runs on 8 simulated CPU devices (tests/conftest.py). On a machine that has fewer and
is not simulating them (one GPU, with JAX_PLATFORMS=cuda and XLA_FLAGS emptied, as
experiments/device_check.sh runs it), these tests are skipped and say why.
"""

import jax
import pytest


def needs_devices(count: int) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        jax.device_count() < count,
        reason=f"needs {count} devices, found {jax.device_count()}; on CPU, "
               f"XLA_FLAGS=--xla_force_host_platform_device_count={count} simulates them")
