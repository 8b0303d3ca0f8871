"""Compiled training: one program per (task, batch size, optimizer family), runs vmapped inside.

A group of runs that differ only in scalars (learning rate, seed, momentum, weight decay, betas)
trains as one vmapped state. Steps run in lax.scan chunks; evaluation, target checks, divergence
checks and noise-scale statistics happen inside the chunk, and the host reads one small table
of metrics per chunk (DESIGN.md section 5). The step counter is shared by the group, so the
`lax.cond`s on it (new epoch, evaluation point) stay real branches under vmap. When most runs
have stopped, the group is cut to a smaller width between chunks (scaling.repack).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from scaling import gns, measure, reach
from scaling.gradients import GroupLayout
from scaling.optimizers import make_optimizer, set_learning_rate
from scaling.reach import ReachState, Schedule
from scaling.repack import Packing
from scaling.rules import lr_multiplier
from scaling.targets import EMA_SUFFIX, Reach
from scaling.tasks.base import Task

RUNNING, COMPLETED, DIVERGED, BUDGET_EXHAUSTED, PADDING = 0, 1, 2, 3, 4
STATUS_NAMES = {RUNNING: "running", COMPLETED: "completed", DIVERGED: "diverged",
                BUDGET_EXHAUSTED: "budget_exhausted"}


@dataclass(frozen=True)
class GroupSpec:
    """Everything that shapes the compiled program; runs in one group share all of it."""

    batch_size: int
    layout: GroupLayout
    optimizer: str
    total_steps: int
    chunk_steps: int
    schedule: str
    warmup_steps: int
    final_fraction: float
    num_train: int | None
    drop_last: bool
    targets: tuple[tuple[str, str, float], ...]
    divergence_factor: float
    stop_at_targets: bool
    measure_gns: bool
    ema_decay: float
    hessian_every: int = 0
    gns_every: int = 1
    preconditioned: bool = False
    repack: bool = True
    reach: Reach = Reach()
    eval_every: int | None = None
    points_per_decade: int = 20
    param_ema: float | None = None  # decay of the parameters' moving average, None: off

    @property
    def eval_points(self) -> np.ndarray:
        return eval_steps(self.total_steps, self.eval_every, self.points_per_decade)

    @property
    def measures(self) -> bool:
        return self.measure_gns and self.layout.num_groups >= 2

    @property
    def gns_metrics(self) -> int:
        """Estimates kept side by side: Euclidean, and Adam's preconditioned metric if asked."""
        return 2 if self.preconditioned else 1

    @property
    def steps_per_epoch(self) -> int | None:
        if self.num_train is None:
            return None
        div = self.num_train // self.batch_size if self.drop_last else -(-self.num_train // self.batch_size)
        return max(div, 1)


@dataclass(frozen=True)
class RunSpec:
    """The scalars of one run: data, not constants, in the compiled program."""

    learning_rate: float
    seed: int
    momentum: float = 0.9
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8


class RunState(NamedTuple):
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
    ema: gns.EMAState
    hessian_ema: gns.EMAState
    gns_sum: jax.Array
    gns_count: jax.Array
    reach: ReachState
    ema_params: Any  # the parameters' moving average before bias correction (None: off)


def eval_steps(total_steps: int, every: int | None, points_per_decade: int) -> np.ndarray:
    """Evaluation points: 0, the end, a fixed cadence, and geometric spacing for resolution."""
    points = {0, total_steps}
    if every:
        points.update(range(every, total_steps, every))
    if points_per_decade and total_steps > 1:
        n = int(math.ceil(points_per_decade * math.log10(total_steps))) + 1
        points.update(int(round(s)) for s in np.geomspace(1, total_steps, n))
    return np.array(sorted(points), dtype=np.int64)


class GroupProgram:
    """The compiled init and chunk functions for one GroupSpec on one mesh."""

    def __init__(self, task: Task, spec: GroupSpec, mesh: Mesh) -> None:
        self.task, self.spec, self.mesh = task, spec, mesh
        self.tx_factory = make_optimizer(spec.optimizer)
        self.metric_names = tuple(m for m in task.metrics if m != "train_loss")
        self.schedule = reach.schedule(spec.eval_points, spec.total_steps + spec.chunk_steps + 1,
                                       spec.hessian_every, spec.reach)
        self._init = jax.jit(self._init_fn)
        self._chunk = jax.jit(self._chunk_fn, donate_argnums=0)
        self._final = jax.jit(self._final_fn)
        self._take = jax.jit(self._take_fn)
        # Per group width (the runs axis): compiled chunk, its compile seconds, chunks run.
        self.compiled: dict[int, Callable] = {}
        self.compile_s: dict[int, float] = {}
        self.chunks_at: dict[int, int] = {}

    # ------------------------------------------------------------ per-run pieces (vmapped)
    def _tx(self, hparams: dict[str, jax.Array]) -> optax.GradientTransformation:
        return optax.inject_hyperparams(self.tx_factory)(**hparams)

    def _new_perm(self, key: jax.Array, epoch: jax.Array) -> jax.Array:
        """This epoch's order, padded (or cut, with drop_last) to steps_per_epoch x batch."""
        spec = self.spec
        perm = jax.random.permutation(jax.random.fold_in(key, epoch), spec.num_train)
        length = spec.steps_per_epoch * spec.batch_size
        if length > spec.num_train:
            perm = jnp.concatenate([perm, jnp.zeros(length - spec.num_train, perm.dtype)])
        return perm[:length]

    def _batch(self, rs: RunState, data: Any, step: jax.Array) -> tuple[Any, jax.Array]:
        """This step's examples and their weights (0 pads a kept partial last batch)."""
        spec, size = self.spec, self.spec.batch_size
        if spec.num_train is None:
            return self.task.sample(jax.random.fold_in(rs.data_key, step), size), jnp.ones(size)
        start = (step % spec.steps_per_epoch) * size
        idx = jax.lax.dynamic_slice(rs.perm, (start,), (size,))
        weights = (start + jnp.arange(size) < spec.num_train).astype(jnp.float32)
        return jax.tree.map(lambda a: a[idx], data), weights

    def _evaluate(self, rs: RunState, eval_data: Any) -> dict[str, jax.Array]:
        """The task's metrics of the parameters, and of their moving average with eval.ema_decay."""
        metrics = self.task.evaluate(rs.params, eval_data)
        out = {k: metrics[k].astype(jnp.float32) for k in self.metric_names}
        if self.spec.param_ema is not None:
            averaged = self.task.evaluate(ema_params(rs, self.spec.param_ema), eval_data)
            out.update({k + EMA_SUFFIX: averaged[k].astype(jnp.float32) for k in self.metric_names})
        return out

    def _init_run(self, seed: jax.Array, hparams: dict[str, jax.Array], data: Any, eval_data: Any
                  ) -> tuple:
        init_key, data_key = jax.random.split(jax.random.key(seed))
        params = self.task.init(init_key)
        opt_state = self._tx(hparams).init(params)
        spec = self.spec
        perm_len = spec.steps_per_epoch * spec.batch_size if spec.num_train else 1
        zero, m = jnp.zeros((), jnp.float32), spec.gns_metrics
        rs = RunState(params, opt_state, hparams["learning_rate"], data_key,
                      jnp.zeros(perm_len, jnp.int32), jnp.zeros((), jnp.int32),
                      jnp.zeros((), jnp.int32), zero, zero, zero, gns.ema_init((m,)), gns.ema_init(),
                      jnp.zeros((2, m), jnp.float32), jnp.zeros(m, jnp.float32),
                      reach.init(len(spec.targets), len(spec.eval_points), spec.reach),
                      None if spec.param_ema is None else jax.tree.map(jnp.zeros_like, params))
        return self._after_eval(rs, data, eval_data, self.schedule, jnp.zeros((), jnp.int32),
                                jnp.asarray(spec.total_steps == 0), jnp.asarray(False))

    def _train_step(self, rs: RunState, data: Any, step: jax.Array, live: jax.Array) -> RunState:
        spec = self.spec
        batch, weights = self._batch(rs, data, step)
        out, valid = measure.step_gradient(spec, self.task.per_example_loss, self.mesh, rs.params,
                                           rs.opt_state, batch, weights, step)
        lr = rs.base_lr * lr_multiplier(spec.schedule, step, spec.total_steps, spec.warmup_steps,
                                        spec.final_fraction)
        opt_state = set_learning_rate(rs.opt_state, lr)
        tx = self._tx(dict(opt_state.hyperparams))
        updates, opt_state = tx.update(out.grad, opt_state, rs.params)
        params = optax.apply_updates(rs.params, updates)
        finite = jnp.isfinite(out.loss)
        ema, gns_sum, gns_count = measure.fold(spec, rs.ema, rs.gns_sum, rs.gns_count, out,
                                               valid & live & finite)
        keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(live, n, o), new, old)
        averaged = rs.ema_params
        if spec.param_ema is not None:
            d = spec.param_ema
            averaged = keep(jax.tree.map(lambda a, p: d * a + (1 - d) * p, averaged, params), averaged)
        return rs._replace(
            params=keep(params, rs.params), opt_state=keep(opt_state, rs.opt_state),
            ema_params=averaged,
            steps=rs.steps + live, status=jnp.where(live & ~finite, DIVERGED, rs.status),
            loss_sum=rs.loss_sum + jnp.where(live, out.loss, 0.0), loss_count=rs.loss_count + live,
            ema=ema, gns_sum=gns_sum, gns_count=gns_count)

    def _after_eval(self, rs: RunState, data: Any, eval_data: Any, sched: Schedule,
                    point: jax.Array, is_last: jax.Array, hessian: jax.Array
                    ) -> tuple[RunState, dict[str, jax.Array]]:
        """Metrics at an evaluation point, then target, divergence and budget bookkeeping."""
        spec = self.spec
        metrics = self._evaluate(rs, eval_data)
        here = (rs.steps == point) & (rs.status == RUNNING)
        hessian_ema, hessian_point = measure.hessian_update(
            spec, self.task, rs.params, rs.data_key, rs.hessian_ema, data, point, hessian, here)
        start_loss = jnp.where(point == 0, metrics["eval_loss"], rs.start_loss)
        targets = reach.update(rs.reach, spec.reach, spec.targets, metrics, point,
                               sched.index[point], sched, here)
        all_hit = reach.all_settled(targets)
        loss = metrics["eval_loss"]
        blown = ~jnp.isfinite(loss) | (loss > spec.divergence_factor * start_loss)
        status = jnp.where(here & blown, DIVERGED, rs.status)
        done_targets = here & all_hit & spec.stop_at_targets & (status == RUNNING)
        status = jnp.where(done_targets, COMPLETED, status)
        at_end = here & is_last & (status == RUNNING)
        status = jnp.where(at_end & (all_hit | (len(spec.targets) == 0)), COMPLETED, status)
        status = jnp.where(at_end & (status == RUNNING), BUDGET_EXHAUSTED, status)
        row = dict(metrics, step=rs.steps, recorded=here, status=status, lr=opt_lr(rs),
                   train_loss=jnp.where(rs.loss_count > 0, rs.loss_sum / jnp.maximum(rs.loss_count, 1),
                                        jnp.nan),
                   **measure.row(spec, rs.ema, rs.gns_sum, rs.gns_count, hessian_ema,
                                 hessian_point))
        reset = lambda x: jnp.where(here, jnp.zeros_like(x), x)
        rs = rs._replace(status=status, start_loss=start_loss, reach=targets,
                         hessian_ema=hessian_ema, loss_sum=reset(rs.loss_sum),
                         loss_count=reset(rs.loss_count), gns_sum=reset(rs.gns_sum),
                         gns_count=reset(rs.gns_count))
        return rs, row

    # ------------------------------------------------------------ group-level (compiled)
    def _vmap(self, fn: Callable, in_axes: Any) -> Callable:
        return jax.vmap(fn, in_axes=in_axes, spmd_axis_name="runs")

    def _init_fn(self, seeds: jax.Array, hparams: dict, status: jax.Array, data: Any,
                 eval_data: Any) -> tuple:
        """Every run's first state and its row at step 0."""
        rs, row = self._vmap(self._init_run, (0, 0, None, None))(seeds, hparams, data, eval_data)
        rs = rs._replace(status=jnp.where(status == PADDING, PADDING, rs.status))
        return self._shard_runs(rs), self._replicate(row)

    def _chunk_fn(self, rs: RunState, data: Any, eval_data: Any, sched: Schedule,
                  first_step: jax.Array) -> tuple[RunState, dict]:
        spec = self.spec
        steps = first_step + jnp.arange(spec.chunk_steps)
        after_eval = self._vmap(self._after_eval, (0, None, None, None, None, None, None))
        row_shape = jax.eval_shape(
            lambda r: after_eval(r, data, eval_data, sched, steps[0], False, False)[1], rs)

        def body(rs: RunState, step: jax.Array) -> tuple[RunState, dict]:
            live = (rs.status == RUNNING) & (step < spec.total_steps)
            if spec.num_train is not None:
                epoch = step // spec.steps_per_epoch
                perm = jax.lax.cond(step % spec.steps_per_epoch == 0,
                                    lambda: self._vmap(self._new_perm, (0, None))(rs.data_key, epoch),
                                    lambda: rs.perm)
                rs = rs._replace(perm=perm)
            rs = jax.lax.cond(jnp.any(live), lambda r: self._vmap(self._train_step, (0, None, None, 0))(
                r, data, step, live), lambda r: r, rs)
            point = step + 1
            rs, row = jax.lax.cond(
                sched.index[point] >= 0,
                lambda r: after_eval(r, data, eval_data, sched, point, point == spec.total_steps,
                                     sched.hessian[point]),
                lambda r: (r, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), row_shape)), rs)
            return rs, dict(row, status=rs.status)

        rs, rows = jax.lax.scan(body, rs, steps)
        return self._shard_runs(rs), self._replicate(rows)

    def _take_fn(self, rs: RunState, take: jax.Array, pad: jax.Array) -> RunState:
        """The runs in slots `take` (every leaf, optimizer state and keys included), pads marked."""
        rs = jax.tree.map(lambda x: jnp.take(x, take, axis=0), rs)
        return self._shard_runs(rs._replace(status=jnp.where(pad, PADDING, rs.status)))

    def _shard_runs(self, rs: RunState) -> RunState:
        """Every state leaf has the runs axis first; pinning it keeps one compiled chunk valid."""
        return jax.lax.with_sharding_constraint(rs, NamedSharding(self.mesh, P("runs")))

    def _replicate(self, tree: Any) -> Any:
        """Metrics are read by every process, so they are gathered to all devices (small)."""
        return jax.lax.with_sharding_constraint(tree, NamedSharding(self.mesh, P()))

    # ------------------------------------------------------------ host side
    def init(self, runs: list[RunSpec], status: np.ndarray, data: Any, eval_data: Any
             ) -> tuple[RunState, dict]:
        seeds = jnp.asarray([r.seed for r in runs], jnp.uint32)
        hparams = {k: jnp.asarray([getattr(r, k) for r in runs], jnp.float32)
                   for k in hparam_names(self.spec.optimizer)}
        return self._init(seeds, hparams, jnp.asarray(status, jnp.int32), data, eval_data)

    def final_view(self, rs: RunState) -> dict:
        """The small per-run facts the host needs at the end, gathered for every process."""
        return self._final(rs)

    def _final_fn(self, rs: RunState) -> dict:
        return self._replicate({"status": rs.status, "steps": rs.steps})

    def take(self, rs: RunState, take: np.ndarray, pad: np.ndarray) -> RunState:
        """A smaller group: the state's slots `take`, the `pad` ones marked PADDING."""
        return self._take(rs, jnp.asarray(take, jnp.int32), jnp.asarray(pad))

    def chunk(self, rs: RunState, data: Any, eval_data: Any, first_step: int):
        """Run one chunk; the first call at a width compiles ahead, so compile time is apart."""
        width = int(rs.status.shape[0])
        args = (rs, data, eval_data, self.schedule, jnp.asarray(first_step, jnp.int32))
        self._compile(width, args)
        self.chunks_at[width] = self.chunks_at.get(width, 0) + 1
        return self.compiled[width](*args)

    def _compile(self, width: int, args: tuple) -> Any:
        """The chunk at `width`, compiled once; `args` may hold abstract (shape-only) state."""
        if width not in self.compiled:
            start = time.perf_counter()
            self.compiled[width] = self._chunk.lower(*args).compile()
            self.compile_s[width] = time.perf_counter() - start
        return self.compiled[width]

    def memory_at(self, width: int, data: Any, eval_data: Any) -> Any:
        """XLA's memory analysis of the chunk at `width` (per device), compiled ahead from the
        state's shapes alone, so no state is allocated; the group that trains at this width
        reuses the compiled chunk. None where the backend gives no analysis."""
        seeds = jax.ShapeDtypeStruct((width,), jnp.uint32)
        hparams = {k: jax.ShapeDtypeStruct((width,), jnp.float32)
                   for k in hparam_names(self.spec.optimizer)}
        status = jax.ShapeDtypeStruct((width,), jnp.int32)
        shapes = jax.eval_shape(self._init, seeds, hparams, status, data, eval_data)[0]
        runs = NamedSharding(self.mesh, P("runs"))
        rs = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=runs), shapes)
        args = (rs, data, eval_data, self.schedule, jnp.asarray(0, jnp.int32))
        return self._compile(width, args).memory_analysis()


def opt_lr(rs: RunState) -> jax.Array:
    return rs.opt_state.hyperparams["learning_rate"].astype(jnp.float32)


def ema_params(rs: RunState, decay: float) -> Any:
    """The bias-corrected moving average of the parameters (the parameters before any step)."""
    correction = 1.0 - decay ** rs.steps.astype(jnp.float32)
    return jax.tree.map(lambda a, p: jnp.where(rs.steps > 0, a / jnp.maximum(correction, 1e-30), p),
                        rs.ema_params, rs.params)


def hparam_names(optimizer: str) -> tuple[str, ...]:
    from scaling.optimizers import HYPERPARAMS

    return HYPERPARAMS[optimizer]


@dataclass
class RunResult:
    """What the host knows about one run when its group stops."""

    status: str
    steps: int


def run_group(program: GroupProgram, runs: list[RunSpec], data: Any, eval_data: Any,
              on_records: Callable[[list[list[dict]], float], None],
              runs_axis: int = 1) -> tuple[list[RunResult], float]:
    """Train a group to the end; `on_records(records_per_run, wall_s)` is called once per chunk.

    The next chunk is dispatched before the previous chunk's metrics are read, so the device
    never waits on the host. With spec.repack, the state shrinks to the runs still running when
    they fit a smaller width (scaling.repack). Returns the results and the compile seconds of
    the chunk programs this group ran.
    """
    spec = program.spec
    pad = (-len(runs)) % runs_axis
    padded = runs + [runs[-1]] * pad
    status = np.array([RUNNING] * len(runs) + [PADDING] * pad)
    start = time.perf_counter()
    rs, row0 = program.init(padded, status, data, eval_data)
    packing = Packing(len(runs), len(padded), spec.repack, runs_axis)
    on_records(packing.records(jax.device_get(row0), packing.slots), time.perf_counter() - start)
    widths, pending = set(), None
    for first in range(0, spec.total_steps, spec.chunk_steps):
        cut = packing.plan()
        if cut is not None:
            final_view = program.final_view(rs)
            rs = program.take(rs, *cut)
            packing.repacked(*cut, final_view)
        rs, rows = program.chunk(rs, data, eval_data, first)
        widths.add(len(packing.slots))
        if pending is not None and _consume(pending, packing, start, on_records):
            pending = None
            break
        pending = (rows, packing.slots)
    if pending is not None:
        _consume(pending, packing, start, on_records)
    final = packing.final(program.final_view(rs))
    return [_result(final, i) for i in range(len(runs))], sum(program.compile_s[w] for w in widths)


def _consume(pending: tuple[dict, np.ndarray], packing: Packing, start: float,
             on_records: Callable) -> bool:
    """Hand a chunk's metrics to the host; True when every real run has stopped."""
    rows, slots = jax.device_get(pending[0]), pending[1]
    on_records(packing.records(rows, slots), time.perf_counter() - start)
    return packing.update(np.asarray(rows["status"])[-1] == RUNNING, slots)


def _result(final: dict, i: int) -> RunResult:
    return RunResult(STATUS_NAMES.get(int(final["status"][i]), "failed"), int(final["steps"][i]))
