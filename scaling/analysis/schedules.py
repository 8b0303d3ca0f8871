"""Batch-size schedules against the fixed batch sizes of the same sweep, per target.

A scheduled run's steps and examples to a target are read from its rows as every run's are
(its own optimizer steps and examples, whatever batch each step used). Each schedule's learning
rate is chosen like a batch size's (scaling.analysis.selection). It is then set against three
fixed batch sizes: the one it starts from (the small-batch run a schedule means to speed up),
the one that needed the fewest steps and the one that needed the fewest examples, as ratios of
the schedule's steps and examples to theirs, each with an interval over seeds: by default the
leave-one-seed-out jackknife, seed i left out of both sides at once (a seed's schedule run and
fixed run share its initialisation and data order, so the pair stays together), log ratio +-
t(k-1) se, which holds its level with 3 seeds whether the two sides are correlated or not
(tests/test_schedule_intervals.py simulates both); with `analysis.interval: percentile`, a
bootstrap that resamples each side's seeds apart. Against the fitted trade-off
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


@dataclasses.dataclass(frozen=True)
class Chosen:
    """The cell a schedule or a fixed batch size is read at: its learning rate and, per seed
    (ascending), its steps and examples."""

    lr: float
    steps: np.ndarray
    examples: np.ndarray
    seeds: tuple[int, ...]


def _best_cell(grids: list[LRCurve], how: str) -> Chosen | None:
    """The chosen cell of a batch size's curves; None when no cell was reached by every seed."""
    steps = np.concatenate([g.stack("steps") for g in grids])
    examples = np.concatenate([g.stack("examples") for g in grids])
    lrs = [lr for g in grids for lr in g.lrs]
    choice = choose(steps, how)
    if choice is None:
        return None
    return Chosen(lrs[choice.best], steps[choice.best], examples[choice.best],
                  tuple(grids[0].seeds))


def ratio_interval(mine: np.ndarray, theirs: np.ndarray, paired: bool, method: str,
                   draws: int, rng: np.random.Generator) -> list[float] | None:
    """The 95% interval of mean(mine) / mean(theirs) over seeds. jackknife (pooled likewise):
    the k leave-one-seed-out replicates with seed i left out of both sides (`paired`: the two
    sides hold the same seeds in the same order; None otherwise), log ratio +- t(k-1) se;
    percentile: each side's seeds drawn apart, `draws` times."""
    ratio = float(np.mean(mine) / np.mean(theirs))
    if method == "percentile":
        if len(mine) < 2 and len(theirs) < 2:
            return None
        a = mine[rng.integers(0, len(mine), (draws, len(mine)))].mean(axis=1)
        b = theirs[rng.integers(0, len(theirs), (draws, len(theirs)))].mean(axis=1)
        return [float(v) for v in np.percentile(a / b, [2.5, 97.5])]
    left = intervals.seed_draws(len(mine), "jackknife", 0, None) if paired else None
    if left is None:
        return None
    replicates = [float(np.mean(mine[k]) / np.mean(theirs[k])) for k in left]
    return intervals.from_replicates(ratio, replicates, "jackknife", len(mine))


def _why_none(mine: Chosen, theirs: Chosen, method: str, draws: int) -> str:
    """Why a comparison has no interval."""
    if draws <= 0:
        return "not asked for"
    if len(mine.seeds) < 2 and len(theirs.seeds) < 2:
        return intervals.ONE_SEED
    if method != "percentile" and mine.seeds != theirs.seeds:
        return "the schedule and the batch size hold different seeds: no pairs to leave out"
    return intervals.NO_REPLICATES


def _against(name: str, size: int, mine: Chosen, cells: dict[int, Chosen], method: str,
             draws: int, rng: np.random.Generator) -> dict[str, Any]:
    theirs = cells[size]
    paired = mine.seeds == theirs.seeds
    method = "percentile" if method == "percentile" else "jackknife"
    out: dict[str, Any] = {"against": name, "batch_size": size}
    for key in ("steps", "examples"):
        a, b = getattr(mine, key), getattr(theirs, key)
        out[f"{key}_ratio"] = float(np.mean(a) / np.mean(b))
        out[f"{key}_ratio_ci"] = (ratio_interval(a, b, paired, method, draws, rng)
                                  if draws > 0 else None)
    replicates = draws if method == "percentile" else len(mine.seeds)
    out["interval"] = (intervals.info("seeds", method, replicates) if out["steps_ratio_ci"]
                       else intervals.none(_why_none(mine, theirs, method, draws)))
    return out


def schedule_target(name: str, first_batch: int, table: list[dict], fixed: list[dict],
                    target: dict, how: str, method: str, draws: int, rng: np.random.Generator
                    ) -> dict[str, Any]:
    """One schedule at one target: its learning rate, steps and examples, the comparisons."""
    grids = next(iter(lr_curves(table, target["name"]).values()), [])
    mine = _best_cell(grids, how) if grids else None
    entry: dict[str, Any] = {"target": target["name"], "reached": mine is not None}
    if mine is None:
        return entry
    entry.update(best_lr=mine.lr, steps=float(np.mean(mine.steps)),
                 examples=float(np.mean(mine.examples)),
                 steps_per_seed=[float(v) for v in mine.steps])
    cells = {size: cell for size, g in lr_curves(fixed, target["name"]).items()
             if (cell := _best_cell(g, how)) is not None}
    comparisons = []
    if first_batch in cells:
        comparisons.append(_against("start", first_batch, mine, cells, method, draws, rng))
    if cells:
        fewest_steps = min(cells, key=lambda b: (np.mean(cells[b].steps), b))
        fewest_examples = min(cells, key=lambda b: (np.mean(cells[b].examples), b))
        for against, size in (("fewest_steps", fewest_steps), ("fewest_examples", fewest_examples)):
            comparisons.append(_against(against, size, mine, cells, method, draws, rng))
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
                      targets: list[dict], how: str, method: str, draws: int, seed: int,
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
        entries = [schedule_target(name, first, item["runs"], fixed, t, how, method, draws,
                                   rng)
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
