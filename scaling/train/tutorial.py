"""A tutorial-style training loop over the engine's own pieces: what most training scripts do,
kept as the baseline `scaling bench` times the engine against.

The runs train one after another; every step is one call of one jitted function (it takes the
batch out of the data by the epoch's permutation, or draws it, then takes the step) and its
loss is read back (a host sync per step, as a tutorial's logging does); the evaluation is a
jitted call at the same points the engine evaluates. Nothing else runs per step, so the loop is
as fast as a plain one written by hand (experiments/bench_plain.py measures the two side by
side). It trains the same runs as the engine: the same initial parameters, the same
batches (the engine's permutation of each epoch, or the task's draws from the same keys), the
same optimizer, schedule and precision, so the final losses agree up to float32 rounding
(which training amplifies over many steps).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from scaling.config.names import HYPERPARAMS
from scaling.train.optimizers import make_optimizer, set_learning_rate
from scaling.train.program import GroupProgram
from scaling.train.schedules import schedule_multiplier
from scaling.train.spec import RunSpec
from scaling.train.step import AUGMENT_STREAM


@dataclass
class Arm:
    """One way of training the runs: compile and training seconds, each run's final eval loss."""

    name: str
    compile_s: float
    train_s: float
    final_losses: list[float]


class TutorialLoop:
    """The runs one after another, a jitted step per step, the loss read back every step."""

    def __init__(self, program: GroupProgram, data: Any, eval_data: Any) -> None:
        self.program, self.spec, self.task = program, program.spec, program.task
        self.data, self.eval_data = data, eval_data
        self.tx = optax.inject_hyperparams(make_optimizer(self.spec.optimizer))
        self.step = program.jit(self._step)  # compiled as the engine's programs are
        self.evaluate = program.jit(program.evaluate)
        self.new_perm = program.jit(program.new_perm)
        self.points = set(int(p) for p in self.spec.eval_points)

    def _step(self, params: Any, opt_state: Any, base_lr: jax.Array, data_key: jax.Array,
              step: jax.Array, perm: Any, data: Any) -> tuple:
        """One step of one run: the batch from the data, by this epoch's permutation `perm`
        (finite data) or drawn by the task, then the update."""
        spec, task = self.spec, self.task
        if spec.data.num_train is None:
            batch = task.sample(jax.random.fold_in(data_key, step), spec.batch_size, data)
            weights = jnp.ones(spec.batch_size)
        else:
            start = (step % spec.data.steps_per_epoch) * spec.batch_size
            idx = jax.lax.dynamic_slice_in_dim(perm, start, spec.batch_size)
            weights = (start + jnp.arange(spec.batch_size) < spec.data.num_train).astype(jnp.float32)
            key = jax.random.fold_in(jax.random.fold_in(data_key, AUGMENT_STREAM), step)
            batch = task.augment(key, {k: v[idx] for k, v in data.items()})

        def mean_loss(p: Any) -> jax.Array:
            losses = self.program.loss(p, batch)
            return jnp.sum(losses * weights) / jnp.sum(weights)

        loss, grads = jax.value_and_grad(mean_loss)(params)
        lr = base_lr * schedule_multiplier(spec.schedule, step, spec.total_steps)
        opt_state = set_learning_rate(opt_state, lr)
        updates, opt_state = self.tx(**opt_state.hyperparams).update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def train(self, run: RunSpec, steps: int | None = None) -> float:
        """One run to the end (or `steps` steps); its last evaluation's loss."""
        spec = self.spec
        init_key, data_key = jax.random.split(jax.random.key(run.seed))
        params = self.task.init(init_key)
        hparams = {k: jnp.asarray(getattr(run, k), jnp.float32) for k in HYPERPARAMS[spec.optimizer]}
        opt_state = self.tx(**hparams).init(params)
        final = float(self.evaluate(params, self.eval_data)["eval_loss"])
        perm = jnp.zeros(0, jnp.int32)
        for step in range(steps or spec.total_steps):
            if spec.data.num_train is not None and step % spec.data.steps_per_epoch == 0:
                perm = self.new_perm(data_key, step // spec.data.steps_per_epoch)
            params, opt_state, loss = self.step(params, opt_state, hparams["learning_rate"],
                                                data_key, step, perm, self.data)
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
