"""The learning-rate rules (linear, square root, noise scale) against the fixed-budget optima.

As in the steps view (scaling.analysis.lr_rules), linear and square-root scaling start from
the smallest batch size's optimum and the noise-scale rule lr = eps_max / (1 + B_noise / B) is
fitted to the optima; each prediction's cost is the final metric at the predicted learning
rate above the metric at the optimum, both read linearly in log lr off the batch size's
measured curve (the excess: 0 where the rule hits the optimum).
"""

from __future__ import annotations

import math
from typing import Any

from scaling.analysis.lr_rules import noise_scale_fit, steps_at_lr
from scaling.analysis.table import LRCurve
from scaling.config.learning_rates import scaled_lr

NOTES = {"target not reached there": "beside a diverged or missing run"}  # the steps view's words


SMALL = 0.0001  # a metric difference printed as less than this


def _curve(curve: Any) -> LRCurve:
    """A fixed-budget curve (lower is better) as the steps view's LRCurve, so its reading
    between grid points (steps_at_lr) serves here too."""
    return LRCurve(lrs=[float(v) for v in curve.lrs], steps=list(curve.values),
                   diverged=[bool(d) for d in curve.diverged])


def _entry(point: dict, predicted: float, curve: LRCurve, lower: bool) -> dict:
    """The rule's learning rate at one batch size, and the metric there: its excess over the
    metric at the optimum, both read the same way (linear in log lr between grid points)."""
    value, note = steps_at_lr(curve, predicted)
    note = NOTES.get(note, note)
    optimum, _ = steps_at_lr(curve, point["learning_rate"])
    return {"batch_size": point["batch_size"], "learning_rate": predicted,
            "ratio_to_optimum": predicted / point["learning_rate"],
            "value": None if value is None else value if lower else 1.0 - value,
            "excess": None if value is None or optimum is None else value - optimum,
            "note": note}


def _worst(entries: list[dict]) -> str:
    worst = max(entries, key=lambda e: abs(math.log(e["ratio_to_optimum"])))
    cost = "" if worst["excess"] is None else f", {_signed(worst['excess'])} in the metric"
    return (f"at worst {worst['ratio_to_optimum']:.2g}x the optimum (B = {worst['batch_size']}"
            f"{cost}{', ' + worst['note'] if worst['note'] else ''})")


def _signed(value: float) -> str:
    """A difference in the metric: 3 significant figures, or '+<0.0001' below what a final
    metric's noise could mean."""
    return f"{value:+.3g}" if abs(value) >= SMALL else f"{'+' if value >= 0 else '-'}<{SMALL}"


def _summary(rules: dict, fit: dict | None) -> str:
    text = "; ".join(f"{name.replace('_', '-')} scaling is {_worst(entries)}"
                     for name, entries in rules.items() if entries)
    if fit is None:
        text += "; the noise-scale rule needs optima at 3 or more batch sizes"
    return text + "."


def budget_rules(per_batch: list[dict], curves: list[Any], lower: bool) -> dict | None:
    """The rules against each batch size's loss-optimal learning rate; None with fewer than
    two batch sizes that have one."""
    pairs = [(p, c) for p, c in zip(per_batch, curves) if p["learning_rate"] is not None]
    if len(pairs) < 2:
        return None
    optima = [{"batch_size": p["batch_size"], "learning_rate": p["learning_rate"]}
              for p, _ in pairs]
    ref, fit = optima[0], noise_scale_fit(optima)
    predict = {name: (lambda b, name=name: scaled_lr(name, b, ref["batch_size"],
                                                     ref["learning_rate"]))
               for name in ("linear", "sqrt")}
    if fit is not None:
        predict["noise_scale"] = lambda b: scaled_lr("noise_scale", b, None, None,
                                                     fit["eps_max"], fit["b_noise"])
    rules = {name: [_entry(p, rule(p["batch_size"]), _curve(c), lower) for p, c in pairs]
             for name, rule in predict.items()}
    rules.setdefault("noise_scale", [])
    return {"reference": dict(ref), "optima": optima, "noise_scale_fit": fit, "rules": rules,
            "summary": _summary(rules, fit)}
