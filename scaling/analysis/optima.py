"""Each batch size's optimal learning rate, and its replicates for the rules' intervals.

The optimum is the vertex of a parabola in log lr through log steps at the best grid LR and its
neighbours (`refine_lr`), else the best grid LR itself. The learning-rate rules fitted to the
optima (scaling.analysis.lr_rules) take their intervals from refits on `replicate_optima`,
subsets of whole seeds (scaling.analysis.intervals).
"""

from __future__ import annotations

import numpy as np

from scaling.analysis.table import LRCurve
from scaling.lr_curve import cell_means, vertex


def refine_lr(lrs: np.ndarray, steps: np.ndarray, best: int) -> float | None:
    """Vertex of the parabola in log lr through log steps at the best LR and its two neighbours;
    None at the grid's edge, with an unreached neighbour, or when it does not open upward."""
    if best == 0 or best == len(lrs) - 1:
        return None
    y = np.asarray(steps[best - 1:best + 2], float)
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        return None
    lr, _, curvature = vertex(list(lrs[best - 1:best + 2]), list(y))
    return lr if curvature > 0 else None


def optimum(point: dict) -> float:
    """A batch size's optimal learning rate from its analysis.json point."""
    return point["refined_lr"] if point["refined_lr"] is not None else point["best_lr"]


def _grid_optima(grid: LRCurve, draws: np.ndarray) -> np.ndarray:
    """The optimum of each draw of whole seeds (rows of `draws`) on one batch size's grid: the
    fewest mean steps, refined; NaN where no LR was reached by every drawn seed."""
    lrs, means = np.asarray(grid.lrs), cell_means(grid.stack("steps")[:, draws])
    out = np.full(len(draws), np.nan)
    for k in range(len(draws)):
        column = means[:, k]
        if np.all(np.isnan(column)):
            continue
        best = int(np.nanargmin(column))
        refined = refine_lr(lrs, column, best)
        out[k] = lrs[best] if refined is None else refined
    return out


def replicate_optima(points: list[dict], grid_by_size: dict[int, LRCurve],
                     draws: np.ndarray) -> list[list[dict]]:
    """Each replicate's optima (rows of `draws`: the seed columns it keeps, the same at every
    batch size), each a list of {batch_size, learning_rate}: the best LR found and refined
    again on those seeds; a batch size with no LR reached that replicate is left out of it."""
    drawn = [_grid_optima(grid_by_size[p["batch_size"]], draws) for p in points]
    return [[{"batch_size": p["batch_size"], "learning_rate": float(lrs[k])}
             for p, lrs in zip(points, drawn) if np.isfinite(lrs[k])] for k in range(len(draws))]
