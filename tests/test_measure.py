"""scaling.train.measure: the noise-scale columns of a row, with exactly known averages. A
ratio whose denominator's moving average is not positive is null; the moving eps_max divides
two averages taken at the same Hessian points with the same decay."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest

from scaling import gns, store
from scaling.cli.main import main
from scaling.train.spec import group_spec
from scaling.train import measure
from tests.helpers import NQM, config, write_config


@pytest.fixture
def spec():
    cfg = config(NQM, "gns.hessian_every=1", "batch.sizes=[32]", "gns.ema_decay=0.5")
    return group_spec(cfg, 32, 1)[0]


def test_b_simple_is_null_where_the_moving_g2_is_not_positive(spec):
    noise = measure.init(spec)
    for g2 in (-2.0, 0.0, 4.0):
        ema = gns.ema_update(gns.ema_init((1,)), jnp.float32([g2]), jnp.float32([6.0]), 0.5)
        row = measure.record(spec, noise._replace(ema=ema))
        assert float(row["gns_g2"]) == g2
        assert float(row["b_simple"]) == 1.5 if g2 > 0 else np.isnan(row["b_simple"])


def _probe(values: dict[int, tuple[float, float, float, float]]):
    """A Hessian probe that returns, at point p, (G^T H G, tr(H Sigma), |G|^2, tr(Sigma))."""
    def probe(spec, task, params, data_key, data, point):
        ghg, trace_h, g2, trace = (jnp.float32(v) for v in values[int(point)])
        return gns.HessianEstimate(ghg, trace_h, trace_h / ghg, g2 / ghg, g2, trace)
    return probe


def _hessian_points(spec, monkeypatch, values) -> list[dict]:
    """Rows after each of `values`' points, with a per-step |G|^2 average of 100 throughout."""
    monkeypatch.setattr(measure, "hessian_probe", _probe(values))
    noise = measure.init(spec)
    noise = noise._replace(ema=gns.ema_update(noise.ema, jnp.float32([100.0]), jnp.float32([7.0]), 0.5))
    rows = []
    for point in sorted(values):
        noise, est = measure.hessian_update(spec, None, None, None, noise, None, jnp.int32(point),
                                            jnp.bool_(True), jnp.bool_(True))
        rows.append({k: float(v) for k, v in measure.record(spec, noise, est).items()})
    return rows


def test_the_moving_eps_max_divides_averages_over_the_same_hessian_points(spec, monkeypatch):
    rows = _hessian_points(spec, monkeypatch, {10: (1.0, 5.0, 4.0, 9.0), 20: (3.0, 2.0, 2.0, 9.0)})
    # Decay 0.5 at both points; the bias correction cancels in each ratio.
    assert rows[0]["eps_max"] == pytest.approx(4.0) and rows[0]["b_noise"] == pytest.approx(5.0)
    assert rows[1]["gns_ghg"] == pytest.approx((0.25 * 1 + 0.5 * 3) / 0.75)
    assert rows[1]["eps_max"] == pytest.approx((0.25 * 4 + 0.5 * 2) / (0.25 * 1 + 0.5 * 3))
    assert rows[1]["b_noise"] == pytest.approx((0.25 * 5 + 0.5 * 2) / (0.25 * 1 + 0.5 * 3))
    assert rows[1]["gns_g2"] == 100.0  # the per-step average, which eps_max no longer uses
    assert (rows[1]["gns_ghg_point"], rows[1]["gns_trace_h_sigma_point"]) == (3.0, 2.0)


def test_b_noise_and_eps_max_are_null_where_their_averages_are_not_positive(spec, monkeypatch):
    rows = _hessian_points(spec, monkeypatch, {10: (1.0, 5.0, 4.0, 9.0), 20: (-3.0, 2.0, 2.0, 9.0),
                                               30: (5.0, 2.0, -9.0, 9.0)})
    assert rows[1]["gns_ghg"] < 0 and np.isnan(rows[1]["b_noise"]) and np.isnan(rows[1]["eps_max"])
    assert rows[2]["gns_ghg"] > 0 and rows[2]["b_noise"] == pytest.approx(
        (0.125 * 5 + 0.25 * 2 + 0.5 * 2) / (0.125 * 1 - 0.25 * 3 + 0.5 * 5))
    # |G|^2 at the probe averages below zero: no step size, though G^T H G is positive.
    assert (0.125 * 4 + 0.25 * 2 - 0.5 * 9) < 0 and np.isnan(rows[2]["eps_max"])


@pytest.mark.slow
def test_near_the_optimum_b_simple_is_null_where_g2_is_not_positive_and_counted(tmp_path):
    """NQM started next to its optimum: the true |G|^2 (1e-6) is far below its estimate's
    noise, so the moving estimate is below zero at some points and above at others; the
    summary counts the null points."""
    path = write_config(tmp_path, "task.init_scale=1e-3", "seeds=[0]", "batch.sizes=[16]",
                        "learning_rate.values=[1e-4]", "eval.every=1", "eval.points_per_decade=0",
                        "targets=[]", "budget.max_examples=3200")
    assert main(["sweep", path, "--out", str(tmp_path / "o"), "--quiet", "--no-analyze"]) == 0
    (record,) = store.load(tmp_path / "o")
    rows = [r for r in record["metrics"] if r["gns_g2"] is not None]
    below = [r for r in rows if r["gns_g2"] <= 0]
    above = [r for r in rows if r["gns_g2"] > 0]
    assert below and above  # both cases occur, so the check means something
    assert all(r["b_simple"] is None for r in below)
    for r in above:
        assert r["b_simple"] == pytest.approx(r["gns_trace_sigma"] / r["gns_g2"], rel=1e-4)
    assert record["summary"]["noise_scale_undefined"] == {"b_simple": len(below)}
    summary = json.loads((tmp_path / "o" / "runs" / record["run_id"] / "summary.json").read_text())
    assert summary["noise_scale_undefined"]["b_simple"] == len(below)
