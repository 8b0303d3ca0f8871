"""`scaling bench`: one group of a config trained by the engine and by a tutorial-style loop,
timed side by side in one process, with the ratio.

The tutorial loop is what most training scripts do: the runs train one after another, a jitted
step is called from Python every step and its loss read back (a host sync per step), and the
evaluation is a jitted call at the same points the engine evaluates. It trains the same runs
as the engine: the same initial parameters, the same batches (the engine's permutation of each
epoch, or the task's draws from the same keys), the same optimizer, schedule and precision, so
the final losses agree up to float32 rounding (summed in another order; training at a high
learning rate amplifies it) and the comparison is of speed alone. The engine also measures the
gradient noise scale, as every sweep does; the tutorial loop does not.

Compile time is apart from training: the engine's first call compiles and trains, the timed
calls reuse the compiled program; the tutorial loop compiles on a warm-up step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from scaling import config as config_mod
from scaling.config import Config
from scaling.config.names import HYPERPARAMS
from scaling.formatting import text_table
from scaling.sweep import grid, runner
from scaling.tasks import build_task
from scaling.train import throughput
from scaling.train.loop import run_group
from scaling.train.mesh import make_mesh, put_replicated
from scaling.train.optimizers import make_optimizer, set_learning_rate
from scaling.train.program import AUGMENT_STREAM, GroupProgram
from scaling.train.schedules import lr_multiplier
from scaling.train.spec import RunSpec

NO_DIVERGENCE = 1e30  # train.divergence_factor: only a non-finite loss stops a run
COMPUTE_BOUND = 0.3  # a tutorial loop at this share of the peak leaves vmapping little to gain


@dataclass
class Arm:
    """One way of training the runs: compile and training seconds, each run's final eval loss."""

    name: str
    compile_s: float
    train_s: float
    final_losses: list[float]


@dataclass
class Result:
    batch_size: int
    runs: int
    steps: int
    devices: int
    engine: Arm
    tutorial: Arm
    model_flops_per_step: float | None
    peak_flops_per_s: float  # one device
    peak_source: str

    def mfu(self, arm: Arm, devices: int) -> float | None:
        if self.model_flops_per_step is None or arm.train_s <= 0:
            return None
        flops = self.model_flops_per_step * self.runs * self.steps / arm.train_s
        return flops / (self.peak_flops_per_s * devices)

    @property
    def speedup(self) -> float:
        """Tutorial training seconds over the engine's."""
        return self.tutorial.train_s / self.engine.train_s

    @property
    def speedup_with_compile(self) -> float:
        return ((self.tutorial.train_s + self.tutorial.compile_s)
                / (self.engine.train_s + self.engine.compile_s))

    @property
    def compute_bound(self) -> bool:
        mfu = self.mfu(self.tutorial, 1)
        return mfu is not None and mfu >= COMPUTE_BOUND


def bench_config(cfg: Config, batch_size: int, steps: int) -> Config:
    """The config at one batch size for `steps` steps, without targets and without stopping a
    run whose loss grows (the tutorial loop trains every run to the end, so the engine must
    too), and without checkpoints."""
    data = config_mod.to_dict(cfg)
    data["batch"]["sizes"], data["batch"]["schedules"] = [batch_size], []
    data["budget"] = {"max_steps": steps}
    data["targets"] = []
    data["train"]["checkpoint_minutes"] = 0
    data["train"]["divergence_factor"] = NO_DIVERGENCE
    return config_mod.from_dict(data)


def bench(cfg: Config, batch_size: int, steps: int, num_runs: int | None = None,
          repeats: int = 1) -> Result:
    """Train the first `num_runs` runs of the grid at `batch_size` (default: one group's worth)
    for `steps` steps with the engine and with the tutorial loop; the best of `repeats` counts."""
    cfg = bench_config(cfg, batch_size, steps)
    runs_axis, data_shards = config_mod.validate_devices(cfg, jax.device_count())
    planned = grid.expand(cfg)
    runs = [r.spec for r in planned[:num_runs or cfg.train.max_group_size or len(planned)]]
    task = build_task(cfg)
    mesh = make_mesh(runs_axis, data_shards)
    program = GroupProgram(task, runner.group_spec(cfg, batch_size, data_shards)[0], mesh)
    train_arrays, eval_arrays = task.train_arrays() or {}, runner.eval_subset(task, cfg)
    data, eval_data = put_replicated(mesh, train_arrays), put_replicated(mesh, eval_arrays)
    engine = engine_arm(program, runs, data, eval_data, runs_axis, repeats)
    device = jax.devices()[0]  # the tutorial loop runs on the default device, as tutorials do
    loop = TutorialLoop(program, jax.device_put(train_arrays, device),
                        jax.device_put(eval_arrays, device))
    tutorial = loop.arm(runs, repeats)
    peak, source = throughput.peak(device, program.spec.precision)
    return Result(batch_size, len(runs), steps, mesh.devices.size, engine, tutorial,
                  program.model_flops(data), peak, source)


def engine_arm(program: GroupProgram, runs: list[RunSpec], data: Any, eval_data: Any,
               runs_axis: int, repeats: int, clock: Callable[[], float] = time.perf_counter
               ) -> Arm:
    """The engine: a first run_group call (compiling), then `repeats` timed calls on the
    compiled program, each from a fresh state; compile seconds = first - best."""
    last: list[dict] = [{} for _ in runs]

    def collect(records: list[list[dict]], wall_s: float) -> None:
        for i, rows in enumerate(records):
            last[i] = rows[-1] if rows else last[i]

    start = clock()
    run_group(program, runs, data, eval_data, collect, runs_axis)
    first = clock() - start
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        run_group(program, runs, data, eval_data, lambda records, wall_s: None, runs_axis)
        best = min(best, clock() - start)
    return Arm("engine", max(first - best, 0.0), best,
               [row.get("eval_loss", float("nan")) for row in last])


class TutorialLoop:
    """The runs one after another, a jitted step per step, the loss read back every step."""

    def __init__(self, program: GroupProgram, data: Any, eval_data: Any) -> None:
        self.program, self.spec, self.task = program, program.spec, program.task
        self.data, self.eval_data = data, eval_data
        self.tx = optax.inject_hyperparams(make_optimizer(self.spec.optimizer))
        self.step = jax.jit(self._step)
        self.evaluate = jax.jit(program.evaluate)
        self.new_perm = jax.jit(program.new_perm)
        self.points = set(int(p) for p in self.spec.eval_points)

    def _step(self, params: Any, opt_state: Any, base_lr: jax.Array, data_key: jax.Array,
              step: jax.Array, batch: Any, weights: jax.Array, data: Any) -> tuple:
        """One step of one run; `data` is the task's data where the task draws the batch."""
        spec, task = self.spec, self.task
        if spec.num_train is None:
            batch = task.sample(jax.random.fold_in(data_key, step), spec.batch_size, data)
        else:
            key = jax.random.fold_in(jax.random.fold_in(data_key, AUGMENT_STREAM), step)
            batch = task.augment(key, batch)

        def mean_loss(p: Any) -> jax.Array:
            losses = self.program.loss(p, batch)
            return jnp.sum(losses * weights) / jnp.sum(weights)

        loss, grads = jax.value_and_grad(mean_loss)(params)
        lr = base_lr * lr_multiplier(spec.schedule, step, spec.total_steps, spec.warmup_steps,
                                     spec.final_fraction)
        opt_state = set_learning_rate(opt_state, lr)
        updates, opt_state = self.tx(**opt_state.hyperparams).update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def _batch(self, perm: Any, step: int) -> tuple[Any, jax.Array]:
        """The engine's batch at `step` from this epoch's permutation (finite data), else none:
        the step draws it from the task."""
        spec = self.spec
        if spec.num_train is None:
            return {}, jnp.ones(spec.batch_size)
        start = (step % spec.steps_per_epoch) * spec.batch_size
        idx = perm[start:start + spec.batch_size]
        weights = (start + jnp.arange(spec.batch_size) < spec.num_train).astype(jnp.float32)
        return {k: v[idx] for k, v in self.data.items()}, weights

    def train(self, run: RunSpec, steps: int | None = None) -> float:
        """One run to the end (or `steps` steps); its last evaluation's loss."""
        spec = self.spec
        init_key, data_key = jax.random.split(jax.random.key(run.seed))
        params = self.task.init(init_key)
        hparams = {k: jnp.asarray(getattr(run, k), jnp.float32) for k in HYPERPARAMS[spec.optimizer]}
        opt_state = self.tx(**hparams).init(params)
        final, perm = float(self.evaluate(params, self.eval_data)["eval_loss"]), None
        drawn = self.data if spec.num_train is None else {}
        for step in range(steps or spec.total_steps):
            if spec.num_train is not None and step % spec.steps_per_epoch == 0:
                perm = self.new_perm(data_key, step // spec.steps_per_epoch)
            batch, weights = self._batch(perm, step)
            params, opt_state, loss = self.step(params, opt_state, hparams["learning_rate"],
                                                data_key, step, batch, weights, drawn)
            float(loss)  # the per-step host sync of a tutorial's logging
            if step + 1 in self.points:
                final = float(self.evaluate(params, self.eval_data)["eval_loss"])
        return final

    def arm(self, runs: list[RunSpec], repeats: int,
            clock: Callable[[], float] = time.perf_counter) -> Arm:
        """Compile on a one-step warm-up, then train every run `repeats` times; the best counts."""
        start = clock()
        self.train(runs[0], steps=1)  # compiles the step, the evaluation and the gathers
        compile_s = clock() - start
        best, finals = float("inf"), []
        for _ in range(repeats):
            start = clock()
            finals = [self.train(run) for run in runs]
            best = min(best, clock() - start)
        return Arm("tutorial", compile_s, best, finals)


def format_result(r: Result) -> str:
    """The side-by-side table, the ratios, and whether the finals agree."""
    rows = []
    for arm, devices in ((r.engine, r.devices), (r.tutorial, 1)):
        mfu = r.mfu(arm, devices)
        rows.append([arm.name, arm.compile_s, arm.train_s, r.runs * r.steps / arm.train_s,
                     r.runs * r.steps * r.batch_size / arm.train_s,
                     "-" if mfu is None else f"{100 * mfu:.2g}%"])
    table = text_table(["arm", "compile s", "train s", "run-steps/s", "examples/s", "MFU"], rows)
    lines = [f"batch {r.batch_size}: {r.runs} runs x {r.steps} steps; engine on {r.devices} "
             f"device(s), tutorial loop on 1; peak {r.peak_source}", table,
             f"engine / tutorial: {r.speedup:.2f}x in training, {r.speedup_with_compile:.2f}x "
             "with compilation"]
    pairs = [(e, t) for e, t in zip(r.engine.final_losses, r.tutorial.final_losses)
             if np.isfinite(e) and np.isfinite(t)]
    if pairs:
        diff = max(abs(e - t) for e, t in pairs)
        lines.append(f"final eval loss, engine against tutorial: max |difference| {diff:.3g} "
                     f"over {len(pairs)} runs")
    if r.compute_bound:
        lines.append(f"compute-bound: the tutorial loop already uses "
                     f"{100 * r.mfu(r.tutorial, 1):.2g}% of the peak, so training runs together "
                     "cannot make it much faster; the ratio above is not a vmapping speed-up")
    return "\n".join(lines)
