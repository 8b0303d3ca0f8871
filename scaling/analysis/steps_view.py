"""The steps view: steps to each target, best LR, the S(B) fit, B_crit, the rules.

For each target: the steps each run needs under the sweep's rule for "reached"
(scaling.config.targets, interpolated between evaluation points), each batch size's learning
rate and its steps under the chosen selection (scaling.analysis.selection), the trade-off
S(B) = S_min + E_min / B fitted in log space with an interval over seeds on B_crit = E_min /
S_min and its identification (scaling.analysis.fit), the scaling regimes of Shallue et al.
(2018) and the noise scale at the crossing; beside it, B_crit under the first crossing and the
fewest mean steps, the definition most papers used. Then the learning-rate rules against the
measured optima, and the batch-size schedules against the fixed batch sizes. Its sections are
the contract's Analysis (every analysis.json holds them; with no targets they are empty);
its `VIEW` is registered in scaling.config.names.VIEW_TABLE, its report in
scaling.report.steps_report.
"""

from __future__ import annotations

import numpy as np

from scaling.analysis import definitions, intervals, optimum
from scaling.analysis.crossing import crossing
from scaling.analysis.fit import fit_with_interval
from scaling.analysis.hyper_rules import budgets, hyper_rules
from scaling.analysis.lr_rules import lr_rules
from scaling.analysis.points import best_point, median_positive, select
from scaling.analysis.schedules import analyze_schedules, summary_lines as schedule_lines
from scaling.analysis.table import (LRCurve, lr_curves, run_table, unreached_lines,
                                    unreached_reason)
from scaling.analysis.tradeoff import regimes
from scaling.analysis.view import Added, Folder, View
from scaling.config import parse_target
from scaling.config.names import OPTIMIZER_TABLE
from scaling.formatting import estimate, number, text_table

CROSSING_STREAM = 7921  # the crossing's percentile draws, apart from the fit's
RUN_KEYS = ("run_id", "batch_size", "learning_rate", "seed", "hyperparameters", "status",
            "steps_to_target", "steps_censored", "reading", "examples_to_target")


def _curve(name: str, table: list[dict], bootstrap: int, rng: np.random.Generator, how: str,
           key: str, method: str
           ) -> tuple[list[dict], dict[int, list[LRCurve]], list[dict], dict | None]:
    """(points, grids, timed points, fit) of one target with steps read from `key`; the
    optimum between the rates tried is read for the sweep's own rule only (the first crossing
    is read as most papers did, at the best rate tried)."""
    by_size = lr_curves(table, name, key)
    own = key == "steps_to_target"
    points = [p for size, g in by_size.items()
              if (p := best_point(size, g, how, bootstrap, rng, own, method)) is not None]
    timed = [p for p in points if p["steps"] > 0]  # a target met at step 0 says nothing on S(B)
    return points, by_size, timed, fit_with_interval(by_size, timed, bootstrap, rng, how, method)


def analyze_target(name: str, table: list[dict], bootstrap: int, rng: np.random.Generator,
                   how: str = "min", examples: dict[int, int] | None = None,
                   method: str = intervals.DEFAULT_METHOD, surge: bool = False) -> dict:
    """One entry of analysis.json "targets", with the learning-rate rules read on each batch
    size's grid holding its best cell, and a searched beta2 or weight decay against its rule
    (`examples`: each batch size's budget in examples, which the timescale rule reads);
    intervals over seeds by `method` (scaling.analysis.intervals); the surge rule fitted where
    `surge` (adaptive optimizers)."""
    metric, op, value = parse_target(name)
    points, by_size, timed, fit = _curve(name, table, bootstrap, rng, how, "steps_to_target",
                                         method)
    unreached = [s for s, g in by_size.items() if select(g, how) is None]
    crossed = crossing(by_size, timed, unreached, how, bootstrap,
                       np.random.default_rng(CROSSING_STREAM), method)
    fit = None if crossed["crossed"] else fit  # no hyperbola over crossing curves
    first_points, _, _, first_fit = _curve(name, table, bootstrap, rng, "min", "first_crossing",
                                           method)
    scales = {key: median_positive([p[key] for p in points])
              for key in ("b_simple", "b_noise", "b_simple_precond")}
    b_simple = scales["b_simple"]
    ci = fit and fit["b_crit_ci"]
    first_b = first_fit and first_fit["b_crit"]
    entry = {"name": name, "metric": metric, "op": op, "value": value, "points": points,
             "unreached_batch_sizes": unreached,
             "unreached_reasons": {str(s): unreached_reason(table, name, s) for s in unreached},
             "fit": fit, "s_min": fit and fit["s_min"], "e_min": fit and fit["e_min"],
             "b_crit": fit and fit["b_crit"], "b_crit_ci": ci,
             "interval": fit and fit["interval"],
             "regimes": regimes([p["batch_size"] for p in timed], [p["steps"] for p in timed]),
             **scales, "b_simple_over_b_crit": b_simple / fit["b_crit"] if fit and b_simple else None,
             **{d.key: d.compute(timed, fit) for d in definitions.DEFINITIONS},
             "first_crossing": {
                 "b_crit": first_b, "b_crit_ci": first_fit and first_fit["b_crit_ci"],
                 "interval": first_fit and first_fit["interval"],
                 "steps": {str(p["batch_size"]): p["steps"] for p in first_points},
                 "outside_interval": bool(ci and first_b and not ci[0] <= first_b <= ci[1])},
             "crossing": crossed}
    chosen = {size: picked[1] for size, g in by_size.items() if (picked := select(g, how))}
    entry["lr_rules"] = lr_rules(name, points, chosen, bootstrap, rng, scales, method, surge)
    entry["hyper_rules"] = hyper_rules(name, by_size, examples or {})
    return entry


def surge_rule(cfg: dict, records: list[dict]) -> bool:
    """Whether the surge rule is fitted: as analysis.surge_rule says, else for adaptive
    optimizers only (the fall of the optimum at large batches is Adam's)."""
    asked = (cfg.get("analysis") or {}).get("surge_rule")
    if asked is not None:
        return bool(asked)
    name = (cfg.get("optimizer") or {}).get("name") or records[0]["summary"].get("optimizer")
    family = OPTIMIZER_TABLE.get(name)
    return bool(family and family.adaptive)

def analyse(folder: Folder, _: dict) -> Added:
    """The steps view's sections of analysis.json: every target read on the folder's runs
    (each with its own random stream), the schedules against them, the runs' readings; the
    top-level rules are the first target's that has them."""
    f = folder
    examples, surge = budgets(f.arithmetic, f.records), surge_rule(f.cfg, f.records)
    results = [analyze_target(t, f.table, f.bootstrap, np.random.default_rng([f.seed, i]), f.how,
                              examples, f.method, surge) for i, t in enumerate(f.targets)]
    schedules = analyze_schedules(f.scheduled, run_table(f.scheduled, f.targets, f.reach),
                                  f.table, results, f.how, f.method, f.bootstrap, f.seed,
                                  f.records)
    return Added({"reached": {"rule": f.reach.rule, "window": f.reach.window,
                              "definition": f.reach.describe()},
                  "lr_selection": f.how, "interval_method": f.method,
                  "primary_target": f.targets[0] if f.targets else None,
                  "runs": [{k: r[k] for k in RUN_KEYS} for r in f.table], "targets": results,
                  **{k: next((e[k] for e in results if e[k]), None)
                     for k in ("lr_rules", "hyper_rules")},
                  "b_crit_power_law": definitions.power_laws(results), "schedules": schedules})


def summary_lines(analysis: dict) -> list[str]:
    """The steps view for the terminal: best LR and steps per batch size, then the fit, the
    rules and the schedules."""
    lines = [f"reached: {analysis['reached']['definition']}; learning rate: "
             f"{analysis['lr_selection']}"]
    for t in analysis["targets"]:
        rows = [[p["batch_size"], p["best_lr"], p["at_edge"] or "", p["steps"],
                 optimum.describe(p.get("optimum")), p["examples"]] for p in t["points"]]
        table = text_table(["batch", "best lr", "edge", "steps", "at the optimum", "examples"],
                           rows)
        lines += [f"target {t['name']}"] + ["  " + line for line in table.splitlines()]
        lines += [f"  {line}" for line in unreached_lines(t)]
        fit = t["fit"] or {}
        b_crit = estimate(t["b_crit"], t["b_crit_ci"], fit.get("identification"), 4)
        spread = intervals.describe(fit.get("interval")) if fit else "not fitted"
        lines.append(f"  S_min {number(t['s_min'], 4)} steps, E_min {number(t['e_min'], 4)} examples, "
                     f"B_crit {b_crit} ({spread}), B_simple {number(t['b_simple'], 4)}; "
                     f"first crossing: B_crit {number(t['first_crossing']['b_crit'], 4)}")
    for rules in ("lr_rules", "hyper_rules"):
        if analysis.get(rules):
            lines.append(analysis[rules]["summary"])
    return lines + schedule_lines(analysis.get("schedules") or [])


VIEW = View("steps", analyse, {}, summary_lines)
