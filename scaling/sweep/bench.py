"""`scaling bench`: one group of a config trained by the engine and by a tutorial-style loop,
timed side by side in one process, with the ratio.

The tutorial loop is what most training scripts do: the runs train one after another, a jitted
step is called from Python every step and its loss read back (a host sync per step), and the
evaluation is a jitted call at the same points the engine evaluates. It trains the same runs
as the engine: the same initial parameters, the same batches (the engine's permutation of each
epoch, or the task's draws from the same keys), the same optimizer, schedule and precision, so
the final losses agree up to float32 rounding (summed in another order), which training
amplifies over many steps, most at a high learning rate; the comparison is of speed alone.
The engine also measures the gradient noise scale, as every sweep does; the tutorial loop does
not.

Compile time is apart from training: the engine's first call compiles and trains, the timed
calls reuse the compiled program; the tutorial loop compiles on a warm-up step.

With several `train.fsdp` values (`--fsdp`), the engine alone also trains the same runs with
each run's parameters and optimizer state split over K devices, timed side by side with the
finals' agreement against the first K.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable

import jax
import numpy as np

from scaling import config as config_mod
from scaling.config import Config
from scaling.formatting import percent, text_table
from scaling.sweep import grid
from scaling.sweep.session import eval_subset
from scaling.tasks import build_task
from scaling.train import throughput
from scaling.train.loop import run_group
from scaling.train.mesh import make_mesh, put_replicated
from scaling.train.program import GroupProgram
from scaling.train.sinks import Records, Sink
from scaling.train.spec import RunSpec, group_spec
from scaling.train.start import fresh
from scaling.train.tutorial import Arm, TutorialLoop

NO_DIVERGENCE = 1e30  # train.divergence_factor: only a non-finite loss stops a run
COMPUTE_BOUND = 0.3  # a tutorial loop at this share of the peak leaves vmapping little to gain


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


def with_fsdp(cfg: Config, fsdp: int) -> Config:
    """The config with train.fsdp set (checked as any config is)."""
    return config_mod.from_dict(config_mod.to_dict(
        dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, fsdp=fsdp))))


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


@dataclass
class Setup:
    """One group of a config, ready for both arms: its program and runs, the data placed for
    the engine (over the mesh) and for the tutorial loop (on the default device)."""

    program: GroupProgram
    runs: list[RunSpec]
    runs_axis: int
    data: Any
    eval_data: Any
    loop_data: Any
    loop_eval_data: Any

    def engine(self, repeats: int) -> Arm:
        return engine_arm(self.program, self.runs, self.data, self.eval_data, self.runs_axis,
                          repeats)

    def tutorial(self) -> TutorialLoop:
        return TutorialLoop(self.program, self.loop_data, self.loop_eval_data)


def setup(cfg: Config, batch_size: int, steps: int, num_runs: int | None = None) -> Setup:
    """The first `num_runs` runs of the grid at `batch_size` (default: one group's worth) for
    `steps` steps (bench_config), built but not yet compiled or trained."""
    cfg = bench_config(cfg, batch_size, steps)
    runs_axis, data_shards = config_mod.validate_devices(cfg, jax.device_count())
    planned = grid.expand(cfg)
    runs = [r.spec for r in planned[:num_runs or cfg.train.max_group_size or len(planned)]]
    task = build_task(cfg)
    mesh = make_mesh(runs_axis, data_shards, fsdp=cfg.train.fsdp)
    program = GroupProgram(task, group_spec(cfg, batch_size, data_shards)[0], mesh)
    train_arrays, eval_arrays = task.train_arrays() or {}, eval_subset(task, cfg)
    device = jax.devices()[0]  # the tutorial loop runs on the default device, as tutorials do
    return Setup(program, runs, runs_axis, put_replicated(mesh, train_arrays),
                 put_replicated(mesh, eval_arrays), jax.device_put(train_arrays, device),
                 jax.device_put(eval_arrays, device))


def bench(cfg: Config, batch_size: int, steps: int, num_runs: int | None = None,
          repeats: int = 1) -> Result:
    """Train the first `num_runs` runs of the grid at `batch_size` (default: one group's worth)
    for `steps` steps with the engine and with the tutorial loop; the best of `repeats` counts."""
    s = setup(cfg, batch_size, steps, num_runs)
    engine = s.engine(repeats)
    tutorial = s.tutorial().arm(s.runs, repeats)
    peak, source = throughput.peak_or_measured(jax.devices()[0], s.program.precision)
    flops, _ = throughput.per_step(s.program.task, batch_size, lambda: s.program.model_flops(s.data))
    return Result(s.program.spec.batch_size, len(s.runs), steps, s.program.mesh.devices.size,
                  engine, tutorial, flops, peak, source)


@dataclass
class Split:
    """The engine at one train.fsdp: K, the devices it ran on and its arm."""

    fsdp: int
    devices: int
    engine: Arm


def bench_fsdp(cfg: Config, batch_size: int, steps: int, splits: list[int],
               num_runs: int | None = None, repeats: int = 1) -> list[Split]:
    """The engine alone at each train.fsdp in `splits`, on the same runs and batches."""
    out = []
    for k in splits:
        s = setup(with_fsdp(cfg, k), batch_size, steps, num_runs)
        out.append(Split(k, s.program.mesh.devices.size, s.engine(repeats)))
    return out


def format_splits(r: Result, splits: list[Split]) -> str:
    """The engine at each train.fsdp, its ratio to the first K and its finals' agreement."""
    first = splits[0]
    rows = [[s.fsdp, s.engine.compile_s, s.engine.train_s,
             r.runs * r.steps * r.batch_size / s.engine.train_s,
             percent(r.mfu(s.engine, s.devices)), first.engine.train_s / s.engine.train_s]
            for s in splits]
    lines = [text_table(["fsdp", "compile s", "train s", "examples/s", "MFU",
                         f"speed vs fsdp {first.fsdp}"], rows)]
    for s in splits[1:]:
        pairs = [(a, b) for a, b in zip(first.engine.final_losses, s.engine.final_losses)
                 if np.isfinite(a) and np.isfinite(b)]
        if pairs:
            diff = max(abs(a - b) / max(abs(a), 1e-30) for a, b in pairs)
            lines.append(f"final eval loss, fsdp {s.fsdp} against fsdp {first.fsdp}: max "
                         f"relative difference {diff:.3g} over {len(pairs)} runs")
    return "\n".join(lines)


def engine_arm(program: GroupProgram, runs: list[RunSpec], data: Any, eval_data: Any,
               runs_axis: int, repeats: int, clock: Callable[[], float] = time.perf_counter
               ) -> Arm:
    """The engine: a first run_group call (compiling), then `repeats` timed calls on the
    compiled program, each from a fresh state; compile seconds = first - best."""
    began = clock()
    finals = train_once(program, runs, data, eval_data, runs_axis)
    first = clock() - began
    best = float("inf")
    for _ in range(repeats):
        began = clock()
        run_group(program, fresh(program, runs, data, eval_data, runs_axis), data, eval_data, [])
        best = min(best, clock() - began)
    return Arm("engine", max(first - best, 0.0), best, finals)


def train_once(program: GroupProgram, runs: list[RunSpec], data: Any, eval_data: Any,
               runs_axis: int) -> list[float]:
    """One run_group call from a fresh state (compiling where the program has not yet); each
    run's final eval loss."""
    last = _LastRows(len(runs))
    run_group(program, fresh(program, runs, data, eval_data, runs_axis), data, eval_data, [last])
    return [row.get("eval_loss", float("nan")) for row in last.last]


class _LastRows(Sink):
    """Each run's last row."""

    def __init__(self, runs: int) -> None:
        self.last: list[dict] = [{} for _ in range(runs)]

    def rows(self, records: Records, wall_s: float, running: int) -> None:
        self.last = [rows[-1] if rows else last for rows, last in zip(records, self.last)]


def format_result(r: Result) -> str:
    """The side-by-side table, the ratios, and whether the finals agree."""
    rows = []
    for arm, devices in ((r.engine, r.devices), (r.tutorial, 1)):
        mfu = r.mfu(arm, devices)
        rows.append([arm.name, arm.compile_s, arm.train_s, r.runs * r.steps / arm.train_s,
                     r.runs * r.steps * r.batch_size / arm.train_s,
                     percent(mfu)])
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
                     f"{percent(r.mfu(r.tutorial, 1))} of the peak, so training runs together "
                     "cannot make it much faster; the ratio above is not a vmapping speed-up")
    return "\n".join(lines)
