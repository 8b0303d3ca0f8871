"""Compiled training: one program per (task, batch size, optimizer family), runs vmapped inside.

A group of runs that differ only in scalars (learning rate, seed, momentum, weight decay, betas)
trains as one vmapped state. Steps run in lax.scan chunks; evaluation, target checks, divergence
checks and noise-scale statistics happen inside the chunk, and the host reads one small table
of metrics per chunk (docs/architecture.md). The step counter is shared by the group, so the
`lax.cond`s on it (new epoch, evaluation point) stay real branches under vmap. When most runs
have stopped, the group is cut to a smaller width between chunks (scaling.train.repack).
"""

from __future__ import annotations

import functools
import math
import weakref
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from scaling.config.names import HYPERPARAMS
from scaling.tasks.base import Task
from scaling.train import fsdp, measure, reach, throughput
from scaling.train.compiles import CompiledChunks
from scaling.train.optimizers import set_hyperparams
from scaling.train.reach import Schedule
from scaling.train.spec import GroupSpec, RunSpec, Status
from scaling.train.step import RunState, RunStep, first_params

# On CPU, XLA's older fusion emitters (not the MLIR ones, jax 0.10's default) compile a chunk in
# about half the time and train as fast (docs/benchmarks.md, "Compiling on CPU"): on 2 cores the
# smoke sweep's 11 chunks compiled in 10.8 s instead of 19.2 s and the quickstart took 4m25s
# instead of 6m05s. Float rounding differs, as between two CPUs (the smoke sweep's rows: 1,057
# of 12,624 values, at most 1.7e-5 relative).
CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}

# first_params compiled once per task (and platform), not once per program: every batch size's
# program draws its runs' initial parameters from the same seeds by the same program.
_FIRST_PARAMS: weakref.WeakKeyDictionary[Task, dict[bool, Callable]] = weakref.WeakKeyDictionary()


def _compiled_first_params(task: Task, cpu: bool, jit: Callable) -> Callable:
    """The task's first_params under `jit` (this platform's), compiled by the first program
    that asks and shared by the rest."""
    per_platform = _FIRST_PARAMS.setdefault(task, {})
    if cpu not in per_platform:
        per_platform[cpu] = jit(functools.partial(first_params, task))
    return per_platform[cpu]


class GroupProgram(CompiledChunks, RunStep):
    """The compiled init and chunk functions for one GroupSpec on one mesh."""

    def __init__(self, task: Task, spec: GroupSpec, mesh: Mesh) -> None:
        RunStep.__init__(self, task, spec, mesh)
        cpu = mesh.devices.flat[0].platform == "cpu"
        # jax.jit with this platform's compiler options: the group's programs, the bench's loop
        self.jit = jit = functools.partial(
            jax.jit, compiler_options=CPU_COMPILER_OPTIONS if cpu else None)
        CompiledChunks.__init__(self, jit(self._chunk_fn, donate_argnums=0), spec.data.host_data)
        self._first = _compiled_first_params(task, cpu, jit)
        self._init = jit(self._init_fn)
        self._final = jit(self._final_fn)
        self._take = jit(self._take_fn)
        self._stop = jit(self._stop_fn)
        self._start_from = jit(self._start_from_fn, static_argnums=(5, 6))
        self._model_flops: tuple[float | None] | None = None  # model_flops, once counted
        self._in_turn = cpu  # see _per_run

    # ------------------------------------------------------------ group-level (compiled)
    def _vmap(self, fn: Callable, in_axes: Any) -> Callable:
        return jax.vmap(fn, in_axes=in_axes, spmd_axis_name="runs")

    def _init_fn(self, firsts: tuple, which: jax.Array, hparams: dict, status: jax.Array
                 ) -> RunState:
        """Every run's first state; run i starts from firsts[which[i]] (first_params of each
        seed in the group). Its step-0 evaluation is the first chunk's (`first_eval`), so the
        model's evaluation is compiled once, in the chunk, and this program is the same small
        one at every width."""
        params, keys = jax.tree.map(lambda *xs: jnp.stack(xs)[which], *firsts)
        rs = self._vmap(self._init_run, (0, 0, 0))(params, keys, hparams)
        return self._shard_runs(rs._replace(status=status))

    def _chunk_fn(self, rs: RunState, data: Any, eval_data: Any, sched: Schedule,
                  first_step: jax.Array, end_step: jax.Array, slots: jax.Array,
                  first_eval: jax.Array) -> tuple[RunState, dict]:
        """`chunk_steps` steps of every run, none at or past `end_step` (a segment that ends
        before the run's total steps: a branch's window, a batch-size schedule's phase), each
        followed by its evaluation where one falls. The scan starts one step early and trains
        nothing there, so its first row is the evaluation at `first_step` itself where
        `first_eval` (a fresh group's step 0; the chunk before evaluated it otherwise).
        Host-streamed, `data` holds the chunk's batches, (seeds, chunk_steps, batch, ...), and
        `slots` each run's seed among them."""
        spec = self.spec
        steps = first_step - 1 + jnp.arange(spec.chunk_steps + 1)
        end = jnp.minimum(end_step, spec.last_step)
        row_shape = jax.eval_shape(
            lambda r: self._evaluated(r, data, eval_data, sched, first_step, False)[1], rs)
        train_step = self._vmap(self._train_step, (0, None, None, 0, 0))

        def body(rs: RunState, step: jax.Array) -> tuple[RunState, dict]:
            trains = step >= first_step
            live = (rs.status == Status.RUNNING) & (step < end) & trains
            step_data = data
            if spec.data.host_data:
                step_data = jax.tree.map(lambda a: a[:, jnp.maximum(step - first_step, 0)], data)
            elif spec.data.num_train is not None:
                epoch = step // spec.data.steps_per_epoch
                new_epoch = trains & (step % spec.data.steps_per_epoch == 0)
                perm = jax.lax.cond(new_epoch,
                                    lambda: self._vmap(self.new_perm, (0, None))(rs.data_key, epoch),
                                    lambda: rs.perm)
                rs = rs._replace(perm=perm)
            rs = jax.lax.cond(jnp.any(live), lambda r: train_step(r, step_data, step, live, slots),
                              lambda r: r, rs)
            point = step + 1
            rs, row = jax.lax.cond(
                (sched.index[point] >= 0) & (trains | first_eval),
                lambda r: self._evaluated(r, data, eval_data, sched, point, sched.hessian[point]),
                lambda r: (r, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), row_shape)), rs)
            return rs, dict(row, status=rs.status)

        rs, rows = jax.lax.scan(body, rs, steps)
        return self._shard_runs(rs), self._replicate(rows)

    def _stop_fn(self, rs: RunState, stop: jax.Array) -> RunState:
        """The running runs in slots `stop` marked dominated: they train no further."""
        running = rs.status == Status.RUNNING
        return self._shard_runs(rs._replace(
            status=jnp.where(stop & running, Status.DOMINATED, rs.status).astype(jnp.int32)))

    def _evaluated(self, rs: RunState, data: Any, eval_data: Any, sched: Schedule,
                   point: jax.Array, hessian: Any) -> tuple[RunState, dict]:
        """Every run evaluated at `point`, then its bookkeeping (RunStep._after_eval)."""
        metrics = self._evaluate_all(rs, eval_data)
        return self._vmap(self._after_eval, (0, 0, None, None, None, None))(
            rs, metrics, data, sched, point, hessian)

    def _evaluate_all(self, rs: RunState, eval_data: Any) -> dict:
        """Every run's metrics (_per_run: on CPU one run after another, whose matmuls took 2.7x
        less time than vmapped over 16 runs of the quickstart MLP on 6,000 examples; eval_loss
        within an ulp of the vmapped one, the mean summed in another order)."""
        return self._per_run(lambda p, a, s: self._evaluate(p, a, s, eval_data),
                            rs.params, rs.ema_params, rs.steps)

    def _per_run(self, fn: Callable, *args: Any) -> Any:
        """fn of each run's slice of `args` (runs axis first), stacked. On CPU one run after
        another within each device's share of the runs (lax.map): XLA's CPU backend runs
        batched matmuls over many runs slower than the same matmuls in turn. On accelerators
        vmapped, which fills the device."""
        if not self._in_turn:
            return self._vmap(fn, (0,) * len(args))(*args)
        shards = self.mesh.shape["runs"]  # the runs axis splits evenly into the devices' shares
        split = lambda x: x.reshape(shards, x.shape[0] // shards, *x.shape[1:])
        in_turn = lambda *local: jax.lax.map(lambda run: fn(*run), local)
        out = self._vmap(in_turn, (0,) * len(args))(*jax.tree.map(split, args))
        return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), out)

    def _take_fn(self, rs: RunState, take: jax.Array, pad: jax.Array) -> RunState:
        """The runs in slots `take` (every leaf, optimizer state and keys included), pads marked."""
        rs = jax.tree.map(lambda x: jnp.take(x, take, axis=0), rs)
        return self._shard_runs(rs._replace(status=jnp.where(pad, Status.PADDING, rs.status)))

    def _start_from_fn(self, rs: RunState, take: jax.Array, pad: jax.Array, base_lr: jax.Array,
                       step: jax.Array, stream: int, carry_noise: bool, hparams: dict) -> RunState:
        spec, width = self.spec, take.shape[0]
        src = jax.tree.map(lambda x: jnp.take(x, take, axis=0), rs)
        src = src._replace(opt_state=set_hyperparams(src.opt_state, hparams))
        fresh = lambda tree: jax.tree.map(lambda x: jnp.broadcast_to(x, (width, *x.shape)), tree)
        data_key, perm = src.data_key, src.perm
        if stream:
            data_key = jax.vmap(jax.random.fold_in, (0, None))(data_key, stream)
        if stream or perm.shape[1] != self._perm_length:
            perm = jnp.zeros((width, self._perm_length), jnp.int32)
            if spec.data.num_train and not spec.data.host_data:
                perm = self._vmap(self.new_perm, (0, None))(data_key, step // spec.data.steps_per_epoch)
        zero = jnp.zeros(width, jnp.float32)
        diverged = jnp.where(src.status == Status.DIVERGED, Status.DIVERGED, Status.RUNNING)
        return self._shard_runs(src._replace(
            base_lr=base_lr, data_key=data_key, perm=perm, steps=jnp.full(width, step, jnp.int32),
            status=jnp.where(pad, Status.PADDING, diverged).astype(jnp.int32),
            loss_sum=zero, loss_count=zero,
            noise=src.noise if carry_noise else fresh(measure.init(spec)),
            reach=fresh(reach.init(len(spec.stopping.targets), len(spec.eval_points), spec.stopping.reach))))

    def _shard_runs(self, rs: RunState) -> RunState:
        """Every state leaf has the runs axis first, parameter-shaped ones split over 'fsdp' too
        (scaling.train.fsdp); pinning them keeps one compiled chunk valid."""
        return jax.lax.with_sharding_constraint(rs, fsdp.state_shardings(rs, self.mesh))

    def _replicate(self, tree: Any) -> Any:
        """Metrics are read by every process, so they are gathered to all devices (small)."""
        return jax.lax.with_sharding_constraint(tree, NamedSharding(self.mesh, P()))

    # ------------------------------------------------------------ host side
    def init(self, runs: list[RunSpec], status: np.ndarray) -> RunState:
        seeds = sorted({r.seed for r in runs})
        # Host arrays (numpy) throughout: jit places each on the mesh directly, where an array
        # on one device would first be resliced by a small program compiled per shape.
        firsts = tuple(self._first(np.uint32(seed)) for seed in seeds)
        which = np.asarray([seeds.index(r.seed) for r in runs], np.int32)
        hparams = {k: np.asarray([getattr(r, k) for r in runs], np.float32)
                   for k in HYPERPARAMS[self.spec.optimizer]}
        return self._init(firsts, which, hparams, np.asarray(status, np.int32))

    def model_flops(self, data: Any) -> float | None:
        """XLA's FLOPs of one run's gradient at this batch size (scaling.train.throughput),
        counted once per program from shapes alone."""
        if self._model_flops is None:
            key, size = jax.random.key(0), self.spec.batch_size
            params = jax.eval_shape(self.task.init, key)
            data_spec = self.spec.data
            if data_spec.num_train is None and not data_spec.host_data:  # as _batch draws them
                batch = jax.eval_shape(lambda k: self.task.sample(k, size, data), key)
            else:
                batch = {k: jax.ShapeDtypeStruct((size, *a.shape[1:]), a.dtype)
                         for k, a in self.task.streamed_example().items()}
            self._model_flops = (throughput.step_flops(self.loss, params, batch),)
        return self._model_flops[0]

    def final_view(self, rs: RunState) -> dict:
        """The small per-run facts the host needs at the end, gathered for every process."""
        return self._final(rs)

    def _final_fn(self, rs: RunState) -> dict:
        return self._replicate({"status": rs.status, "steps": rs.steps})

    def stop(self, rs: RunState, slots: np.ndarray) -> RunState:
        """The group with the runs in the slots marked by `slots` (bools) stopped as dominated."""
        return self._stop(rs, np.asarray(slots, bool))

    def take(self, rs: RunState, take: np.ndarray, pad: np.ndarray) -> RunState:
        """A smaller group: the state's slots `take`, the `pad` ones marked Status.PADDING."""
        return self._take(rs, np.asarray(take, np.int32), np.asarray(pad, bool))

    def start_from(self, rs: RunState, take: np.ndarray, pad: np.ndarray, base_lr: np.ndarray,
                   step: int, stream: int = 0, carry_noise: bool = False,
                   hparams: dict[str, np.ndarray] | None = None) -> RunState:
        """A group of this program that continues, at its own step `step`, the runs in slots
        `take` of another group's state `rs` (the same task and optimizer family, any batch
        size; `pad` marks padding slots): parameters, optimizer state, parameter average, start
        loss, keys and a diverged status carried, learning rates `base_lr`; the target state and
        the training-loss interval start afresh, and so do the noise-scale estimates unless
        `carry_noise` (they estimate |G|^2 and tr(Sigma), which do not depend on the batch).

        `stream` 0 carries the data stream, so at the same batch size the runs go on exactly as
        they would have (the same permutation, the same draws); any other value folds it into
        each run's data key first, so that a run continued at another batch size does not
        replay the examples or noise draws its own earlier steps used. A new permutation is
        drawn for the epoch `step` falls in whenever the stream or the batch size changes.
        `hparams`: per slot, optimizer scalars that replace the source's (the beta2 and weight
        decay the optimizer's batch-size rules give at this batch size).
        """
        hparams = {k: np.asarray(v, np.float32) for k, v in (hparams or {}).items()}
        return self._start_from(rs, np.asarray(take, np.int32), np.asarray(pad, bool),
                                np.asarray(base_lr, np.float32), np.int32(step),
                                int(stream), bool(carry_noise), hparams)

    def chunk(self, rs: RunState, data: Any, eval_data: Any, first_step: int,
              slots: np.ndarray | None = None, end_step: int | None = None,
              first_eval: bool = False):
        """Run one chunk; the first call at a width compiles ahead, so compile time is apart.
        `slots`: host-streamed, each run's seed among the chunk's batches (else unused);
        `end_step`: no step at or past it is taken (default: the spec's total steps);
        `first_eval`: evaluate at `first_step` first (a fresh group's first chunk)."""
        width = int(rs.status.shape[0])
        slots = np.zeros(width, np.int32) if slots is None else slots
        end = self.spec.last_step if end_step is None else end_step
        args = (rs, data, eval_data, self.schedule, np.int32(first_step), np.int32(end),
                np.asarray(slots, np.int32), np.bool_(first_eval))
        return self._run_compiled(width, args)

    def abstract_state(self, width: int, data: Any, eval_data: Any) -> RunState:
        """The shapes, dtypes and shardings of a group's state at `width`, nothing allocated."""
        first = jax.eval_shape(self._first, jax.ShapeDtypeStruct((), jnp.uint32))
        hparams = {k: jax.ShapeDtypeStruct((width,), jnp.float32)
                   for k in HYPERPARAMS[self.spec.optimizer]}
        per_run = jax.ShapeDtypeStruct((width,), jnp.int32)
        shapes = jax.eval_shape(self._init, (first,), per_run, hparams, per_run)
        # As the state comes out of _init: runs-sharded, but an empty leaf (no targets) comes
        # out replicated, and a chunk compiled for another sharding would refuse it.
        empty = NamedSharding(self.mesh, P())
        return jax.tree.map(lambda s, sharded: jax.ShapeDtypeStruct(
            s.shape, s.dtype, sharding=sharded if math.prod(s.shape) else empty),
            shapes, fsdp.state_shardings(shapes, self.mesh))

    def _abstract_args(self, width: int, data: Any, eval_data: Any) -> tuple:
        return (self.abstract_state(width, data, eval_data), data, eval_data, self.schedule,
                np.int32(0), np.int32(0), jax.ShapeDtypeStruct((width,), jnp.int32),
                np.bool_(False))


