"""report.md's learning-rate rules: every rule judged at every target in one table, the fitted
noise-scale and surge rules with their intervals, B_peak beside the measured noise scales, and
whether the measured optimum falls with the batch size (read from analysis.json)."""

from __future__ import annotations

from typing import Any

from scaling.analysis.contract import Analysis
from scaling.analysis.intervals import describe
from scaling.analysis.sections import LRRules, NoiseScaleFit, SurgeFit
from scaling.formatting import estimate, markdown_table, number
from scaling.report.tables import relative_cost, steps_text

NOISE_SCALES = (("b_simple", "B_simple"), ("b_noise", "B_noise"),
                ("b_simple_precond", "B_simple in Adam's metric"))


def rule_entries(analysis: Analysis) -> list[LRRules]:
    """The rules of every target that has them; an analysis.json from before the rules were
    read per target has only the top-level one."""
    per_target = [t["lr_rules"] for t in analysis["targets"] if t["lr_rules"]]
    return per_target or ([analysis["lr_rules"]] if analysis["lr_rules"] else [])


def _fitted(fit: NoiseScaleFit | SurgeFit, key: str) -> str:
    """A fitted parameter with its interval, or the bound it is."""
    return estimate(fit[key], fit[f"{key}_ci"], fit["identification"].get(key))


def _fit_text(name: str, fit: NoiseScaleFit | SurgeFit | None,
              keys: tuple[tuple[str, str], ...]) -> str | None:
    if not fit:
        return None
    values = ", ".join(f"{label} {_fitted(fit, k)}" for k, label in keys)
    return f"{name} fitted to the optima: {values}; {describe(fit['interval'])}."


def falls_sentence(rules: LRRules) -> str | None:
    """'The measured optimum falls ...' with B_peak beside the measured noise scales."""
    falls, surge, measured = rules["optimum_falls"], rules["surge_fit"], rules["noise_scales"]
    if not falls:
        return None
    scales = [f"{label} {number(measured[key])}" for key, label in NOISE_SCALES
              if measured and measured[key] is not None]
    text = (f"At {rules['target']} the measured optimal learning rate falls with the batch "
            f"size: from {number(falls['peak_learning_rate'])} at B = {falls['peak_batch_size']} "
            f"to {number(falls['learning_rate'])} at B = {falls['largest_batch_size']} "
            f"({falls['ratio']:.2g}x lower), as Li et al. 2024 found for Adam.")
    if surge and surge["b_peak"] is not None:
        text += f" The surge fit puts the peak at B_peak {_fitted(surge, 'b_peak')}"
        text += f", beside the measured {', '.join(scales)}." if scales else "."
    return text


def _target_lines(rules: LRRules) -> list[str]:
    ref = rules["reference"]
    lines = [f"Target {rules['target']}: reference batch {number(ref['batch_size'])} at "
             f"LR {number(ref['learning_rate'])}."]
    for text in (_fit_text("Noise-scale rule", rules["noise_scale_fit"],
                           (("eps_max", "eps_max"), ("b_noise", "B_noise"))),
                 _fit_text("Surge rule", rules["surge_fit"],
                           (("eta_max", "eta_max"), ("b_peak", "B_peak"))),
                 falls_sentence(rules)):
        if text:
            lines.append(text)
    return lines + [""]


def _rows(rules: LRRules) -> list[list[Any]]:
    optimum = {o["batch_size"]: o["learning_rate"] for o in rules["optima"]}
    return [[rules["target"], name, r["batch_size"], optimum.get(r["batch_size"]),
             r["learning_rate"], r["ratio_to_optimum"], steps_text(r),
             relative_cost(r), r["note"] or "-"]
            for name, rs in rules["rules"].items()
            for r in sorted(rs, key=lambda r: r["batch_size"])]


def lr_rules_section(analysis: Analysis) -> list[str]:
    """Every rule at every target in one table, each rule's cost in steps beside its LR."""
    entries = rule_entries(analysis)
    if not entries:
        return ["## Learning-rate rules", "", "Not computed (no target reached at two or more "
                "batch sizes).", ""]
    lines = ["## Learning-rate rules", ""]
    for rules in entries:
        lines += _target_lines(rules)
    header = ["target", "rule", "batch", "measured optimum", "predicted LR", "ratio to optimum",
              "steps at the rule's LR", "relative cost (steps)", "note"]
    lines += markdown_table(header, [row for rules in entries for row in _rows(rules)]) + [""]
    return lines + [rules["summary"] + "\n" for rules in entries if rules["summary"]]


def lr_conclusion(analysis: Analysis) -> list[str]:
    """Sentences for the conclusion: linear scaling at the rules' first target, and every
    target where the measured optimum falls."""
    rules, out = analysis["lr_rules"], []
    brk = rules and rules["linear_breaks_at"]
    if brk is not None:
        row = next((r for r in rules["rules"].get("linear") or [] if r["batch_size"] == brk),
                   None)
        ratio = row and row["ratio_to_optimum"]
        out.append(f"Linear learning-rate scaling over-shoots the measured optimum from a batch "
                   f"of about {brk}" + (f" ({ratio:.2g}x the optimum there)" if ratio else "")
                   + ".")
    elif rules:
        out.append("Linear learning-rate scaling stays within 2x of the measured optimum (and "
                   "1.5x of the best steps) at every batch size tried.")
    return out + [s for entry in rule_entries(analysis) if (s := falls_sentence(entry))]
