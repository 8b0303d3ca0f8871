"""One target's trade-off fit S(B) = S_min + E_min / B with its interval over seeds, and whether
its B_crit is identified by the batch sizes fitted (scaling.analysis.intervals).

Each replicate (a leave-one-out set of seeds, or a bootstrap draw) takes the same seeds at every
batch size, since a seed sets the initialisation shared across batch sizes, and redoes each
batch size's selection and optimum before refitting, so the interval carries the selection's
noise, not only the fit's.
"""

from __future__ import annotations

import numpy as np

from scaling.analysis import intervals
from scaling.analysis.points import draw_steps, fit_steps, num_seeds, stacked
from scaling.analysis.selection import resampled_steps
from scaling.analysis.table import LRCurve
from scaling.analysis.tradeoff import fit_tradeoff, fit_tradeoffs

BAND_POINTS = 25
DELTA = 1e-4  # the relative bump of a point's steps for the fit's finite-difference gradient


def replicate_steps(grids_by_size: dict[int, list[LRCurve]], points: list[dict],
                    draws: np.ndarray, how: str) -> np.ndarray:
    """Each point's steps on each replicate's seeds (rows of `draws`), points x replicates:
    the optimum where the point reads one, else the selection's steps (NaN: none that draw)."""
    out = np.empty((len(points), len(draws)))
    for row, p in enumerate(points):
        grids = grids_by_size[p["batch_size"]]
        out[row] = (draw_steps(grids, how, draws) if p.get("optimum")
                    else resampled_steps(stacked(grids, "steps"), how, draws))
    return out


def replicate_fits(grids_by_size: dict[int, list[LRCurve]], points: list[dict],
                   draws: np.ndarray, how: str) -> np.ndarray:
    """(S_min, E_min) refitted on each replicate, replicates x 2 (NaN: could not be fitted)."""
    sizes = np.array([p["batch_size"] for p in points], float)
    return fit_tradeoffs(sizes[None, :], replicate_steps(grids_by_size, points, draws, how).T)


def _seeds(grids_by_size: dict[int, list[LRCurve]], points: list[dict]) -> int | None:
    """The seeds every point's batch size holds (None where they differ: no joint replicate)."""
    counts = {num_seeds(grids_by_size[p["batch_size"]]) for p in points}
    return counts.pop() if len(counts) == 1 else None


def _interval(grids_by_size: dict[int, list[LRCurve]], points: list[dict], fitted: tuple,
              num: int, rng: np.random.Generator, how: str, method: str) -> dict:
    """The fit's intervals and its `interval` record."""
    none = {"s_min_ci": None, "e_min_ci": None, "b_crit_ci": None, "band": None}
    if num <= 0:
        return {**none, "interval": intervals.none("not asked for (bootstrap 0)")}
    k = _seeds(grids_by_size, points)
    if k is None:
        return {**none, "interval": intervals.none("batch sizes hold different seeds")}
    if k < 2:
        return {**none, "interval": intervals.none(intervals.ONE_SEED)}
    if len(points) < intervals.MIN_POINTS:
        return {**none, "interval": intervals.none(intervals.FEW_POINTS)}
    draws = intervals.seed_draws(k, method, num, rng)
    if method == "pooled":
        return _pooled(points, fitted, replicate_steps(grids_by_size, points, draws, how), k)
    fits = replicate_fits(grids_by_size, points, draws, how)
    s_min, e_min = fitted
    with np.errstate(invalid="ignore", divide="ignore"):
        values = {"s_min": (s_min, fits[:, 0]), "e_min": (e_min, fits[:, 1]),
                  "b_crit": (e_min / s_min, fits[:, 1] / fits[:, 0])}
    out = {f"{key}_ci": intervals.from_replicates(est, reps, method, k)
           for key, (est, reps) in values.items()}
    out["band"] = _band(points, fitted, fits, method, k)
    fitted_count = int(np.sum(np.isfinite(fits[:, 0])))
    if out["b_crit_ci"] is None:
        return {**none, "interval": intervals.none(intervals.NO_REPLICATES if not fitted_count
                                                   else "a leave-one-out replicate could not "
                                                        "be fitted")}
    return {**out, "interval": intervals.info("seeds", method, fitted_count)}


def _jacobian(sizes: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """d (log S_min, log E_min) / d log steps at each point, 2 x points, by finite differences
    of the fit (each point's steps raised by a factor e^DELTA in turn)."""
    bumped = np.tile(steps, (len(steps), 1)) * np.exp(DELTA * np.eye(len(steps)))
    base = np.log(fit_tradeoffs(sizes[None, :], steps[None, :]))[0]
    return ((np.log(fit_tradeoffs(np.tile(sizes, (len(steps), 1)), bumped)) - base) / DELTA).T


def _pooled(points: list[dict], fitted: tuple, steps: np.ndarray, k: int) -> dict:
    """Intervals from each batch size's own spread over seeds (the jackknife of its steps:
    `steps`, points x leave-one-out replicates) carried through the fit's linearisation, the
    batch sizes taken as independent, with Satterthwaite's degrees of freedom (k - 1 per batch
    size, pooled): log x +- t(dof) se."""
    sizes = np.array([p["batch_size"] for p in points], float)
    own = np.array([fit_steps(p) for p in points])
    logs = np.log(steps)
    if not np.all(np.isfinite(logs)):
        return {"s_min_ci": None, "e_min_ci": None, "b_crit_ci": None, "band": None,
                "interval": intervals.none("a leave-one-out replicate reached no target")}
    var = (k - 1) / k * np.sum((logs - logs.mean(axis=1, keepdims=True)) ** 2, axis=1)
    jac, (s_min, e_min) = _jacobian(sizes, own), fitted
    grid = np.geomspace(sizes.min(), sizes.max(), BAND_POINTS)
    share = (e_min / grid) / (s_min + e_min / grid)  # d log S(B) / d log E_min
    gradients = {"s_min": jac[0], "e_min": jac[1], "b_crit": jac[1] - jac[0]}
    centres = {"s_min": s_min, "e_min": e_min, "b_crit": e_min / s_min}
    out = {f"{key}_ci": _delta_interval(centres[key], g, var, k) for key, g in gradients.items()}
    ends = [_delta_interval(s_min + e_min / b, (1 - w) * jac[0] + w * jac[1], var, k)
            for b, w in zip(grid, share)]
    out["band"] = {"batch_sizes": grid.tolist(), "low": [e[0] for e in ends],
                   "high": [e[1] for e in ends]}
    return {**out, "interval": intervals.info("seeds", "pooled", k)}


def _delta_interval(centre: float, gradient: np.ndarray, var: np.ndarray, k: int) -> list[float]:
    """centre x exp(+- t se), se^2 = sum gradient^2 var, dof by Satterthwaite."""
    terms = gradient ** 2 * var
    total = float(terms.sum())
    dof = total ** 2 / float(np.sum(terms ** 2) / (k - 1)) if total > 0 else k - 1
    half = intervals.t975(int(dof)) * np.sqrt(total)
    return [centre * float(np.exp(-half)), centre * float(np.exp(half))]


def _band(points: list[dict], fitted: tuple, fits: np.ndarray, method: str,
          k: int) -> dict | None:
    """The fitted curve's interval at BAND_POINTS batch sizes across those fitted, from the
    replicates' curves by the same method: what a figure draws around the fit."""
    sizes = [p["batch_size"] for p in points]
    grid = np.geomspace(min(sizes), max(sizes), BAND_POINTS)
    curves = fits[:, :1] + fits[:, 1:] / grid[None, :]
    ends = [intervals.from_replicates(fitted[0] + fitted[1] / b, curves[:, i], method, k)
            for i, b in enumerate(grid)]
    if any(e is None for e in ends):
        return None
    return {"batch_sizes": grid.tolist(), "low": [e[0] for e in ends],
            "high": [e[1] for e in ends]}


def fit_with_interval(grids_by_size: dict[int, list[LRCurve]], points: list[dict], num: int,
                      rng: np.random.Generator, how: str = "min",
                      method: str = intervals.DEFAULT_METHOD) -> dict | None:
    """The analysis.json "fit" object, None with fewer than 2 batch sizes reaching the target:
    the fit, its intervals over seeds by `method` (`num` draws for percentile; none when 0)
    and B_crit's identification against the batch sizes fitted."""
    if len(points) < 2:
        return None
    sizes = np.array([p["batch_size"] for p in points], float)
    steps = np.array([fit_steps(p) for p in points])
    s_min, e_min = fit_tradeoff(sizes, steps)
    residual = np.log(s_min + e_min / sizes) - np.log(steps)
    spread = _interval(grids_by_size, points, (s_min, e_min), num, rng, how, method)
    b_crit = e_min / s_min
    return {"s_min": s_min, "e_min": e_min, "b_crit": b_crit, **spread,
            "num_points": len(points), "rms_log_residual": float(np.sqrt(np.mean(residual**2))),
            "identification": intervals.identify(b_crit, spread["b_crit_ci"], float(sizes.min()),
                                                 float(sizes.max()))}
