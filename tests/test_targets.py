"""The rules for "reached the target" against hand-computed crossings, exact integrals, and the
engine: a run stops at the first evaluation from which its rows decide every target."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from scaling import config as config_mod, store
from scaling.config import targets
from scaling.config.targets import Reach, crossing, window_edges, window_mean
from scaling.sweep import runner
from scaling.train import reach as engine


def rows_of(values, steps=None, key="eval_loss"):
    steps = range(len(values)) if steps is None else steps
    return [{"step": s, key: v} for s, v in zip(steps, values)]


def test_first_crossing_interpolates_between_the_last_miss_and_the_first_hit():
    rows = rows_of([3.0, 2.0, 1.2, 0.8], steps=[0, 10, 20, 30])
    assert crossing(rows, "eval_loss<=1.0", Reach("first")) == pytest.approx(25.0)
    assert crossing(rows, "eval_loss<=3.0", Reach("first")) == 0.0
    assert crossing(rows, "eval_loss<=0.5", Reach("first")) is None


def test_sustained_skips_a_lucky_dip_and_waits_for_the_horizon():
    # A dip meets the target at step 3 only; from step 8 on it stays met. Window 1.5: the stretch
    # from step 8 must hold to 1.5 x 9 - 1 = 12.5, so step 13 decides; the crossing is
    # interpolated between steps 7 (1.2) and 8 (0.8).
    values = [3.0, 2.0, 1.5, 0.9, 1.4, 1.3, 1.25, 1.2, 0.8, 0.9, 0.7, 0.8, 0.6, 0.7, 0.5]
    rows = rows_of(values)
    reach = Reach("sustained", 1.5)
    assert crossing(rows, "eval_loss<=1.0", Reach("first")) == pytest.approx(2 + 0.5 / 0.6)
    assert crossing(rows, "eval_loss<=1.0", reach) == pytest.approx(7.5)
    assert crossing(rows[:13], "eval_loss<=1.0", reach) is None  # recorded to step 12 < 12.5
    broken = values[:12] + [1.1] + values[13:]  # step 12 misses: the stretch from 8 breaks
    assert crossing(rows_of(broken), "eval_loss<=1.0", reach) is None
    accuracy = rows_of([0.1, 0.95, 0.5, 0.8, 0.9, 0.92, 0.91, 0.95], key="eval_accuracy")
    assert crossing(accuracy, "eval_accuracy>=0.9", Reach("sustained", 1.5)) == pytest.approx(4.0)


def test_window_mean_is_the_exact_mean_of_the_piecewise_linear_curve():
    rng = np.random.default_rng(0)
    steps = np.unique(np.concatenate([[0], rng.integers(1, 400, 60)]))
    values = rng.normal(size=len(steps))
    u = np.log1p(steps.astype(float))
    edges = window_edges(steps, 1.5)
    cum = targets.cumulative(np, u, values)
    fine = np.linspace(0, u[-1], 400_001)
    curve = np.interp(fine, u, values)
    for k in (5, 20, 40):
        lo, hi = max(u[k] - math.log(1.5), 0.0), u[k] + math.log(1.5)
        if hi > u[-1]:
            continue
        inside = (fine >= lo) & (fine <= hi)
        exact = np.trapezoid(curve[inside], fine[inside]) / (fine[inside][-1] - fine[inside][0])
        assert window_mean(np, u, values, cum, edges, k) == pytest.approx(exact, rel=1e-4, abs=1e-4)


def test_smoothed_crossing_of_a_curve_linear_in_log_step_is_exact():
    # v = 3 - log(1 + t): a centred window in log(1 + t) leaves it unchanged, so the smoothed
    # crossing of v <= 1 is e^2 - 1 = 6.389 (up to the linear interpolation between points).
    steps = np.arange(0, 200)
    rows = rows_of(3.0 - np.log1p(steps), steps)
    assert crossing(rows, "eval_loss<=1.0", Reach("smoothed", 1.5)) == pytest.approx(
        math.e**2 - 1, rel=5e-3)
    assert crossing(rows[:10], "eval_loss<=1.0", Reach("smoothed", 1.5)) is None  # not recorded to 1.5 x 7.4
    noisy = np.array([r["eval_loss"] for r in rows])
    noisy[3] = 0.5  # a dip: first crossing fires, the window mean does not
    dipped = rows_of(noisy, steps)
    assert crossing(dipped, "eval_loss<=1.0", Reach("first")) < 3
    assert crossing(dipped, "eval_loss<=1.0", Reach("smoothed", 1.5)) > 5


def test_rule_ema_reads_the_moving_average_column():
    rows = [{"step": s, "eval_loss": 2.0 - 0.1 * s, "eval_loss_ema": 2.0 - 0.05 * s} for s in range(30)]
    assert crossing(rows, "eval_loss<=1.0", Reach("ema")) == pytest.approx(20.0)
    assert crossing(rows, "eval_loss<=1.0", Reach("first")) == pytest.approx(10.0)


def test_bad_rules_and_windows_are_refused_before_compute():
    base = {"task": {"name": "nqm"}, "budget": {"max_steps": 10}, "learning_rate": {"values": [0.1]}}
    with pytest.raises(config_mod.ConfigError, match="reached.rule: got 'last'"):
        config_mod.from_dict({**base, "reached": {"rule": "last"}})
    with pytest.raises(config_mod.ConfigError, match="reached.window: got 1.0"):
        config_mod.from_dict({**base, "reached": {"window": 1.0}})
    with pytest.raises(config_mod.ConfigError, match="eval.ema_decay"):
        config_mod.from_dict({**base, "reached": {"rule": "ema"}})
    with pytest.raises(config_mod.ConfigError, match="analysis.lr_selection: got 'best'"):
        config_mod.from_dict({**base, "analysis": {"lr_selection": "best"}})


ALL_RUNS = {"data": 1, "runs": math.gcd(8, jax.device_count())}  # shard runs, not the batch


def nqm_rule_cfg(rule: str, **extra) -> config_mod.Config:
    """Noise-dominated NQM (h = c = 1/i) at a small batch: single runs fluctuate around E[L]."""
    return config_mod.from_dict({
        "name": f"rule-{rule}", "task": {"name": "nqm", "dim": 50}, "optimizer": {"name": "sgd"},
        "batch": {"sizes": [4]}, "learning_rate": {"values": [0.2, 0.5, 0.9]}, "seeds": [0, 1],
        "budget": {"max_steps": 600}, "targets": ["eval_loss<=0.9", "eval_loss<=0.5"],
        "reached": {"rule": rule, "window": 1.5}, "eval": {"every": 1, "points_per_decade": 0, **extra},
        "train": {"chunk_steps": 50}, "gns": {"enabled": False}, "parallel": ALL_RUNS})


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["first", "sustained", "smoothed", "ema"])
def test_the_engine_stops_at_the_first_evaluation_that_decides_every_target(tmp_path, rule):
    extra = {"ema_decay": 0.9} if rule == "ema" else {}
    cfg = nqm_rule_cfg(rule, **extra)
    summaries = runner.run(cfg, tmp_path, quiet=True)
    reach = cfg.reached.reach
    completed = [s for s in summaries if s["status"] == "completed"]
    assert len(completed) >= 4
    for s in completed:
        rows = store.read_metrics(store.run_dir(tmp_path, s["run_id"]) / "metrics.jsonl")
        assert rows[-1]["step"] == s["steps"]
        found = [crossing(rows, t, reach) for t in cfg.targets]
        assert None not in found and found == [s["steps_to_target"][t] for t in cfg.targets]
        earlier = [crossing(rows[:-1], t, reach) for t in cfg.targets]
        assert None in earlier, (s["run_id"], earlier)  # one point less would not have decided


def test_ema_closed_form_matches_the_engine_average_over_seeds(tmp_path):
    from scaling.analysis.nqm_reference import constant_lr_expected_loss_ema

    cfg = config_mod.from_dict({
        "task": {"name": "nqm", "dim": 20}, "optimizer": {"name": "sgd"}, "batch": {"sizes": [8]},
        "learning_rate": {"values": [0.5]}, "seeds": list(range(128)), "budget": {"max_steps": 60},
        "eval": {"every": 1, "points_per_decade": 0, "ema_decay": 0.9}, "train": {"chunk_steps": 30},
        "gns": {"enabled": False}, "parallel": ALL_RUNS})
    runner.run(cfg, tmp_path, quiet=True)
    curves = np.array([[r["eval_loss_ema"] for r in rec["metrics"]] for rec in store.load(tmp_path)])
    exact = constant_lr_expected_loss_ema(cfg.task.options, [0.5], 8, 60, 0.9)[0]
    tolerance = 4 * curves.std(0) / math.sqrt(len(curves)) + 1e-5 * exact
    assert np.all(np.abs(curves.mean(0) - exact) <= tolerance)
    plain = np.array([[r["eval_loss"] for r in rec["metrics"]] for rec in store.load(tmp_path)])
    assert np.any(np.abs(plain.mean(0) - exact) > tolerance), "the test must tell EMA from SGD"


# ---------------------------------------------------------------- runs cut short


def _clipped_means(steps: np.ndarray, values: np.ndarray, window: float) -> np.ndarray:
    """Each point's mean over its window cut at 0 and at the last point, by brute force."""
    u = np.log1p(steps.astype(float))
    fine = np.linspace(0, u[-1], 200_001)
    curve = np.interp(fine, u, values)
    out = []
    for k in range(len(steps)):
        lo, hi = max(u[k] - math.log(window), 0.0), min(u[k] + math.log(window), u[-1])
        inside = (fine >= lo) & (fine <= hi)
        out.append(np.trapezoid(curve[inside], fine[inside]) / (fine[inside][-1] - fine[inside][0]))
    out[0] = values[0]
    return np.array(out)


def test_a_window_past_the_end_is_read_clipped_only_when_asked():
    """Loss falling linearly to 1 at step 20 and flat after: the target 2 is crossed at step
    17.5, but the run ends at 40, inside the smoothed window (x2) of every point past 19."""
    steps = np.arange(0, 41, 2)
    values = np.maximum(1.0, 9.0 - 0.4 * steps)
    rows = rows_of(values, steps)
    reach = Reach("smoothed", 2.0)
    assert crossing(rows, "eval_loss<=2.0", reach) is None
    means = _clipped_means(steps, values, 2.0)
    expected = targets.first_crossing(steps, means, "<=", 2.0)
    assert 17.5 < expected < 40
    assert crossing(rows, "eval_loss<=2.0", reach, clip=True) == pytest.approx(expected, rel=1e-4)
    long = np.arange(0, 201, 2)  # the same curve recorded far enough: clip changes nothing
    long_rows = rows_of(np.maximum(1.0, 9.0 - 0.4 * long), long)
    assert crossing(long_rows, "eval_loss<=2.0", reach, clip=True) == \
        crossing(long_rows, "eval_loss<=2.0", reach)
    sustained = rows_of([3.0, 2.0, 1.5, 0.9, 0.8])  # met from step 3; its horizon is 5
    assert crossing(sustained, "eval_loss<=1.0", Reach("sustained", 1.5)) is None
    assert crossing(sustained, "eval_loss<=1.0", Reach("sustained", 1.5), clip=True) == \
        pytest.approx(2 + 0.5 / 0.6)


@pytest.mark.parametrize("reach", [Reach("first"), Reach("sustained", 1.5), Reach("smoothed", 1.5),
                                   Reach("smoothed", 2.0)])
def test_an_undecided_target_is_never_read_below_the_bound(reach):
    """On noisy falling curves, wherever a prefix of the rows does not decide the target, the
    whole run's reading is at or above the prefix's undecided_bound."""
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(40):
        steps = np.unique(np.concatenate([[0], rng.integers(1, 600, 50)]))
        values = 3.0 * np.exp(-steps / rng.uniform(50, 300)) + rng.normal(0, 0.15, len(steps))
        rows = rows_of(values, steps)
        final = crossing(rows, "eval_loss<=1.0", reach)
        for end in range(2, len(steps)):
            if crossing(rows[:end], "eval_loss<=1.0", reach) is None and final is not None:
                assert final >= targets.undecided_bound(steps[:end], reach) - 1e-9
                checked += 1
    assert checked > 100
    assert targets.undecided_bound(np.array([0.0, 10, 20, 30, 39]), Reach("smoothed", 2.0)) == 10
    assert targets.undecided_bound(np.array([0.0, 10, 20, 30, 39]), Reach("first")) == 39


@pytest.mark.parametrize("reach", [Reach("first"), Reach("sustained", 1.5), Reach("smoothed", 1.5),
                                   Reach("smoothed", 2.0)])
def test_the_engines_stop_and_the_analysis_reading_agree_on_random_curves(reach):
    """Each reach rule has two homes, numpy for the analysis (config.targets.crossing) and jit
    for the engine's stop (train.reach.update): on noisy falling curves, at every evaluation
    point, the engine counts a target settled exactly when the rows so far decide it. Three
    targets at once, one of them met from above (">=" on a rising metric), as the engine
    holds them: arrays over the targets."""
    rng = np.random.default_rng(2)
    targets_ = (("eval_loss", "<=", 1.0), ("eval_accuracy", ">=", 0.7),
                ("eval_loss", "<=", 0.5))
    names = [f"{m}{op}{v}" for m, op, v in targets_]
    step_fn = jax.jit(lambda st, v, a, s, p, sched: engine.update(
        st, reach, targets_, {"eval_loss": v, "eval_accuracy": a}, s, p, sched,
        jax.numpy.asarray(True)))
    compared = 0
    for _ in range(12):
        steps = np.unique(np.concatenate([[0], rng.integers(1, 400, 30)]))
        values = 3.0 * np.exp(-steps / rng.uniform(40, 250)) + rng.normal(0, 0.15, len(steps))
        accuracy = 1.0 - values / 3.0 + rng.normal(0, 0.05, len(steps))
        sched = engine.schedule(steps, int(steps[-1]) + 1, 0, reach)
        state = engine.init(len(targets_), len(steps), reach)
        rows = [{"step": s, "eval_loss": v, "eval_accuracy": a}
                for s, v, a in zip(steps, values, accuracy)]
        for p, (s, v, a) in enumerate(zip(steps, values, accuracy)):
            state = step_fn(state, jax.numpy.float32(v), jax.numpy.float32(a),
                            jax.numpy.int32(s), jax.numpy.int32(p), sched)
            for j, name in enumerate(names):
                decided = crossing(rows[:p + 1], name, reach) is not None
                assert bool(state.settled[j]) == decided, (reach, name, list(steps[:p + 1]), p)
                compared += 1
    assert compared > 900
