"""Throughput figures: XLA's FLOP count against exact arithmetic, the peak table, MFU, and the
figures a sweep records in summaries, analysis.json, report.md and its end table."""

from __future__ import annotations

import json
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import pytest

from scaling.analysis.analyze import analyze
from scaling.sweep import runner
from scaling.train import throughput
from tests.helpers import DIGITS, assert_throughput, config

B, D = 32, 50
SHAPES = ({"w": jax.ShapeDtypeStruct((D,), jnp.float32)},
          {"x": jax.ShapeDtypeStruct((B, D), jnp.float32)})


def test_the_gradient_of_a_linear_model_costs_one_matrix_vector_product():
    """d/dw mean(x @ w) = x^T 1 / B: B x D multiply-adds, 2 B D FLOPs, the forward pass unused."""
    assert throughput.step_flops(lambda p, b: b["x"] @ p["w"], *SHAPES) == 2 * B * D


def test_a_squared_linear_model_costs_forward_and_backward():
    flops = throughput.step_flops(lambda p, b: (b["x"] @ p["w"]) ** 2, *SHAPES)
    assert 4 * B * D <= flops <= 4 * B * D + 4 * B


@pytest.mark.parametrize("kind, precision, tflops", [
    ("NVIDIA H100 80GB HBM3", "bfloat16", 989.0), ("NVIDIA H100 PCIe", "bfloat16", 756.0),
    ("NVIDIA A100-SXM4-40GB", "float32", 156.0), ("NVIDIA H200", "float32", 494.0),
    ("TPU v5 lite", "bfloat16", 197.0), ("TPU v5p", "bfloat16", 459.0),
    ("Tesla V100-SXM2-16GB", "float32", 15.7)])
def test_published_peaks_are_found_by_device_kind(kind, precision, tflops):
    value, source = throughput.peak(SimpleNamespace(device_kind=kind), precision)
    assert value == pytest.approx(tflops * 1e12) and "published" in source


def test_an_unknown_device_falls_back_to_a_measured_matmul():
    value, source = throughput.peak(SimpleNamespace(device_kind="cpu"), "float32")
    assert 1e8 < value < 1e14 and "measured" in source


def test_mfu_is_model_flops_per_second_over_the_peak_of_every_device():
    device = SimpleNamespace(device_kind="NVIDIA A100-SXM4-80GB")
    f = throughput.figures(run_steps=1000, batch_size=64, train_s=2.0, flops_per_step=3.12e9,
                           device=device, num_devices=4, precision="bfloat16")
    assert f["examples_per_s"] == 32000 and f["run_steps_per_s"] == 500
    assert f["model_flops_per_s"] == pytest.approx(1.56e12)
    assert f["mfu"] == pytest.approx(1.56e12 / (4 * 312e12))
    assert throughput.figures(10, 8, 1.0, None, device, 1, "float32")["mfu"] is None


def test_a_sweep_records_its_throughput_in_summaries_and_analysis(tmp_path):
    cfg = config(DIGITS, "targets=['eval_loss<=1.0']")
    runner.run(cfg, tmp_path, quiet=True)
    summaries = [json.loads(p.read_text()) for p in tmp_path.glob("runs/*/summary.json")]
    speeds = [s["throughput"] for s in summaries]
    assert len(speeds) == 2 and speeds[0] == speeds[1], "one group: one figure for both runs"
    # An MLP 64-32-10 at batch 64: the weight gradients alone take 2 x 64 x (64x32 + 32x10)
    # FLOPs and the forward pass as many; the input layer needs no gradient of its input.
    weights = 2 * 64 * (64 * 32 + 32 * 10)
    assert 2 * weights <= speeds[0]["model_flops_per_step"] <= 3.3 * weights
    assert 0 < speeds[0]["mfu"] < 1 and speeds[0]["examples_per_s"] > 0
    assert assert_throughput(tmp_path) == 1
    analysis = analyze(tmp_path)
    assert analysis["throughput"][0]["batch_size"] == 64
    assert analysis["throughput"][0]["mfu"] == pytest.approx(speeds[0]["mfu"])
