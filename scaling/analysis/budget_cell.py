"""One cell's `fixed_budget` entry in analysis.json (docs/results-format.md): the grid of final
values, each batch size's optimum, the cell's optimum, the measured arg-min and the
learning-rate rules, from scaling.analysis.fixed_budget's curves and draws."""

from __future__ import annotations

import math

import numpy as np

from scaling.analysis.budget_rules import budget_rules
from scaling.analysis.fixed_budget import (BudgetCurve, Optima, budget_curves, draw_means,
                                           interval95, lower_is_better, optima)
from scaling.errors import ConfigError
from scaling.lr_curve import cell_means
from scaling.store import finite


def _own(value: float, lower: bool) -> float | None:
    """A lower-is-better reading back in the metric's own terms (accuracy = 1 - error)."""
    value = float(value)
    return None if not math.isfinite(value) else value if lower else 1.0 - value


def _own_ci(samples: np.ndarray | None, lower: bool) -> list[float] | None:
    ci = None if samples is None else interval95(samples)
    return ci if ci is None or lower else [1.0 - ci[1], 1.0 - ci[0]]


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
               lower: bool) -> list[dict]:
    out = []
    for j, c in enumerate(curves):
        means, best = cell_means(c.values), int(point.best[0, j])
        reached = bool(np.any(np.isfinite(means)))
        out.append({"batch_size": c.batch_size, "hyperparameters": c.hyperparameters,
                    "best_lr": float(c.lrs[best]) if reached else None,
                    "best_value": _own(means[best], lower),
                    "learning_rate": _own(point.lr[0, j], True),
                    "learning_rate_ci": None if boot is None else interval95(boot.lr[:, j]),
                    "value": _own(point.value[0, j], lower),
                    "value_ci": _own_ci(None if boot is None else boot.value[:, j], lower),
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
             lower: bool) -> dict:
    pick = (lambda name: None) if boot is None else (lambda name: getattr(boot, name))
    size_draws, lr_draws = pick("batch_size"), pick("learning_rate")
    return {"batch_size": _own(point.batch_size[0], True),
            "batch_size_ci": None if size_draws is None else interval95(size_draws),
            "learning_rate": _own(point.learning_rate[0], True),
            "learning_rate_ci": None if lr_draws is None else interval95(lr_draws),
            "value": _own(point.loss[0], lower), "value_ci": _own_ci(pick("loss"), lower),
            "interpolated": bool(point.batch_interpolated[0]),
            "at_edge": _edge(int(point.batch_best[0]), len(curves))}


def analyze_cell(records: list[dict], metric: str, bootstrap: int,
                 rng: np.random.Generator) -> tuple[dict, np.ndarray | None]:
    """One cell's fixed_budget entry (without its params and tokens, which the caller knows),
    and its bootstrap draws of (B_opt, eta*, the metric there), 3 x draws, for the laws."""
    recorded = {k for r in records for row in r["metrics"] for k, v in row.items() if finite(v)}
    if metric not in recorded:
        raise ConfigError(f"analysis.metric: got {metric!r}, which no run recorded; expected "
                          f"one of {', '.join(sorted(recorded))}")
    curves = budget_curves(records, metric)
    lower = lower_is_better(metric)
    point = optima(curves, [cell_means(c.values)[None] for c in curves])
    means, how = draw_means(curves, bootstrap, rng)
    boot = None if means is None else optima(curves, means)
    per_batch = _per_batch(curves, point, boot, lower)
    entry = {"metric": metric, "lower_is_better": lower, "num_runs": len(records),
             "seeds": int(curves[0].values.shape[1]), "interval": how,
             "grid": _grid(curves, lower), "per_batch": per_batch, "best": _best(curves, lower),
             "optimum": _optimum(curves, point, boot, lower),
             "lr_rules": budget_rules(per_batch, curves, lower)}
    if boot is None:
        return entry, None
    loss = boot.loss if lower else 1.0 - boot.loss
    return entry, np.stack([boot.batch_size, boot.learning_rate, loss])
