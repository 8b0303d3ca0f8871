"""One cell's `fixed_budget` entry in analysis.json (docs/results-format.md): the grid of final
values, each batch size's optimum, the cell's optimum, the measured arg-min and the
learning-rate rules, from scaling.analysis.fixed_budget's curves and draws."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from scaling.analysis import intervals
from scaling.analysis.budget_rules import budget_rules
from scaling.analysis.fixed_budget import (BudgetCurve, Optima, budget_curves, draw_means,
                                           interval95, jackknife_means, lower_is_better,
                                           optima, seed_count)
from scaling.errors import ConfigError
from scaling.lr_curve import cell_means
from scaling.store import finite


def _own(value: float, lower: bool) -> float | None:
    """A lower-is-better reading back in the metric's own terms (accuracy = 1 - error)."""
    value = float(value)
    return None if not math.isfinite(value) else value if lower else 1.0 - value


CI = Callable[[float, np.ndarray], "list[float] | None"]  # (point, replicates) -> interval


def _percentile(point: float, replicates: np.ndarray) -> list[float] | None:
    return interval95(replicates)


def _jackknife(seeds: int) -> CI:
    return lambda point, replicates: intervals.from_replicates(point, replicates, "jackknife",
                                                               seeds)


def _own_ci(ci: CI, point: float, samples: np.ndarray | None, lower: bool
            ) -> list[float] | None:
    got = None if samples is None else ci(point, samples)
    return got if got is None or lower else [1.0 - got[1], 1.0 - got[0]]


def _edge(best: int, count: int) -> str | None:
    return "low" if best == 0 else "high" if best == count - 1 else None


def _grid(curves: list[BudgetCurve], lower: bool) -> list[dict]:
    out = []
    for c in curves:
        means = cell_means(c.values)
        for i, lr in enumerate(c.lrs):
            done = c.values[i][np.isfinite(c.values[i])]
            out.append({"batch_size": c.batch_size, "learning_rate": float(lr),
                        "hyperparameters": c.hyperparameters, "mean": _own(means[i], lower),
                        "std": float(np.std(done, ddof=1)) if done.size > 1 else None,
                        "seeds": int(done.size), "diverged": bool(c.diverged[i])})
    return out


def _per_batch(curves: list[BudgetCurve], point: Optima, boot: Optima | None,
               lower: bool, ci: CI) -> list[dict]:
    out = []
    for j, c in enumerate(curves):
        means, best = cell_means(c.values), int(point.best[0, j])
        reached = bool(np.any(np.isfinite(means)))
        out.append({"batch_size": c.batch_size, "hyperparameters": c.hyperparameters,
                    "best_lr": float(c.lrs[best]) if reached else None,
                    "best_value": _own(means[best], lower),
                    "learning_rate": _own(point.lr[0, j], True),
                    "learning_rate_ci": (None if boot is None else
                                         ci(point.lr[0, j], boot.lr[:, j])),
                    "value": _own(point.value[0, j], lower),
                    "value_ci": _own_ci(ci, point.value[0, j],
                                        None if boot is None else boot.value[:, j], lower),
                    "interpolated": bool(point.interpolated[0, j]),
                    "at_edge": _edge(best, len(c.lrs)) if reached else None,
                    "num_lrs": len(c.lrs), "num_complete": int(np.sum(np.isfinite(means))),
                    "num_diverged": int(np.sum(c.diverged))})
    return out


def _best(curves: list[BudgetCurve], lower: bool) -> dict | None:
    """The measured arg-min over every complete (batch size, learning rate) cell."""
    cells = [(m, c.batch_size, float(lr)) for c in curves
             for m, lr in zip(cell_means(c.values), c.lrs) if np.isfinite(m)]
    if not cells:
        return None
    value, size, lr = min(cells)
    return {"batch_size": size, "learning_rate": lr, "value": _own(value, lower)}


def _optimum(curves: list[BudgetCurve], point: Optima, boot: Optima | None,
             lower: bool, ci: CI) -> dict:
    def read(name: str) -> list[float] | None:
        return None if boot is None else ci(getattr(point, name)[0], getattr(boot, name))

    return {"batch_size": _own(point.batch_size[0], True), "batch_size_ci": read("batch_size"),
            "learning_rate": _own(point.learning_rate[0], True),
            "learning_rate_ci": read("learning_rate"),
            "value": _own(point.loss[0], lower),
            "value_ci": _own_ci(ci, point.loss[0], None if boot is None else boot.loss, lower),
            "interpolated": bool(point.batch_interpolated[0]),
            "at_edge": _edge(int(point.batch_best[0]), len(curves))}


def _shown(curves: list[BudgetCurve], boot: Optima | None, how: dict, method: str
           ) -> tuple[Optima | None, dict, CI]:
    """The replicates the cell's intervals are read from, their record and how: with 2 or
    more seeds and any method but percentile, the leave-one-seed-out jackknife; else the
    bootstrap's draws."""
    jack = jackknife_means(curves) if boot is not None and method != "percentile" else None
    if jack is None:
        return boot, how, _percentile
    means, record = jack
    return optima(curves, means), record, _jackknife(seed_count(curves))


def analyze_cell(records: list[dict], metric: str, bootstrap: int,
                 rng: np.random.Generator, method: str = intervals.DEFAULT_METHOD
                 ) -> tuple[dict, np.ndarray | None]:
    """One cell's fixed_budget entry (without its params and tokens, which the caller knows),
    its intervals by `method` (analysis.interval), and its bootstrap draws of (B_opt, eta*,
    the metric there), 3 x draws, for the laws."""
    recorded = {k for r in records for row in r["metrics"] for k, v in row.items() if finite(v)}
    if metric not in recorded:
        raise ConfigError(f"analysis.metric: got {metric!r}, which no run recorded; expected "
                          f"one of {', '.join(sorted(recorded))}")
    curves = budget_curves(records, metric)
    lower = lower_is_better(metric)
    point = optima(curves, [cell_means(c.values)[None] for c in curves])
    means, how = draw_means(curves, bootstrap, rng)
    boot = None if means is None else optima(curves, means)
    shown, record, ci = _shown(curves, boot, how, method)
    per_batch = _per_batch(curves, point, shown, lower, ci)
    entry = {"metric": metric, "lower_is_better": lower, "num_runs": len(records),
             "seeds": seed_count(curves), "interval": record,
             "grid": _grid(curves, lower), "per_batch": per_batch, "best": _best(curves, lower),
             "optimum": _optimum(curves, point, shown, lower, ci),
             "lr_rules": budget_rules(per_batch, curves, lower)}
    if boot is None:
        return entry, None
    loss = boot.loss if lower else 1.0 - boot.loss
    return entry, np.stack([boot.batch_size, boot.learning_rate, loss])
