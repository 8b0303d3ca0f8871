"""The first grid from neighbours (learning_rate.first_grid: neighbours): the batch sizes train
from a middle one outward, and each later one's first grid is a few rates around the optima
(one per target) its trained neighbours predict, not the config's whole grid.

A batch size's first grid is what its search starts from; on a wide grid, most of its rates
are far from the optimum and train only to be ruled out, the largest part of a searched
sweep's cost. Once the middle batch size's search is done, the batch sizes next to it (one
below, one above) are released, and so on outward; each one released gets
`learning_rate.neighbour_rates` rates on the middle's lattice (scaling.sweep.search.Settings),
`learning_rate.neighbour_spacing` apart (default 1.1x: one lattice step, so a best inside the
grid is bracketed within the resolution at once; null: the grid's factor), centred on
the lattice rate nearest the prediction: the line in (log B, log optimum) through the two
batch sizes nearest it whose search is done, its slope kept within [0, 1] (between no scaling
and linear scaling); with one such batch size, the slope of the config's rule (linear 1, sqrt
0.5; other rules and explicit grids 0.5, halfway). Each target is predicted from its own best
rates, and the grid is the union of the rates around each prediction: targets whose optima
differ (an easy loss target's optimum can sit at half a hard one's at large batches) each
start near their own, where one grid around their mean would bracket neither. The search
then goes on from that grid as from any other, walking outward by the grid's spacing where its
best is at an edge (and, where no rate reached a target, past the edge whose runs ended
nearer it), so a prediction that misses costs rounds, not the answer. The released grid is
recorded in rounds.json as round 0, so a resumed sweep trains the same grid.
"""

from __future__ import annotations

import math
from dataclasses import replace

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


def optima(readings: list[search.RunReading], targets: list[str]) -> dict[str, float]:
    """A trained batch size's optimum per target: each target's best rate (a target no rate
    reached is left out)."""
    out = {}
    for target in targets:
        curve = search.cells(readings, target)
        i = curve.best() if len(curve.lrs) else None
        if i is not None:
            out[target] = float(curve.lrs[i])
    return out


NEAREST = 2  # trained batch sizes a prediction's line goes through


def nearest(optima: dict[int, float], size: int) -> list[int]:
    """The NEAREST trained batch sizes to `size` in log B (the smaller first on a tie),
    ascending: those a prediction at `size` goes through."""
    return sorted(sorted(optima, key=lambda b: (abs(math.log(b / size)), b))[:NEAREST])


def predict(optima: dict[int, float], size: int, slope: float) -> float:
    """The optimum at `size` from the NEAREST trained batch sizes' `optima` (nearest in log B):
    their line in log-log, the slope within [0, 1]; `slope` where only one batch size is
    known. Only the nearest, since the optimum bends: it levels off at large batches, where a
    line through every batch size over-shoots."""
    logs = np.log(np.array(sorted((b, optima[b]) for b in nearest(optima, size)), float))
    if len(logs) > 1 and np.ptp(logs[:, 0]) > 0:
        slope = float(np.polyfit(logs[:, 0], logs[:, 1], 1)[0])
    slope = min(max(slope, 0.0), 1.0)
    intercept = float(np.mean(logs[:, 1] - slope * logs[:, 0]))
    return math.exp(intercept + slope * math.log(size))


def lattice_steps(settings: search.Settings, spacing: float | None) -> int:
    """A released grid's spacing in whole steps of the middle's lattice, at least one (None:
    the grid's factor)."""
    return max(1, round(math.log(spacing or settings.factor) / math.log(settings.step)))


def released(settings: search.Settings, spacing: float | None) -> search.Settings:
    """A released batch size's search settings: the middle's lattice, walking outward by the
    released grid's spacing (a prediction that misses is walked back in steps of the grid
    it started from, not the middle's whole factor)."""
    return replace(settings, walk=lattice_steps(settings, spacing)) if spacing else settings


def first_grid(predicted: list[float], settings: search.Settings, count: int,
               spacing: float | None = None) -> list[float]:
    """For each rate `predicted` (one per target), `count` rates on the settings' lattice,
    `spacing` apart (lattice_steps: the grid's factor by default), centred on the lattice rate
    nearest it (one more above than below for an even count); their union, ascending."""
    pieces = lattice_steps(settings, spacing)
    points = {settings.lattice_index(lr) + pieces * (k - (count - 1) // 2)
              for lr in predicted for k in range(count)}
    return [search.rounded(settings.on_lattice(i)) for i in sorted(points)]
