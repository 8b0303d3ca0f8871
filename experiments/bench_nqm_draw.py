"""Side by side: the NQM drawing B noise vectors per step (task.draw: examples) or each
noise-scale group's mean directly (task.draw: means, the same distribution in O(dim)).

One vmapped group of RUNS runs (SGD, learning rates over 0.1-1, noise-scale groups on) per
batch size and arm, STEPS steps, compiled before the clock starts; prints seconds per step of
the group and the ratio.

    python experiments/bench_nqm_draw.py                        # dim 1000, B = 512 and 4096
    python experiments/bench_nqm_draw.py --dim 100 --batch-sizes 64 512 4096
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from scaling import config as config_mod
from scaling.train.spec import group_spec
from scaling.tasks import build_task
from scaling.train.loop import run_group
from scaling.train.mesh import make_mesh, put_replicated
from scaling.train.program import GroupProgram
from scaling.train.spec import RunSpec
from scaling.train.start import fresh


def seconds_per_step(draw: str, batch: int, args: argparse.Namespace) -> float:
    """Best of --repeats timed group runs (after one that compiles), per step."""
    cfg = config_mod.from_dict({
        "task": {"name": "nqm", "dim": args.dim, "draw": draw}, "optimizer": {"name": "sgd"},
        "batch": {"sizes": [batch]}, "learning_rate": {"values": [0.1]},
        "budget": {"max_steps": args.steps}, "eval": {"every": 100, "points_per_decade": 0},
        "train": {"chunk_steps": min(100, args.steps)}})
    mesh = make_mesh(1, 1, jax.devices())
    task = build_task(cfg)
    program = GroupProgram(task, group_spec(cfg, batch, 1)[0], mesh)
    runs = [RunSpec(float(lr), 0) for lr in np.geomspace(0.1, 1.0, args.runs)]
    data, eval_data = put_replicated(mesh, {}), put_replicated(mesh, {})
    run_group(program, fresh(program, runs, data, eval_data, 1), data, eval_data, [])  # compiles
    best = float("inf")
    for _ in range(args.repeats):
        began = time.perf_counter()
        run_group(program, fresh(program, runs, data, eval_data, 1), data, eval_data, [])
        best = min(best, time.perf_counter() - began)
    return best / args.steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dim", type=int, default=1000)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[512, 4096])
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    print(f"NQM dim {args.dim}, {args.runs} runs per group, {args.steps} steps, "
          f"{jax.devices()[0].platform}")
    print(f"{'batch':>6} {'examples ms/step':>17} {'means ms/step':>14} {'speed-up':>9}")
    for batch in args.batch_sizes:
        slow, fast = (seconds_per_step(d, batch, args) for d in ("examples", "means"))
        print(f"{batch:>6} {1e3 * slow:>17.2f} {1e3 * fast:>14.2f} {slow / fast:>8.1f}x")


if __name__ == "__main__":
    main()
