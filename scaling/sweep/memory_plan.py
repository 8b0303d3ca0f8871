"""A memory plan before any compute: per batch size, the per-device bytes of one group's chunk
and the gradient accumulation, fsdp and group width that fit a device's memory.

Every figure is XLA's memory analysis of the chunk compiled ahead for the config's devices
from shapes alone: nothing is allocated and nothing runs. The total is the chunk's arguments,
outputs and temporaries less the donated state (scaling.train.memory.chunk_bytes). Parameters
and optimizer state are each device's shards of them (their shardings); the gradients take the
parameters' shapes and shardings and live among XLA's temporaries, whose rest are the
activations (and the step's other scratch); `data` is the training and evaluation data each
device holds (its shardings), and `other` the remainder: the rest of the state (keys,
statistics, the parameters' average) and the metric rows.

Settings are searched in the order they cost throughput. The config's own accumulation and
fsdp at one run per device come first; where they do not fit, the least settings (accumulation
down to one example per device per micro-batch at the config's fsdp and at the most fsdp, one
run per device), and a batch size that fits at neither is refused. Else, from the config's
fsdp up (the sizes that split some parameter), the smallest accumulation that fits (bisected:
memory falls as accumulation rises). Then the widest group
up to the batch size's runs. `scaling plan --device-memory` prints the plan; a sweep given
train.memory_limit_gb trains by it (settle).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from scaling.config import Config, ConfigError, named_devices, validate_devices
from scaling.sweep import grid
from scaling.sweep.prepare import Prepared
from scaling.sweep.session import eval_subset, host_spec, placement
from scaling.tasks import build_task
from scaling.train import fsdp, memory, stream
from scaling.train.mesh import make_mesh, replicated
from scaling.train.program import GroupProgram
from scaling.train.spec import group_spec
from scaling.train.start import width as padded_width

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Setting:
    """How a batch size's groups run: accumulation (micro-batches per step), fsdp (devices each
    run's parameters and optimizer state split over) and width (runs in one group)."""

    accumulation: int
    fsdp: int
    width: int

    def describe(self) -> str:
        runs = f"{self.width} run{'s' if self.width != 1 else ''}"
        return f"accumulation {self.accumulation}, fsdp {self.fsdp}, {runs} per group"


@dataclass(frozen=True)
class Footprint:
    """Per-device bytes of one compiled chunk at a setting (see the module's docstring)."""

    setting: Setting
    params: int
    opt_state: int
    gradients: int
    activations: int
    data: int
    other: int

    @property
    def total(self) -> int:
        return (self.params + self.opt_state + self.gradients + self.activations + self.data
                + self.other)


@dataclass(frozen=True)
class SizePlan:
    """One batch size's plan: the footprint at the setting chosen, or where nothing fits
    (`fits` false) at the least setting; `compiles` counts the chunks compiled to find it."""

    batch_size: int
    footprint: Footprint
    fits: bool
    compiles: int


def shard_bytes(tree: Any) -> int:
    """Bytes one device holds of the abstract arrays in `tree`, by their shardings."""
    return sum(math.prod(s.sharding.shard_shape(s.shape)) * np.dtype(s.dtype).itemsize
               for s in jax.tree.leaves(tree))


def model_label(cfg: Config) -> str:
    """The model as a refusal names it: gpt-124m for a preset, else the model's name (the
    task's where the task's own model is used)."""
    if cfg.model.preset:
        return f"{cfg.model.name}-{cfg.model.preset}"
    return cfg.task.name if cfg.model.name == "default" else cfg.model.name


def device_count(cfg: Config) -> int:
    """The devices a sweep of `cfg` runs on: parallel.runs x data x train.fsdp where
    parallel.data is given, else every device jax sees."""
    return named_devices(cfg) or jax.device_count()


@dataclass(frozen=True)
class Settled:
    """What a sweep given train.memory_limit_gb trains with: the config at the fsdp every batch
    size's plan allows (the largest any needs), and each batch size's plan."""

    cfg: Config
    plans: dict[int, SizePlan]

    def record(self) -> dict[str, Any]:
        """The plan as the sweep's folder keeps it (memory_plan.json): the sweep's fsdp, and
        per batch size the accumulation it trains with and the footprint of one run per device
        at the fsdp its own plan found (the group widths are the engine's to cut)."""
        return {"memory_limit_gb": self.cfg.train.memory_limit_gb, "fsdp": self.cfg.train.fsdp,
                "batch_sizes": {str(size): {
                    "fits": p.fits, "accumulation": p.footprint.setting.accumulation,
                    "planned_fsdp": p.footprint.setting.fsdp,
                    "runs_per_device": p.footprint.setting.width // self.cfg.parallel.runs,
                    "bytes": {part: getattr(p.footprint, part) for part in PARTS},
                    "total_bytes": p.footprint.total} for size, p in self.plans.items()}}


PARTS = ("params", "opt_state", "gradients", "activations", "data", "other")


class Planner:
    """Compiles one config's chunk at settings and batch sizes on `devices` devices, for a
    device of `limit` bytes; the task is built once, and each footprint measured once (the
    limit may change between plans: it decides only the data's placement, part of the key)."""

    def __init__(self, cfg: Config, limit: int, devices: int | None = None) -> None:
        self.cfg, self.limit = cfg, limit
        self.devices = devices or device_count(cfg)
        if self.devices > jax.device_count():
            raise ConfigError(
                f"parallel: the config runs on {self.devices} devices, jax sees "
                f"{jax.device_count()}; on CPU set XLA_FLAGS=--xla_force_host_platform_device_count="
                f"{self.devices} to plan for them")
        self.task = build_task(cfg)
        self.param_shapes = [tuple(x.shape) for x in jax.tree.leaves(
            jax.eval_shape(self.task.init, jax.random.key(0)))]
        self.compiles = 0
        self._known: dict[tuple[int, Setting, str], Footprint] = {}

    def configured(self, size: int, setting: Setting) -> Config:
        """The config of batch `size` alone with the setting's accumulation and fsdp on the
        same devices (its data shards follow), and the device memory as its limit (the data's
        placement follows it)."""
        cfg = copy.deepcopy(self.cfg)
        cfg.batch.sizes, cfg.batch.schedules = [size], []
        cfg.batch.accumulation, cfg.train.fsdp = setting.accumulation, setting.fsdp
        cfg.parallel.data = self.devices // (cfg.parallel.runs * setting.fsdp)
        cfg.train.memory_limit_gb = self.limit / memory.GB
        return cfg

    def footprint(self, size: int, setting: Setting) -> Footprint:
        """XLA's memory analysis of the chunk at `size` and `setting`, compiled ahead from
        shapes alone (once per batch size, setting and data placement)."""
        cfg = self.configured(size, setting)
        key = (size, setting, placement(cfg, self.task))
        if key not in self._known:
            program, data, eval_data = self.program(size, setting)
            self._known[key] = measure(program, setting, data, eval_data)
            self.compiles += 1
        return self._known[key]

    def program(self, size: int, setting: Setting) -> tuple[GroupProgram, Any, Any]:
        """The program of batch `size` at `setting` on the planner's devices, and its training
        and evaluation data as shapes (a host-streamed chunk's for every seed); nothing is
        compiled yet (the chunk compiles at its width on first need, and a run of this
        program at that width reuses it: experiments/memory_check.py)."""
        cfg = self.configured(size, setting)
        runs_axis, shards = validate_devices(cfg, self.devices)
        mesh = make_mesh(runs_axis, shards, jax.devices(), fsdp=setting.fsdp)
        spec = group_spec(cfg, size, shards)[0]
        if placement(cfg, self.task) == "host":
            spec = host_spec(spec, cfg, self.task)
            data = stream.abstract(spec, self.task.streamed_example(), len(cfg.seeds), mesh)
        else:
            data = abstract(self.task.train_arrays() or {}, mesh)
        eval_data = abstract(eval_subset(self.task, cfg), mesh)
        return GroupProgram(self.task, spec, mesh), data, eval_data

    def fits(self, footprint: Footprint) -> bool:
        return footprint.total <= memory.SAFETY * self.limit


def measure(program: GroupProgram, setting: Setting, data: Any, eval_data: Any) -> Footprint:
    """The footprint of `program`'s chunk at the setting's width: compiled ahead (the program
    keeps it) and its memory analysis split by the module's rules."""
    analysis = program.memory_at(setting.width, data, eval_data)
    state = program.abstract_state(setting.width, data, eval_data)
    return split(setting, analysis, shard_bytes(state.params), shard_bytes(state.opt_state),
                 shard_bytes((data, eval_data)))


def abstract(arrays: dict[str, Any], mesh: Any) -> dict[str, jax.ShapeDtypeStruct]:
    """Host arrays as the shapes of their copies on every device of `mesh` (nothing copied)."""
    everywhere = replicated(mesh)
    return {k: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=everywhere)
            for k, a in arrays.items()}


def split(setting: Setting, analysis: Any, params: int, opt_state: int, data: int
          ) -> Footprint:
    """A chunk's memory analysis cut into the footprint's parts; a backend that gives no
    analysis is refused (the plan has nothing to stand on)."""
    total = memory.chunk_bytes(analysis)
    if total is None:
        raise ConfigError("--device-memory: this backend gives no memory analysis of a "
                          "compiled program; plan on a CPU, GPU or TPU backend")
    temp = analysis.temp_size_in_bytes
    gradients = min(params, temp)
    return Footprint(setting, params, opt_state, gradients, temp - gradients, data,
                     total - params - opt_state - temp - data)


def accumulations(cfg: Config, size: int, shards: int) -> list[int]:
    """The config's accumulation times powers of two while each device's share of a
    micro-batch is a whole number of examples."""
    out, a = [], cfg.batch.accumulation
    while size % (a * shards) == 0:
        out.append(a)
        a *= 2
    return out


def fsdp_sizes(cfg: Config, devices: int, shapes: list[tuple[int, ...]]) -> list[int]:
    """fsdp sizes from the config's up: the divisors of the devices a run group has that split
    some parameter of `shapes` (one run's; a size that splits none is refused by the engine)."""
    per_run = devices // cfg.parallel.runs
    return [k for k in range(cfg.train.fsdp, per_run + 1)
            if per_run % k == 0 and (k == cfg.train.fsdp or fsdp.splits_some(shapes, k))]


def wanted_width(cfg: Config, size: int) -> int:
    """The runs of `size` in the config's first grid, at most train.max_group_size."""
    runs = sum(r.batch_size == size and r.schedule is None for r in grid.expand(cfg))
    return min(cfg.train.max_group_size or runs, max(runs, 1))


def plan_size(planner: Planner, size: int, widths: bool = True) -> SizePlan:
    """The batch size's plan: the first fit in the order of the module's docstring, or, where
    no least setting fits either, refused with the smallest footprint tried. `widths`: search
    the widest group (else one run per device: a sweep's engine cuts its groups itself)."""
    grow = widest if widths else (lambda _planner, _size, narrow: narrow)
    cfg, runs = planner.cfg, planner.cfg.parallel.runs
    start = planner.compiles
    options = [(k, accumulations(cfg, size, planner.devices // runs)) for k in fsdp_sizes(
        cfg, planner.devices, planner.param_shapes)]
    options = [(k, accs) for k, accs in options if accs]
    if not options:
        raise ConfigError(f"batch.sizes: {size} does not split over the {planner.devices // runs} "
                          f"data shards x batch.accumulation {cfg.batch.accumulation}")
    own = planner.footprint(size, Setting(options[0][1][0], options[0][0], runs))
    if planner.fits(own):
        return SizePlan(size, grow(planner, size, own), True, planner.compiles - start)
    # The most accumulation at the config's fsdp and at the most fsdp: sharding usually saves
    # memory, but XLA's partitioner may spend more on gathered and replicated temporaries
    # than it saves (the 124M preset on 8 CPU devices: docs/memory.md).
    least = [planner.footprint(size, Setting(accs[-1], k, runs))
             for k, accs in {options[0][0]: options[0][1], options[-1][0]: options[-1][1]}.items()]
    if not any(planner.fits(f) for f in least):
        return SizePlan(size, min([own, *least], key=lambda f: f.total), False,
                        planner.compiles - start)
    for k, accs in options:
        found = smallest_accumulation(planner, size, k, accs)
        if found is not None:
            return SizePlan(size, grow(planner, size, found), True, planner.compiles - start)
    raise AssertionError("the least setting fits, so the last fsdp size finds one")


def smallest_accumulation(planner: Planner, size: int, k: int, accs: list[int]
                          ) -> Footprint | None:
    """The footprint of the smallest accumulation in `accs` that fits at fsdp `k` and one run
    per device, bisected; None where even the largest does not fit."""
    runs = planner.cfg.parallel.runs
    probe = lambda a: planner.footprint(size, Setting(a, k, runs))
    top = probe(accs[-1])
    if not planner.fits(top):
        return None
    lo, hi, best = 0, len(accs) - 1, top  # accs[hi] fits; find the first that does
    while lo < hi:
        mid = (lo + hi) // 2
        tried = probe(accs[mid])
        if planner.fits(tried):
            hi, best = mid, tried
        else:
            lo = mid + 1
    return best


def widest(planner: Planner, size: int, narrow: Footprint) -> Footprint:
    """The widest group up to the batch size's runs that fits, from the one-run-per-device
    footprint `narrow`: each further run per device adds what one adds there beyond the data,
    and the width so predicted is compiled to confirm it (halved until it fits)."""
    cfg, runs = planner.cfg, planner.cfg.parallel.runs
    wanted = padded_width(wanted_width(cfg, size), runs)
    per_run = max(narrow.total - narrow.data, 1)
    width = min(wanted, memory.max_width(planner.limit, per_run, runs, narrow.data))
    while width > runs:
        tried = planner.footprint(size, Setting(narrow.setting.accumulation,
                                                narrow.setting.fsdp, width))
        if planner.fits(tried):
            return tried
        width = padded_width(width // 2, runs)
    return narrow


def plan(cfg: Config, limit_gb: float, devices: int | None = None, widths: bool = True
         ) -> list[SizePlan]:
    """Every fixed batch size's plan for devices of `limit_gb` GB each (`widths`: plan_size)."""
    planner = Planner(cfg, int(limit_gb * memory.GB), devices)
    out = []
    for size in cfg.batch.sizes:
        out.append(plan_size(planner, size, widths))
        log.info("batch %d planned (%d chunks compiled)", size, out[-1].compiles)
    return out


def refusal(cfg: Config, size_plan: SizePlan, limit_gb: float) -> str:
    """One line: why the batch size cannot run on this device at any setting."""
    f = size_plan.footprint
    return (f"batch {size_plan.batch_size} of {model_label(cfg)} needs {f.total / memory.GB:.3g} "
            f"GB per device even at its smallest ({f.setting.describe()}); the device has "
            f"{limit_gb:.3g} GB, of which {memory.SAFETY:.0%} is planned for")


def settle(p: Prepared) -> Prepared:
    """The prepared sweep as its memory plan sets it, where train.memory_limit_gb is given:
    a batch size that fits at no setting refused in one line (ConfigError), before anything
    runs; else the largest fsdp any batch size needs (its mesh is the sweep's) and each batch
    size's own accumulation, in its spec and arithmetic (so its runs' config.json record it).
    The group width stays the engine's to cut (scaling.sweep.fixed.width)."""
    gb = p.cfg.train.memory_limit_gb
    if gb is None or not p.specs or not p.cfg.batch.sizes:
        return p
    settled = settled_config(p.cfg, gb, jax.device_count())
    specs = {size: group_spec(with_accumulation(settled.cfg, settled.plans[size]), size,
                              p.data_shards) if size in settled.plans else spec
             for size, spec in p.specs.items()}
    return dataclasses.replace(p, cfg=settled.cfg, specs=specs, memory_plan=settled.record())


def settled_config(cfg: Config, gb: float, devices: int) -> Settled:
    """Plan every fixed batch size; refuse the first that fits at no setting."""
    plans = {p.batch_size: p for p in plan(cfg, gb, devices, widths=False)}
    for size_plan in plans.values():
        if not size_plan.fits:
            raise ConfigError(f"train.memory_limit_gb: {refusal(cfg, size_plan, gb)}")
    out = copy.deepcopy(cfg)
    out.train.fsdp = max(p.footprint.setting.fsdp for p in plans.values())
    if out.parallel.data is not None:
        out.parallel.data = devices // (out.parallel.runs * out.train.fsdp)
    for size, size_plan in plans.items():
        s = size_plan.footprint.setting
        log.info("memory plan, batch %d: accumulation %d, fsdp %d, %.3g GB per device at one "
                 "run per device", size, s.accumulation, s.fsdp,
                 size_plan.footprint.total / memory.GB)
    return Settled(out, plans)


def with_accumulation(cfg: Config, size_plan: SizePlan) -> Config:
    """The config with the batch size's planned accumulation."""
    out = copy.deepcopy(cfg)
    out.batch.accumulation = size_plan.footprint.setting.accumulation
    return out
