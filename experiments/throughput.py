"""Training throughput and model-FLOPs utilisation by batch size and precision, as sweeps record it.

The workload: the mnist1d MLP (hidden [256, 256], momentum, constant learning rate, the noise-scale
statistics on as in every sweep) with RUNS learning rates in one vmapped group, STEPS steps at
each batch size, no targets (every run trains every step), in float32 and in bfloat16. Each cell
is one `scaling.sweep.runner.run` into a temporary folder; the figures are the group's
`throughput` from its summaries (scaling.train.throughput: compile time left out, model FLOPs
from XLA's cost analysis, MFU against the device's published peak; on CPU, which has none,
against --peak-tflops, by default the measured rate of a float32 matmul).

    python experiments/throughput.py                          # batches 128, 1024, 8192
    python experiments/throughput.py --batch-sizes 128 1024 --steps 200 --precisions float32
"""

from __future__ import annotations

import argparse
import tempfile
import time

import jax

from scaling import config as config_mod, store
from scaling.sweep import runner
from scaling.train import throughput


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[128, 1024, 8192])
    p.add_argument("--precisions", nargs="+", default=["float32", "bfloat16"],
                   choices=["float32", "bfloat16"])
    p.add_argument("--steps", type=int, default=300, help="training steps per run")
    p.add_argument("--runs", type=int, default=4, help="learning rates in the group")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="one device's peak (default: the published one, else a measured matmul)")
    return p.parse_args()


def make_config(args: argparse.Namespace, batch_size: int, precision: str) -> config_mod.Config:
    return config_mod.from_dict({
        "name": "throughput", "task": {"name": "mnist1d", "num_samples": 20000},
        "model": {"name": "mlp", "hidden": [256, 256]},
        "optimizer": {"name": "momentum", "momentum": 0.9}, "schedule": {"name": "constant"},
        "batch": {"sizes": [batch_size]},
        "learning_rate": {"mode": "grid", "min": 1e-3, "max": 1e-2, "num": args.runs},
        "budget": {"max_steps": args.steps}, "targets": [],
        "eval": {"every": 100, "points_per_decade": 0},
        "train": {"precision": precision, "checkpoint_minutes": 0,
                  "peak_tflops": args.peak_tflops}})


def main() -> None:
    args = parse_args()
    device = jax.devices()[0]
    if args.peak_tflops is None and throughput.peak(device, "float32")[0] is None:
        args.peak_tflops = throughput.measured_peak() / 1e12
    print(f"jax {jax.__version__}, {jax.device_count()} device(s): {device.platform} "
          f"({device.device_kind}); {args.runs} runs x {args.steps} steps per cell")
    print(f"{'precision':<10}{'batch':>7}{'examples/s':>13}{'run-steps/s':>13}"
          f"{'GFLOP/step':>12}{'TFLOP/s':>10}{'MFU':>8}{'wall s':>8}")
    source = None
    for precision in args.precisions:
        for size in args.batch_sizes:
            start = time.perf_counter()
            with tempfile.TemporaryDirectory() as out:
                runner.run(make_config(args, size, precision), out, quiet=True)
                speed = store.load(out)[0]["summary"]["throughput"]
            source = speed["peak_source"]
            flops = speed["model_flops_per_step"] or 0.0
            mfu = "-" if speed["mfu"] is None else f"{100 * speed['mfu']:.2g}%"
            print(f"{precision:<10}{size:>7}{speed['examples_per_s']:>13,.0f}"
                  f"{speed['run_steps_per_s']:>13,.1f}{flops / 1e9:>12.3g}"
                  f"{(speed['model_flops_per_s'] or 0) / 1e12:>10.3g}{mfu:>8}"
                  f"{time.perf_counter() - start:>8.1f}", flush=True)
    print(f"peak: {source}")


if __name__ == "__main__":
    main()
