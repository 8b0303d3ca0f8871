"""The best beta2 and weight decay per batch size against their rules, where a sweep searched
them (optimizer.b2 or weight_decay given as a list: a grid axis), as the learning-rate rules
are judged against the best learning rate (scaling.analysis.lr_rules).

At each batch size and value of the searched scalar, the fewest mean steps over the learning
rates (and any other axis) tried; the best value is the one with the fewest. Each best value
is turned into what its rule keeps fixed (scaling.config.optimizer):

- b2, the half_life rule (Marek et al. 2025): the half-life in examples, B ln(1/2) / ln(b2);
- weight_decay, the timescale rule (Wang & Aitchison 2024; Bergsma et al. 2025): tau =
  B / (eta lambda D), eta the best cell's learning rate, D the run's budget in examples.

The rule's value at each batch size starts from the best at the smallest batch size (the
reference), and its cost is the steps at that value, interpolated between the neighbouring
values tried (in log(1 - b2), or log lambda), over the best's. `exponent` is the log-log slope
of the kept quantity against the batch size: 0 where the rule holds; 1 for the half-life of a
beta2 held fixed.
"""

from __future__ import annotations

import math

import numpy as np

from scaling.analysis.table import LRCurve
from scaling.config.optimizer import half_life_examples, timescale, timescale_weight_decay

RULES = {"b2": ("half_life", "half_life_examples"), "weight_decay": ("timescale", "tau")}


def budgets(arithmetic: list[dict], records: list[dict]) -> dict[int, int]:
    """D per batch size: the examples a run's budget holds, as the sweep planned them (a
    folder's arithmetic.json, `arithmetic`), else total steps x batch size from the runs'
    config.json (where it says; an imported run may not)."""
    planned = {int(a["batch_size"]): int(a["examples"]) for a in arithmetic}
    for rec in records:
        cfg = rec["config"]
        size = int(cfg["batch_size"])
        if cfg.get("total_steps") is not None:
            planned.setdefault(size, int(cfg["total_steps"]) * size)
    return planned


def _profile(curves: list[LRCurve], scalar: str) -> tuple[list[float], list[float], list[float]]:
    """(values, fewest mean steps at each, the learning rate there) of one batch size."""
    values = sorted({c.hyperparameters[scalar] for c in curves})
    steps, lrs = [], []
    for v in values:
        best, at = math.nan, math.nan
        for c in (c for c in curves if c.hyperparameters[scalar] == v):
            means = c.means()
            if np.any(np.isfinite(means)):
                i = int(np.nanargmin(means))
                if math.isnan(best) or means[i] < best:
                    best, at = float(means[i]), c.lrs[i]
        steps.append(best)
        lrs.append(at)
    return values, steps, lrs


def _scale(scalar: str, value: float) -> float:
    """Where the steps between two tried values are interpolated: log(1 - b2), log lambda."""
    inner = 1.0 - value if scalar == "b2" else value
    return math.log(inner) if inner > 0 else math.nan


def _steps_at(scalar: str, values: list[float], steps: list[float], value: float) -> float | None:
    """Steps at `value`, linear in the scalar's scale between the neighbouring tried values;
    None outside them or where a neighbour was not reached."""
    x, y = np.array([_scale(scalar, v) for v in values]), np.array(steps)
    here = _scale(scalar, value)
    ok = np.isfinite(x)
    x, y = x[ok], y[ok]
    order = np.argsort(x)
    x, y = x[order], y[order]
    if not math.isfinite(here) or len(x) == 0 or here < x[0] - 1e-9 or here > x[-1] + 1e-9:
        return None
    i = min(int(np.searchsorted(x, here - 1e-9)), len(x) - 1)
    pair = [i] if abs(x[i] - here) <= 1e-9 else [i - 1, i]
    if not np.all(np.isfinite(y[pair])):
        return None
    return float(np.interp(here, x[pair], y[pair]))


def _measure(scalar: str, value: float, size: int, lr: float, examples: int | None
             ) -> float | None:
    if scalar == "b2":
        return half_life_examples(value, size)
    return None if examples is None else timescale(size, lr, value, examples)


def _point(scalar: str, size: int, curves: list[LRCurve], examples: int | None) -> dict | None:
    values, steps, lrs = _profile(curves, scalar)
    if not np.any(np.isfinite(steps)):
        return None
    k = int(np.nanargmin(steps))
    edge = None if len(values) < 2 else "low" if k == 0 else "high" if k == len(values) - 1 \
        else None
    return {"batch_size": size, "values": values,
            "steps": [s if math.isfinite(s) else None for s in steps], "best": values[k],
            "best_lr": lrs[k], "steps_at_best": steps[k], "at_edge": edge,
            "measure": _measure(scalar, values[k], size, lrs[k], examples)}


def _rule_value(scalar: str, ref: dict, point: dict, examples: int | None) -> float | None:
    """The rule's value at the point's batch size, from the reference's best (whose measure,
    for the weight decay, is its tau)."""
    if scalar == "b2":
        return ref["best"] ** (point["batch_size"] / ref["batch_size"]) if ref["best"] > 0 else None
    tau = ref["measure"]
    return None if tau is None or examples is None else timescale_weight_decay(
        tau, point["batch_size"], point["best_lr"], examples)


def _exponent(points: list[dict]) -> float | None:
    """Least-squares slope of log(measure) against log(B), None with fewer than 2 batch sizes."""
    kept = [(p["batch_size"], p["measure"]) for p in points if p["measure"]]
    if len({b for b, _ in kept}) < 2:
        return None
    x, y = np.log([b for b, _ in kept]), np.log([m for _, m in kept])
    return float(np.polyfit(x, y, 1)[0])


def scalar_rule(scalar: str, by_size: dict[int, list[LRCurve]], examples: dict[int, int]
                ) -> dict | None:
    """One searched scalar against its rule at one target; None where no batch size reached."""
    points = [p for size, curves in sorted(by_size.items())
              if (p := _point(scalar, size, curves, examples.get(size))) is not None]
    if not points:
        return None
    ref = points[0]
    for p in points:
        value = _rule_value(scalar, ref, p, examples.get(p["batch_size"]))
        cost = None if value is None else _steps_at(scalar, p["values"],
                                                    [math.nan if s is None else s
                                                     for s in p["steps"]], value)
        p.update(rule_value=value, rule_steps=cost,
                 relative_cost=None if cost is None else cost / p["steps_at_best"])
    rule, measure = RULES[scalar]
    entry = {"scalar": scalar, "rule": rule, "measure": measure,
             "reference": {"batch_size": ref["batch_size"], "value": ref["best"],
                           "measure": ref["measure"]},
             "points": points, "exponent": _exponent(points),
             "exponent_identified": not any(p["at_edge"] for p in points)}
    return {**entry, "summary": _summary(entry)}


def _summary(entry: dict) -> str:
    points, scalar = entry["points"], entry["scalar"]
    first, last = points[0], points[-1]
    text = (f"The best {scalar} goes from {first['best']:.4g} at B = {first['batch_size']} to "
            f"{last['best']:.4g} at B = {last['batch_size']}")
    edges = [str(p["batch_size"]) for p in points if p["at_edge"]]
    text += f" (at the edge of the values tried at B = {', '.join(edges)})" if edges else ""
    if entry["exponent"] is not None:
        what = ("its half-life in examples" if scalar == "b2"
                else "its timescale tau = B / (eta lambda D)")
        fixed = "; 1 with b2 fixed" if scalar == "b2" else ""
        text += (f"; {what} scales as B^{entry['exponent']:.2f} (0 under the "
                 f"{entry['rule']} rule{fixed})")
        if not entry["exponent_identified"]:
            text += (": not identified, a bound, since the best value sits at the edge of those "
                     "tried")
    ruled = points[1:]  # the reference batch size follows the rule by construction
    costs = [p for p in ruled if p["relative_cost"] is not None]
    if costs:
        worst = max(costs, key=lambda p: p["relative_cost"])
        text += (f"; the rule from B = {first['batch_size']} costs at worst "
                 f"{worst['relative_cost']:.3g}x the best steps (B = {worst['batch_size']})")
    outside = [f"{p['batch_size']} ({p['rule_value']:.4g})" for p in ruled
               if p["rule_value"] is not None and p["relative_cost"] is None]
    if outside:
        text += (f"; the rule's value lies outside the values tried at B = {', '.join(outside)}"
                 ", where its cost is not measured")
    return text + "."


def hyper_rules(target: str, by_size: dict[int, list[LRCurve]], examples: dict[int, int]
                ) -> dict | None:
    """analysis.json's `hyper_rules` at one target: each searched scalar (b2, weight_decay)
    against its rule; None where none was searched."""
    searched = {k for curves in by_size.values() for c in curves for k in c.hyperparameters}
    scalars = {k: entry for k in RULES if k in searched
               if (entry := scalar_rule(k, by_size, examples)) is not None}
    if not scalars:
        return None
    return {"target": target, "scalars": scalars,
            "summary": f"At {target}: " + " ".join(s["summary"] for s in scalars.values())}
