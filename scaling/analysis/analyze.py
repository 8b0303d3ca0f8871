"""From run folders to the numbers of the papers: steps to target, best LR, S(B) fit, B_crit.

For each target: the steps each run needs under the sweep's rule for "reached"
(scaling.config.targets, interpolated between evaluation points), each batch size's learning
rate and its steps under the chosen selection (scaling.analysis.selection), the trade-off
S(B) = S_min + E_min / B fitted in log space with an interval over seeds on B_crit = E_min /
S_min and its identification (scaling.analysis.fit), the scaling regimes of Shallue et al.
(2018) and the noise scale at the crossing; beside it, B_crit under the first crossing and the
fewest mean steps, the definition most papers used. Then the learning-rate rules against the
measured optima. Output: the analysis.json contract (version 2, docs/results-format.md).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import yaml

from scaling import store
from scaling.analysis import definitions, intervals, optimum
from scaling.analysis.budget_folder import (budget_section, reading as budget_reading,
                                            summary_lines as budget_summary)
from scaling.analysis.crossing import crossing
from scaling.analysis.hyper_rules import budgets, hyper_rules
from scaling.analysis.lr_rules import lr_rules
from scaling.analysis.schedules import analyze_schedules, is_scheduled, summary_lines
from scaling.analysis.fit import fit_with_interval
from scaling.analysis.points import best_point, median_positive, select
from scaling.analysis.table import (LRCurve, lr_curves, run_table, unreached_lines,
                                    unreached_reason)
from scaling.analysis.tradeoff import regimes
from scaling.config import AnalysisConfig, ConfigError, parse_target
from scaling.config.names import INTERVAL_METHODS, LR_SELECTIONS, OPTIMIZER_TABLE, REACH_RULES
from scaling.config.targets import FIRST, Reach
from scaling.errors import need
from scaling.formatting import estimate, number, text_table
from scaling.store import finite
from scaling.store.cost import cost

CROSSING_STREAM = 7921  # the crossing's percentile draws, apart from the fit's


# ---------------------------------------------------------------- whole sweep


def _sweep_yaml(out: Path) -> dict:
    path = out / "sweep.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def _check_metrics(records: list[dict], targets: list[str], reach: Reach) -> None:
    recorded = {k for rec in records for row in rec["metrics"] for k, v in row.items() if finite(v)}
    for name in targets:
        column = reach.column(parse_target(name)[0])
        if column not in recorded:
            why = " (rule ema reads the moving average's metrics: train with eval.ema_decay)" \
                if reach.rule == "ema" else ""
            raise ConfigError(f"targets: {name!r} needs {column!r}, which no run in this folder "
                              f"recorded{why}; expected one of {', '.join(sorted(recorded))}")


def _sweep_section(out: Path, cfg: dict, records: list[dict], table: list[dict]) -> dict:
    tokens = any(finite(row.get("tokens")) for rec in records for row in rec["metrics"])
    first = records[0]["summary"]
    return {"name": cfg.get("name", out.name),
            "task": (cfg.get("task") or {}).get("name", first.get("task")),
            "optimizer": (cfg.get("optimizer") or {}).get("name", first.get("optimizer")),
            "unit": "tokens" if tokens else "examples",
            "batch_sizes": sorted({r["batch_size"] for r in table}),
            "learning_rates": sorted({r["learning_rate"] for r in table}),
            "seeds": sorted({r["seed"] for r in table}), "num_runs": len(table),
            "statuses": dict(Counter(r["status"] for r in table))}


def _throughput(records: list[dict]) -> list[dict]:
    """Per batch size, the training speed its groups recorded (mean over runs; runs from before
    summaries recorded it are left out)."""
    out = []
    for size in sorted({r["summary"]["batch_size"] for r in records}):
        timed = [r["summary"] for r in records
                 if r["summary"]["batch_size"] == size and r["summary"].get("throughput")]
        if timed:
            out.append({"batch_size": size, "runs": len(timed),
                        **{k: store.mean_throughput(timed, k)
                           for k in ("examples_per_s", "run_steps_per_s", "model_flops_per_step",
                                     "model_flops_per_s", "mfu")},
                        "peak_source": timed[0]["throughput"].get("peak_source")})
    return out


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


def sweep_reading(out: Path) -> Reach:
    """The rule a sweep folder ran with (sweep.yaml)."""
    return _reach_of(_sweep_yaml(Path(out)))


def _reach_of(cfg: dict) -> Reach:
    """The rule of a sweep.yaml; one written before the rules existed has no `reached`
    section, and its runs stopped at the first crossing."""
    section = cfg.get("reached")
    return Reach(**section) if section else FIRST


def clipped_reading(cfg: dict, records: list[dict]) -> bool:
    """Whether runs whose reading window the budget cut off are read with the window clipped
    (flagged): what the sweep decided and recorded in its summaries (`reading_clip`, from
    Config.reading_extension); for a folder from before they recorded it, or an import, where
    the sweep ran no reading extension (budget.reading_extension off or 1, runs that did not
    stop at their targets, or a folder from before the extension existed)."""
    recorded = {r["summary"]["reading_clip"] for r in records if "reading_clip" in r["summary"]}
    if len(recorded) == 1:
        return recorded.pop()
    ext = (cfg.get("budget") or {}).get("reading_extension", False)
    stops = (cfg.get("train") or {}).get("stop_at_targets", True)
    return ext is False or ext is None or ext <= 1 or not stops


def _reading(cfg: dict, reach: Reach | None, how: str | None,
             method: str | None) -> tuple[Reach, str, str]:
    """The rule, selection and interval method to analyse with: as given, else the sweep's own
    (`cfg`, its sweep.yaml), else the defaults."""
    if reach is None:
        reach = _reach_of(cfg)
    section = cfg.get("analysis") or {}
    how = how or section.get("lr_selection") or AnalysisConfig.lr_selection
    method = method or section.get("interval") or AnalysisConfig.interval
    need(reach.rule in REACH_RULES, "reached.rule", reach.rule, f"one of {', '.join(REACH_RULES)}")
    need(reach.window > 1, "reached.window", reach.window, "a number > 1")
    need(how in LR_SELECTIONS, "lr_selection", how, f"one of {', '.join(LR_SELECTIONS)}")
    need(method in INTERVAL_METHODS, "interval", method,
         f"one of {', '.join(INTERVAL_METHODS)}")
    return reach, how, method


def surge_rule(cfg: dict, records: list[dict]) -> bool:
    """Whether the surge rule is fitted: as analysis.surge_rule says, else for adaptive
    optimizers only (the fall of the optimum at large batches is Adam's)."""
    asked = (cfg.get("analysis") or {}).get("surge_rule")
    if asked is not None:
        return bool(asked)
    name = (cfg.get("optimizer") or {}).get("name") or records[0]["summary"].get("optimizer")
    family = OPTIMIZER_TABLE.get(name)
    return bool(family and family.adaptive)


def _records(out: Path, records: list[dict] | None) -> tuple[list[dict], list[dict]]:
    """A folder's finished runs (`records`, read from it when None) at fixed batch sizes, and
    its batch-size schedules' runs."""
    records = store.load(out) if records is None else records
    if not records:
        raise ConfigError(f"{out}: holds no finished runs (no runs/*/summary.json); "
                          "expected the --out folder of a sweep")
    fixed = [r for r in records if not is_scheduled(r)]
    if not fixed:
        raise ConfigError(f"{out}: holds only scheduled runs; expected fixed batch sizes too "
                          "(batch.sizes), which the schedules are compared with")
    return fixed, [r for r in records if is_scheduled(r)]


def analyze(out: str | Path, targets: list[str] | None = None, bootstrap: int = 1000,
            seed: int = 0, reach: Reach | None = None, lr_selection: str | None = None,
            view: str | None = None, metric: str | None = None,
            records: list[dict] | None = None, interval: str | None = None) -> dict:
    """Read the finished runs in `out` and return the analysis.json dict (version 2).

    `reach`, `lr_selection`, `view`, `metric` and `interval` (the method of the intervals over
    seeds) default to the sweep's (sweep.yaml). The
    learning-rate rules are judged at every target some batch size reached (each target's
    `lr_rules`, and `hyper_rules` where b2 or weight_decay was searched); the top-level ones
    are the first such target's. fixed_budget or both adds `fixed_budget` (budget_folder).
    `records`: the folder's runs where the caller has read them (store.load) for its figures.
    """
    return analyze_with_draws(out, targets, bootstrap, seed, reach, lr_selection, view, metric,
                              records, interval)[0]


def analyze_with_draws(out: str | Path, targets: list[str] | None = None, bootstrap: int = 1000,
                       seed: int = 0, reach: Reach | None = None, lr_selection: str | None = None,
                       view: str | None = None, metric: str | None = None,
                       records: list[dict] | None = None, interval: str | None = None
                       ) -> tuple[dict, np.ndarray | None]:
    """`analyze`, and with the fixed-budget view the folder's bootstrap draws of (B_opt, eta*,
    the metric there), which a parent folder's laws read (scaling.analysis.cells) rather than
    measure the cell a second time."""
    out = Path(out)
    need(bootstrap >= 0, "bootstrap", bootstrap, "a non-negative integer")
    records, scheduled = _records(out, records)
    cfg, arithmetic = _sweep_yaml(out), store.read_arithmetic(out) or []
    reach, how, method = _reading(cfg, reach, lr_selection, interval)
    view, metric = budget_reading(cfg, view, metric)
    targets = list(targets or cfg.get("targets") or records[0]["config"].get("targets") or [])
    need(bool(targets) or view != "steps", "targets", f"none in {out}",
         "at least one, e.g. eval_loss<=1.0 (or analysis.view: fixed_budget)")
    _check_metrics(records + scheduled, targets, reach)
    table = run_table(records, targets, reach, clip=clipped_reading(cfg, records))
    examples = budgets(arithmetic, records)
    surge = surge_rule(cfg, records)
    results = [analyze_target(t, table, bootstrap, np.random.default_rng([seed, i]), how, examples,
                              method, surge) for i, t in enumerate(targets)]
    schedules = analyze_schedules(scheduled, run_table(scheduled, targets, reach), table,
                                  results, how, bootstrap, seed, records)
    runs = [{k: r[k] for k in ("run_id", "batch_size", "learning_rate", "seed", "hyperparameters",
                               "status", "steps_to_target", "steps_censored", "reading",
                               "examples_to_target")} for r in table]
    result = {"version": 2, "sweep": _sweep_section(out, cfg, records, table),
              "reached": {"rule": reach.rule, "window": reach.window,
                          "definition": reach.describe()},
              "lr_selection": how, "interval_method": method, "primary_target": targets[0] if targets else None,
              "runs": runs, "targets": results,
              **{k: next((e[k] for e in results if e[k]), None) for k in ("lr_rules", "hyper_rules")},
              "throughput": _throughput(records),
              "cost": cost(records, {a["batch_size"]: a["examples"] for a in arithmetic}),
              "b_crit_power_law": definitions.power_laws(results),
              "schedules": schedules}
    if view == "steps":
        return result, None
    result["fixed_budget"], draws = budget_section(out, cfg, records, metric, bootstrap, seed,
                                                   result["targets"])
    return result, draws


def summary_table(analysis: dict) -> str:
    """Plain-text digest for the terminal: best LR and steps per batch size, then the fit."""
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
    lines += summary_lines(analysis.get("schedules") or []) + budget_summary(analysis)
    return "\n".join(lines)
