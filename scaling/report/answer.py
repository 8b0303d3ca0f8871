"""report.md's first screen: per target the critical batch size with its interval and what
that interval resamples, S_min, E_min and where perfect scaling ends; then one sentence on which
learning-rate rule the measured optima support. Everything else in the report qualifies this."""

from __future__ import annotations

import math

from scaling.analysis.contract import Analysis, Target
from scaling.analysis.intervals import describe
from scaling.analysis.sections import LRRules, RuleEntry
from scaling.analysis.lr_rules import LINEAR_BREAK_COST, LINEAR_BREAK_RATIO
from scaling.formatting import estimate, markdown_table, number, unpinned

FIXED_RULES = ("linear", "sqrt")
FITTED_RULES = (("noise_scale", "noise-scale rule", "noise_scale_fit", "b_noise", "B_noise"),
                ("surge", "surge rule", "surge_fit", "b_peak", "B_peak"))


AT_ZERO = 1e-6  # S_min below this share of the fewest steps measured sits at its bound, 0


def _points_steps(t: Target) -> list[float]:
    return [p["steps"] for p in t["points"] if p["steps"]]


def s_min_text(t: Target) -> str:
    """S_min with its interval, or '≈ 0 (at its bound)' where the fit pushed it to zero (steps
    that keep halving with the batch: B_crit is then beyond the batch sizes, a bound)."""
    ci, steps, value = t["fit"] and t["fit"]["s_min_ci"], _points_steps(t), t["s_min"]
    if value is not None and steps and value < AT_ZERO * min(steps):
        return "≈ 0 (at its bound)"
    return unpinned(value, ci) or estimate(value, ci)


def e_min_text(t: Target) -> str:
    """E_min with its interval, or '≈ 0 (at its bound)' where E_min / B is nothing beside the
    fewest steps at every batch size tried (steps flat in B: B_crit below the batches)."""
    ci, steps, value = t["fit"] and t["fit"]["e_min_ci"], _points_steps(t), t["e_min"]
    sizes = [p["batch_size"] for p in t["points"]]
    if value is not None and steps and sizes and value / min(sizes) < AT_ZERO * min(steps):
        return "≈ 0 (at its bound)"
    return unpinned(value, ci) or estimate(value, ci)


def _row(t: Target) -> list[str]:
    fit, reg = t["fit"], t["regimes"]
    if not fit:
        return [t["name"], "no fit", "-", "-", "-", number(reg["perfect_scaling_until"])]
    return [t["name"], estimate(t["b_crit"], t["b_crit_ci"], fit["identification"], 3),
            describe(fit["interval"]), s_min_text(t), e_min_text(t),
            number(reg["perfect_scaling_until"])]


def _holds(rows: list[RuleEntry]) -> int | None:
    """The largest batch size up to which a rule's rate stays within LINEAR_BREAK_RATIO of the
    optimum either way, reaches the target and costs at most LINEAR_BREAK_COST x the best
    steps at every batch size."""
    last = None
    for r in sorted(rows, key=lambda r: r["batch_size"]):
        ratio, cost = r["ratio_to_optimum"], r["relative_cost"]
        if (ratio is None or not 1 / LINEAR_BREAK_RATIO <= ratio <= LINEAR_BREAK_RATIO
                or cost is None or cost > LINEAR_BREAK_COST):
            return last
        last = r["batch_size"]
    return last


def _worst(rows: list[RuleEntry]) -> tuple[float, int]:
    worst = max((r for r in rows if r["ratio_to_optimum"]),
                key=lambda r: abs(math.log(r["ratio_to_optimum"])))
    return worst["ratio_to_optimum"], worst["batch_size"]


def _off(ratio: float) -> str:
    return f"{ratio:.2g}x high" if ratio >= 1 else f"{1 / ratio:.2g}x low"


def lr_sentence(rules: LRRules) -> str | None:
    """Which rule the measured optima support at the rules' target, in one sentence."""
    table = rules["rules"]
    optima = sorted(rules["optima"], key=lambda o: o["batch_size"])
    fixed = [(name, table[name]) for name in FIXED_RULES if table.get(name)]
    if len(optima) < 2 or not fixed:
        return None
    largest = optima[-1]["batch_size"]
    name, rows = max(fixed, key=lambda nr: _holds(nr[1]) or 0)
    until = _holds(rows)
    text = f"Learning rate (at {rules['target']}): "
    if until is None or until == optima[0]["batch_size"]:
        text += f"no fixed rule from B = {number(optima[0]['batch_size'])} stays within " \
                f"{LINEAR_BREAK_RATIO:g}x of the measured optimum past it"
        until, name = optima[0]["batch_size"], None
    else:
        text += f"{name} scaling from B = {number(optima[0]['batch_size'])} stays within " \
                f"{LINEAR_BREAK_RATIO:g}x of the measured optimum (and {LINEAR_BREAK_COST:g}x " \
                f"the best steps) up to B = {number(until)}"
    beyond = [o["learning_rate"] for o in optima if o["batch_size"] > (until or 0)]
    if until is not None and until < largest and beyond:
        spread = number(min(beyond)) if number(min(beyond)) == number(max(beyond)) else \
            f"{number(min(beyond))}-{number(max(beyond))}"
        text += f"; past B = {number(until)} the optimum is {spread}"
    others = [f"{other} scaling is up to {_off(_worst(rs)[0])} (B = {number(_worst(rs)[1])})"
              for other, rs in fixed if other != name]
    for key, label, fit_key, scale, scale_label in FITTED_RULES:
        fit = rules[fit_key]
        if table.get(key) and fit:
            ratio, at = _worst(table[key])
            shown = estimate(fit[scale], fit[f"{scale}_ci"], fit["identification"].get(scale))
            others.append(f"the {label} fitted to the optima ({scale_label} {shown}) is at "
                          f"worst {_off(ratio)} (B = {number(at)})")
    return text + ("; " + "; ".join(others) if others else "") + "."


def section(analysis: Analysis) -> list[str]:
    """The first screen: the B_crit table, then the learning-rate sentence."""
    targets = analysis["targets"]
    if not targets:
        return []
    header = ["target", "B_crit [95% CI]", "interval", "S_min", "E_min",
              "perfect scaling until B"]
    lines = ["## Answer", ""] + markdown_table(header, [_row(t) for t in targets]) + [""]
    sentence = lr_sentence(analysis["lr_rules"]) if analysis["lr_rules"] else None
    return lines + ([sentence, ""] if sentence else [])
