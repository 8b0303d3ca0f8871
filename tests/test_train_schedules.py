"""scaling.train.schedules: the learning-rate multiplier of each schedule, exact values at known
points (warm-up, decay, its end), traceable under jit and vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling.train.schedules import lr_multiplier


def _m(name, step, total, warmup, final=0.0):
    return float(lr_multiplier(name, step, total, warmup, final))


def test_warmup_ramp():
    for name in ("constant", "linear", "cosine"):
        assert _m(name, 0, 100, 10) == pytest.approx(0.1)
        assert _m(name, 4, 100, 10) == pytest.approx(0.5)
        assert _m(name, 9, 100, 10) == pytest.approx(1.0)
        assert _m(name, 10, 100, 10) == pytest.approx(1.0)  # first step after warm-up


def test_constant_after_warmup_and_without_warmup():
    assert _m("constant", 0, 100, 0) == 1.0
    assert _m("constant", 99, 100, 10) == 1.0


def test_linear_decay_ends_at_final_fraction():
    assert _m("linear", 0, 101, 0, 0.1) == pytest.approx(1.0)
    assert _m("linear", 50, 101, 0, 0.1) == pytest.approx(0.55)
    assert _m("linear", 100, 101, 0, 0.1) == pytest.approx(0.1)
    assert _m("linear", 99, 100, 10, 0.1) == pytest.approx(0.1)


def test_cosine_decay_midpoint_and_end():
    assert _m("cosine", 50, 101, 0, 0.1) == pytest.approx(0.55)
    assert _m("cosine", 25, 101, 0, 0.0) == pytest.approx(0.5 * (1 + np.cos(np.pi / 4)), rel=1e-6)
    assert _m("cosine", 100, 101, 0, 0.1) == pytest.approx(0.1)
    assert _m("cosine", 99, 100, 10, 0.0) == pytest.approx(0.0, abs=1e-7)


def test_multiplier_is_traceable_and_bounded():
    fn = jax.jit(lambda s: lr_multiplier("cosine", s, 200, 20, 0.0))
    values = np.asarray(jax.vmap(fn)(jnp.arange(200)))
    assert values.min() >= 0.0 and values.max() <= 1.0
    assert np.all(np.diff(values[:20]) > 0) and np.all(np.diff(values[19:]) <= 1e-7)


def test_unknown_schedule():
    with pytest.raises(ValueError, match="schedule 'step' is unknown"):
        lr_multiplier("step", 0, 10, 0, 0.0)
