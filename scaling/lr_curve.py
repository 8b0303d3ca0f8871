"""One batch size's learning-rate curve at one target: the one definition of its cells, its
best rate, its bracket and the optimum between its rates, which the learning-rate search
(scaling.sweep.search) and the analysis (scaling.analysis) both read, so the search stops on
the same bracket the analysis reports.

A cell is one learning rate over its seeds. Each seed's steps are exact where it reached the
target (NaN where not) and have a lower bound: the steps themselves where reached, the step a
run stopped as dominated is known to exceed (censored), infinity where it diverged or ended
unreached, NaN where unknown (no such run). A cell's mean counts only where every seed reached
(`cell_means`); its bound is the mean of its seeds' lower bounds (`cell_bounds`), a lower bound
of the mean it would have had.

Bracketed: the best rate (the fewest mean steps, ties to the lower rate) has a neighbour on
each side whose steps are at least the best's: its mean where every seed reached, else its
lower bound. A censored neighbour whose bound already reaches the best's mean, or one that
diverged or never reached, is worse whatever its seeds would have done, so the optimum lies
between the neighbours. Only where both neighbours' means are exact does a parabola read the
optimum's steps between them (`Curve.optimum`); a bound would bias it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaling.parabola import log_vertex


def cell_means(steps: np.ndarray) -> np.ndarray:
    """Mean over seeds (the last axis) per cell; NaN unless every seed reached the target, since
    leaving out the seeds that missed would bias the mean low."""
    steps = np.asarray(steps, float)
    if steps.shape[-1] == 0:
        return np.full(steps.shape[:-1], np.nan)
    return np.where(np.all(np.isfinite(steps), axis=-1), steps.mean(axis=-1), np.nan)


def cell_bounds(floors: np.ndarray) -> np.ndarray:
    """A lower bound of each cell's mean steps: the mean of its seeds' lower bounds (the last
    axis); infinite where a seed never reaches, NaN where one is unknown."""
    floors = np.asarray(floors, float)
    if floors.shape[-1] == 0:
        return np.full(floors.shape[:-1], np.nan)
    return floors.mean(axis=-1)


def vertex(lrs: list[float], steps: list[float]) -> tuple[float, float, float]:
    """(learning rate, steps, curvature) at the minimum of the parabola in (log lr, log steps)
    through three points, the middle with the fewest steps; curvature is d^2 log steps /
    d (log lr)^2. The minimum lies between the outer points and at or below the middle one;
    three equal steps give the middle point, curvature 0."""
    lr, value, curvature = log_vertex(np.asarray(lrs, float), np.asarray(steps, float), 1)
    if np.isnan(curvature):
        return float(lrs[1]), float(steps[1]), 0.0
    return float(lr), float(value), float(curvature)


@dataclass(frozen=True)
class Curve:
    """The cells of one batch size at one target, ascending in learning rate: each cell's mean
    steps (`cell_means`), lower bound (`cell_bounds`) and whether a seed diverged."""

    lrs: np.ndarray
    means: np.ndarray
    bounds: np.ndarray
    diverged: np.ndarray

    @classmethod
    def of_cells(cls, lrs: list[float], steps: list[np.ndarray], floors: list[np.ndarray],
                 diverged: list[bool]) -> Curve:
        """The curve of cells given per rate (ascending) as per-seed steps and lower bounds;
        cells may hold different numbers of seeds."""
        return cls(np.asarray(lrs, float), np.array([cell_means(s) for s in steps], float),
                   np.array([cell_bounds(f) for f in floors], float),
                   np.asarray(diverged, bool))

    def best(self) -> int | None:
        """The cell with the fewest mean steps (ties: the lower rate); None when none reached."""
        reached = np.isfinite(self.means)
        return int(np.argmin(np.where(reached, self.means, np.inf))) if reached.any() else None

    def no_bracket(self, best: int) -> str | None:
        """Why cell `best` is not bracketed (None: it is): at an edge, or a neighbour whose steps
        are not known to be at least its mean. The search's test for a target done (within its
        resolution) and the analysis's `bracketed`, one call."""
        if best == 0:
            return "best at the lowest rate tried"
        if best == len(self.lrs) - 1:
            return "best at the highest rate tried"
        for j in (best - 1, best + 1):
            if not self.bounds[j] >= self.means[best]:
                known = ("a seed has no run there" if np.isnan(self.bounds[j]) else
                         f"its steps exceed {self.bounds[j]:.4g}, below the best's "
                         f"{self.means[best]:.4g}")
                return f"neighbour {self.lrs[j]:.4g} may be better: {known}"
        return None

    def bounded_only(self, j: int) -> str | None:
        """Why cell `j` gives no mean, only a bound (None: every seed reached)."""
        if np.isfinite(self.means[j]):
            return None
        lr = f"neighbour {self.lrs[j]:.4g}"
        if self.diverged[j]:
            return f"{lr} diverged"
        if np.isfinite(self.bounds[j]):
            return f"{lr} stopped as dominated (censored)"
        return f"{lr} not reached by every seed"

    def optimum(self, best: int) -> tuple[float, float, float] | None:
        """`vertex` through bracketed cell `best` and its neighbours' means; None where a
        neighbour gives only a bound."""
        idx = [best - 1, best, best + 1]
        if any(self.bounded_only(j) for j in idx):
            return None
        return vertex(list(self.lrs[idx]), list(self.means[idx]))
