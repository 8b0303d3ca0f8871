"""A sweep checked before any compute: the devices, the batch sizes, the shard, the folder.

`prepare` returns a `Prepared`: the whole grid (the search's recorded rounds included), each batch
size's program spec and arithmetic, and this shard's groups. A results folder written by a
different config is refused here, with what differs and how to extend a sweep on purpose.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import yaml

from scaling import config as config_mod, store
from scaling.config import Config, ConfigError
from scaling.config.arithmetic import Arithmetic
from scaling.errors import need
from scaling.store import layout
from scaling.sweep import grid, neighbours, search
from scaling.sweep.grid import PlannedRun, Unit, expand
from scaling.sweep.stopping import axes_key
from scaling.train import precision
from scaling.train.spec import GroupSpec, group_spec

# Sections that may change between invocations into one folder: the grid's axes (which may grow
# freely, as may list-valued optimizer scalars, config.AXES: see _differences), the analysis,
# knobs that do not change results, and a scale cell's record (what it follows from is checked).
# Any other change makes earlier runs incomparable.
GRID_KEYS = ("batch", "learning_rate", "seeds", "targets", "train", "parallel", "name", "analysis",
             "data", "log", "branch", "cell")


def _with_defaults(section: str, value: Any, now: Any) -> Any:
    """A section as a folder's sweep.yaml holds it, each key of `now` that it lacks at its
    default: the key did not exist when the folder was written (a model key added later
    changes no old run)."""
    field = next((f for f in dataclasses.fields(Config) if f.name == section), None)
    if not isinstance(value, dict) or not isinstance(now, dict) or field is None \
            or field.default_factory is dataclasses.MISSING:
        return value
    default = dataclasses.asdict(field.default_factory())
    return {**{k: default[k] for k in now if k not in value and k in default}, **value}


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, value there, value here) of every non-grid setting that changed.

    An optimizer scalar that is a list on either side is a grid axis and may change like the
    learning rates; as a number on both sides it must stay the same.
    """
    then = {k: _with_defaults(k, old.get(k), new[k]) for k in new}
    out = [(k, then[k], new[k]) for k in new
           if k not in GRID_KEYS and k != "optimizer" and then[k] != new[k]]
    # A folder from before train.precision existed trained in float32.
    old_precision = precision.here((old.get("train") or {}).get("precision", "float32"))
    new_precision = precision.here(new["train"]["precision"])
    if old_precision != new_precision:
        out.append(("train.precision", old_precision, new_precision))
    old_opt = dict(_with_defaults("optimizer", old.get("optimizer") or {}, new["optimizer"]))
    new_opt = dict(new["optimizer"])
    for k in config_mod.AXES:
        if isinstance(old_opt.get(k), list) or isinstance(new_opt.get(k), list):
            old_opt.pop(k, None)
            new_opt.pop(k, None)
    return out + [(f"optimizer.{k}", old_opt.get(k), new_opt.get(k))
                  for k in {**old_opt, **new_opt} if old_opt.get(k) != new_opt.get(k)]


def check_folder(cfg: Config, out: Path, force: bool) -> None:
    """Refuse to mix runs of a different task, model, optimizer, schedule or budget into `out`."""
    path = out / layout.SWEEP_YAML
    if not path.is_file() or force:
        return
    differ = _differences(yaml.safe_load(path.read_text()) or {}, config_mod.to_dict(cfg))
    if differ:
        key, there, here = differ[0]
        raise ConfigError(
            f"{out}: holds a sweep with a different {', '.join(d[0] for d in differ)} ({key}: "
            f"{there!r} there, {here!r} here); use a new --out folder, or --force to add these "
            "runs anyway. To extend a sweep on purpose, change only batch sizes, learning rates, "
            "seeds, or optimizer momentum/weight_decay/b2 given as lists (grid axes).")


@dataclass(frozen=True)
class Stable:
    """Where a cooldown cell's runs start (scaling.sweep.cooldown): the states the stable
    sweep in `out` saved, per batch size at `steps[size]` (a batch size not listed starts
    from step 0)."""

    out: Path
    steps: dict[int, int]


@dataclass
class Prepared:
    """A validated sweep, before any compute: the grid, each batch size's program, this shard."""

    cfg: Config
    out: Path
    planned: list[PlannedRun]  # the whole grid, the search's recorded rounds included
    specs: dict[int, tuple[GroupSpec, Arithmetic]]
    units: list[Unit]  # this shard's groups of the base grid
    rounds: list[dict[str, Any]]  # the learning-rate search's rounds (rounds.json)
    runs_axis: int
    data_shards: int
    checkpoint_at: dict[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    stable: Stable | None = None  # a cooldown cell's: where its runs start
    batch_sizes: list[int] | None = None  # only these batch sizes (scaling train), else all
    memory_plan: dict[str, Any] | None = None  # the settings chosen (scaling.sweep.memory_plan)

    @property
    def searched(self) -> bool:
        return search.searched(self.cfg)

    def runs_of(self, unit: Unit) -> list[PlannedRun]:
        """A unit's runs; a searched batch size's unit is all of it, rounds so far included."""
        if self.searched and unit.schedule is None:
            return self.batch_runs(unit.batch_size)
        return list(unit.runs)

    def batch_runs(self, size: int) -> list[PlannedRun]:
        rates = grid.batch_learning_rates(self.cfg, size, self.rounds)
        return grid.runs_for(self.cfg, size, rates)

    def next_round(self, size: int, finished: dict[str, dict[str, Any]]) -> search.Plan:
        """The search's next round at a batch size whose runs so far are all `finished`: for
        each combination of the optimizer axes, what its readings ask for; their union."""
        runs = self.batch_runs(size)
        settings = self.search_settings(size)
        done = len(search.rounds_of(self.rounds, size))
        by_axes: dict[tuple, list[search.RunReading]] = {}
        for r in runs:
            by_axes.setdefault(axes_key(r), []).append(search.reading(finished[r.run_id],
                                                                      self.cfg.targets))
        plans = [search.next_round(readings, self.cfg.targets, settings, done)
                 for readings in by_axes.values()]
        rates = sorted({lr for plan in plans for lr in plan.learning_rates})
        return search.Plan(tuple(rates), plans[0].reasons if len(plans) == 1 else {
            t: "; ".join(dict.fromkeys(p.reasons[t] for p in plans)) for t in plans[0].reasons})

    def search_settings(self, size: int) -> search.Settings:
        """A batch size's search settings: from its first grid, or with the first grid from
        neighbours the middle's lattice for all (a rate a released grid holds is the
        lattice's own, not one rounded into a distinct rate a hair away), a released batch
        size walking outward by its grid's spacing."""
        cfg = self.cfg
        if not neighbours.enabled(cfg):
            return search.settings(cfg.learning_rate, grid.first_rates(cfg, size, self.rounds))
        middle = neighbours.middle(cfg.batch.sizes)
        lattice = search.settings(cfg.learning_rate, grid.first_rates(cfg, middle, self.rounds))
        return lattice if size == middle else neighbours.released(
            lattice, cfg.learning_rate.neighbour_spacing)

    def searched_done(self, size: int, finished: dict[str, dict[str, Any]]) -> bool:
        """Whether a batch size has a first grid, every run of it is `finished` and its search
        asks for no further round."""
        runs = self.batch_runs(size)
        return bool(runs) and all(r.run_id in finished for r in runs) \
            and self.next_round(size, finished).done

    def neighbour_grid(self, size: int, finished: dict[str, dict[str, Any]]) -> search.Plan:
        """The first grid of a batch size released by its neighbour (scaling.sweep.neighbours):
        around each target's optimum as the batch sizes whose search is done predict it."""
        cfg, middle = self.cfg, neighbours.middle(self.cfg.batch.sizes)
        optima: dict[str, dict[int, float]] = {}
        for b in cfg.batch.sizes:
            if self.searched_done(b, finished):
                best = neighbours.optima([search.reading(finished[r.run_id], cfg.targets)
                                          for r in self.batch_runs(b)], cfg.targets)
                for target, lr in best.items():
                    optima.setdefault(target, {})[b] = lr
        settings = self.search_settings(middle)
        slope = neighbours.default_slope(cfg)
        predicted = {t: neighbours.predict(o, size, slope) for t, o in optima.items()}
        if predicted:
            near = lambda t: ", ".join(f"{b} ({optima[t][b]:.4g})"
                                       for b in neighbours.nearest(optima[t], size))
            why = "; ".join(f"{t}: centred on {lr:.4g}, predicted from its optima at B = "
                            f"{near(t)}" for t, lr in predicted.items())
        else:
            first = grid.first_rates(cfg, middle)
            predicted = {"": math.sqrt(min(first) * max(first))}
            why = f"centred on the middle of B = {middle}'s grid: no trained optimum yet"
        rates = neighbours.first_grid(list(predicted.values()), settings,
                                      cfg.learning_rate.neighbour_rates,
                                      cfg.learning_rate.neighbour_spacing)
        return search.Plan(tuple(rates), {"first grid": why})

    def cost(self, r: PlannedRun) -> int:
        return self.specs[r.batch_size][1].examples

    def has_work(self, units: list[Unit]) -> bool:
        """Whether these groups hold a run not yet done, or a finished batch size whose
        learning-rate search has another round to train (a shard with nothing left is skipped,
        or not submitted)."""
        for unit in units:
            summaries = {r.run_id: store.read_summary(self.out, r.run_id)
                         for r in self.runs_of(unit)}
            if any(s is None for s in summaries.values()):
                return True
            if self.searched and unit.schedule is None \
                    and not self.next_round(unit.batch_size, summaries).done:
                return True
        return False

    def shards_with_work(self, jobs: int) -> list[int]:
        """The shards of `jobs` (over these groups, as --shard I/`jobs` splits them) with work
        left."""
        return [i for i, units in enumerate(grid.partition(self.units, jobs))
                if self.has_work(units)]


def prepare(cfg: Config, out: str | Path, batch_sizes: list[int] | None = None,
            force: bool = False, shard: tuple[int, int] | None = None) -> Prepared:
    """Every check that needs no training, in order: devices, batch sizes, shard, the folder."""
    out = Path(out)
    runs_axis, data_shards = config_mod.validate_devices(cfg, jax.device_count())
    for size in batch_sizes or []:
        if size not in cfg.batch.sizes:
            raise ConfigError(f"--batch-size: got {size}, expected one of the config's batch.sizes "
                              f"{cfg.batch.sizes}")
    if shard is not None and not 0 <= shard[0] < shard[1]:
        raise ConfigError(f"--shard: got {shard[0]}/{shard[1]}, expected I/N with 0 <= I < N")
    if neighbours.enabled(cfg):
        need(batch_sizes is None and shard is None, "learning_rate.first_grid", "neighbours",
             "grid with --batch-size or --shard (each batch size waits for its neighbour's "
             "search, so one process trains them all)")
    rounds = store.read_rounds(out) if search.searched(cfg) else []
    planned = expand(cfg, batch_sizes, rounds)
    sizes = {r.batch_size for r in planned} | set(batch_sizes or cfg.batch.sizes)
    specs = {size: group_spec(cfg, size, data_shards) for size in sizes}
    examples = {size: arith.examples for size, (_, arith) in specs.items()}
    units = grid.units(cfg, expand(cfg, batch_sizes, [r for r in rounds if r["round"] == 0]),
                       examples)
    if shard is not None:
        units = grid.partition(units, shard[1])[shard[0]]
    check_folder(cfg, out, force)
    return Prepared(cfg=cfg, out=out, planned=planned, specs=specs, units=units,
                    rounds=rounds, runs_axis=runs_axis, data_shards=data_shards,
                    batch_sizes=batch_sizes)


