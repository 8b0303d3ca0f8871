"""Intervals that say what they resample, and numbers that say when the data do not pin them.

An interval is a claim about repeated experiments: run the sweep again with new seeds and the
truth falls inside at the nominal level. What varies between repeats is the seeds; the batch
sizes and learning rates are the design, so they are never resampled under that name. Every
interval the analysis writes carries an `interval` record (`info`): what it resamples, the
method, the nominal level, how many replicates it rests on, and why there is none where there
is none.

Over k seeds, each replicate redoes everything downstream of the runs (the learning-rate
selection, the optimum between rates, the fit) on a subset of whole seeds:

- jackknife: the k leave-one-seed-out replicates, the interval log x +- t(k-1) se on the log
  scale (se the jackknife's); Student's t with k - 1 degrees of freedom is what keeps its level
  with 2-5 seeds, where a percentile bootstrap has few distinct draws (3 seeds: 10) and is too
  narrow. The default: experiments/coverage.py measured it against the noisy quadratic model's
  closed form (results/coverage).
- pooled (the S(B) fit; elsewhere as jackknife): each batch size's own jackknife spread carried
  through the fit's linearisation, the batch sizes taken as independent, so their k - 1
  degrees of freedom add up (Satterthwaite) and t shrinks (scaling.analysis.fit). The seeds are
  shared by every batch size, so the degrees of freedom are not all there and it under-covers
  (results/coverage measures them across groups: `width dof`).
- percentile: the 2.5 and 97.5 percentiles of `num` bootstrap draws of k seeds with
  replacement; kept for comparison, and for many seeds.

With one seed there is no spread between seeds to resample: no interval, said so.

Identification (`identify`): a value outside the range the data span (a B_crit beyond the batch
sizes fitted, a parameter at the bound of its search), an interval end past IDENTIFIABLE times
that range, or an interval of zero width is not a result. analysis.json keeps the number and adds
the flags; reports print a bound ("< 16", "> 4,096") or "not identified" (scaling.formatting).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from scaling.config.names import INTERVAL_METHODS as METHODS

LEVEL = 0.95
DEFAULT_METHOD = "jackknife"
IDENTIFIABLE = 10.0  # an interval end beyond this factor past the range tried is open
MIN_POINTS = 4  # a fit on fewer points gets no interval: 2 parameters leave too little to test
# Two-sided 97.5% quantiles of Student's t for 1..10 degrees of freedom; 1.96 beyond.
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
ONE_SEED = "one seed: no spread between seeds to resample"
FEW_POINTS = f"a fit on fewer than {MIN_POINTS} batch sizes: too few to test the fit"
NO_REPLICATES = "no replicate could be fitted"
FEW_CELLS = (f"a law on fewer than {MIN_POINTS} cells, or no more cells than coefficients: "
             "too few to resample")


def t975(dof: int) -> float:
    """Student's t two-sided 97.5% quantile at `dof` degrees of freedom (1.96 past 10)."""
    return T975[dof - 1] if 1 <= dof <= len(T975) else 1.96


def width_floor(seeds: int) -> float:
    """The median width, over the replicates' own 95% spread, of a jackknife-style interval
    log x +- t(k-1) se whose se is estimated from k seeds without bias (normal errors): t(k-1)
    x the median of chi(k-1) / sqrt(k-1), over 1.96; the chi-square's median by Wilson and
    Hilferty. How narrow an interval that rests on k seeds alone can be at the median."""
    nu = seeds - 1
    median_chi2 = nu * (1 - 2 / (9 * nu)) ** 3
    return t975(nu) * math.sqrt(median_chi2 / nu) / 1.96


def info(resamples: str, method: str | None, replicates: int, why: str | None = None,
         level: float = LEVEL) -> dict[str, Any]:
    """The `interval` record of a section: what its intervals resample ("seeds", "cells",
    "cells and seeds", "points", "none"), how, at which nominal level, over how many
    replicates; `why` there is none where resamples is "none"."""
    return {"resamples": resamples, "method": method, "level": level, "replicates": replicates,
            "why": why}


def none(why: str) -> dict[str, Any]:
    """The `interval` record of a section without intervals, saying why."""
    return info("none", None, 0, why)


def describe(record: dict | None) -> str:
    """An `interval` record for a report: '95% over 3 seeds (jackknife)', or why there is none."""
    if not record or record["resamples"] == "none":
        return f"no interval ({record['why']})" if record and record.get("why") else "no interval"
    over = record["resamples"]
    return f"{record['level']:.0%} over {over} ({record['method']}, {record['replicates']} replicates)"


def seed_draws(seeds: int, method: str, num: int, rng: np.random.Generator | None
               ) -> np.ndarray | None:
    """The replicates' seed columns, one row each: the leave-one-out sets (jackknife, pooled;
    `rng` unused) or `num` draws with replacement (percentile); None with fewer than 2 seeds."""
    if seeds < 2:
        return None
    if method in ("jackknife", "pooled"):
        return np.array([[j for j in range(seeds) if j != i] for i in range(seeds)])
    if method == "percentile":
        return rng.integers(0, seeds, (num, seeds)) if num > 0 else None
    raise ValueError(f"interval method {method!r} is unknown; expected one of {', '.join(METHODS)}")


def from_replicates(estimate: float, replicates: Any, method: str, seeds: int,
                    log: bool = True) -> list[float] | None:
    """The interval from the replicates' values (NaN: not fitted that draw): jackknife around
    `estimate` on the log scale (`log`; linear for values that may be negative), needing every
    leave-one-out replicate; percentile from those fitted."""
    values = np.asarray(replicates, float)
    if method == "percentile":
        kept = values[np.isfinite(values)]
        return [float(v) for v in np.percentile(kept, [2.5, 97.5])] if kept.size else None
    if len(values) != seeds or not np.all(np.isfinite(values)) or not math.isfinite(estimate):
        return None
    if log and (np.any(values <= 0) or estimate <= 0):
        return None
    scale = np.log(values) if log else values
    centre = math.log(estimate) if log else estimate
    se = math.sqrt((seeds - 1) / seeds * float(np.sum((scale - scale.mean()) ** 2)))
    lo, hi = centre - t975(seeds - 1) * se, centre + t975(seeds - 1) * se
    return [math.exp(lo), math.exp(hi)] if log else [lo, hi]


def identify(value: float | None, ci: list[float] | None, low: float, high: float,
             what: str = "the batch sizes fitted") -> dict[str, Any]:
    """Whether `value` is pinned by data spanning `range` [low, high] (`what` names it):
    outside it, the value is a bound (upper: the truth lies below `at`; lower: above); an
    interval end past IDENTIFIABLE x the range is open; a zero-width interval is degenerate."""
    ok = value is not None and math.isfinite(value)
    status = {"identified": ok, "bound": None, "at": None, "why": None if ok else "not fitted",
              "range": [low, high], "ci_open": [False, False], "ci_zero_width": False}
    if ok and value < low * (1 - 1e-9):
        status.update(identified=False, bound="upper", at=low, why=f"below {what}")
    elif ok and value > high * (1 + 1e-9):
        status.update(identified=False, bound="lower", at=high, why=f"beyond {what}")
    if ci:
        status["ci_open"] = [bool(ci[0] < low / IDENTIFIABLE), bool(ci[1] > high * IDENTIFIABLE)]
        status["ci_zero_width"] = bool(ci[1] - ci[0] <= 1e-9 * max(abs(ci[1]), 1e-300))
    return status


def at_search_bound(status: dict[str, Any], value: float, low: float, high: float) -> None:
    """Mark `status` (identify's) a bound where a fitted `value` searched within [low, high]
    sits at either end: the data only say it lies beyond."""
    if value >= high * (1 - 1e-6):
        status.update(identified=False, bound="lower", at=high,
                      why="at the upper end of the range searched")
    elif value <= low * (1 + 1e-6):
        status.update(identified=False, bound="upper", at=low,
                      why="at the lower end of the range searched")
