"""Noise-scale estimators (scaling.gns) against exactly computable |G|^2 and tr(Sigma), alone
and end to end through the engine and `scaling gns`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from scaling import gns
from scaling.analysis.nqm_reference import noise_scales
from scaling.train.gradients import batch_gradient
from scaling.train.optimizers import make_optimizer, preconditioner
from scaling.train.spec import GroupLayout, RunSpec
from tests.helpers import DIGITS, NQM, config, train


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


def test_unbiased_estimates_invert_the_expected_norms():
    g2, trace = 2.0, 30.0
    sq = lambda b: g2 + trace / b  # E|G_B|^2
    est = gns.unbiased_estimates(sq(4), sq(32), 4, 32)
    np.testing.assert_allclose(est, (g2, trace), rtol=1e-6)


@pytest.mark.parametrize("num_groups", [2, 8])
def test_estimate_converges_to_exact_statistics(num_groups):
    data, params, per_example, loss_fn = small_problem()
    truth = gns.exact_statistics(per_example, params, data)
    g2_exact, trace_exact = truth.g2, truth.trace_sigma
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
    ["batch.sizes=[32]"],  # the default 4 groups of 8
    ["batch.sizes=[32]", "gns.groups=2"],  # the cheapest split: 2 groups of 16
    ["batch.sizes=[32]", "batch.accumulation=4"],  # 4 micro-batches of 8: B_small = 8
    ["batch.sizes=[32]", "batch.accumulation=2", "gns.groups=8"],  # 2 x 4 groups of 4
    ["batch.sizes=[32]", "task.draw=means"],  # each group's mean drawn directly
    ["batch.sizes=[32]", "batch.accumulation=2", "gns.groups=8", "task.draw=means"],
])
def test_in_run_estimates_match_the_nqm_closed_form(overrides):
    """With a negligible step size the parameters stay at theta0, where |G|^2 and tr Sigma are exact."""
    cfg = config(NQM, "budget.max_steps=200", "eval.every=200", *overrides)
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
    cfg = config(NQM, "gns.enabled=false", "budget.max_steps=20")
    _, records = train(cfg, [RunSpec(0.1, 0)])
    assert all(np.isnan(row["b_simple"]) for row in records[0])
    from scaling.train.spec import group_spec

    assert group_spec(cfg, 8, 1)[0].layout.num_groups == 1


def test_hessian_noise_scale_matches_the_nqm_closed_form():
    """B_noise = tr(H Sigma)/(G^T H G) and eps_max = |G|^2/(G^T H G) at theta0, where H is exact."""
    cfg = config(NQM, "budget.max_steps=200", "eval.every=10", "gns.hessian_every=1",
                 "task.c_power=0.5", "batch.sizes=[32]")
    seeds = 32
    _, records = train(cfg, [RunSpec(1e-7, s) for s in range(seeds)])
    exact = noise_scales(cfg.task.options, np.full(cfg.task.options.dim, 1.0))
    assert exact["b_noise"] != pytest.approx(exact["eps_max"], rel=0.2)  # the two are told apart
    assert np.isnan(records[0][0]["b_noise"])  # no measurement before the first Hessian point
    for key in ("b_noise", "eps_max"):
        values = np.array([rows[-1][key] for rows in records])
        assert np.median(values) == pytest.approx(exact[key], rel=0.1), key
    # The raw point estimates: one per Hessian point, pooled over all runs and points they give
    # tr(H Sigma) / G^T H G at theta0 (lr 1e-7 keeps the parameters there).
    points = [(r["gns_trace_h_sigma_point"], r["gns_ghg_point"]) for rows in records for r in rows[1:]]
    assert np.isnan(records[0][0]["gns_ghg_point"]) and all(np.isfinite(points).all(axis=1))
    trace, ghg = np.sum(points, axis=0)
    assert trace / ghg == pytest.approx(exact["b_noise"], rel=0.1)


@pytest.mark.parametrize("hessian_from", ["independent batch", "second half"])
def test_hessian_estimate_converges_to_exact_statistics(hessian_from):
    """On a finite data set with per-example curvature (softmax regression), G^T H G and
    tr(H Sigma) averaged over i.i.d. batches match the exact values; the Hessian of the
    gradients' own batch would not (shown last: the check can tell the two apart)."""
    data, params, per_example, loss_fn = small_problem()
    truth = gns.exact_statistics(per_example, params, data)
    ghg_exact, trace_exact = truth.ghg, truth.trace_h_sigma
    batches, size, groups = 4000, 8, 4
    idx = jax.random.randint(jax.random.key(2), (batches, 2, size), 0, 64)  # i.i.d. draws
    take = lambda i: jax.tree.map(lambda a: a[i], data)
    if hessian_from == "independent batch":
        one = lambda i: gns.hessian_estimate(loss_fn, params, take(i[0]), groups, take(i[1]))
    else:  # the default: first half of one batch of 2 x size for the groups, second for H
        one = lambda i: gns.hessian_estimate(loss_fn, params, take(i.reshape(-1)), groups)
    est = jax.jit(jax.vmap(one))(idx)
    for values, exact in ((est.ghg, ghg_exact), (est.trace_h_sigma, trace_exact)):
        values = np.asarray(values, np.float64)
        tolerance = 4 * values.std() / np.sqrt(batches)
        assert abs(values.mean() - exact) <= tolerance
        assert tolerance < 0.2 * abs(exact)
    same = jax.jit(jax.vmap(lambda i: gns.hessian_estimate(loss_fn, params, take(i[0]), groups,
                                                           take(i[0]))))(idx)
    assert abs(np.mean(same.ghg) - ghg_exact) > 0.2 * abs(ghg_exact)


@pytest.mark.slow
def test_engine_hessian_probe_matches_exact_statistics_off_the_quadratic():
    """In-run tr(H Sigma) and G^T H G on softmax regression (digits, no hidden layer) at fixed
    parameters (learning rate 1e-9) match their exact values over the training set: the probe
    takes the Hessian from a batch independent of the gradients'. With the gradients' own
    batch, tr(H Sigma) reads 1.11x here at B=8, which the first check is tight enough to reject
    (G^T H G is too noisy per point to tell: its check is only for gross errors)."""
    from scaling.tasks import build_task

    cfg = config(DIGITS, "model.hidden=[]", "batch.sizes=[8]", "budget.max_steps=160",
                 "eval.every=1", "gns.hessian_every=1", "train.chunk_steps=40")
    seeds = 16
    _, records = train(cfg, [RunSpec(1e-9, s) for s in range(seeds)])
    task = build_task(cfg)
    data = {k: jnp.asarray(v) for k, v in task.train_arrays().items()}
    ratios = []  # per Hessian point: (tr(H Sigma), G^T H G) over this seed's exact values
    for seed, rows in enumerate(records):
        params = task.init(jax.random.split(jax.random.key(seed))[0])  # the engine's init key
        truth = gns.exact_statistics(task.per_example_loss, params, data)
        ghg, trace = truth.ghg, truth.trace_h_sigma
        ratios += [(r["gns_trace_h_sigma_point"] / trace, r["gns_ghg_point"] / ghg)
                   for r in rows[1:]]
    ratios = np.asarray(ratios)
    assert ratios.shape == (seeds * 160, 2)
    error = ratios.std(axis=0) / np.sqrt(len(ratios))
    assert error[0] < 0.02
    assert np.all(np.abs(ratios.mean(axis=0) - 1.0) <= 4 * error)


def test_hessian_estimate_needs_an_even_batch_to_split():
    data, params, _, loss_fn = small_problem()
    with pytest.raises(ValueError, match="must be even"):
        gns.hessian_estimate(loss_fn, params, jax.tree.map(lambda a: a[:9], data), 2)


def test_hessian_measurement_needs_a_batch_that_splits():
    from scaling.config import ConfigError
    from scaling.train.spec import group_spec

    cfg = config(NQM, "batch.sizes=[1]", "gns.hessian_every=1")
    with pytest.raises(ConfigError, match="gns.hessian_every"):
        group_spec(cfg, 1, 1)


@pytest.mark.parametrize("accumulation,groups", [(1, 4), (2, 8)])
def test_preconditioned_norms_are_plain_norms_of_rescaled_gradients(accumulation, groups):
    """With a fixed diagonal P, |g|^2_P of every group equals |p * g|^2 from exact per-example grads."""
    data, params, per_example, _ = small_problem()
    rng = np.random.RandomState(3)
    scale = jax.tree.map(lambda a: jnp.asarray(rng.uniform(0.2, 3.0, a.shape), jnp.float32), params)
    metric = jax.tree.map(jnp.square, scale)
    layout = GroupLayout.choose(64, accumulation, 1, groups)
    out = batch_gradient(per_example, params, data, jnp.ones(64), layout, metric=metric)
    per = jax.vmap(jax.grad(lambda p, e: per_example(p, jax.tree.map(lambda a: a[None], e))[0]),
                   in_axes=(None, 0))(params, data)
    flat = lambda tree: np.concatenate([np.asarray(g).reshape(64, -1) for g in jax.tree.leaves(tree)], 1)
    per_scale = jax.tree.map(lambda s: jnp.broadcast_to(s, (64, *s.shape)), scale)
    plain, rescaled = flat(per), flat(per) * flat(per_scale)
    for i, grads in enumerate((plain, rescaled)):
        means = grads.reshape(groups, 64 // groups, -1).mean(1)
        np.testing.assert_allclose(out.sq_small[i], (means ** 2).sum(1).mean(), rtol=1e-5)
        np.testing.assert_allclose(out.sq_big[i], (grads.mean(0) ** 2).sum(), rtol=1e-5)
    assert not np.isclose(out.sq_small[0], out.sq_small[1], rtol=0.05)  # P really changes them


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_preconditioner_is_adams_bias_corrected_second_moment(name):
    hp = dict(learning_rate=0.1, b1=0.9, b2=0.99, eps=1e-3, weight_decay=0.0)
    tx = optax.inject_hyperparams(make_optimizer(name))(**hp)
    params = {"w": jnp.zeros(3)}
    state = tx.init(params)
    assert not bool(preconditioner(state)[1])  # no second moment before the first update
    grads = [np.array([1.0, -2.0, 0.5]), np.array([3.0, 0.0, -1.0])]
    for g in grads:
        _, state = tx.update({"w": jnp.asarray(g, jnp.float32)}, state, params)
    metric, seen = preconditioner(state)
    v = (1 - 0.99) * (0.99 * grads[0] ** 2 + grads[1] ** 2)
    expected = 1 / (np.sqrt(v / (1 - 0.99 ** 2)) + 1e-3) ** 2
    assert bool(seen)
    np.testing.assert_allclose(metric["w"], expected, rtol=1e-5)


def test_engine_with_adam_records_preconditioned_noise_scale():
    cfg = config(DIGITS, "optimizer.name=adam", "gns.preconditioned=true",
                 "learning_rate.values=[0.001]")
    _, records = train(cfg, [RunSpec(1e-3, 0, b1=0.9, b2=0.999, eps=1e-8)])
    rows = records[0]
    assert np.isnan(rows[0]["b_simple_precond"])  # step 0: nothing measured yet
    later = np.array([[r["b_simple"], r["b_simple_precond"], r["gns_g2_precond"],
                       r["gns_trace_sigma_precond"]] for r in rows[1:]])
    assert np.all(np.isfinite(later)) and np.all(later[:, 2:] != 0)
    assert not np.allclose(later[:, 0], later[:, 1], rtol=0.05)  # a different metric


def test_preconditioned_needs_adam_and_every_must_be_positive():
    from scaling.config import ConfigError

    with pytest.raises(ConfigError, match="gns.preconditioned.*adam or adamw"):
        config(NQM, "gns.preconditioned=true")
    with pytest.raises(ConfigError, match="gns.every"):
        config(NQM, "gns.every=0")


@pytest.mark.parametrize("draw", ["examples", "means"])
def test_measuring_every_fourth_step_still_matches_the_closed_form(draw):
    """Plain steps between measurements must not count: they would pull tr Sigma towards 0."""
    cfg = config(NQM, "budget.max_steps=200", "eval.every=200", "batch.sizes=[32]",
                 "gns.every=4", f"task.draw={draw}")
    seeds = 32
    _, records = train(cfg, [RunSpec(1e-7, s) for s in range(seeds)])
    exact = noise_scales(cfg.task.options, np.full(cfg.task.options.dim, 1.0))
    values = np.array([rows[-1]["gns_trace_sigma_interval"] for rows in records])
    assert abs(values.mean() - exact["trace_sigma"]) <= 4 * values.std() / np.sqrt(seeds)
    assert values.std() / np.sqrt(seeds) < 0.1 * exact["trace_sigma"]


def test_gns_command_trains_one_run_prints_b_simple_and_draws(tmp_path, capsys, monkeypatch):
    import json

    from scaling import store
    from scaling.cli.main import main

    printed_before = {}  # step of the rows being written -> table lines printed until then
    append = store.append_metrics

    def spy(out, run_id, rows):
        printed_before[rows[0]["step"]] = capsys.readouterr().out
        append(out, run_id, rows)

    monkeypatch.setattr(store, "append_metrics", spy)

    config = tmp_path / "tiny.yaml"
    config.write_text("name: tiny\ntask: {name: digits}\nmodel: {name: mlp, hidden: [16]}\n"
                      "optimizer: {name: momentum}\nbatch: {sizes: [32, 64]}\n"
                      "learning_rate: {values: [0.05, 0.1]}\nbudget: {max_steps: 30}\n"
                      "eval: {every: 10, points_per_decade: 0}\ntrain: {chunk_steps: 10}\n")
    out = tmp_path / "out"
    assert main(["gns", str(config), "--out", str(out), "--batch-size", "64", "--quiet"]) == 0
    printed = ("".join(printed_before.values()) + capsys.readouterr().out).splitlines()
    # Streamed: when a chunk's rows are written, the rows before them are already printed.
    assert sorted(printed_before) == [0, 10, 20, 30]
    assert [len(printed_before[s].splitlines()) for s in (0, 10, 20, 30)] == [0, 2, 1, 1]
    run = out / "runs" / "bs64-lr0.05-seed0"  # the given batch size, the config's first lr
    assert sorted(p.name for p in (out / "runs").iterdir()) == [run.name]
    assert {"config.json", "metrics.jsonl", "summary.json"} <= {p.name for p in run.iterdir()}
    assert (out / "noise_vs_loss.png").stat().st_size > 1000
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert "B_simple" in printed[0]
    table = [line.split() for line in printed[1:1 + len(rows)]]
    assert [int(cells[0]) for cells in table] == [r["step"] for r in rows] == [0, 10, 20, 30]
    for cells, row in zip(table[1:], rows[1:]):  # step 0 has no estimate yet
        assert float(cells[-1]) == pytest.approx(row["b_simple"], rel=1e-3)
    assert len(printed) == 1 + len(rows) + 1  # header, one line per row, the closing line
    # Again: the finished run is not trained twice, and the table printed from its files is the same.
    assert main(["gns", str(config), "--out", str(out), "--batch-size", "64", "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines() == printed


def test_gns_command_refuses_bad_input_before_training(tmp_path, capsys):
    from scaling.cli.main import main

    config = tmp_path / "c.yaml"
    config.write_text("task: {name: nqm, dim: 4}\noptimizer: {name: sgd}\nbatch: {sizes: [8]}\n"
                      "learning_rate: {values: [0.1]}\nbudget: {max_steps: 10}\n")
    assert main(["gns", str(config), "gns.preconditioned=true", "--out", str(tmp_path / "o")]) == 2
    assert "error: gns.preconditioned" in capsys.readouterr().err
    assert main(["gns", str(config), "gns.enabled=false", "--out", str(tmp_path / "o")]) == 2
    assert "error: gns.enabled" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_sweep_passes_the_gns_options_to_the_engine():
    from scaling.train.spec import group_spec

    cfg = config(DIGITS, "optimizer.name=adam", "gns.every=4", "gns.preconditioned=true")
    spec, _ = group_spec(cfg, 64, 1)
    assert (spec.noise.every, spec.noise.preconditioned) == (4, True)


def test_b_simple_is_undefined_where_the_moving_g2_is_not_positive():
    """Where the average of the unbiased |G|^2 estimates is zero or below, B_simple is NaN
    (null on disk), never a negative or huge number; above it, the exact ratio."""
    for g2, expected in ((-1.0, None), (0.0, None), (2.0, 5.0)):
        value = gns.ema_value(gns.ema_update(gns.ema_init(), g2, 10.0, 0.9))
        assert float(value.g2) == g2
        assert (np.isnan(value.b_simple) if expected is None else float(value.b_simple) == expected)
    assert np.isnan(gns.ema_value(gns.ema_init()).b_simple)  # before the first update
    assert np.isnan(gns.ratio(jnp.float32(3.0), jnp.float32(-1e-30)))


def _quadratic(sign: float):
    """Per-example loss sign x |w - x_i|^2 / 2: gradients w - x_i (times sign), Hessian sign x I,
    so G^T H G = sign x |G|^2 and tr(H Sigma) = sign x tr(Sigma) exactly."""
    def loss_fn(p, batch):
        return sign * 0.5 * jnp.mean(jnp.sum((p - batch) ** 2, axis=1))
    return loss_fn


def test_hessian_ratios_are_exact_on_a_quadratic_and_undefined_where_h_is_negative():
    batch = jnp.asarray(np.random.RandomState(0).randn(32, 4), jnp.float32)
    params = jnp.full(4, 10.0, jnp.float32)  # far from the data: |G|^2 well above its noise
    up = gns.hessian_estimate(_quadratic(1.0), params, batch, 4)
    assert float(up.ghg) == pytest.approx(float(up.g2), rel=1e-4)  # float32 both ways
    assert float(up.b_noise) == pytest.approx(float(up.trace_sigma / up.g2), rel=1e-4)
    assert float(up.eps_max) == pytest.approx(1.0, rel=1e-4)  # the best step of H = I
    down = gns.hessian_estimate(_quadratic(-1.0), params, batch, 4)
    assert float(down.ghg) == pytest.approx(-float(down.g2), rel=1e-4) and float(down.ghg) < 0
    assert np.isnan(down.b_noise) and np.isnan(down.eps_max)
