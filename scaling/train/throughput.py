"""How busy the devices were: a group's examples and steps per second, and its model FLOPs
against the devices' peak (model-FLOPs utilisation, MFU).

Model FLOPs are the forward and backward passes of one run's gradient at the group's batch
size, not the optimizer update, the evaluation or the noise-scale bookkeeping: for a language
model the task's formula (6 N plus attention per token, Task.flops_per_example), for other
models XLA's count (cost analysis). MFU = model FLOPs x run-steps trained / training seconds /
(peak x devices). Peaks are the vendors' dense figures per chip for the dtype jax's matmuls use
by default (TF32 for float32 on NVIDIA Ampere and later, bfloat16 passes on TPU), or
train.peak_tflops; on CPU, and on a device kind not in peaks.PEAK_TFLOPS, there is no peak and no
MFU (`scaling bench` measures a float32 matmul instead, to say how busy a CPU is).

References:
  Chowdhery et al. 2022, "PaLM: Scaling Language Modeling with Pathways" (appendix B, MFU).
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp

from scaling.train.peaks import MEASURED_PEAK, peak


@functools.lru_cache(maxsize=None)
def measured_peak(size: int = 1024) -> float:
    """FLOP/s of a size x size float32 matmul on the default device, best of five."""
    x = jnp.ones((size, size), jnp.float32)
    matmul = jax.jit(lambda a: a @ a)
    matmul(x).block_until_ready()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        matmul(x).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2.0 * size ** 3 / best


XLA, FORMULA = "XLA cost analysis", "6 N + 12 L T d per token"  # where model FLOPs come from


def peak_or_measured(device: Any, precision: str) -> tuple[float, str]:
    """The published peak, else (a CPU) the measured float32 matmul: how busy a device is
    against what it can run, for `scaling bench`."""
    value, source = peak(device, precision)
    if value is None:
        return measured_peak(), f"{device.device_kind} {MEASURED_PEAK}"
    return value, source


def per_step(task: Any, batch_size: int, counted: Callable[[], float | None]
             ) -> tuple[float | None, str]:
    """One run's model FLOPs per step and their source: the task's formula where it has one
    (language models), else `counted()`, XLA's count of the gradient."""
    formula = task.flops_per_example()
    if formula is not None:
        return formula * batch_size, FORMULA
    return counted(), XLA


def step_flops(loss: Any, params: Any, batch: Any) -> float | None:
    """XLA's FLOP count of one gradient of the mean loss; None where the backend gives none.
    `params` and `batch` may be shapes (jax.ShapeDtypeStruct): nothing is run. The lowered
    program's count first; where that is empty (the CUDA backend of jax 0.11 gave 0 on an
    H200), the compiled program's."""
    lowered = jax.jit(jax.grad(lambda p, b: jnp.mean(loss(p, b)))).lower(params, batch)
    flops = _flops(lowered.cost_analysis())
    return flops if flops is not None else _flops(lowered.compile().cost_analysis())


def _flops(cost: Any) -> float | None:
    """The 'flops' of a cost analysis (a dict, or a list of one per program), if positive."""
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    flops = (cost or {}).get("flops")
    return float(flops) if flops and flops > 0 else None


def figures(run_steps: int, batch_size: int, train_s: float, flops_per_step: float | None,
            device: Any, num_devices: int, precision: str, examples: int | None = None,
            peak_tflops: float | None = None) -> dict[str, Any]:
    """One group's throughput, as summaries record it (None where a figure is unknown):
    `run_steps` (every run's steps, summed) and `examples` (default run_steps x batch_size;
    exact where a last batch is partial) trained in `train_s` seconds."""
    examples = run_steps * batch_size if examples is None else examples
    rate = lambda n: n / train_s if train_s > 0 else None
    flops_s = None if flops_per_step is None else rate(flops_per_step * run_steps)
    peak_s, source = peak(device, precision, peak_tflops)
    total = None if peak_s is None else peak_s * num_devices
    return {"run_steps_per_s": rate(run_steps), "examples_per_s": rate(examples),
            "model_flops_per_step": flops_per_step, "model_flops_per_s": flops_s,
            "peak_flops_per_s": total, "peak_source": source,
            "mfu": None if flops_s is None or total is None else flops_s / total,
            "train_s": train_s, "examples": examples}
