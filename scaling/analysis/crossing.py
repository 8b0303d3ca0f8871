"""Crossing curves at one target: whether its steps/examples points keep the trade-off's order,
and the two batch sizes a study reads where they do not (Zhou et al. 2026, under WSD).

The steps/examples trade-off S(B) = S_min (1 + B_noise / B) needs fewer steps and more
examples at every larger batch size. Where the loss curves of different batch sizes cross,
a larger batch size needs more steps, or fewer examples, than a smaller one, and no
hyperbola describes the points. A pair breaks the order only where the points' intervals
over seeds say so (the larger batch size's interval of steps wholly above the smaller's, or
its interval of examples wholly below); with one seed a pair whose point estimates break it
is listed as seen, not tested. Read at every target, crossed or not:

- `smallest`: the smallest batch size tried that reaches the target; the truth lies between
  the largest smaller batch size tried that does not reach it and this one (its interval,
  the grid's resolution), or below it where it is the smallest tried (an upper bound).
- `example_optimal`: the batch size with the fewest examples to the target, read between grid
  points by the parabola in (log B, log examples) through it and its neighbours, its interval
  over seeds as every point's is (each replicate redoes every batch size's reading); at the
  grid's edge it is a bound, as under an unbroken trade-off, where the smallest batch size
  is always the example-optimal one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from scaling.analysis import intervals
from scaling.analysis.points import draw_steps, fit_steps, num_seeds
from scaling.analysis.table import LRCurve
from scaling.parabola import log_vertex


def broken_pairs(points: list[dict]) -> tuple[list[dict], list[dict]]:
    """(pairs whose intervals break the order, pairs whose point estimates do): each a smaller
    and a larger batch size and which order breaks (steps rise, or examples fall)."""
    tested, seen = [], []
    ordered = sorted(points, key=lambda p: p["batch_size"])
    for i, small in enumerate(ordered):
        for large in ordered[i + 1:]:
            for quantity, broken, significant in _orders(small, large):
                pair = {"smaller": small["batch_size"], "larger": large["batch_size"],
                        "breaks": quantity}
                if significant:
                    tested.append(pair)
                elif broken:
                    seen.append(pair)
    return tested, seen


def _orders(small: dict, large: dict) -> list[tuple[str, bool, bool]]:
    """For steps and examples: (name, broken by the point estimates, broken beyond both
    intervals)."""
    b0, b1 = small["batch_size"], large["batch_size"]
    s0, s1 = fit_steps(small), fit_steps(large)
    c0, c1 = small["optimum"].get("steps_ci"), large["optimum"].get("steps_ci")
    both = c0 is not None and c1 is not None
    return [("steps rise", s1 > s0, both and c1[0] > c0[1]),
            ("examples fall", b1 * s1 < b0 * s0, both and b1 * c1[1] < b0 * c0[0])]


def smallest(points: list[dict], unreached: list[int]) -> dict[str, Any] | None:
    """The smallest batch size tried that reaches the target, and where the truth lies."""
    if not points:
        return None
    size = min(p["batch_size"] for p in points)
    below = [b for b in unreached if b < size]
    if not below:
        return {"batch_size": size, "interval": None, "bound": "upper",
                "why": "the smallest batch size tried reaches the target"}
    return {"batch_size": size, "interval": [max(below), size], "bound": None,
            "why": "between the largest smaller batch size tried that does not reach the "
                   "target and this one"}


def example_optimal(by_size: dict[int, list[LRCurve]], points: list[dict], how: str,
                    bootstrap: int, rng: np.random.Generator, method: str) -> dict[str, Any] | None:
    """The batch size with the fewest examples to the target, read between grid points, with
    its interval over seeds; a bound at the edge of the batch sizes reaching it."""
    if len(points) < 2:
        return None
    ordered = sorted(points, key=lambda p: p["batch_size"])
    sizes = np.array([p["batch_size"] for p in ordered], float)
    examples = sizes * np.array([fit_steps(p) for p in ordered])
    best = int(np.argmin(examples))
    value, edge = _vertex(sizes, examples, best)
    entry = {"batch_size": value, "examples": float(examples[best]), "at_edge": edge,
             "bound": {"low": "upper", "high": "lower"}.get(edge), "batch_size_ci": None}
    seeds = min(num_seeds(by_size[p["batch_size"]]) for p in ordered)
    draws = intervals.seed_draws(seeds, method, bootstrap, rng) if bootstrap > 0 else None
    if edge is not None or draws is None:
        why = "at the edge of the batch sizes reaching the target: a bound" if edge else \
            intervals.ONE_SEED if seeds < 2 else "not asked for"
        return {**entry, "interval": intervals.none(why)}
    replicated = sizes[:, None] * np.stack(
        [draw_steps(by_size[p["batch_size"]], how, draws) for p in ordered])
    values = [_vertex(sizes, col, int(np.argmin(col)))[0] if np.all(np.isfinite(col)) else math.nan
              for col in replicated.T]
    entry["batch_size_ci"] = intervals.from_replicates(value, values, method, seeds)
    return {**entry, "interval": intervals.info("seeds", method, len(draws))}


def _vertex(sizes: np.ndarray, examples: np.ndarray, best: int) -> tuple[float, str | None]:
    """The arg-min between grid points (the grid's own at an edge or where the parabola does
    not open upward) and the edge it sits at."""
    edge = "low" if best == 0 else "high" if best == len(sizes) - 1 else None
    at, _, _ = log_vertex(sizes, examples, best)
    return (float(sizes[best]) if edge or not np.isfinite(at) else float(at)), edge


def crossing(by_size: dict[int, list[LRCurve]], points: list[dict], unreached: list[int],
             how: str, bootstrap: int, rng: np.random.Generator, method: str) -> dict[str, Any]:
    """A target's `crossing` entry: whether its curves cross, the pairs that say so, the
    smallest batch size that reaches it and the example-optimal one."""
    tested, seen = broken_pairs(points)
    return {"crossed": bool(tested), "pairs": tested, "seen": seen,
            "why": (f"{len(tested)} pair(s) of batch sizes break the trade-off's order beyond "
                    "their intervals over seeds: no S(B) fit" if tested else None),
            "smallest": smallest(points, unreached),
            "example_optimal": example_optimal(by_size, points, how, bootstrap, rng, method)}
