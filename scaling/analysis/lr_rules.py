"""Measured optimal learning rates against the scaling rules: linear, square root, noise scale.

Each rule's prediction at a batch size is read off that batch size's measured steps-vs-LR curve,
so its cost is in steps to target relative to the best learning rate (docs/arithmetic.md).
"""

from __future__ import annotations

import math

import numpy as np

from scaling.analysis.table import LRCurve
from scaling.analysis.tradeoff import fit_tradeoff
from scaling.config.learning_rates import scaled_lr

LINEAR_BREAK_RATIO = 2.0  # linear rule "breaks" above this ratio to the optimum ...
LINEAR_BREAK_COST = 1.5  # ... or above this relative cost in steps


def steps_at_lr(grid: LRCurve, lr: float) -> tuple[float | None, str | None]:
    """Steps to target at any `lr`, linear in log lr between neighbouring reached grid LRs;
    (None, why) where that cannot be read off the grid."""
    x, means, log_lr = np.log(grid.lrs), grid.means(), math.log(lr)
    diverged = [v for v, d in zip(grid.lrs, grid.diverged) if d]
    if diverged and log_lr >= math.log(min(diverged)) - 1e-9:
        return None, "diverges"
    if log_lr < x[0] - 1e-9 or log_lr > x[-1] + 1e-9:
        return None, "outside the grid"
    i = int(np.searchsorted(x, log_lr - 1e-9))  # the first grid LR at or above lr
    pair = [i] if abs(x[i] - log_lr) <= 1e-9 else [i - 1, i]
    if not np.all(np.isfinite(means[pair])):
        return None, "target not reached there"
    return float(np.interp(log_lr, x[pair], means[pair])), None


def bound_at_lr(grid: LRCurve, lr: float) -> float | None:
    """Where `steps_at_lr` finds a neighbouring cell stopped as dominated (censored), a lower
    bound of the steps there: the same interpolation with its censored seeds at their bound;
    None where that cannot be read either."""
    x, log_lr = np.log(grid.lrs), math.log(lr)
    known = np.where(np.isfinite(grid.means()), grid.means(), grid.bounds())
    i = int(np.searchsorted(x, log_lr - 1e-9))
    if i >= len(x) or (i == 0 and abs(x[0] - log_lr) > 1e-9):
        return None
    pair = [i] if abs(x[i] - log_lr) <= 1e-9 else [i - 1, i]
    if not np.all(np.isfinite(known[pair])) or not np.any(np.isfinite(grid.bounds()[pair])):
        return None
    return float(np.interp(log_lr, x[pair], known[pair]))


def noise_scale_fit(optima: list[dict]) -> dict | None:
    """eps_max, B_noise of lr = eps_max / (1 + B_noise / B), least squares on log lr.

    1/lr = 1/eps_max + (B_noise/eps_max) / B has the form of S(B), so fit_tradeoff solves it.
    """
    sizes = [o["batch_size"] for o in optima]
    if len(set(sizes)) < 3:
        return None
    inv_eps, slope = fit_tradeoff(sizes, [1.0 / o["learning_rate"] for o in optima])
    return {"eps_max": 1.0 / inv_eps, "b_noise": slope / inv_eps}


def _rule_entry(point: dict, optimum: float, predicted: float, grid: LRCurve) -> dict:
    """A rule at one batch size; where its steps fall on runs stopped as dominated, they are
    censored: `steps_censored` and `relative_cost_censored` are lower bounds, never steps."""
    steps, note = steps_at_lr(grid, predicted)
    bound = bound_at_lr(grid, predicted) if note == "target not reached there" else None
    if bound is not None:
        note = "stopped as dominated there"
    ratio = lambda value: value / point["steps"] if value and point["steps"] else None
    return {"batch_size": point["batch_size"], "learning_rate": predicted,
            "ratio_to_optimum": predicted / optimum, "steps": steps,
            "relative_cost": ratio(steps), "steps_censored": bound,
            "relative_cost_censored": ratio(bound), "note": note}


def _breaks(entry: dict) -> bool:
    cost = entry["relative_cost"]
    return (entry["ratio_to_optimum"] > LINEAR_BREAK_RATIO or entry["note"] == "diverges"
            or (cost is not None and cost > LINEAR_BREAK_COST))


def _worst(entries: list[dict]) -> str:
    worst = max(entries, key=lambda e: abs(math.log(e["ratio_to_optimum"])))
    return f"{worst['ratio_to_optimum']:.2g}x the optimum at B = {worst['batch_size']}"


def _rules_summary(target: str, optima: list[dict], rules: dict, fit: dict | None,
                   breaks_at: int | None) -> str:
    first, last = optima[0], optima[-1]
    text = (f"At {target} the measured optimal learning rate goes from {first['learning_rate']:.3g} "
            f"at B = {first['batch_size']} to {last['learning_rate']:.3g} at B = "
            f"{last['batch_size']} ({last['learning_rate'] / first['learning_rate']:.2g}x for a "
            f"{last['batch_size'] / first['batch_size']:.3g}x larger batch). ")
    if breaks_at is None:
        text += (f"Linear scaling from B = {first['batch_size']} stays within "
                 f"{LINEAR_BREAK_RATIO:g}x of the optimum and {LINEAR_BREAK_COST:g}x its steps "
                 "over the grid. ")
    else:
        entry = next(e for e in rules["linear"] if e["batch_size"] == breaks_at)
        verb = "over-shoots" if entry["ratio_to_optimum"] > 1 else "under-shoots"
        cost = (entry["note"] or "beyond the grid") if entry["relative_cost"] is None \
            else f"{entry['relative_cost']:.2g}x the best steps"
        text += (f"Linear scaling {verb} the measured optimum from B = {breaks_at} "
                 f"({entry['ratio_to_optimum']:.2g}x the optimum there; {cost}). ")
    text += f"Square-root scaling is at worst {_worst(rules['sqrt'])}. "
    if fit is None:
        return text + "The noise-scale rule needs optima at 3 or more batch sizes; not fitted."
    return text + (f"The noise-scale rule fitted to the optima (eps_max = {fit['eps_max']:.3g}, "
                   f"B_noise = {fit['b_noise']:.3g}) is at worst {_worst(rules['noise_scale'])}.")


def lr_rules(target: str, points: list[dict], grid_by_size: dict[int, LRCurve]) -> dict | None:
    """Linear, square-root and noise-scale rules against the measured optima at one target."""
    if not points:
        return None
    optima = [{"batch_size": p["batch_size"],
               "learning_rate": p["refined_lr"] if p["refined_lr"] is not None else p["best_lr"]}
              for p in points]
    ref = optima[0]
    fit = noise_scale_fit(optima)
    predict = {"linear": lambda b: scaled_lr("linear", b, ref["batch_size"], ref["learning_rate"]),
               "sqrt": lambda b: scaled_lr("sqrt", b, ref["batch_size"], ref["learning_rate"])}
    if fit is not None:
        predict["noise_scale"] = lambda b: scaled_lr("noise_scale", b, None, None,
                                                     fit["eps_max"], fit["b_noise"])
    rules = {name: [] for name in ("linear", "sqrt", "noise_scale")}
    for name, rule in predict.items():
        rules[name] = [_rule_entry(p, o["learning_rate"], rule(p["batch_size"]),
                                   grid_by_size[p["batch_size"]]) for p, o in zip(points, optima)]
    breaks_at = next((e["batch_size"] for e in rules["linear"] if _breaks(e)), None)
    return {"target": target, "reference": dict(ref), "optima": optima, "noise_scale_fit": fit,
            "rules": rules, "linear_breaks_at": breaks_at,
            "summary": _rules_summary(target, optima, rules, fit, breaks_at)}
