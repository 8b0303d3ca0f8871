"""The devices' peak FLOP/s that MFU is taken over, and how a record names where its peak came
from (`peak_source`). Jax-free, so the analysis reads the names without importing jax."""

from __future__ import annotations

from typing import Any

NO_PEAK = "(no published peak; train.peak_tflops sets one)"  # a CPU, an unknown device kind
# Runs trained on a CPU before 2026-12-04 recorded MFU over a float32 matmul the sweep timed;
# `scaling bench` still measures one, to say how busy a CPU is.
MEASURED_PEAK = "(measured float32 matmul)"

# Dense tensor-core TFLOP/s per chip: (bfloat16, float32 as jax computes it by default).
# Matched against jax's device_kind in this order (the first entry contained in it wins).
PEAK_TFLOPS: tuple[tuple[str, float, float], ...] = (
    ("H200", 989.0, 494.0),
    ("H100 PCIe", 756.0, 378.0),
    ("H100", 989.0, 494.0),
    ("A100", 312.0, 156.0),
    ("L40S", 362.0, 183.0),
    ("L4", 121.0, 60.0),
    ("A10", 125.0, 62.5),
    ("V100", 125.0, 15.7),
    ("TPU v6", 918.0, 918.0),
    ("TPU v5p", 459.0, 459.0),
    ("TPU v5", 197.0, 197.0),
    ("TPU v4", 275.0, 275.0),
)


def peak(device: Any, precision: str, tflops: float | None = None) -> tuple[float | None, str]:
    """(FLOP/s of one device at this precision, where the figure comes from): `tflops`
    (train.peak_tflops) where given, else the published figure; None where there is none."""
    kind = device.device_kind
    if tflops is not None:
        return 1e12 * tflops, f"{kind} (train.peak_tflops)"
    for name, bf16, f32 in PEAK_TFLOPS:
        if name.lower() in kind.lower():
            return 1e12 * (bf16 if precision == "bfloat16" else f32), f"{kind} (published)"
    return None, f"{kind} {NO_PEAK}"
