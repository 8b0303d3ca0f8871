"""The local critical batch size from branched runs (Merrill et al. 2025), read from the folder
`scaling branch` writes.

Branches start from one base run's state at a point along training, each at k x B0, and train
for the same window of examples. A branch (or the base) is judged by its metric averaged over
the last `average` of the window's evaluation points, which sit at the same examples for every
k. Per factor k the learning rate is the best of the grid (the lowest mean over seeds); at
k = 1 the grid holds the base continued (factor 1) and any branches at B0 with the grid's
other factors, so every batch size is judged with the same choice of learning rates. The
local critical batch size at the point is k x B0 for the largest k such that every factor up
to it stays within `tolerance` (relative) of the k = 1 reference: the first factor that falls
behind ends the count, so a lucky larger factor does not count.

Its interval (`local_interval`) inverts one test per factor rather than resampling: a seed's
branch and its base share their data and starting state, so per factor the seeds' paired
differences L_k,s - (1 + tolerance) L_1,s give a Student's t interval on their mean, and the
factor is clearly within (the interval below 0), clearly behind (above 0, or no loss), or
undecided. The lower end counts the factors clearly within up to the first that is not; the
upper end counts every factor up to the first clearly behind. Each end errs only where a
one-sided 97.5% test does, as a two-sided 95% interval's ends do. A percentile bootstrap of
seeds (`percentile`) held its level less often where a factor sits near the tolerance
(tests/test_branch_intervals.py measures both against a known truth).

References:
  Merrill, Arora, Groeneveld, Hajishirzi, "Critical Batch Size Revisited: A Simple Empirical
  Approach to Large-Batch Language Model Training" (2025).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from scaling import store
from scaling.analysis import intervals
from scaling.analysis.points import median_positive
from scaling.analysis.curves import b_noise_at, b_simple_at
from scaling.config import ConfigError
from scaling.store import finite, layout

TOLERANCES = (0.01, 0.02, 0.05, 0.1, 0.2)  # also read at these, to show how much rests on it


def window_value(rows: list[dict], steps: list[int], metric: str, average: int) -> float:
    """The mean of `metric` at the last `average` of the window's evaluation `steps`; NaN when
    one is missing or not finite (a branch that diverged)."""
    at = {r["step"]: r.get(metric) for r in rows}
    values = [at.get(s) for s in steps[-average:]]
    return float(np.mean(values)) if all(finite(v) for v in values) else math.nan


def local_critical_batch(factors: list[int], losses: np.ndarray, reference: float,
                         tolerance: float, base_batch: int) -> tuple[int | None, bool]:
    """(k x B0 for the largest k whose every factor up to it is within tolerance, whether every
    factor was); None without a finite reference. A factor whose loss is NaN (diverged) falls
    behind. k = 1 is the reference itself, so the answer is at least B0."""
    if not math.isfinite(reference):
        return None, False
    best = 1
    for k, loss in sorted(zip(factors, losses)):
        if k == 1:
            continue
        if not (math.isfinite(loss) and loss <= reference * (1.0 + tolerance)):
            return best * base_batch, False
        best = max(best, k)
    return best * base_batch, True


def _point_losses(base: dict[int, list[dict]], branches: list[dict], point: int,
                  plan: dict, metric: str, average: int
                  ) -> tuple[np.ndarray, dict[int, dict[float, np.ndarray]], dict[float, float]]:
    """(the base's value per seed, per factor and lr factor the branches' values per seed, the
    learning rate of each (factor, lr factor)), seeds in the base's order."""
    seeds = sorted(base)
    w = plan["window"] // plan["batch_size"]
    base_steps = [point + j * w // plan["evals"] for j in range(1, plan["evals"] + 1)]
    base_values = np.array([window_value(base[s], base_steps, metric, average) for s in seeds])
    cells: dict[int, dict[float, np.ndarray]] = {}
    lrs: dict[tuple[int, float], float] = {}
    for rec in branches:
        cfg = rec["config"]
        wanted = (cfg["factor"] in plan.get("factors", [cfg["factor"]]) or cfg["factor"] == 1) \
            and cfg["lr_factor"] in plan.get("lr_grid", [cfg["lr_factor"]]) \
            and cfg.get("lr_rule") == plan.get("lr_rule", cfg.get("lr_rule"))
        if cfg["point"] != point or cfg["seed"] not in base or not wanted:
            continue  # another point, or a branch the config no longer asks for
        offsets = [j * cfg["window_steps"] // plan["evals"] for j in range(1, plan["evals"] + 1)]
        steps = [cfg["start_step"] + o for o in offsets]
        value = (window_value(rec["metrics"], steps, metric, average)
                 if rec["summary"]["status"] == "completed" else math.nan)
        row = cells.setdefault(cfg["factor"], {}).setdefault(
            cfg["lr_factor"], np.full(len(seeds), math.nan))
        row[seeds.index(cfg["seed"])] = value
        lrs[(cfg["factor"], cfg["lr_factor"])] = cfg["learning_rate"]
    return base_values, cells, lrs


def _best_per_factor(cells: dict[int, dict[float, np.ndarray]], idx: np.ndarray
                     ) -> tuple[list[int], np.ndarray, list[float | None]]:
    """Per factor (ascending), the lowest mean over the seeds `idx` among its learning rates,
    and which lr factor gave it (NaN/None when every one has a missing seed)."""
    factors, losses, picked = sorted(cells), [], []
    for k in factors:
        means = {f: float(np.mean(v[idx])) for f, v in cells[k].items()}
        ok = {f: m for f, m in means.items() if math.isfinite(m)}
        f = min(ok, key=lambda f: (ok[f], f)) if ok else None
        losses.append(ok[f] if f is not None else math.nan)
        picked.append(f)
    return factors, np.array(losses), picked


PAIRED = "paired t per factor"  # the interval record's method name for local_interval's default


def local_interval(cells: dict[int, dict[float, np.ndarray]], tol: float, b0: int,
                   method: str | None, num: int, rng: np.random.Generator
                   ) -> tuple[list[float] | None, dict[str, Any]]:
    """The local critical batch size's 95% interval over seeds and its `interval` record.

    `paired` (the default): per factor, with the learning rates chosen on every seed, the
    seeds' differences L_k,s - (1 + tol) L_1,s and t(n-1) times their standard error; the
    lower end is k x B0 for the largest k whose every factor up to it is clearly within, the
    upper end for the largest k with no factor up to it clearly behind (a factor without a
    loss is behind). `percentile`: the 2.5 and 97.5 percentiles of the point reading over
    `num` bootstrap draws of seeds. `method` None: not asked for."""
    n = len(next(iter(cells[1].values())))
    if method is None:
        return None, intervals.none("not asked for")
    if n < 2:
        return None, intervals.none(intervals.ONE_SEED)
    if method == "percentile":
        draws = []
        for _ in range(num):
            fs, ls, _ = _best_per_factor(cells, rng.integers(0, n, n))
            draws.append(local_critical_batch(fs, ls, float(ls[fs.index(1)]), tol, b0)[0])
        kept = [d for d in draws if d is not None]
        return ([float(v) for v in np.percentile(kept, [2.5, 97.5])] if kept else None,
                intervals.info("seeds", "percentile", len(kept)) if kept
                else intervals.none(intervals.NO_REPLICATES))
    factors, _, picked = _best_per_factor(cells, np.arange(n))
    reference = cells[1][picked[factors.index(1)]] if picked[factors.index(1)] is not None \
        else np.full(n, math.nan)
    if not np.all(np.isfinite(reference)):
        return None, intervals.none(intervals.NO_REPLICATES)
    low = high = 1
    low_open = high_open = True
    for k, f in zip(factors, picked):
        if k == 1:
            continue
        diff = cells[k][f] - (1 + tol) * reference if f is not None else np.full(n, math.nan)
        mean = float(np.mean(diff))
        half = intervals.t975(n - 1) * float(np.std(diff, ddof=1)) / math.sqrt(n)
        low_open = low_open and math.isfinite(mean) and mean + half <= 0
        high_open = high_open and math.isfinite(mean) and mean - half <= 0
        low, high = (k if low_open else low), (k if high_open else high)
    return [float(low * b0), float(high * b0)], intervals.info("seeds", PAIRED, n)


def analyze_point(base: dict[int, list[dict]], branches: list[dict], point: int, plan: dict,
                  settings: dict, bootstrap: int, rng: np.random.Generator) -> dict[str, Any]:
    """One point of analysis.json "branching": the base's loss, each factor's best branch, the
    local critical batch size with its interval, and the base's noise scales at the point."""
    metric, average, tol, b0 = (settings["metric"], settings["average"], settings["tolerance"],
                                plan["batch_size"])
    base_values, cells, lrs = _point_losses(base, branches, point, plan, metric, average)
    n = len(base_values)
    cells.setdefault(1, {})[1.0] = base_values  # the base continued: k = 1 at its own rate
    lrs[(1, 1.0)] = plan["learning_rate"]
    factors, losses, picked = _best_per_factor(cells, np.arange(n))
    reference = float(losses[factors.index(1)])
    local, at_edge = local_critical_batch(factors, losses, reference, tol, b0)
    ci, how = (None, intervals.none("a lower bound: every factor tried keeps up")) if at_edge \
        else local_interval(cells, tol, b0, "paired" if bootstrap else None, bootstrap, rng)
    by_tolerance = {f"{t:g}": local_critical_batch(factors, losses, reference, t, b0)[0]
                    for t in sorted({tol, *TOLERANCES})}
    noise = {key: median_positive([at(base[s], point) for s in sorted(base)])
             for key, at in (("b_simple", b_simple_at), ("b_noise", b_noise_at))}
    grid = sorted({g for cell in cells.values() for g in cell})
    rows = [{"factor": k, "batch_size": k * b0, "best_lr_factor": f,
             "best_lr": None if f is None else lrs[(k, f)],
             "best_at_grid_edge": len(grid) > 1 and f in (grid[0], grid[-1]),
             "loss": _num(loss), "ratio": _num(loss / reference) if reference else None,
             "within": bool(math.isfinite(loss) and loss <= reference * (1 + tol)),
             "by_lr_factor": {f"{g:g}": _num(float(np.mean(v))) for g, v in sorted(cells[k].items())}}
            for k, f, loss in zip(factors, picked, losses)]
    return {"step": point, "examples": point * b0, "reference_loss": _num(reference),
            "base_loss": _num(float(np.mean(base_values))),
            "base_loss_sem": _num(float(np.std(base_values, ddof=1) / math.sqrt(n))) if n > 1 else None,
            "branches": [r for r in rows if r["factor"] != 1], "reference": rows[0], "local_b_crit": local, "at_edge": at_edge,
            "local_b_crit_ci": ci,
            # the upper end at the largest factor: no factor tried is clearly behind
            "local_b_crit_ci_open_above": bool(ci and ci[1] >= factors[-1] * b0),
            "interval": how,
            "local_b_crit_by_tolerance": by_tolerance,
            "b_simple": noise["b_simple"], "b_noise": noise["b_noise"],
            "local_over_b_simple": (local / noise["b_simple"]
                                    if local and noise["b_simple"] else None)}


def _num(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def is_branch_folder(out: str | Path) -> bool:
    return (Path(out) / layout.BRANCH_YAML).is_file()


def read_settings(out: Path) -> tuple[dict, dict]:
    """(the base plan of plan.json, the branch section's reading settings) of a branch folder."""
    plan = json.loads((out / layout.BRANCH_PLAN).read_text())
    cfg = yaml.safe_load((out / layout.BRANCH_YAML).read_text()) or {}
    section = cfg.get("branch") or {}
    settings = {"tolerance": section.get("tolerance", 0.01),
                "metric": section.get("metric", "eval_loss"),
                "average": section.get("average", 1), "lr_rule": section.get("lr_rule"),
                "evals": plan["evals"]}
    plan = {**plan, "factors": section.get("factors", []), "lr_grid": section.get("lr_grid", [1.0]),
            "lr_rule": section.get("lr_rule", "linear")}
    return plan, settings


def analyze_branches(out: str | Path, bootstrap: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The analysis.json of a `scaling branch` folder: per point, the local critical batch
    size against the base's noise scales."""
    out = Path(out)
    if not is_branch_folder(out) or not (out / layout.BRANCH_PLAN).is_file():
        raise ConfigError(f"{out}: not a folder written by scaling branch (no branch.yaml and "
                          "plan.json)")
    plan, settings = read_settings(out)
    base = {r["config"]["seed"]: r["metrics"] for r in store.load(layout.base_dir(out))}
    if not base:
        raise ConfigError(f"{layout.base_dir(out)}: holds no finished base run; run scaling "
                          "branch first")
    branches = store.load(layout.branches_dir(out))  # its runs/ or runs.tar.xz; none yet: []
    points = [analyze_point(base, branches, p, plan, settings, bootstrap,
                            np.random.default_rng([seed, i]))
              for i, p in enumerate(plan["points"])]
    tokens = any(finite(r.get("tokens")) for rows in base.values() for r in rows)
    return {"version": 2, "kind": "branch",
            "branching": {"unit": "sequences" if tokens else "examples",
                          "base": {"batch_size": plan["batch_size"],
                                   "learning_rate": plan["learning_rate"],
                                   "seeds": sorted(base)},
                          "window": plan["window"], **settings,
                          "points": points, "noise_scale_agreement": agreement(points)}}


def agreement(points: list[dict]) -> dict[str, Any] | None:
    """How well B_simple tracks the local critical batch size across points: the ratio's
    spread, and the correlation of their logs (None with fewer than 3 usable points)."""
    pairs = [(p["local_b_crit"], p["b_simple"]) for p in points
             if p["local_b_crit"] and p["b_simple"] and not p["at_edge"]]
    if len(pairs) < 3:
        return None
    local, simple = np.log(np.array(pairs, float)).T
    ratio = np.exp(local - simple)
    corr = (float(np.corrcoef(local, simple)[0, 1])
            if np.std(local) > 0 and np.std(simple) > 0 else None)
    return {"points": len(pairs), "ratio_median": float(np.median(ratio)),
            "ratio_min": float(ratio.min()), "ratio_max": float(ratio.max()),
            "log_correlation": corr}
