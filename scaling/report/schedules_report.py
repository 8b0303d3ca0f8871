"""The report's section on batch-size schedules: each against the fixed batch sizes at every
target, and the catch-up after its last switch (scaling.analysis.schedules, catch_up)."""

from __future__ import annotations

from scaling.analysis.contract import Analysis
from scaling.analysis.intervals import describe
from scaling.formatting import estimate, markdown_table, number


def _vs_fit(vs: dict | None) -> str:
    return "-" if not vs else f"{number(vs['examples_ratio'])}, {number(vs['steps_ratio'])}"


def schedules_section(analysis: Analysis) -> list[str]:
    """Each batch-size schedule at each target against the fixed batch sizes."""
    schedules = analysis["schedules"]
    if not schedules:
        return []
    lines = ["## Batch-size schedules", "",
             "Each schedule at its best learning rate against three fixed batch sizes of the "
             "sweep: the one it starts from, the one with the fewest steps and the one with the "
             "fewest examples; ratios of its steps and examples to theirs, each with the "
             "interval the column \"interval\" names. Against the fit: its examples over the fitted trade-off's "
             "at the same steps, and its steps over the fit's at the same examples (the fixed "
             "batch sizes lie near 1, within the fit's residual; below 1 the schedule does "
             "better than any fixed batch size would).", ""]
    header = ["schedule", "target", "best lr", "steps", "examples", "against", "steps ratio",
              "examples ratio", "interval", "vs fit: examples, steps"]
    rows = []
    for sched in schedules:
        for t in sched["targets"]:
            if not t["reached"]:
                rows.append([sched["name"], t["target"], "-", "not reached"] + ["-"] * 6)
                continue
            for c in t["comparisons"]:
                rows.append([sched["name"], t["target"], number(t["best_lr"]), number(t["steps"]),
                             number(t["examples"]), f"{c['against'].replace('_', ' ')} "
                             f"(batch {c['batch_size']})",
                             estimate(c["steps_ratio"], c["steps_ratio_ci"]),
                             estimate(c["examples_ratio"], c["examples_ratio_ci"]),
                             describe(c.get("interval")), _vs_fit(t.get("vs_fit"))])
    lines += markdown_table(header, rows) + [""]
    for sched in schedules:
        lines.append(f"- {sched['name']}: {sched['kind']}, learning rate by the {sched['lr_rule']} "
                     f"rule from batch {sched['first_batch']}; final batch sizes "
                     f"{', '.join(map(str, sched['final_batch_sizes'])) or '-'}"
                     f"{catch_up_text(sched.get('catch_up'))}.")
    return lines + [""]


def catch_up_text(c: dict | None) -> str:
    """The catch-up after a schedule's last switch, as a clause (empty where it has none)."""
    if not c:
        return ""
    against = (f"the fixed batch {c['batch_size']} run at learning rate "
               f"{number(c['fixed_learning_rate'])}")
    if c["switch_examples"] is None:
        return f"; no catch-up read: {c['interval']['why']}"
    within = f"within {100 * c['tolerance']:g}% of {against} in {c['metric']}"
    if c["examples"] is None:
        return (f"; after its switch at {number(c['switch_examples'])} examples it came "
                f"{within} at " + ", ".join(f"seed {s}: {number(v)}" for s, v in
                                           c["per_seed"].items()) + f" examples ({c['interval']['why']})")
    return (f"; after its switch at {number(c['switch_examples'])} examples it came {within} "
            f"{estimate(c['examples'], c['examples_ci'])} examples later "
            f"({describe(c['interval'])})")
