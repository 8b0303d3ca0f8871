"""Batch-size schedules against the fixed batch sizes of the same sweep, per target.

A scheduled run's steps and examples to a target are read from its rows as every run's are
(its own optimizer steps and examples, whatever batch each step used). Each schedule's learning
rate is chosen like a batch size's (scaling.analysis.selection). It is then set against three
fixed batch sizes: the one it starts from (the small-batch run a schedule means to speed up),
the one that needed the fewest steps and the one that needed the fewest examples, as ratios of
the schedule's steps and examples to theirs, each with a bootstrap interval over seeds (the
schedule's and the batch size's seeds resampled apart). Against the fitted trade-off
E = E_min S / (S - S_min) it is placed against every fixed batch size at once: its examples
over the fit's at the same steps, and its steps over the fit's at the same examples; below 1
it does better than any fixed batch size would.

References:
  Smith, Kindermans, Ying, Le, "Don't Decay the Learning Rate, Increase the Batch Size" (2018);
  Merrill, Arora, Groeneveld, Hajishirzi, "Critical Batch Size Revisited" (2025).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from scaling.analysis import intervals
from scaling.analysis.catch_up import catch_up
from scaling.analysis.selection import choose
from scaling.analysis.table import LRCurve, lr_curves
from scaling.config import BatchScheduleConfig
from scaling.config.targets import parse_target


def is_scheduled(record: dict) -> bool:
    """A run of a batch-size schedule (its config.json names one)."""
    return bool(record["config"].get("batch_schedule"))


def settings(record: dict) -> BatchScheduleConfig:
    """The batch.schedules entry a scheduled run's config.json records."""
    known = {f.name for f in dataclasses.fields(BatchScheduleConfig)}
    return BatchScheduleConfig(**{k: v for k, v in record["config"]["batch_schedule"].items()
                                  if k in known})


def _best_cell(grids: list[LRCurve], how: str) -> tuple[float, np.ndarray, np.ndarray] | None:
    """(learning rate, steps per seed, examples per seed) of the chosen cell; None when no cell
    was reached by every seed."""
    steps = np.concatenate([g.stack("steps") for g in grids])
    examples = np.concatenate([g.stack("examples") for g in grids])
    lrs = [lr for g in grids for lr in g.lrs]
    choice = choose(steps, how)
    if choice is None:
        return None
    return lrs[choice.best], steps[choice.best], examples[choice.best]


def _ratio(mine: np.ndarray, theirs: np.ndarray, draws: int, rng: np.random.Generator
           ) -> tuple[float, list[float] | None]:
    """mean(mine) / mean(theirs) and its 95% bootstrap interval, each side's seeds resampled."""
    ratio = float(np.mean(mine) / np.mean(theirs))
    if draws <= 0 or (len(mine) < 2 and len(theirs) < 2):
        return ratio, None
    a = mine[rng.integers(0, len(mine), (draws, len(mine)))].mean(axis=1)
    b = theirs[rng.integers(0, len(theirs), (draws, len(theirs)))].mean(axis=1)
    return ratio, [float(v) for v in np.percentile(a / b, [2.5, 97.5])]


def _against(name: str, size: int, mine: tuple, cells: dict[int, tuple], draws: int,
             rng: np.random.Generator) -> dict[str, Any]:
    _, steps, examples = cells[size]
    s, s_ci = _ratio(mine[1], steps, draws, rng)
    e, e_ci = _ratio(mine[2], examples, draws, rng)
    record = (intervals.info("seeds", "percentile", draws) if s_ci
              else intervals.none(intervals.ONE_SEED if draws > 0 else "not asked for"))
    return {"against": name, "batch_size": size, "steps_ratio": s, "steps_ratio_ci": s_ci,
            "examples_ratio": e, "examples_ratio_ci": e_ci, "interval": record}


def schedule_target(name: str, first_batch: int, table: list[dict], fixed: list[dict],
                    target: dict, how: str, draws: int, rng: np.random.Generator
                    ) -> dict[str, Any]:
    """One schedule at one target: its learning rate, steps and examples, the comparisons."""
    grids = next(iter(lr_curves(table, target["name"]).values()), [])
    mine = _best_cell(grids, how) if grids else None
    entry: dict[str, Any] = {"target": target["name"], "reached": mine is not None}
    if mine is None:
        return entry
    lr, steps, examples = mine
    entry.update(best_lr=lr, steps=float(np.mean(steps)), examples=float(np.mean(examples)),
                 steps_per_seed=[float(v) for v in steps])
    cells = {size: cell for size, g in lr_curves(fixed, target["name"]).items()
             if (cell := _best_cell(g, how)) is not None}
    comparisons = []
    if first_batch in cells:
        comparisons.append(_against("start", first_batch, mine, cells, draws, rng))
    if cells:
        fewest_steps = min(cells, key=lambda b: (np.mean(cells[b][1]), b))
        fewest_examples = min(cells, key=lambda b: (np.mean(cells[b][2]), b))
        comparisons.append(_against("fewest_steps", fewest_steps, mine, cells, draws, rng))
        comparisons.append(_against("fewest_examples", fewest_examples, mine, cells, draws, rng))
    entry["comparisons"] = comparisons
    entry["vs_fit"] = against_fit(entry["steps"], entry["examples"], target.get("fit"))
    return entry


def against_fit(steps: float, examples: float, fit: dict | None) -> dict[str, float | None] | None:
    """The schedule against the fixed batch sizes' fitted trade-off E = E_min S / (S - S_min):
    its examples over the fit's at the same steps, and its steps over the fit's at the same
    examples (below 1: better than any fixed batch size would be; None outside the curve's
    domain, e.g. fewer steps than S_min, which no fixed batch size reaches)."""
    if not fit or not fit["s_min"] > 0 or not fit["e_min"] > 0:
        return None
    s_min, e_min = fit["s_min"], fit["e_min"]
    return {"examples_ratio": examples / (e_min * steps / (steps - s_min)) if steps > s_min else None,
            "steps_ratio": steps / (s_min * examples / (examples - e_min)) if examples > e_min else None}


def analyze_schedules(records: list[dict], table: list[dict], fixed: list[dict],
                      targets: list[dict], how: str, draws: int, seed: int,
                      fixed_records: list[dict] | None = None) -> list[dict]:
    """analysis.json "schedules": per schedule, its settings, one entry per target and the
    catch-up after its last switch (scaling.analysis.catch_up). `table` holds the scheduled
    runs' rows of the run table, `fixed` the fixed batch sizes' (`fixed_records` their runs)."""
    by_name: dict[str, dict] = {}
    for rec, entry in zip(records, table):
        sched = settings(rec)
        item = by_name.setdefault(sched.label, {"settings": sched, "runs": [], "paths": [],
                                                "records": []})
        item["runs"].append(entry)
        item["records"].append(rec)
        item["paths"].append(rec["summary"].get("batch_path") or [])
    out = []
    for i, (name, item) in enumerate(sorted(by_name.items())):
        sched, first = item["settings"], item["settings"].first_batch
        rng = np.random.default_rng([seed, 7919, i])
        paths = [p for p in item["paths"] if p]
        entries = [schedule_target(name, first, item["runs"], fixed, t, how, draws, rng)
                   for t in targets]
        finals = sorted({p[-1][2] for p in paths})
        out.append({"name": name, "kind": sched.kind, "lr_rule": sched.lr_rule,
                    "first_batch": first, "settings": dataclasses.asdict(sched),
                    "num_runs": len(item["runs"]), "final_batch_sizes": finals,
                    "targets": entries,
                    "catch_up": _catch_up(item["records"], fixed_records or [], entries, targets,
                                          finals)})
    return out


def _catch_up(scheduled: list[dict], fixed: list[dict], entries: list[dict],
              targets: list[dict], finals: list[int]) -> dict[str, Any] | None:
    """The catch-up at the first target the schedule reaches, its rate and the final batch
    size's chosen there."""
    for entry, target in zip(entries, targets):
        if entry["reached"] and finals:
            point = next((p for p in target["points"] if p["batch_size"] == finals[-1]), None)
            return catch_up(scheduled, fixed, entry["best_lr"], finals[-1],
                            point and point["best_lr"], target["metric"],
                            lower_is_better=parse_target(target["name"])[1].startswith("<"))
    return None


def summary_lines(schedules: list[dict]) -> list[str]:
    """One line per schedule and target for the terminal."""
    lines = []
    for s in schedules:
        for t in s["targets"]:
            if not t["reached"]:
                lines.append(f"schedule {s['name']} at {t['target']}: not reached by every seed")
                continue
            parts = [f"{c['against'].replace('_', ' ')} (batch {c['batch_size']}): steps x"
                     f"{c['steps_ratio']:.3g}, examples x{c['examples_ratio']:.3g}"
                     for c in t["comparisons"]]
            lines.append(f"schedule {s['name']} at {t['target']}: {t['steps']:.4g} steps, "
                         f"{t['examples']:.4g} examples; vs " + "; ".join(parts))
    return lines
