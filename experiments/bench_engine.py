"""Side-by-side speed of the engine and a tutorial-style training loop on the same sweep.

The workload: the mnist1d MLP (hidden [128, 128], momentum 0.9, constant learning rate) at
batch 128, RUNS learning rates log-spaced over [1e-3, 10**-0.5], STEPS steps each, evaluated
on the whole test split at step 0, every 100 steps and at the end.

  (a) engine: `scaling.train.loop.run_group` on one GroupProgram, the runs vmapped together in
      lax.scan chunks, metrics read once per chunk. The noise-scale statistics are on, as in every
      sweep by default (each batch split into groups); --also-gns-off adds an engine arm with
      gns.enabled=false, to show what they cost.
  (b) plain: what most tutorials do. The runs train one after another; every step draws its
      batch from a numpy permutation made on the host once per epoch, gathers it from the
      device-resident training set, calls a jitted train step from Python and reads the loss
      back with float(loss) (a host sync every step); evaluation is a jitted call every 100 steps.

Both arms use the same task object (init, per_example_loss, evaluate), the same optimizer
factory (scaling.train.optimizers.make_optimizer("momentum") under optax.inject_hyperparams, so one
compiled step serves every learning rate), the same initial parameters (seed 0) and the same
number of examples per step: the config sets batch.drop_last so that every step of both arms is
a full batch of 128 (8000 train examples -> 62 steps per epoch). Only the data order differs.

Compile time is measured apart from training: the engine's first run_group call compiles and
trains once (its metrics feed the sanity check); the timed calls reuse the compiled program,
each from a fresh initial state. The plain arm compiles its step and evaluation on a warm-up
call before the clock starts. With --repeats > 1 the arms alternate and the best time counts.

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
import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from scaling import config as config_mod
from scaling.sweep.runner import group_spec
from scaling.tasks import build_task
from scaling.train.loop import run_group
from scaling.train.mesh import make_mesh, put_replicated
from scaling.train.optimizers import make_optimizer
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


# ---------------------------------------------------------------- (a) the engine


class EngineArm:
    def __init__(self, cfg: config_mod.Config, task) -> None:
        runs_axis, data_shards = config_mod.validate_devices(cfg, jax.device_count())
        self.mesh = make_mesh(runs_axis, data_shards)
        spec, _ = group_spec(cfg, cfg.batch.sizes[0], data_shards)
        # Set here too, in case sweep.group_spec does not pass gns.every on.
        self.spec = dataclasses.replace(spec, gns_every=cfg.gns.every)
        self.program = GroupProgram(task, self.spec, self.mesh)
        o = cfg.optimizer
        self.runs = [RunSpec(lr, SEED, o.momentum, o.weight_decay, o.b1, o.b2, o.eps)
                     for lr in config_mod.learning_rates(cfg.learning_rate, cfg.batch.sizes[0])]
        self.data = put_replicated(self.mesh, task.train_arrays())
        self.eval_data = put_replicated(self.mesh, task.eval_arrays())
        self.runs_axis = runs_axis

    def first(self) -> tuple[float, float, list[float], list[str]]:
        """Compile and train once; (wall s, compile_s reported by run_group, final losses, status)."""
        last: list[dict] = [{} for _ in self.runs]

        def collect(records: list[list[dict]], wall_s: float) -> None:
            for i, rows in enumerate(records):
                if rows:
                    last[i] = rows[-1]

        clock = CLOCK["timed"]  # the same clock as timed(): compile = first call - a timed call
        start = clock()
        results, compile_s = run_group(self.program, self.runs, self.data, self.eval_data,
                                       collect, self.runs_axis)
        wall = clock() - start
        for r, row in zip(results, last):
            assert r.status == "diverged" or row.get("step") == r.steps, (r, row)
        return wall, compile_s, [row.get("eval_loss", float("nan")) for row in last], \
            [r.status for r in results]

    def timed(self) -> float:
        """Seconds of one whole run_group call on the compiled program (fresh state)."""
        clock = CLOCK["timed"]
        start = clock()
        run_group(self.program, self.runs, self.data, self.eval_data,
                  lambda records, wall_s: None, self.runs_axis)
        return clock() - start


# ---------------------------------------------------------------- (b) the tutorial loop


class PlainArm:
    def __init__(self, cfg: config_mod.Config, task, lrs: list[float]) -> None:
        self.task, self.lrs = task, lrs
        self.steps, self.batch_size = cfg.budget.max_steps, cfg.batch.sizes[0]
        self.momentum = cfg.optimizer.momentum
        self.weight_decay = cfg.optimizer.weight_decay
        device = jax.devices()[0]
        self.data = jax.device_put(dict(task.train_arrays()), device)
        self.eval_data = jax.device_put(dict(task.eval_arrays()), device)
        self.num_train = int(task.train_arrays()["y"].shape[0])
        self.tx = optax.inject_hyperparams(make_optimizer("momentum"))

        def loss_fn(params, batch):
            return jnp.mean(task.per_example_loss(params, batch))

        @jax.jit
        def train_step(params, opt_state, batch):
            loss, grads = jax.value_and_grad(loss_fn)(params, batch)
            # As the engine does: the scalars live in the state, so one compile serves every lr.
            tx = self.tx(**opt_state.hyperparams)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        self.train_step = train_step
        self.evaluate = jax.jit(task.evaluate)
        self.init_params = jax.jit(task.init)

    def init(self, lr: float):
        # The engine's key split: (init key, data key) from key(seed); params from the first.
        init_key, _ = jax.random.split(jax.random.key(SEED))
        params = self.init_params(init_key)
        opt_state = self.tx(learning_rate=lr, momentum=self.momentum,
                            weight_decay=self.weight_decay).init(params)
        return params, opt_state

    def warm_up(self) -> float:
        """Compile the step and the evaluation (and the eager gather) before any timing."""
        start = time.perf_counter()
        params, opt_state = self.init(self.lrs[0])
        idx = np.arange(self.batch_size)
        batch = {k: v[idx] for k, v in self.data.items()}
        params, opt_state, loss = self.train_step(params, opt_state, batch)
        float(loss)
        jax.block_until_ready(self.evaluate(params, self.eval_data))
        return time.perf_counter() - start

    def train_one(self, lr: float, rng: np.random.Generator) -> float:
        params, opt_state = self.init(lr)
        per_epoch = self.num_train // self.batch_size  # drop_last, as the engine is configured
        log = [float(self.evaluate(params, self.eval_data)["eval_loss"])]
        perm = None
        for step in range(self.steps):
            i = step % per_epoch
            if i == 0:
                perm = rng.permutation(self.num_train)
            idx = perm[i * self.batch_size:(i + 1) * self.batch_size]
            batch = {k: v[idx] for k, v in self.data.items()}
            params, opt_state, loss = self.train_step(params, opt_state, batch)
            loss = float(loss)  # the per-step host sync of a tutorial's logging
            if (step + 1) % EVAL_EVERY == 0 or step + 1 == self.steps:
                metrics = self.evaluate(params, self.eval_data)
                log.append(float(metrics["eval_loss"]))
        return log[-1]

    def timed(self) -> tuple[float, list[float]]:
        rng = np.random.default_rng(SEED)
        clock = CLOCK["timed"]
        start = clock()
        finals = [self.train_one(lr, rng) for lr in self.lrs]
        return clock() - start, finals


# ---------------------------------------------------------------- the comparison


def repack_check(args: argparse.Namespace, task) -> None:
    """The engine with train.repack on and off on one group where most runs stop early."""
    arms = {name: EngineArm(make_config(args, repack=name == "repack"), task)
            for name in ("repack", "no-repack")}
    firsts = {name: arm.first() for name, arm in arms.items()}
    statuses = firsts["repack"][3]
    assert statuses == firsts["no-repack"][3]
    print("runs: " + ", ".join(f"{s} {statuses.count(s)}" for s in sorted(set(statuses))))
    widths = {name: dict(arm.program.chunks_at) for name, arm in arms.items()}
    times: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(args.repeats):
        for name, arm in arms.items():
            times[name].append(arm.timed())
    for name, arm in arms.items():
        chunks = ", ".join(f"{n} at width {w}" for w, n in sorted(widths[name].items(), reverse=True))
        print(f"{name:<10} train s " + ", ".join(f"{t:.2f}" for t in times[name])
              + f" (best {min(times[name]):.2f}); chunks run: {chunks}")
    print(f"repack saving = no-repack / repack train time = "
          f"{min(times['no-repack']) / min(times['repack']):.2f}x")


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
    plain = PlainArm(cfg, task, lrs)
    spec = engine.spec
    print(f"workload: {len(lrs)} runs x {spec.total_steps} steps, batch {spec.batch_size}, "
          f"lr {lrs[0]:.3g}..{lrs[-1]:.3g}, eval every {EVAL_EVERY} steps on all eval examples; "
          f"engine mesh runs={engine.mesh.shape['runs']} x data={engine.mesh.shape['data']}, gns on "
          f"({spec.layout.num_groups} groups of {spec.layout.group_size}, every {spec.gns_every} "
          f"step(s)), "
          f"chunk {spec.chunk_steps} steps")

    engines = {"engine": engine}
    if args.also_gns_off:
        engines["engine-nogns"] = EngineArm(make_config(args, gns=False), task)
    firsts = {name: arm.first() for name, arm in engines.items()}
    _, engine_compile_s, engine_finals, statuses = firsts["engine"]
    plain_compile = plain.warm_up()
    times: dict[str, list[float]] = {name: [] for name in [*engines, "plain"]}
    plain_finals = None
    for _ in range(args.repeats):
        for name, arm in engines.items():
            times[name].append(arm.timed())
        wall, plain_finals = plain.timed()
        times["plain"].append(wall)
    best = {name: min(t) for name, t in times.items()}
    # Everything in the first engine call beyond a steady-state call: compilation of the
    # init, chunk and final programs (run_group's own compile_s counts the chunk only).
    compile_s = {name: max(firsts[name][0] - best[name], 0.0) for name in engines}
    compile_s["plain"] = plain_compile
    run_steps = len(lrs) * spec.total_steps

    print()
    if args.cpu_time:
        print("times in CPU seconds of this process (--cpu-time); compile s beyond the chunk's "
              "compile_s likewise")
    print(f"{'arm':<13}{'runs':>6}{'steps/run':>11}{'compile s':>11}{'train s':>10}{'steps/s':>11}")
    for name in times:
        print(f"{name:<13}{len(lrs):>6}{spec.total_steps:>11}{compile_s[name]:>11.2f}"
              f"{best[name]:>10.2f}{run_steps / best[name]:>11.0f}")
    print(f"engine compile: {compile_s['engine']:.2f} s in its first call, of which the chunk "
          f"program {engine_compile_s:.2f} s (run_group's compile_s)")
    if args.repeats > 1:
        print("train s per repeat: " + "; ".join(
            f"{name} " + ", ".join(f"{t:.2f}" for t in ts) for name, ts in times.items()))
    print(f"engine speed-up = plain / engine train time = {best['plain'] / best['engine']:.2f}x")
    if args.also_gns_off:
        print(f"without gns: plain / engine-nogns = {best['plain'] / best['engine-nogns']:.2f}x; "
              f"gns costs the engine {best['engine'] / best['engine-nogns']:.2f}x")

    # Sanity: same learning rate, same init, different data order -> similar final eval loss.
    print()
    print("final eval loss per learning rate (engine status):")
    diffs = []
    for lr, e, p, status in zip(lrs, engine_finals, plain_finals, statuses):
        ok = status == "completed" and np.isfinite(e) and np.isfinite(p)
        if ok:
            diffs.append(abs(e - p))
        print(f"  lr {lr:<9.4g} engine {e:8.4f}  plain {p:8.4f}  {status}")
    if diffs:
        print(f"max |engine - plain| final eval loss over {len(diffs)} non-diverged lrs: "
              f"{max(diffs):.4f} (data orders differ, so not bit-identical)")
    else:
        print("every run diverged in at least one arm: no comparison")
    print(f"total wall {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
