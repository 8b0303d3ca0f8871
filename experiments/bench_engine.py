"""Side-by-side speed of the engine and a tutorial-style training loop on the same sweep.

The workload: the mnist1d MLP (hidden [128, 128], momentum 0.9, constant learning rate) at
batch 128, RUNS learning rates log-spaced over [1e-3, 10**-0.5], STEPS steps each, evaluated
on the whole test split at step 0, every 100 steps and at the end.

  (a) engine: `scaling.train.loop.run_group` on one GroupProgram, the runs vmapped together in
      lax.scan chunks, metrics read once per chunk. The noise-scale statistics are on, as in every
      sweep by default (each batch split into groups); --also-gns-off adds an engine arm with
      gns.enabled=false, to show what they cost.
  (b) plain: what most tutorials do (scaling.sweep.bench.TutorialLoop, the loop `scaling bench`
      runs). The runs train one after another; a jitted train step is called from Python every
      step and the loss read back with float(loss) (a host sync every step); evaluation is a
      jitted call at the engine's evaluation points. It trains the very runs the engine trains:
      the same initial parameters, the same batches (the engine's permutation of each epoch), the
      same optimizer under optax.inject_hyperparams, so the final losses agree up to float32
      rounding (which training at a high learning rate amplifies) and the comparison is of
      speed alone.

Compile time is measured apart from training: the engine's first run_group call compiles and
trains once (its metrics feed the sanity check); the timed calls reuse the compiled program,
each from a fresh initial state. The plain arm compiles its step and evaluation on a one-step
warm-up before the clock starts. With --repeats > 1 the best time of each arm counts.

Devices: the engine runs on a (runs=R, data=N/R) mesh over the N devices jax sees (R is
--parallel-runs, default 1: every device splits each batch); the plain loop uses the default
device, as tutorials do. On a CPU host, XLA_FLAGS=--xla_force_host_platform_device_count=N makes
jax see N simulated devices; they share the host's cores, so they add no compute, and with
data=N every replicated piece of a step (optimizer update, evaluation, bookkeeping) runs N times
on the same cores. --parallel-runs N splits the runs over them instead.

    python experiments/bench_engine.py                      # defaults: 16 runs x 1000 steps
    XLA_FLAGS=--xla_force_host_platform_device_count=8 python experiments/bench_engine.py
    XLA_FLAGS=--xla_force_host_platform_device_count=8 python experiments/bench_engine.py --parallel-runs 8

--repack-check measures what repacking saves (train.repack, docs/architecture.md): one group
with learning rates over REPACK_LRS, so most runs diverge early, and the target REPACK_TARGET
stopping the good ones early too; the engine with repacking on and off, same runs,
and the ratio of their train times (the plain arm is skipped):

    python experiments/bench_engine.py --repack-check --repeats 3

What the noise-scale statistics cost, steadier on a busy machine (one XLA thread, one core, CPU
seconds; --gns-groups / --gns-every choose the estimator's arm):

    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" taskset -c 1 \
        python experiments/bench_engine.py --also-gns-off --cpu-time --repeats 3 --gns-groups 2

and with the batch sharded over N simulated devices (the groups then sit on the devices, whose
gradients exist anyway), the same with --xla_force_host_platform_device_count=N in XLA_FLAGS.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from scaling import config as config_mod
from scaling.sweep import bench
from scaling.train.spec import group_spec
from scaling.tasks import build_task
from scaling.train.mesh import make_mesh, put_replicated
from scaling.train.program import GroupProgram
from scaling.train.spec import RunSpec

EVAL_EVERY = 100
CLOCK = {"timed": time.perf_counter}  # --cpu-time swaps in time.process_time
LR_MIN, LR_MAX = 1e-3, 10 ** -0.5
# --repack-check: rates up to 1e4 (above ~20 diverge; 0.5..10 stall near ln 10 and use the budget).
REPACK_LRS, REPACK_TARGET = (0.02, 1e4), "eval_loss<=1.2"
SEED = 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=1000, help="training steps per run")
    p.add_argument("--runs", type=int, default=16, help="learning rates, log-spaced 1e-3..10^-0.5")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--num-samples", type=int, default=10000, help="mnist1d size (80%% train)")
    p.add_argument("--repeats", type=int, default=1, help="timed repetitions of each arm (best counts)")
    p.add_argument("--parallel-runs", type=int, default=1,
                   help="engine mesh: device groups the runs are split over (parallel.runs); the "
                        "rest of the devices split each batch (parallel.data)")
    p.add_argument("--also-gns-off", action="store_true",
                   help="add a third arm: the engine with gns.enabled=false (no batch groups)")
    p.add_argument("--gns-groups", type=int, help="gns.groups of the engine arm (default: automatic)")
    p.add_argument("--gns-every", type=int, default=1, help="gns.every of the engine arm")
    p.add_argument("--repack-check", action="store_true",
                   help="only the engine, repacking on vs off, on a group where most runs stop early")
    p.add_argument("--cpu-time", action="store_true",
                   help="time training by the process's CPU seconds, not wall seconds: steadier "
                        "on a shared machine (pin XLA to one thread for a clean count, see above)")
    return p.parse_args()


def make_config(args: argparse.Namespace, gns: bool = True, repack: bool | None = None
                ) -> config_mod.Config:
    """The workload; with `repack` set, --repack-check's (wider rates, a target, train.repack)."""
    early = {} if repack is None else {
        "learning_rate": {"mode": "grid", "min": REPACK_LRS[0], "max": REPACK_LRS[1],
                          "num": args.runs},
        "targets": [REPACK_TARGET], "train": {"repack": repack}}
    return config_mod.from_dict({
        "name": "bench_engine",
        "task": {"name": "mnist1d", "num_samples": args.num_samples},
        "model": {"name": "mlp", "hidden": [128, 128]},
        "optimizer": {"name": "momentum", "momentum": 0.9},
        "schedule": {"name": "constant"},
        "batch": {"sizes": [args.batch_size], "drop_last": True},
        "learning_rate": {"mode": "grid", "min": LR_MIN, "max": LR_MAX, "num": args.runs},
        "budget": {"max_steps": args.steps},
        "targets": [],
        "eval": {"every": EVAL_EVERY, "points_per_decade": 0},
        "seeds": [SEED],
        "gns": {"enabled": gns, "groups": args.gns_groups if gns else None, "every": args.gns_every},
        "parallel": {"runs": args.parallel_runs},
        **early,
    })


# ---------------------------------------------------------------- the engine's group


class EngineArm:
    def __init__(self, cfg: config_mod.Config, task) -> None:
        runs_axis, data_shards = config_mod.validate_devices(cfg, jax.device_count())
        self.mesh = make_mesh(runs_axis, data_shards)
        spec, _ = group_spec(cfg, cfg.batch.sizes[0], data_shards)
        self.spec = spec.replace(noise={"every": cfg.gns.every})
        self.program = GroupProgram(task, self.spec, self.mesh)
        o = cfg.optimizer
        self.runs = [RunSpec(lr, SEED, o.momentum, o.weight_decay, o.b1, o.b2, o.eps)
                     for lr in config_mod.learning_rates(cfg.learning_rate, cfg.batch.sizes[0])]
        self.data = put_replicated(self.mesh, task.train_arrays())
        self.eval_data = put_replicated(self.mesh, task.eval_arrays())
        self.runs_axis = runs_axis

    def arm(self, repeats: int) -> bench.Arm:
        return bench.engine_arm(self.program, self.runs, self.data, self.eval_data,
                                self.runs_axis, repeats, CLOCK["timed"])

    def plain(self, task, repeats: int) -> bench.Arm:
        """The tutorial loop over the same runs, on the default device."""
        device = jax.devices()[0]
        loop = bench.TutorialLoop(self.program, jax.device_put(dict(task.train_arrays()), device),
                                  jax.device_put(dict(task.eval_arrays()), device))
        return loop.arm(self.runs, repeats, CLOCK["timed"])


# ---------------------------------------------------------------- the comparison


def repack_check(args: argparse.Namespace, task) -> None:
    """The engine with train.repack on and off on one group where most runs stop early."""
    arms = {name: EngineArm(make_config(args, repack=name == "repack"), task)
            for name in ("repack", "no-repack")}
    timed = {name: arm.arm(args.repeats) for name, arm in arms.items()}
    for name, arm in arms.items():
        chunks = ", ".join(f"{n} at width {w}" for w, n in
                           sorted(arm.program.chunks_at.items(), reverse=True))
        print(f"{name:<10} train s {timed[name].train_s:.2f} (best of {args.repeats}); chunks run "
              f"over all calls: {chunks}")
    print(f"repack saving = no-repack / repack train time = "
          f"{timed['no-repack'].train_s / timed['repack'].train_s:.2f}x")


def main() -> None:
    args = parse_args()
    if args.cpu_time:
        CLOCK["timed"] = time.process_time
    cfg = make_config(args)
    t0 = time.perf_counter()
    task = build_task(cfg)
    print(f"jax {jax.__version__}, {jax.device_count()} device(s): {jax.devices()[0].platform} "
          f"({jax.devices()[0].device_kind}); mnist1d {len(task.train_arrays()['y'])} train / "
          f"{len(task.eval_arrays()['y'])} eval examples (data built in {time.perf_counter() - t0:.1f} s)")

    if args.repack_check:
        repack_check(args, task)
        print(f"total wall {time.perf_counter() - t0:.1f} s")
        return
    engine = EngineArm(cfg, task)
    lrs = [r.learning_rate for r in engine.runs]
    spec = engine.spec
    print(f"workload: {len(lrs)} runs x {spec.total_steps} steps, batch {spec.batch_size}, "
          f"lr {lrs[0]:.3g}..{lrs[-1]:.3g}, eval every {EVAL_EVERY} steps on all eval examples; "
          f"engine mesh runs={engine.mesh.shape['runs']} x data={engine.mesh.shape['data']}, gns on "
          f"({spec.layout.num_groups} groups of {spec.layout.group_size}, every {spec.noise.every} "
          f"step(s)), "
          f"chunk {spec.chunk_steps} steps")

    engines = {"engine": engine}
    if args.also_gns_off:
        engines["engine-nogns"] = EngineArm(make_config(args, gns=False), task)
    arms = {name: arm.arm(args.repeats) for name, arm in engines.items()}
    arms["plain"] = engine.plain(task, args.repeats)
    run_steps = len(lrs) * spec.total_steps

    print()
    if args.cpu_time:
        print("times in CPU seconds of this process (--cpu-time)")
    print(f"{'arm':<13}{'runs':>6}{'steps/run':>11}{'compile s':>11}{'train s':>10}{'steps/s':>11}")
    for name, arm in arms.items():
        print(f"{name:<13}{len(lrs):>6}{spec.total_steps:>11}{arm.compile_s:>11.2f}"
              f"{arm.train_s:>10.2f}{run_steps / arm.train_s:>11.0f}")
    print(f"engine speed-up = plain / engine train time = "
          f"{arms['plain'].train_s / arms['engine'].train_s:.2f}x")
    if args.also_gns_off:
        print(f"without gns: plain / engine-nogns = "
              f"{arms['plain'].train_s / arms['engine-nogns'].train_s:.2f}x; gns costs the engine "
              f"{arms['engine'].train_s / arms['engine-nogns'].train_s:.2f}x")
    # Sanity: the same runs (init, batches, optimizer) -> the same final eval loss.
    diffs = [abs(e - p) for e, p in zip(arms["engine"].final_losses, arms["plain"].final_losses)
             if np.isfinite(e) and np.isfinite(p)]
    if diffs:
        print(f"max |engine - plain| final eval loss over {len(diffs)} runs: {max(diffs):.3g}")
    print(f"total wall {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
