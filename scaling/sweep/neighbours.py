"""The first grid from neighbours (learning_rate.first_grid: neighbours): the batch sizes train
from a middle one outward, and each later one's first grid is a few rates centred on the
optimum its trained neighbours predict, not the config's whole grid.

A batch size's first grid is what its search starts from; on a wide grid, most of its rates
are far from the optimum and train only to be ruled out, the largest part of a searched
sweep's cost. Once the middle batch size's search is done, the batch sizes next to it (one
below, one above) are released, and so on outward; each one released gets
`learning_rate.neighbour_rates` rates on the middle's lattice (scaling.sweep.search.Settings),
the grid's factor apart, centred on the lattice rate nearest the prediction: a line in (log B,
log optimum) through every batch size whose search is done, least squares, its slope kept
within [0, 1] (between no scaling and linear scaling); with one such batch size, the slope of
the config's rule (linear 1, sqrt 0.5; other rules and explicit grids 0.5, halfway). A batch
size's optimum here is the geometric mean over targets of each target's best rate. The search
then goes on from that grid as from any other, so a prediction that misses costs rounds, not
the answer. The released grid is recorded in rounds.json as round 0, so a resumed sweep trains
the same grid.
"""

from __future__ import annotations

import math

import numpy as np

from scaling.config import Config
from scaling.sweep import search

NEIGHBOURS = "neighbours"
RULE_SLOPES = {"linear": 1.0, "sqrt": 0.5}
DEFAULT_SLOPE = 0.5  # halfway between no scaling and linear: the grid's factor covers both


def enabled(cfg: Config) -> bool:
    return cfg.learning_rate.first_grid == NEIGHBOURS and search.searched(cfg)


def middle(sizes: list[int]) -> int:
    """The batch size that trains first: the middle of the sorted sizes (the upper middle of
    an even count)."""
    ordered = sorted(sizes)
    return ordered[len(ordered) // 2]


def waiting_on(sizes: list[int], size: int) -> list[int]:
    """The batch sizes released when `size`'s search is done: its outward neighbours (both for
    the middle, else the one farther from the middle)."""
    ordered = sorted(sizes)
    i, m = ordered.index(size), ordered.index(middle(sizes))
    steps = (-1, 1) if i == m else ((-1,) if i < m else (1,))
    return [ordered[i + d] for d in steps if 0 <= i + d < len(ordered)]


def default_slope(cfg: Config) -> float:
    """The slope a single trained batch size is extrapolated with: the centred grid's rule's."""
    lr = cfg.learning_rate
    return RULE_SLOPES.get(lr.rule, DEFAULT_SLOPE) if lr.mode == "centered" else DEFAULT_SLOPE


def optimum(readings: list[search.RunReading], targets: list[str]) -> float | None:
    """A trained batch size's optimum: the geometric mean over targets of each one's best rate
    (None where no rate reached any target)."""
    best = []
    for target in targets:
        curve = search.cells(readings, target)
        i = curve.best() if len(curve.lrs) else None
        if i is not None:
            best.append(math.log(curve.lrs[i]))
    return math.exp(float(np.mean(best))) if best else None


def predict(optima: dict[int, float], size: int, slope: float) -> float:
    """The optimum at `size` from the trained batch sizes' `optima`: least squares in log-log,
    the slope within [0, 1]; `slope` where only one batch size is known."""
    logs = np.log(np.array(sorted(optima.items()), float))
    if len(logs) > 1 and np.ptp(logs[:, 0]) > 0:
        slope = float(np.polyfit(logs[:, 0], logs[:, 1], 1)[0])
    slope = min(max(slope, 0.0), 1.0)
    intercept = float(np.mean(logs[:, 1] - slope * logs[:, 0]))
    return math.exp(intercept + slope * math.log(size))


def first_grid(predicted: float, settings: search.Settings, count: int) -> list[float]:
    """`count` rates the grid's factor apart on the settings' lattice, centred on the lattice
    rate nearest `predicted` (one more above than below for an even count)."""
    pieces = round(math.log(settings.factor) / math.log(settings.step))
    centre = settings.lattice_index(predicted)
    return [search.rounded(settings.on_lattice(centre + pieces * (k - (count - 1) // 2)))
            for k in range(count)]
