"""Each batch size's learning rate, and its steps to target read without the winner's curse.

A batch size's candidates are its cells (learning rate, and the optimizer scalars that are grid
axes), each with one steps-to-target value per seed (NaN: not reached). Taking the cell with
the fewest mean steps and reporting that mean is biased low: the minimum of several noisy
means is the luckiest of them, most where several cells are nearly as good and their seeds
disagree (Shallue et al. 2018 minimised this way). The selections:

- min: the fewest mean steps over seeds, as measured (the optimistic minimum);
- crossfit: leave one seed out, choose the cell on the remaining seeds, read the held-out
  seed's steps in that cell; the mean over held-out seeds. Unbiased for the cell it chooses,
  at the price of sometimes choosing a worse one; with one seed it is `min`. As for `min`, a
  cell is a candidate only when every seed reached the target in it: a held-out seed that
  missed would have to be left out, and leaving out the slow cases biases the mean low.

Seeds are aligned across cells (the same data order and initialisation at every learning
rate), so the bootstrap resamples whole seeds: `groups` names each column's original seed, and
crossfit leaves out every copy of a seed together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaling.config.names import LR_SELECTIONS
from scaling.lr_curve import cell_means


@dataclass(frozen=True)
class Choice:
    """best: the cell with the fewest mean steps over all seeds (the learning rate to use);
    pairs: the (cell, seed) values the estimate averages; naive: that fewest mean itself."""

    best: int
    pairs: tuple[tuple[int, int], ...]
    naive: float

    def mean(self, values: np.ndarray) -> float:
        """The estimate of a per-run quantity shaped like steps: its mean over `pairs`."""
        picked = np.array([values[c, s] for c, s in self.pairs], float)
        picked = picked[np.isfinite(picked)]
        return float(picked.mean()) if picked.size else float("nan")


def choose(steps: np.ndarray, how: str, groups: np.ndarray | None = None) -> Choice | None:
    """The `how` selection over cells x seeds `steps`; None when no cell was reached by every seed."""
    steps = np.asarray(steps, float)
    means = cell_means(steps)
    if np.all(np.isnan(means)):
        return None
    best = int(np.nanargmin(means))
    plain = Choice(best, tuple((best, s) for s in range(steps.shape[1])), float(means[best]))
    groups = np.arange(steps.shape[1]) if groups is None else np.asarray(groups)
    if how == "min" or len(np.unique(groups)) < 2:
        return plain
    if how != "crossfit":
        raise ValueError(f"lr selection {how!r} is unknown; expected one of {', '.join(LR_SELECTIONS)}")
    pairs = []
    for g in np.unique(groups):
        rest = np.where(np.isfinite(means), cell_means(steps[:, groups != g]), np.nan)
        k = int(np.nanargmin(rest))
        pairs += [(k, int(s)) for s in np.nonzero(groups == g)[0]]
    return Choice(best, tuple(pairs), plain.naive)


def resampled_steps(steps: np.ndarray, how: str, draws: np.ndarray) -> np.ndarray:
    """The selection's estimate for each bootstrap draw of whole seeds (rows of `draws`, seed
    indices); NaN where the draw leaves no cell reached by every drawn seed."""
    if how == "min":
        means = np.nan_to_num(cell_means(steps[:, draws]), nan=np.inf).min(axis=0)
        return np.where(np.isinf(means), np.nan, means)
    out = np.full(len(draws), np.nan)
    for i, idx in enumerate(draws):
        drawn = steps[:, idx]
        choice = choose(drawn, how, groups=idx)
        if choice is not None:
            out[i] = choice.mean(drawn)
    return out
