"""analysis.json in code: its sections as typed dicts, written and read here by the analysis,
the report and `scaling compare` alike (docs/results-format.md, which a test holds to these
types). `check` walks an analysis against them: a key the types do not name, or one they name
that is missing, is an error naming the path, so the file, the code and the docs cannot drift
apart. The report reads an analysis through `filled` (and `read`), so every key the types
name is there and a file written before some of them existed still renders. The per-target
sections of B_crit's other definitions come from scaling.analysis.definitions.DEFINITIONS, so
a new definition adds its section there; the top-level sections of a view beyond the steps
view come from its View (scaling.analysis.views), so a new view adds its sections there.
"""

from __future__ import annotations

import copy
import json
import types
import typing
from pathlib import Path
from typing import Any, Iterator, TypedDict

from scaling import store
from scaling.analysis import views
from scaling.analysis.definitions import DEFINITIONS
from scaling.analysis.sections import (Cost, FixedBudget, HyperRules, Identification, InUse,
                                      Interval, IntervalInfo, Law, LROptimum, LRRules,
                                      NoiseScaleFit, NoiseScales, OptimumFalls, PowerLaw,
                                      RuleEntry, ScalarPoint, ScalarRule, SurgeFit, Throughput)
from scaling.errors import ConfigError
from scaling.store import layout

VERSION = 2


class Sweep(TypedDict):
    name: str
    task: str
    optimizer: str
    unit: str
    batch_sizes: list[int]
    learning_rates: list[float]
    seeds: list[int]
    num_runs: int
    statuses: dict[str, int]


class Reached(TypedDict):
    rule: str
    window: float
    definition: str


class Run(TypedDict):
    run_id: str
    batch_size: int
    learning_rate: float
    seed: int
    hyperparameters: dict[str, float]
    status: str
    steps_to_target: dict[str, float | None]
    steps_censored: dict[str, float]  # a lower bound where the run stopped before reaching
    examples_to_target: dict[str, float | None]
    reading: dict[str, str]  # per target: reached, clipped, unconfirmed, censored, ...


class Optimum(TypedDict):
    """Steps at the learning rate between those tried (a parabola in log lr, log steps)."""

    learning_rate: float
    steps: float
    steps_ci: Interval | None
    interval: IntervalInfo
    curvature: float | None
    bracketed: bool
    why: str | None


class Point(TypedDict):
    batch_size: int
    best_lr: float
    hyperparameters: dict[str, float]
    refined_lr: float | None
    at_edge: str | None
    steps: float
    steps_min: float
    steps_crossfit: float | None
    examples: float | None
    num_lrs: int
    num_reached: int
    num_diverged: int
    num_censored: int
    censored_below_best: bool
    optimum: Optimum
    b_simple: float | None
    b_noise: float | None
    b_simple_precond: float | None


class Band(TypedDict):
    """The fitted S(B)'s interval at batch sizes across those fitted, for figures."""

    batch_sizes: list[float]
    low: list[float]
    high: list[float]


class Fit(TypedDict):
    s_min: float
    e_min: float
    b_crit: float
    s_min_ci: Interval | None
    e_min_ci: Interval | None
    b_crit_ci: Interval | None
    band: Band | None
    interval: IntervalInfo
    identification: Identification
    num_points: int
    rms_log_residual: float


class Regimes(TypedDict):
    perfect_scaling_until: float | None
    steps_plateau_from: float | None
    definition: str


class FirstCrossing(TypedDict):
    b_crit: float | None
    b_crit_ci: Interval | None
    interval: IntervalInfo | None
    steps: dict[str, float]
    outside_interval: bool


class Smallest(TypedDict):
    """The smallest batch size tried that reaches a target and where the truth lies."""

    batch_size: int
    interval: Interval | None
    bound: str | None
    why: str


class ExampleOptimal(TypedDict):
    """The batch size with the fewest examples to a target, between grid points."""

    batch_size: float
    examples: float
    at_edge: str | None
    bound: str | None
    batch_size_ci: Interval | None
    interval: IntervalInfo


class Crossing(TypedDict):
    """Whether a target's curves cross (scaling.analysis.crossing): pairs that break the
    trade-off's order beyond their intervals (then no S(B) fit), pairs whose estimates do."""

    crossed: bool
    pairs: list[dict[str, Any]]
    seen: list[dict[str, Any]]
    why: str | None
    smallest: Smallest | None
    example_optimal: ExampleOptimal | None


class Target(TypedDict):
    """One target; besides these keys, one section per other definition of B_crit
    (scaling.analysis.definitions.DEFINITIONS)."""

    name: str
    metric: str
    op: str
    value: float
    points: list[Point]
    unreached_batch_sizes: list[int]
    unreached_reasons: dict[str, str]
    fit: Fit | None
    s_min: float | None
    e_min: float | None
    b_crit: float | None
    b_crit_ci: Interval | None
    interval: IntervalInfo | None
    regimes: Regimes
    b_simple: float | None
    b_noise: float | None
    b_simple_precond: float | None
    b_simple_over_b_crit: float | None
    first_crossing: FirstCrossing
    crossing: Crossing
    lr_rules: LRRules | None
    hyper_rules: HyperRules | None


class Analysis(TypedDict):
    """A sweep folder's analysis.json (the schedules' entries: docs/schedules.md); with a view
    beyond the steps view also its sections (the fixed-budget view's `fixed_budget`, a
    FixedBudget: scaling.analysis.views); read with --partial while groups were in use, also
    `partial` (a list of InUse)."""

    version: int
    sweep: Sweep
    reached: Reached
    lr_selection: str
    interval_method: str
    primary_target: str
    runs: list[Run]
    targets: list[Target]
    lr_rules: LRRules | None
    hyper_rules: HyperRules | None
    throughput: list[Throughput]
    cost: Cost
    b_crit_power_law: list[PowerLaw]
    schedules: list[dict[str, Any]]


SECTIONS: dict[str, type] = {t.__name__: t for t in (
    Analysis, Sweep, Reached, Run, Target, Point, Optimum, IntervalInfo, Identification, Band,
    Fit, Regimes, FirstCrossing, LRRules,
    LROptimum, NoiseScaleFit, SurgeFit, OptimumFalls, NoiseScales, RuleEntry, HyperRules,
    ScalarRule, ScalarPoint, Throughput, PowerLaw, Cost, FixedBudget, Law, InUse)}
OPTIONAL: dict[type, dict[str, Any]] = {Analysis: {"partial": list[InUse]},  # and the views'
                                        Law: {"non_embedding": dict[str, Any] | None}}


def optional_keys(section: type) -> dict[str, Any]:
    """The keys a section may hold beyond its own, with their hints: the registered views'
    sections (read at each check, so a view registered later counts) and `partial`."""
    return {**(views.optional_sections() if section is Analysis else {}),
            **OPTIONAL.get(section, {})}


def ordered(analysis: dict[str, Any]) -> dict[str, Any]:
    """An analysis.json's keys in the contract's order (the Analysis's own, then the views'
    sections), whichever view wrote them first."""
    order = [*Analysis.__annotations__, *optional_keys(Analysis)]
    return {**{k: analysis[k] for k in order if k in analysis}, **analysis}


def keys(section: type) -> set[str]:
    """The keys a section always holds (a target also one per other definition of B_crit)."""
    own = set(section.__annotations__)
    return own | {d.key for d in DEFINITIONS} if section is Target else own


def _section(hint: Any) -> type | None:
    """The section a hint names, possibly optional (`Fit | None`), else None."""
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType)
    for arg in (hint, *(typing.get_args(hint) if optional else ())):
        if isinstance(arg, type) and SECTIONS.get(arg.__name__) is arg:
            return arg
    return None


def _sections_in(value: Any, hint: Any, path: str) -> Iterator[tuple[dict, type, str]]:
    """The sections a value holds directly, with their paths: the value itself where its hint
    names a section, else the items of a list or a dict of them (keyed by name); anything
    else is plain data."""
    if value is None:
        return
    section = _section(hint)
    if section is not None:
        yield value, section, path
        return
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin is list and args:
        for i, item in enumerate(value):
            yield from _sections_in(item, args[0], f"{path}[{i}]")
    elif origin is dict and len(args) == 2:
        for key, item in value.items():
            yield from _sections_in(item, args[1], f"{path}.{key}")


def check(value: dict[str, Any], section: type = Analysis, path: str = "analysis") -> None:
    """Raise ValueError at the first key that is missing from, or not named by, the types."""
    optional = optional_keys(section)
    have, want = set(value), keys(section)
    if have - set(optional) != want:
        raise ValueError(f"{path}: keys {sorted(have - want - set(optional))} are not in the "
                         f"contract, {sorted(want - have)} are missing (scaling.analysis.contract)")
    hints = {**typing.get_type_hints(section), **optional}
    for key in have & set(hints):
        for inner, kind, where in _sections_in(value[key], hints[key], f"{path}.{key}"):
            check(inner, kind, where)


def _empty(hint: Any) -> Any:
    """What a key reads as in a file written before it existed: its type's empty value (an
    empty list or dict, 0, False, ''; a count the file predates counted nothing), None where
    its type is optional or a section."""
    origin = typing.get_origin(hint)
    if origin in (list, dict):
        return origin()
    return hint() if hint in (int, float, bool, str) else None


def _fill(value: dict[str, Any], section: type) -> None:
    """Add, in place, every key the section (and the sections it holds) names but `value`
    lacks, read as empty (_empty)."""
    hints = {**typing.get_type_hints(section), **optional_keys(section)}
    for key in sorted(keys(section) - set(value)):
        value[key] = _empty(hints.get(key))
    for key in set(value) & set(hints):
        for inner, kind, _ in _sections_in(value[key], hints[key], key):
            _fill(inner, kind)


def filled(value: dict[str, Any], section: type = Analysis) -> Any:
    """A copy of an analysis (or of one of its sections) holding every key the types name,
    the report's one way in: a file written before a key existed reads it as empty (_empty;
    a section as None), so the report subscripts what the contract names and a committed
    older file still renders."""
    value = copy.deepcopy(value)
    _fill(value, section)
    return value


def write(out: str | Path, analysis: dict[str, Any]) -> Path:
    """Write <out>/analysis.json atomically (non-finite numbers become null); a sweep's
    analysis is checked against the contract first."""
    if analysis.get("kind") is None:
        check(analysis)
    path = Path(out) / layout.ANALYSIS
    store.write_json(path, analysis)
    return path


def read(out: str | Path) -> Analysis:
    """A folder's analysis.json with every key the types name (`filled`); a ConfigError naming
    the file when it is missing, unreadable or of another version."""
    path = Path(out) / layout.ANALYSIS
    if not path.is_file():
        raise ConfigError(f"{out}: holds no {layout.ANALYSIS}; run scaling analyze {out} first")
    try:
        analysis = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON ({err})") from None
    if analysis.get("version") != VERSION:
        raise ConfigError(f"{path}: version {analysis.get('version')!r}, expected {VERSION}; "
                          f"run scaling analyze {out} again")
    return filled(analysis)
