"""One run's pieces of the compiled program, pure functions of its state: the batch of a
step, the train step, the evaluation point's bookkeeping and a run's first state. The
program (scaling.train.program) vmaps them over a group's runs and strings them into chunks.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh

from scaling.config.targets import EMA_SUFFIX
from scaling.tasks.base import Task
from scaling.train import measure, precision, reach
from scaling.train.measure import NoiseState
from scaling.train.mesh import put_replicated
from scaling.train.optimizers import make_optimizer, set_learning_rate
from scaling.train.reach import ReachState, Schedule
from scaling.train.schedules import schedule_multiplier
from scaling.train.spec import GroupSpec, Status


# Folded into a run's data key for augmentation, apart from the epoch permutations' keys.
AUGMENT_STREAM = 0x41554721


class RunState(NamedTuple):
    """One run's whole state; every leaf has the runs axis first once vmapped."""

    params: Any
    opt_state: Any
    base_lr: jax.Array
    data_key: jax.Array
    perm: jax.Array
    steps: jax.Array
    status: jax.Array
    start_loss: jax.Array
    loss_sum: jax.Array
    loss_count: jax.Array
    noise: NoiseState
    reach: ReachState
    ema_params: Any  # the parameters' moving average before bias correction (None: off)


def first_params(task: Task, seed: jax.Array) -> tuple[Any, jax.Array]:
    """A run's initial parameters and its data key (as raw key data), from its seed alone.

    Compiled unbatched and called once per seed (scaling.train.program): vmapped over a group's
    runs, XLA's CPU backend took 2.5x as long to compile the random initialisers (3.3 s against
    1.3 s for the quickstart's MLP), for the same values bit for bit."""
    init_key, data_key = jax.random.split(jax.random.key(seed))
    return task.init(init_key), jax.random.key_data(data_key)


class RunStep:
    """The per-run pieces for one GroupSpec: the task's loss and evaluation in the compute
    dtype, the optimizer family, and the static tables of the evaluation points."""

    def __init__(self, task: Task, spec: GroupSpec, mesh: Mesh) -> None:
        self.task, self.spec, self.mesh = task, spec, mesh
        self.tx_factory = make_optimizer(spec.optimizer)
        self.metric_names = tuple(m for m in task.metrics if m != "train_loss")
        self.precision = precision.here(spec.precision)  # train.precision on this platform
        self.loss, self.evaluate = precision.in_compute_dtype(task.per_example_loss,
                                                              task.evaluate, self.precision)
        # On every device once: an argument on one device is copied to the mesh at each call
        self.schedule = put_replicated(mesh, reach.schedule(
            spec.eval_points, spec.last_step + spec.chunk_steps + 1, spec.noise.hessian_every,
            spec.stopping.reach))

    @property
    def _perm_length(self) -> int:
        """A run's permutation: one epoch of indices on the device, else a placeholder."""
        spec = self.spec
        on_device = spec.data.num_train and not spec.data.host_data
        return spec.data.steps_per_epoch * spec.batch_size if on_device else 1

    def _tx(self, hparams: dict[str, jax.Array]) -> optax.GradientTransformation:
        return optax.inject_hyperparams(self.tx_factory)(**hparams)

    def new_perm(self, key: jax.Array, epoch: jax.Array) -> jax.Array:
        """This epoch's order, padded (or cut, with drop_last) to steps_per_epoch x batch."""
        spec = self.spec
        perm = jax.random.permutation(jax.random.fold_in(key, epoch), spec.data.num_train)
        length = spec.data.steps_per_epoch * spec.batch_size
        if length > spec.data.num_train:
            perm = jnp.concatenate([perm, jnp.zeros(length - spec.data.num_train, perm.dtype)])
        return perm[:length]

    def _batch(self, rs: RunState, data: Any, step: jax.Array, slot: jax.Array
               ) -> tuple[Any, jax.Array]:
        """This step's examples and their weights (0 pads a kept partial last batch).

        On the device the examples are gathered from the whole set by the run's permutation;
        host-streamed, `data` holds this step's batch of each seed and `slot` picks the run's.
        """
        spec, size = self.spec, self.spec.batch_size
        if spec.data.num_train is None and self.task.draws_means:
            groups, group_size = spec.layout.num_groups, spec.layout.group_size
            means = self.task.sample_means(jax.random.fold_in(rs.data_key, step), groups,
                                           group_size, data)
            return means, jnp.full(groups, group_size, jnp.float32)
        if spec.data.num_train is None and spec.data.host_data:  # windows drawn on the host
            return jax.tree.map(lambda a: a[slot], data), jnp.ones(size)
        if spec.data.num_train is None:
            return (self.task.sample(jax.random.fold_in(rs.data_key, step), size, data),
                    jnp.ones(size))
        start = (step % spec.data.steps_per_epoch) * size
        weights = (start + jnp.arange(size) < spec.data.num_train).astype(jnp.float32)
        if spec.data.host_data:
            batch = jax.tree.map(lambda a: a[slot], data)
        else:
            idx = jax.lax.dynamic_slice(rs.perm, (start,), (size,))
            batch = jax.tree.map(lambda a: a[idx], data)
        key = jax.random.fold_in(jax.random.fold_in(rs.data_key, AUGMENT_STREAM), step)
        return self.task.augment(key, batch), weights

    def _evaluate(self, params: Any, averaged: Any, steps: jax.Array, eval_data: Any
                  ) -> dict[str, jax.Array]:
        """One run's metrics of its parameters, and of their moving average with
        eval.ema_decay (`averaged` before bias correction, after `steps` steps)."""
        metrics = self.evaluate(params, eval_data)
        out = {k: metrics[k].astype(jnp.float32) for k in self.metric_names}
        if self.spec.evaluation.param_ema is not None:
            averaged = self.evaluate(ema_params(params, averaged, steps,
                                                self.spec.evaluation.param_ema), eval_data)
            out.update({k + EMA_SUFFIX: averaged[k].astype(jnp.float32) for k in self.metric_names})
        return out

    def _init_run(self, params: Any, data_key: jax.Array, hparams: dict[str, jax.Array]
                  ) -> RunState:
        """A run's first state, from first_params' output (its row at step 0 follows from
        _after_eval)."""
        data_key = jax.random.wrap_key_data(data_key)
        opt_state = self._tx(hparams).init(params)
        spec = self.spec
        zero, no_steps = jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32)
        rs = RunState(
            params=params, opt_state=opt_state, base_lr=hparams["learning_rate"],
            data_key=data_key, perm=jnp.zeros(self._perm_length, jnp.int32), steps=no_steps,
            status=jnp.full((), Status.RUNNING, jnp.int32), start_loss=zero, loss_sum=zero,
            loss_count=zero, noise=measure.init(spec),
            reach=reach.init(len(spec.stopping.targets), len(spec.eval_points), spec.stopping.reach),
            ema_params=None if spec.evaluation.param_ema is None else jax.tree.map(jnp.zeros_like, params))
        return rs

    def _train_step(self, rs: RunState, data: Any, step: jax.Array, live: jax.Array,
                    slot: jax.Array) -> RunState:
        spec = self.spec
        batch, weights = self._batch(rs, data, step, slot)
        out, valid = measure.step_gradient(spec, self.loss, self.mesh, rs.params,
                                           rs.opt_state, batch, weights, step)
        lr = rs.base_lr * schedule_multiplier(spec.schedule, step, spec.total_steps)
        opt_state = set_learning_rate(rs.opt_state, lr)
        tx = self._tx(dict(opt_state.hyperparams))
        updates, opt_state = tx.update(out.grad, opt_state, rs.params)
        params = optax.apply_updates(rs.params, updates)
        finite = jnp.isfinite(out.loss)
        noise = measure.add_step(spec, rs.noise, out, valid & live & finite)
        keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(live, n, o), new, old)
        averaged = rs.ema_params
        if spec.evaluation.param_ema is not None:
            d = spec.evaluation.param_ema
            averaged = keep(jax.tree.map(lambda a, p: d * a + (1 - d) * p, averaged, params), averaged)
        return rs._replace(
            params=keep(params, rs.params), opt_state=keep(opt_state, rs.opt_state),
            ema_params=averaged,
            steps=rs.steps + live, status=jnp.where(live & ~finite, Status.DIVERGED, rs.status),
            loss_sum=rs.loss_sum + jnp.where(live, out.loss, 0.0), loss_count=rs.loss_count + live,
            noise=noise)

    def _after_eval(self, rs: RunState, metrics: dict[str, jax.Array], data: Any,
                    sched: Schedule, point: jax.Array, hessian: jax.Array
                    ) -> tuple[RunState, dict[str, jax.Array]]:
        """The run's `metrics` at an evaluation point, then target, divergence and budget
        bookkeeping."""
        spec = self.spec
        here = (rs.steps == point) & (rs.status == Status.RUNNING)
        noise, hessian_point = measure.hessian_update(
            spec, self.task, rs.params, rs.data_key, rs.noise, data, point, hessian, here)
        start_loss = jnp.where(point == 0, metrics["eval_loss"], rs.start_loss)
        targets = reach.update(rs.reach, spec.stopping.reach, spec.stopping.targets, metrics, point,
                               sched.index[point], sched, here)
        status = next_status(spec, rs.status, metrics["eval_loss"], start_loss, here, point,
                             reach.all_settled(targets), reach.unconfirmed(targets))
        row = dict(metrics, step=rs.steps, recorded=here, status=status, lr=opt_lr(rs),
                   train_loss=jnp.where(rs.loss_count > 0, rs.loss_sum / jnp.maximum(rs.loss_count, 1),
                                        jnp.nan),
                   **measure.record(spec, noise, hessian_point))
        reset = lambda x: jnp.where(here, jnp.zeros_like(x), x)
        rs = rs._replace(status=status, start_loss=start_loss, reach=targets,
                         noise=measure.new_interval(noise, here), loss_sum=reset(rs.loss_sum),
                         loss_count=reset(rs.loss_count))
        return rs, row

def blown(loss: Any, start_loss: Any, factor: float, xp: Any = jnp) -> Any:
    """Divergence, the one definition: the loss not finite, or above `factor` x the run's
    first. Under jit on the device (xp = jax.numpy) and on the host from the rows (numpy)."""
    return ~xp.isfinite(loss) | (loss > factor * start_loss)


def next_status(spec: GroupSpec, status: jax.Array, loss: jax.Array, start_loss: jax.Array,
                here: jax.Array, point: jax.Array, all_hit: jax.Array,
                unconfirmed: jax.Array) -> jax.Array:
    """A run recorded `here` at step `point`: diverged (loss not finite, or above
    divergence_factor x its start), completed (every target decided reached, when runs stop at
    targets; or at its end with every target, or no targets), out of budget at its end, or
    still running. Its end is the budget's last step, or, with a reading extension, the first
    evaluation past it where no target waits for its reading (at most spec.last_step)."""
    status = jnp.where(here & blown(loss, start_loss, spec.stopping.divergence_factor),
                       Status.DIVERGED, status)
    done_targets = here & all_hit & spec.stopping.stop_at_targets & (status == Status.RUNNING)
    status = jnp.where(done_targets, Status.COMPLETED, status)
    waits = unconfirmed & (point < spec.last_step)
    at_end = here & (point >= spec.total_steps) & ~waits & (status == Status.RUNNING)
    no_targets = len(spec.stopping.targets) == 0
    status = jnp.where(at_end & (all_hit | no_targets), Status.COMPLETED, status)
    return jnp.where(at_end & (status == Status.RUNNING), Status.BUDGET_EXHAUSTED, status)


def opt_lr(rs: RunState) -> jax.Array:
    return rs.opt_state.hyperparams["learning_rate"].astype(jnp.float32)


def ema_params(params: Any, averaged: Any, steps: jax.Array, decay: float) -> Any:
    """The bias-corrected moving average of the parameters (the parameters before any step)."""
    correction = 1.0 - decay ** steps.astype(jnp.float32)
    return jax.tree.map(lambda a, p: jnp.where(steps > 0, a / jnp.maximum(correction, 1e-30), p),
                        averaged, params)

