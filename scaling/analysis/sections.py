"""analysis.json's sections beyond a target's points and fit: the learning-rate and optimizer
scalar rules, throughput, cost, the power laws and the fixed-budget view, as typed dicts that
scaling.analysis.contract checks with the rest (docs/results-format.md names every key).
"""

from __future__ import annotations

from typing import Any, TypedDict

Interval = list[float]  # an interval [low, high] at the level its section's `interval` names


class IntervalInfo(TypedDict):
    """What a section's intervals resample (seeds, cells, cells and seeds, points, or none),
    by which method, at which nominal level, over how many replicates, and why there are none
    (scaling.analysis.intervals)."""

    resamples: str
    method: str | None
    level: float
    replicates: int
    why: str | None


class Identification(TypedDict):
    """Whether a value is pinned by the range its data span: else a bound ("upper": the truth
    lies below `at`; "lower": above), with why; interval ends past 10x that range are open;
    a zero-width interval is degenerate (scaling.analysis.intervals.identify)."""

    identified: bool
    bound: str | None
    at: float | None
    why: str | None
    range: list[float]
    ci_open: list[bool]
    ci_zero_width: bool


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
    interval: IntervalInfo
    identification: dict[str, Identification]


class SurgeFit(TypedDict):
    eta_max: float
    b_peak: float
    rms_log_residual: float
    eta_max_ci: Interval | None
    b_peak_ci: Interval | None
    interval: IntervalInfo
    identification: dict[str, Identification]


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
    exponent_identified: bool
    summary: str


class HyperRules(TypedDict):
    """A searched beta2 or weight decay against its rule (scaling.analysis.hyper_rules)."""

    target: str
    scalars: dict[str, ScalarRule]
    summary: str


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
    interval: IntervalInfo
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
    """A power law across cells, y = coefficient x params^a x tokens^b; where the cells count
    N without the embeddings too, also `non_embedding` (the same law in that N)."""

    quantity: str
    formula: str
    coefficient: float | None
    coefficient_ci: Interval | None
    exponents: dict[str, float | None]
    exponents_ci: dict[str, Interval | None]
    left_out: dict[str, str]
    num_cells: int
    bootstrap: int
    interval: IntervalInfo
    identification: Identification
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
