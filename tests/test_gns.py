"""Noise-scale estimators against exactly computable |G|^2 and tr(Sigma)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling import gns
from scaling.engine import RunSpec
from scaling.tasks.nqm import noise_scales
from tests.test_engine import nqm_cfg, train


def small_problem():
    """A finite data set of 64 examples and a softmax-regression loss at fixed parameters."""
    rng = np.random.RandomState(0)
    x = jnp.asarray(rng.randn(64, 5), jnp.float32)
    y = jnp.asarray(rng.randint(0, 3, 64))
    params = {"w": jnp.asarray(rng.randn(5, 3) * 0.5, jnp.float32), "b": jnp.zeros(3)}

    def per_example(p, batch):
        logits = batch["x"] @ p["w"] + p["b"]
        return -jax.nn.log_softmax(logits)[jnp.arange(len(batch["y"])), batch["y"]]

    def loss_fn(p, batch):
        return jnp.mean(per_example(p, batch))

    return {"x": x, "y": y}, params, per_example, loss_fn


def exact_stats(data, params, per_example):
    """|G|^2 and tr(Sigma) from all 64 per-example gradients (population covariance)."""
    grads = jax.vmap(jax.grad(lambda p, e: per_example(p, jax.tree.map(lambda a: a[None], e))[0]),
                     in_axes=(None, 0))(params, data)
    flat = np.concatenate([np.asarray(g).reshape(64, -1) for g in jax.tree.leaves(grads)], axis=1)
    mean = flat.mean(0)
    return float(mean @ mean), float(((flat - mean) ** 2).sum(1).mean())


def test_unbiased_estimates_invert_the_expected_norms():
    g2, trace = 2.0, 30.0
    sq = lambda b: g2 + trace / b  # E|G_B|^2
    est = gns.unbiased_estimates(sq(4), sq(32), 4, 32)
    np.testing.assert_allclose(est, (g2, trace), rtol=1e-6)


@pytest.mark.parametrize("num_groups", [2, 8])
def test_estimate_converges_to_exact_statistics(num_groups):
    data, params, per_example, loss_fn = small_problem()
    g2_exact, trace_exact = exact_stats(data, params, per_example)
    batches, size = 4000, 32
    idx = jax.random.randint(jax.random.key(1), (batches, size), 0, 64)  # i.i.d. draws
    draw = jax.vmap(lambda i: gns.estimate(loss_fn, params, jax.tree.map(lambda a: a[i], data),
                                           num_groups))
    est = jax.jit(draw)(idx)
    for values, exact in ((est.g2, g2_exact), (est.trace_sigma, trace_exact)):
        values = np.asarray(values)
        tolerance = 4 * values.std() / np.sqrt(batches)
        assert abs(values.mean() - exact) <= tolerance
        assert tolerance < 0.2 * abs(exact)  # the check is tight enough to mean something


def test_estimate_rejects_groups_that_do_not_divide():
    data, params, _, loss_fn = small_problem()
    with pytest.raises(ValueError, match="num_groups=5"):
        gns.estimate(loss_fn, params, data, 5)


def test_ema_is_bias_corrected_and_skips_invalid_updates():
    state = gns.ema_update(gns.ema_init(), 2.0, 10.0, 0.9)
    value = gns.ema_value(state)
    assert float(value.g2) == pytest.approx(2.0) and float(value.b_simple) == pytest.approx(5.0)
    unchanged = gns.ema_update(state, 100.0, 100.0, 0.9, valid=False)
    assert float(gns.ema_value(unchanged).g2) == pytest.approx(2.0)
    state = gns.ema_update(state, 4.0, 10.0, 0.9)
    assert float(gns.ema_value(state).g2) == pytest.approx((0.9 * 0.1 * 2 + 0.1 * 4) / (1 - 0.81))


@pytest.mark.parametrize("overrides", [
    {"batch.sizes": "[32]"},  # 8 groups of 4
    {"batch.sizes": "[32]", "batch.accumulation": 4},  # 4 micro-batches of 8: B_small = 8
    {"batch.sizes": "[32]", "batch.accumulation": 2, "gns.groups": 8},  # 2 x 4 groups of 4
])
def test_in_run_estimates_match_the_nqm_closed_form(overrides):
    """With a negligible step size the parameters stay at theta0, where |G|^2 and tr Sigma are exact."""
    cfg = nqm_cfg(**{"budget.max_steps": 200, "eval.every": 200, **overrides})
    seeds = 32
    _, records = train(cfg, [RunSpec(1e-7, s) for s in range(seeds)])
    exact = noise_scales(cfg.task.options, np.full(cfg.task.options.dim, 1.0))
    for key, truth in (("gns_g2_interval", exact["g2"]), ("gns_trace_sigma_interval", exact["trace_sigma"])):
        values = np.array([rows[-1][key] for rows in records])
        assert abs(values.mean() - truth) <= 4 * values.std() / np.sqrt(seeds) + 1e-3 * truth
        assert values.std() / np.sqrt(seeds) < 0.05 * truth
    b_simple = np.array([rows[-1]["b_simple"] for rows in records])
    assert np.median(b_simple) == pytest.approx(exact["b_simple"], rel=0.15)


def test_disabled_measurement_records_nothing_and_does_not_split_the_batch():
    cfg = nqm_cfg(**{"gns.enabled": "false", "budget.max_steps": 20})
    _, records = train(cfg, [RunSpec(0.1, 0)])
    assert all(np.isnan(row["b_simple"]) for row in records[0])
    from scaling.sweep import group_spec

    assert group_spec(cfg, 8, 1)[0].layout.num_groups == 1


def test_hessian_noise_scale_matches_the_nqm_closed_form():
    """B_noise = tr(H Sigma)/(G^T H G) and eps_max = |G|^2/(G^T H G) at theta0, where H is exact."""
    cfg = nqm_cfg(**{"budget.max_steps": 200, "eval.every": 10, "gns.hessian_every": 1,
                     "task.c_power": 0.5, "batch.sizes": "[32]"})
    seeds = 32
    _, records = train(cfg, [RunSpec(1e-7, s) for s in range(seeds)])
    exact = noise_scales(cfg.task.options, np.full(cfg.task.options.dim, 1.0))
    assert exact["b_noise"] != pytest.approx(exact["eps_max"], rel=0.2)  # the two are told apart
    assert np.isnan(records[0][0]["b_noise"])  # no measurement before the first Hessian point
    for key in ("b_noise", "eps_max"):
        values = np.array([rows[-1][key] for rows in records])
        assert np.median(values) == pytest.approx(exact[key], rel=0.1), key


def test_hessian_measurement_needs_a_batch_that_splits():
    from scaling.config import ConfigError
    from scaling.sweep import group_spec

    cfg = nqm_cfg(**{"batch.sizes": "[1]", "gns.hessian_every": 1})
    with pytest.raises(ConfigError, match="gns.hessian_every"):
        group_spec(cfg, 1, 1)
