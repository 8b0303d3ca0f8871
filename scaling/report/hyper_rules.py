"""report.md's searched beta2 and weight decay against their rules (read from analysis.json's
`hyper_rules`, scaling.analysis.hyper_rules): per target and batch size the steps at each
value tried, the best, what the rule keeps fixed, and the rule's value and cost."""

from __future__ import annotations

from typing import Any

from scaling.analysis.contract import Analysis
from scaling.analysis.sections import HyperRules, ScalarPoint
from scaling.formatting import markdown_table, number

MEASURES = {"half_life_examples": "half-life (examples)", "tau": "tau = B / (eta lambda D)"}


def _entries(analysis: Analysis) -> list[HyperRules]:
    """Every target's section, else the top-level one."""
    per_target = [t["hyper_rules"] for t in analysis["targets"] if t["hyper_rules"]]
    return per_target or ([analysis["hyper_rules"]] if analysis["hyper_rules"] else [])


def _tried(point: ScalarPoint) -> str:
    """'0.99: 120, 0.999: 95' - each value tried and its fewest mean steps."""
    return ", ".join(f"{v:.4g}: {number(s)}" for v, s in zip(point["values"], point["steps"]))


def _rows(entry: HyperRules) -> list[list[Any]]:
    return [[entry["target"], name, p["batch_size"], _tried(p), f"{p['best']:.4g}",
             p["best_lr"], p["measure"], "-" if p["rule_value"] is None else f"{p['rule_value']:.4g}",
             p["rule_steps"], p["relative_cost"], p["at_edge"] or "-"]
            for name, rule in entry["scalars"].items() for p in rule["points"]]


def hyper_rules_section(analysis: Analysis) -> list[str]:
    """One table of every searched scalar at every target; nothing where none was searched."""
    entries = _entries(analysis)
    if not entries:
        return []
    lines = ["## Beta2 and weight decay against their rules", "",
             "The rule's value starts from the best at the smallest batch size: beta2 keeps its "
             "half-life in examples (Marek et al. 2025), the weight decay its timescale tau = "
             "B / (eta lambda D) (Wang & Aitchison 2024); its steps are interpolated between "
             "the values tried.", ""]
    measures = sorted({MEASURES.get(r["measure"], r["measure"])
                       for e in entries for r in e["scalars"].values()})
    header = ["target", "scalar", "batch", "steps at each value tried", "best", "best lr",
              " / ".join(measures) + " of the best", "rule's value", "steps at the rule's value",
              "relative cost", "edge"]
    lines += markdown_table(header, [row for e in entries for row in _rows(e)]) + [""]
    return lines + [e["summary"] + "\n" for e in entries]
