"""scaling.train.schedules: the learning-rate multiplier of each schedule, exact values at known
points (warm-up, decay, its end), traceable under jit and vmap; a wsd sweep's rates as run."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling import store
from scaling.sweep import runner
from scaling.train.schedules import lr_multiplier
from tests.helpers import NQM, config


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


# ---------------------------------------------------------------- warm-up, stable, decay

WSD = {  # T = 10, warm-up 2, decay 3 (steps 7, 8, 9 at q = 1/3, 2/3, 1), final fraction 0
    "linear": [2 / 3, 1 / 3, 0.0],
    "cosine": [0.75, 0.25, 0.0],
    "sqrt": [1 - math.sqrt(1 / 3), 1 - math.sqrt(2 / 3), 0.0],
}


@pytest.mark.parametrize("shape", list(WSD))
def test_wsd_warms_up_holds_the_peak_then_decays_to_its_end(shape):
    got = [float(lr_multiplier("wsd", t, 10, 2, 0.0, 3, shape)) for t in range(12)]
    assert got[:7] == pytest.approx([0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert got[7:10] == pytest.approx(WSD[shape], abs=1e-7)
    assert got[10:] == pytest.approx([0.0, 0.0], abs=1e-7)  # a reading extension stays at the end


def test_wsd_ends_at_its_final_fraction_and_decays_the_same_from_any_stable_length():
    """The decay's multipliers depend only on where it starts: a cooldown branched from a
    stable run at T - d is the same decay whichever total T the stable run had."""
    f = 0.1
    assert float(lr_multiplier("wsd", 99, 100, 5, f, 20, "sqrt")) == pytest.approx(f)
    short = [float(lr_multiplier("wsd", 40 + k, 60, 5, f, 20, "cosine")) for k in range(20)]
    long = [float(lr_multiplier("wsd", 180 + k, 200, 5, f, 20, "cosine")) for k in range(20)]
    assert short == long and short[0] < 1.0


def test_an_unknown_decay_shape_is_refused():
    with pytest.raises(ValueError, match="decay shape 'step'"):
        lr_multiplier("wsd", 0, 10, 0, 0.0, 3, "step")


def test_a_wsd_sweep_decays_at_the_same_examples_at_every_batch_size_and_schedule(tmp_path):
    """Batch sizes 8 and 16 and a schedule doubling 8 to 16 at half the budget, under wsd
    with a 30% decay: every run's rate first falls within a batch of 0.7 x 1,600 examples, and
    it ends at final_fraction x its last peak."""
    cfg = config(NQM, "batch.sizes=[8, 16]", "budget.max_steps=null",
                 "budget.max_examples=1600", "schedule.name=wsd", "schedule.decay_fraction=0.3",
                 "schedule.final_fraction=0.1", "seeds=[0]",
                 "batch.schedules=[{kind: doubling, start: 8, at: [0.5], max: 16}]")
    runner.run(cfg, tmp_path, quiet=True)
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 3
    for folder in runs:
        rows = store.read_metrics(folder / "metrics.jsonl")
        k = next(k for k in range(1, len(rows)) if rows[k]["lr"] < rows[k - 1]["lr"] * (1 - 1e-6))
        first, peak = rows[k], rows[k - 1]["lr"]  # the first fall: the decay's (the schedule's
        # change to batch 16 raises the rate by the linear rule)
        batch = 8 if folder.name.startswith("bs8") else 16
        assert 1120 - batch < first["examples"] <= 1120 + batch, folder.name
        assert rows[-1]["lr"] == pytest.approx(0.1 * peak, rel=1e-5), folder.name
