"""From run folders to analysis.json (version 2, docs/results-format.md): the one entry point.

`analyze` reads a results folder once (its runs, sweep.yaml, run arithmetic, the rule for
"reached", the learning-rate selection, the interval method, the view and its metric: as
given, else the sweep's own) into a `Folder`, then lets each view of the chosen reading add
its sections (scaling.analysis.views: the steps view, and the views built on it), beside the
folder's own: the sweep in brief, throughput and cost.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from scaling import store
from scaling.analysis import contract, views
from scaling.analysis.schedules import is_scheduled
from scaling.analysis.table import run_table
from scaling.analysis.view import Folder, View
from scaling.config import AnalysisConfig, ConfigError, parse_target
from scaling.config.names import INTERVAL_METHODS, LR_SELECTIONS, REACH_RULES
from scaling.config.targets import FIRST, Reach
from scaling.errors import need
from scaling.store import finite, layout
from scaling.store.cost import cost
from scaling.train.peaks import MEASURED_PEAK, NO_PEAK


# ---------------------------------------------------------------- whole sweep


def _sweep_yaml(out: Path) -> dict:
    path = out / layout.SWEEP_YAML
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def _check_metrics(records: list[dict], targets: list[str], reach: Reach) -> None:
    """Each target's column recorded somewhere: the first finite value settles it, so the rows
    are walked whole only to name the columns in a refusal."""
    rows = [row for rec in records for row in rec["metrics"]]
    for name in targets:
        column = reach.column(parse_target(name)[0])
        if not any(finite(row.get(column)) for row in rows):
            recorded = {k for row in rows for k, v in row.items() if finite(v)}
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
    summaries recorded it are left out). MFU only over a published or configured peak: runs
    trained before 2026-12-04 on a CPU recorded it over a float32 matmul the sweep timed."""
    out = []
    for size in sorted({r["summary"]["batch_size"] for r in records}):
        timed = [r["summary"] for r in records
                 if r["summary"]["batch_size"] == size and r["summary"].get("throughput")]
        if timed:
            row = {"batch_size": size, "runs": len(timed),
                   **{k: store.mean_throughput(timed, k)
                      for k in ("examples_per_s", "run_steps_per_s", "model_flops_per_step",
                                "model_flops_per_s", "mfu")},
                   "peak_source": timed[0]["throughput"].get("peak_source")}
            if MEASURED_PEAK in (row["peak_source"] or ""):
                row.update(mfu=None, peak_source=row["peak_source"].replace(MEASURED_PEAK, NO_PEAK))
            out.append(row)
    return out


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


def view_reading(cfg: dict, view: str | None, metric: str | None) -> tuple[View, str]:
    """The view and metric to analyse with: as given, else the folder's (sweep.yaml), else
    the defaults."""
    own = cfg.get("analysis") or {}
    chosen = views.get(view or own.get("view") or AnalysisConfig.view)
    return chosen, metric or own.get("metric") or AnalysisConfig.metric


def _folder(out: Path, records: list[dict] | None, targets: list[str] | None,
            asked: dict) -> tuple[Folder, View]:
    """The folder read once for every view, and the view asked for (`asked`: analyze's
    reading arguments)."""
    records, scheduled = _records(out, records)
    cfg = _sweep_yaml(out)
    reach, how, method = _reading(cfg, asked["reach"], asked["lr_selection"], asked["interval"])
    view, metric = view_reading(cfg, asked["view"], asked["metric"])
    targets = list(targets or cfg.get("targets") or records[0]["config"].get("targets") or [])
    need(bool(targets) or view.at_budget, "targets", f"none in {out}",
         "at least one, e.g. eval_loss<=1.0 (or analysis.view: fixed_budget)")
    _check_metrics(records + scheduled, targets, reach)
    table = run_table(records, targets, reach, clip=clipped_reading(cfg, records))
    return Folder(out, cfg, records, scheduled, store.read_arithmetic(out) or [], targets, reach,
                  how, method, table, metric, asked["bootstrap"], asked["seed"]), view


def analyze(out: str | Path, targets: list[str] | None = None, bootstrap: int = 1000,
            seed: int = 0, reach: Reach | None = None, lr_selection: str | None = None,
            view: str | None = None, metric: str | None = None,
            records: list[dict] | None = None, interval: str | None = None,
            draws: dict[str, Any] | None = None) -> dict:
    """Read the finished runs in `out` and return the analysis.json dict (version 2).

    `reach`, `lr_selection`, `view`, `metric` and `interval` (the method of the intervals over
    seeds) default to the sweep's (sweep.yaml). The learning-rate rules are judged at every
    target some batch size reached (each target's `lr_rules`, and `hyper_rules` where b2 or
    weight_decay was searched); the top-level ones are the first such target's. A view beyond
    the steps view adds its sections (fixed_budget or both: `fixed_budget`). `records`: the
    folder's runs where the caller has read them (store.load) for its figures. `draws`: where
    given, each view's bootstrap draws by view name, which a parent folder's laws read
    (scaling.analysis.cells) rather than measure the cell a second time.
    """
    out = Path(out)
    need(bootstrap >= 0, "bootstrap", bootstrap, "a non-negative integer")
    folder, chosen = _folder(out, records, targets, {
        "reach": reach, "lr_selection": lr_selection, "interval": interval, "view": view,
        "metric": metric, "bootstrap": bootstrap, "seed": seed})
    result = {"version": 2, "sweep": _sweep_section(out, folder.cfg, folder.records, folder.table),
              "throughput": _throughput(folder.records),
              "cost": cost(folder.records, {a["batch_size"]: a["examples"]
                                            for a in folder.arithmetic})}
    for each in chosen.chain():
        added = each.analyse(folder, result)
        result.update(added.sections)
        if draws is not None and added.draws is not None:
            draws[each.name] = added.draws
    return contract.ordered(result)
