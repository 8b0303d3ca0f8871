"""analysis.json in code: its sections as typed dicts, written and read here by the analysis,
the report and `scaling compare` alike (docs/results-format.md, which a test holds to these
types). `check` walks an analysis against them: a key the types do not name, or one they name
that is missing, is an error naming the path, so the file, the code and the docs cannot drift
apart. The per-target sections of B_crit's other definitions come from
scaling.analysis.definitions.DEFINITIONS, so a new definition adds its section there.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any, TypedDict

from scaling import store
from scaling.analysis.definitions import DEFINITIONS
from scaling.errors import ConfigError

VERSION = 2
FILE = "analysis.json"
Interval = list[float]  # a 95% interval [low, high]


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


class Fit(TypedDict):
    s_min: float
    e_min: float
    b_crit: float
    s_min_ci: Interval | None
    e_min_ci: Interval | None
    b_crit_ci: Interval | None
    num_points: int
    rms_log_residual: float
    bootstrap: int


class Regimes(TypedDict):
    perfect_scaling_until: float | None
    steps_plateau_from: float | None
    definition: str


class FirstCrossing(TypedDict):
    b_crit: float | None
    b_crit_ci: Interval | None
    steps: dict[str, float]
    outside_interval: bool


class RuleEntry(TypedDict):
    batch_size: int
    learning_rate: float
    ratio_to_optimum: float
    steps: float | None
    steps_censored: float | None
    relative_cost: float | None
    relative_cost_censored: float | None
    note: str | None


class LROptimum(TypedDict):
    batch_size: int
    learning_rate: float


class NoiseScaleFit(TypedDict):
    eps_max: float
    b_noise: float
    eps_max_ci: Interval | None
    b_noise_ci: Interval | None
    bootstrap: int


class SurgeFit(TypedDict):
    eta_max: float
    b_peak: float
    rms_log_residual: float
    eta_max_ci: Interval | None
    b_peak_ci: Interval | None
    bootstrap: int


class OptimumFalls(TypedDict):
    peak_batch_size: int
    peak_learning_rate: float
    largest_batch_size: int
    learning_rate: float
    ratio: float


class NoiseScales(TypedDict):
    b_simple: float | None
    b_noise: float | None
    b_simple_precond: float | None


class LRRules(TypedDict):
    target: str
    reference: LROptimum
    optima: list[LROptimum]
    noise_scale_fit: NoiseScaleFit | None
    surge_fit: SurgeFit | None
    optimum_falls: OptimumFalls | None
    noise_scales: NoiseScales
    rules: dict[str, list[RuleEntry]]
    linear_breaks_at: int | None
    summary: str


class ScalarPoint(TypedDict):
    """One batch size of a searched beta2 or weight decay: the fewest mean steps at each value."""

    batch_size: int
    values: list[float]
    steps: list[float | None]
    best: float
    best_lr: float
    steps_at_best: float
    at_edge: str | None
    measure: float | None
    rule_value: float | None
    rule_steps: float | None
    relative_cost: float | None


class ScalarRule(TypedDict):
    scalar: str
    rule: str
    measure: str
    reference: dict[str, float]
    points: list[ScalarPoint]
    exponent: float | None
    summary: str


class HyperRules(TypedDict):
    """A searched beta2 or weight decay against its rule (scaling.analysis.hyper_rules)."""

    target: str
    scalars: dict[str, ScalarRule]
    summary: str


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
    regimes: Regimes
    b_simple: float | None
    b_noise: float | None
    b_simple_precond: float | None
    b_simple_over_b_crit: float | None
    first_crossing: FirstCrossing
    lr_rules: LRRules | None
    hyper_rules: HyperRules | None


class Throughput(TypedDict):
    batch_size: int
    runs: int
    examples_per_s: float | None
    run_steps_per_s: float | None
    model_flops_per_step: float | None
    model_flops_per_s: float | None
    mfu: float | None
    peak_source: str | None


class PowerLaw(TypedDict):
    metric: str
    b_star: float
    exponent: float
    exponent_ci: Interval
    alpha_b: float | None
    alpha_b_ci: Interval | None
    num_targets: int
    weighted: bool
    definition: str


class Cost(TypedDict):
    """What the sweep trained (scaling.analysis.cost)."""

    examples_trained: int
    extension_examples: int
    dominated_runs: int
    examples_saved_at_most: int
    share_saved_at_most: float


class Law(TypedDict):
    """A power law across cells, y = coefficient x params^a x tokens^b."""

    quantity: str
    formula: str
    coefficient: float | None
    coefficient_ci: Interval | None
    exponents: dict[str, float | None]
    exponents_ci: dict[str, Interval | None]
    left_out: dict[str, str]
    num_cells: int
    bootstrap: int
    rms_log_residual: float | None
    alone: dict[str, Any]
    argmin: dict[str, Any] | None


class FixedBudget(TypedDict):
    """The fixed-budget view (analysis.view fixed_budget or both): per cell the final metric
    over batch size x learning rate and its optima, and the laws across cells."""

    metric: str
    lower_is_better: bool
    batch_unit: str
    budget_unit: str
    cells: list[dict[str, Any]]
    laws: dict[str, Law | None]


class InUse(TypedDict):
    """A group a live process held when a --partial analysis read the folder."""

    group: str
    holder: str


class Analysis(TypedDict):
    """A sweep folder's analysis.json (the schedules' entries: docs/schedules.md); with the
    fixed-budget view also `fixed_budget` (a FixedBudget); read with --partial while groups
    were in use, also `partial` (a list of InUse)."""

    version: int
    sweep: Sweep
    reached: Reached
    lr_selection: str
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
    Analysis, Sweep, Reached, Run, Target, Point, Optimum, Fit, Regimes, FirstCrossing, LRRules,
    LROptimum, NoiseScaleFit, SurgeFit, OptimumFalls, NoiseScales, RuleEntry, HyperRules,
    ScalarRule, ScalarPoint, Throughput, PowerLaw, Cost, FixedBudget, Law, InUse)}
OPTIONAL: dict[type, dict[str, Any]] = {Analysis: {"fixed_budget": FixedBudget,
                                                   "partial": list[InUse]}}


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


def _check_value(value: Any, hint: Any, path: str) -> None:
    """Check a value against its hint: a section, a list of sections, or a dict of lists of
    them (keyed by name); anything else is plain data."""
    if value is None:
        return
    section = _section(hint)
    if section is not None:
        check(value, section, path)
        return
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin is list and args:
        for i, item in enumerate(value):
            _check_value(item, args[0], f"{path}[{i}]")
    elif origin is dict and len(args) == 2:
        for key, item in value.items():
            _check_value(item, args[1], f"{path}.{key}")


def check(value: dict[str, Any], section: type = Analysis, path: str = "analysis") -> None:
    """Raise ValueError at the first key that is missing from, or not named by, the types."""
    optional = OPTIONAL.get(section, {})
    have, want = set(value), keys(section)
    if have - set(optional) != want:
        raise ValueError(f"{path}: keys {sorted(have - want - set(optional))} are not in the "
                         f"contract, {sorted(want - have)} are missing (scaling.analysis.contract)")
    hints = {**typing.get_type_hints(section), **optional}
    for key in have & set(hints):
        _check_value(value[key], hints[key], f"{path}.{key}")


def write(out: str | Path, analysis: dict[str, Any]) -> Path:
    """Write <out>/analysis.json atomically (non-finite numbers become null); a sweep's
    analysis is checked against the contract first."""
    if analysis.get("kind") is None:
        check(analysis)
    path = Path(out) / FILE
    store.write_json(path, analysis)
    return path


def read(out: str | Path) -> dict[str, Any]:
    """A folder's analysis.json; a ConfigError naming the file when it is missing, unreadable
    or of another version."""
    path = Path(out) / FILE
    if not path.is_file():
        raise ConfigError(f"{out}: holds no {FILE}; run scaling analyze {out} first")
    try:
        analysis = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON ({err})") from None
    if analysis.get("version") != VERSION:
        raise ConfigError(f"{path}: version {analysis.get('version')!r}, expected {VERSION}; "
                          f"run scaling analyze {out} again")
    return analysis
