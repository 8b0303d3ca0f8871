"""The engine against a tutorial-style loop as whole processes: start-up, compilation and
training all counted, as a user waits for them.

`scaling bench` times the two arms inside one process with compilation apart; this script runs
each arm in a process of its own and times the process from the outside. One group of a
config's runs (default: the quickstart at batch 16, 16 learning rates, 1,000 steps, as
`scaling bench` builds it: no targets, no divergence stop, so both arms train every run to the
end):

  --arm engine    one run_group call (compiling, then training the runs vmapped)
  --arm tutorial  the runs one after another, a jitted step per step (scaling.train.tutorial)

Each prints its seconds from inside (set-up, the arm) and a digest of the final eval losses.
Without --arm, the script runs the two arms as child processes in turn (engine, tutorial,
engine, ...) --pairs times and prints each pair's ratios of wall and CPU seconds and their
medians: the pairs keep the comparison fair when a shared machine's speed drifts, and the CPU
seconds say how much work each process did when other processes share the cores. Neither arm
uses the persistent compilation cache (a cold start, as a first sweep) unless --compile-cache
DIR is given.

    python experiments/bench_process.py --pairs 5
    python experiments/bench_process.py --arm engine        # one arm, e.g. under /usr/bin/time -v
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

T0 = time.perf_counter()

import jax  # noqa: E402  (after the clock: the import is part of the process's start-up)

from scaling.config import load  # noqa: E402
from scaling.sweep import bench  # noqa: E402
from scaling.train import compile_cache  # noqa: E402

DEFAULT_OVERRIDES = ["learning_rate.num=16", "batch.sizes=[16]"]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/quickstart.yaml")
    p.add_argument("overrides", nargs="*", default=DEFAULT_OVERRIDES,
                   help=f"config overrides (default: {' '.join(DEFAULT_OVERRIDES)})")
    p.add_argument("--batch-size", type=int, help="default: the config's first batch size")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--arm", choices=("engine", "tutorial"), help="run this arm here")
    p.add_argument("--pairs", type=int, default=3, help="without --arm: pairs of child processes")
    p.add_argument("--compile-cache",
                   help="jax's persistent compilation cache folder (default: none, a cold start)")
    return p.parse_args()


def run_arm(args: argparse.Namespace) -> None:
    """One arm, from a cold start to the last run's final loss."""
    if args.compile_cache:
        compile_cache.enable(args.compile_cache)
    cfg = load(args.config, args.overrides)
    s = bench.setup(cfg, args.batch_size or cfg.batch.sizes[0], args.steps)
    began = time.perf_counter()
    if args.arm == "engine":
        finals = bench.train_once(s.program, s.runs, s.data, s.eval_data, s.runs_axis)
    else:
        loop = s.tutorial()
        finals = [loop.train(run) for run in s.runs]
    done = time.perf_counter()
    print(f"{args.arm}: {len(s.runs)} runs x {args.steps} steps at batch "
          f"{s.program.spec.batch_size}; start-up {began - T0:.2f} s, compile and train "
          f"{done - began:.2f} s; final eval losses {' '.join(f'{f:.4f}' for f in finals)}")


def pairs(args: argparse.Namespace) -> None:
    """Both arms as child processes, in turn, timed from outside (wall seconds, and the CPU
    seconds the operating system counted for the child); each pair's ratios, their medians."""
    base = [sys.executable, __file__, "--config", args.config, "--steps", str(args.steps)]
    base += ["--batch-size", str(args.batch_size)] if args.batch_size else []
    base += ["--compile-cache", args.compile_cache] if args.compile_cache else []
    ratios: dict[str, list[float]] = {"wall": [], "cpu": []}
    for i in range(args.pairs):
        took = {arm: child(base + ["--arm", arm, *args.overrides])
                for arm in ("engine", "tutorial")}
        for kind, index in (("wall", 0), ("cpu", 1)):
            ratios[kind].append(took["tutorial"][index] / took["engine"][index])
        print(f"pair {i + 1}: tutorial / engine = {ratios['wall'][-1]:.2f}x wall, "
              f"{ratios['cpu'][-1]:.2f}x CPU", flush=True)
    for kind, values in ratios.items():
        print(f"whole processes, tutorial / engine {kind} over {args.pairs} pairs: median "
              f"{statistics.median(values):.2f}x (min {min(values):.2f}x, max {max(values):.2f}x)")


def child(command: list[str]) -> tuple[float, float]:
    """Run one arm's process; (wall seconds, its CPU seconds), its own line printed."""
    cpu = lambda: sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2])
    began, began_cpu = time.perf_counter(), cpu()
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    wall, used = time.perf_counter() - began, cpu() - began_cpu
    print(f"{out.strip()} [process: {wall:.2f} s wall, {used:.2f} s CPU]", flush=True)
    return wall, used


if __name__ == "__main__":
    arguments = parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}", file=sys.stderr)
    run_arm(arguments) if arguments.arm else pairs(arguments)
