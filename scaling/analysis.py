"""From run folders to the numbers of the papers: steps to target, best LR, S(B) fit, B_crit.

For each target: the steps each run needs (interpolated between evaluation points), the best
learning rate per batch size (mean over seeds), the trade-off S(B) = S_min + E_min / B fitted in
log space with a bootstrap interval on B_crit = E_min / S_min, the scaling regimes of Shallue et
al. (2018) and the noise scale at the crossing. Then the learning-rate rules against the
measured optima (DESIGN.md section 3). Output: the analysis.json contract (version 1).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from scaling import store
from scaling.config import AXES, ConfigError, parse_target
from scaling.curves import b_noise_at, b_simple_at, examples_at, finite, steps_to_target
from scaling.lr_analysis import lr_rules
from scaling.tradeoff import fit_tradeoff, regimes


# ---------------------------------------------------------------- grids of runs


@dataclass
class Grid:
    """One batch size at one target: per grid LR (ascending), the per-seed values (NaN: not reached)."""

    lrs: list[float] = field(default_factory=list)
    steps: list[np.ndarray] = field(default_factory=list)
    examples: list[np.ndarray] = field(default_factory=list)
    b_simple: list[np.ndarray] = field(default_factory=list)
    b_noise: list[np.ndarray] = field(default_factory=list)
    diverged: list[bool] = field(default_factory=list)
    hyperparameters: dict[str, float] = field(default_factory=dict)  # list-valued axes only

    def means(self) -> np.ndarray:
        """Mean steps over seeds per LR; NaN unless every seed reached the target."""
        return np.array([s.mean() for s in self.steps])

    def best(self) -> int | None:
        means = self.means()
        return None if np.all(np.isnan(means)) else int(np.nanargmin(means))


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def varying_hyperparameters(records: list[dict]) -> list[str]:
    """Optimizer scalars (config.AXES) that take more than one value across the runs."""
    values: dict[str, set] = {k: set() for k in AXES}
    for rec in records:
        for key in AXES:
            values[key].add((rec["config"].get("optimizer") or {}).get(key))
    return [k for k in AXES if len(values[k]) > 1]


def run_table(records: list[dict], targets: list[str]) -> list[dict]:
    """One entry per run: identity, status and the interpolated steps/examples/noise per target."""
    table, axes = [], varying_hyperparameters(records)
    for rec in records:
        cfg, rows = rec["config"], rec["metrics"]
        entry = {"run_id": rec["run_id"], "batch_size": int(cfg["batch_size"]),
                 "learning_rate": float(cfg["learning_rate"]), "seed": int(cfg["seed"]),
                 "hyperparameters": {k: cfg["optimizer"][k] for k in axes},
                 "status": rec["summary"].get("status"), "steps_to_target": {},
                 "examples_to_target": {}, "b_simple": {}, "b_noise": {}}
        for name in targets:
            step = None if entry["status"] == "diverged" else steps_to_target(rows, name)
            entry["steps_to_target"][name] = step
            entry["examples_to_target"][name] = (
                None if step is None else examples_at(rows, step, entry["batch_size"]))
            entry["b_simple"][name] = None if step is None else b_simple_at(rows, step)
            entry["b_noise"][name] = None if step is None else b_noise_at(rows, step)
        table.append(entry)
    return table


def grids(table: list[dict], target: str) -> dict[int, Grid]:
    """Per batch size, the runs by learning rate (seeds stacked) for one target. With optimizer
    scalars as grid axes, each combination is its own grid and the batch size keeps the one
    with the fewest steps: those scalars are tuned per batch size like the learning rate."""
    cells: dict[int, dict[tuple, dict[float, list[dict]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for run in table:
        combo = tuple(sorted(run["hyperparameters"].items()))
        cells[run["batch_size"]][combo][run["learning_rate"]].append(run)
    return {size: min((_grid(by_lr, dict(combo), target) for combo, by_lr in combos.items()),
                      key=_best_steps)
            for size, combos in sorted(cells.items())}


def _grid(by_lr: dict[float, list[dict]], hyperparameters: dict, target: str) -> Grid:
    grid = Grid(hyperparameters=hyperparameters)
    for lr in sorted(by_lr):
        runs = by_lr[lr]
        grid.lrs.append(lr)
        grid.steps.append(np.array([_nan(r["steps_to_target"][target]) for r in runs]))
        grid.examples.append(np.array([_nan(r["examples_to_target"][target]) for r in runs]))
        grid.b_simple.append(np.array([_nan(r["b_simple"][target]) for r in runs]))
        grid.b_noise.append(np.array([_nan(r["b_noise"][target]) for r in runs]))
        grid.diverged.append(any(r["status"] == "diverged" for r in runs))
    return grid


def _best_steps(grid: Grid) -> float:
    best = grid.best()
    return math.inf if best is None else float(grid.means()[best])


def refine_lr(lrs: np.ndarray, steps: np.ndarray, best: int) -> float | None:
    """Vertex of the parabola in log lr through log steps at the best LR and its two neighbours;
    None at the grid's edge, with an unreached neighbour, or when it does not open upward."""
    if best == 0 or best == len(lrs) - 1:
        return None
    x, y = np.log(lrs[best - 1:best + 2]), np.asarray(steps[best - 1:best + 2], float)
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        return None
    a, b, _ = np.polyfit(x, np.log(y), 2)
    if a <= 0:
        return None
    return float(np.exp(np.clip(-b / (2 * a), x[0], x[2])))


def _nanmean(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


def best_point(size: int, grid: Grid) -> dict | None:
    """The analysis.json point for one batch size, None when no LR reached the target."""
    best = grid.best()
    if best is None:
        return None
    means, lrs = grid.means(), np.array(grid.lrs)
    edge = "low" if best == 0 else "high" if best == len(lrs) - 1 else None
    return {"batch_size": size, "best_lr": float(lrs[best]), "hyperparameters": grid.hyperparameters,
            "refined_lr": refine_lr(lrs, means, best), "at_edge": edge,
            "steps": float(means[best]), "examples": float(grid.examples[best].mean()),
            "num_lrs": len(lrs), "num_reached": int(np.sum(np.isfinite(means))),
            "num_diverged": int(sum(grid.diverged)),
            "b_simple": _nanmean(grid.b_simple[best]), "b_noise": _nanmean(grid.b_noise[best])}


# ---------------------------------------------------------------- trade-off fit with interval


def _percentiles(samples: list[float]) -> list[float] | None:
    return [float(v) for v in np.percentile(samples, [2.5, 97.5])] if samples else None


def _fit_samples(sizes: np.ndarray, steps: np.ndarray) -> tuple[float, float] | None:
    ok = np.isfinite(steps) & (steps > 0)
    if len(np.unique(sizes[ok])) < 2:
        return None
    return fit_tradeoff(sizes[ok], steps[ok])


def bootstrap_fits(grid_by_size: dict[int, Grid], points: list[dict], num: int,
                   rng: np.random.Generator) -> list[tuple[float, float]]:
    """Refits of S(B) on resampled data: seeds within each (B, LR) cell when there are 2 or
    more seeds, else the (B, steps) points themselves (needs 3 or more points)."""
    if num <= 0:
        return []
    sizes = np.array([p["batch_size"] for p in points], float)
    if max(len(s) for g in grid_by_size.values() for s in g.steps) < 2:
        if len(points) < 3:
            return []
        steps = np.array([p["steps"] for p in points])
        draws = (rng.integers(0, len(points), len(points)) for _ in range(num))
        fits = (_fit_samples(sizes[i], steps[i]) for i in draws)
        return [f for f in fits if f is not None]
    best = np.empty((len(points), num))
    for row, p in enumerate(points):
        per_lr = [seeds[rng.integers(0, len(seeds), (num, len(seeds)))].mean(axis=1)
                  for seeds in grid_by_size[p["batch_size"]].steps]
        best[row] = np.nan_to_num(np.array(per_lr), nan=np.inf).min(axis=0)
    best[np.isinf(best)] = np.nan
    fits = (_fit_samples(sizes, best[:, k]) for k in range(num))
    return [f for f in fits if f is not None]


def fit_with_interval(grid_by_size: dict[int, Grid], points: list[dict], num: int,
                      rng: np.random.Generator) -> dict | None:
    """The analysis.json "fit" object, None with fewer than 2 batch sizes reaching the target."""
    if len(points) < 2:
        return None
    sizes = np.array([p["batch_size"] for p in points], float)
    steps = np.array([p["steps"] for p in points])
    s_min, e_min = fit_tradeoff(sizes, steps)
    residual = np.log(s_min + e_min / sizes) - np.log(steps)
    samples = bootstrap_fits(grid_by_size, points, num, rng)
    return {"s_min": s_min, "e_min": e_min, "b_crit": e_min / s_min,
            "s_min_ci": _percentiles([s for s, _ in samples]),
            "e_min_ci": _percentiles([e for _, e in samples]),
            "b_crit_ci": _percentiles([e / s for s, e in samples]),
            "num_points": len(points), "rms_log_residual": float(np.sqrt(np.mean(residual**2))),
            "bootstrap": len(samples)}


# ---------------------------------------------------------------- regimes and noise scale


def median_positive(values: list[float | None]) -> float | None:
    """Median of the positive values, None when there are none: one batch size's estimate can be
    far off (a few noisy measurements near its crossing) without moving the summary."""
    kept = [v for v in values if v is not None and v > 0]
    return float(np.median(kept)) if kept else None


# ---------------------------------------------------------------- whole sweep


def _sweep_yaml(out: Path) -> dict:
    path = out / "sweep.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def _check_metrics(records: list[dict], targets: list[str]) -> None:
    recorded = {k for rec in records for row in rec["metrics"] for k, v in row.items() if finite(v)}
    for name in targets:
        metric = parse_target(name)[0]
        if metric not in recorded:
            raise ConfigError(f"targets: {name!r} uses {metric!r}, which no run in this folder "
                              f"recorded; expected one of {', '.join(sorted(recorded))}")


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


def analyze_target(name: str, table: list[dict], bootstrap: int,
                   rng: np.random.Generator) -> tuple[dict, dict[int, Grid]]:
    """One entry of analysis.json "targets", and the grids it was computed from."""
    metric, op, value = parse_target(name)
    by_size = grids(table, name)
    points = [p for size, g in by_size.items() if (p := best_point(size, g)) is not None]
    timed = [p for p in points if p["steps"] > 0]  # a target met at step 0 says nothing on S(B)
    fit = fit_with_interval(by_size, timed, bootstrap, rng)
    b_simple = median_positive([p["b_simple"] for p in points])
    entry = {"name": name, "metric": metric, "op": op, "value": value, "points": points,
             "unreached_batch_sizes": [s for s, g in by_size.items() if g.best() is None],
             "fit": fit, "s_min": fit and fit["s_min"], "e_min": fit and fit["e_min"],
             "b_crit": fit and fit["b_crit"], "b_crit_ci": fit and fit["b_crit_ci"],
             "regimes": regimes([p["batch_size"] for p in timed], [p["steps"] for p in timed]),
             "b_simple": b_simple, "b_noise": median_positive([p["b_noise"] for p in points]),
             "b_simple_over_b_crit": b_simple / fit["b_crit"] if fit and b_simple else None}
    return entry, by_size


def analyze(out: str | Path, targets: list[str] | None = None, bootstrap: int = 1000,
            seed: int = 0) -> dict:
    """Read the finished runs in `out` and return the analysis.json dict (version 1).

    The learning-rate rules are judged at the first target that some batch size reached.
    """
    out = Path(out)
    if bootstrap < 0:
        raise ConfigError(f"bootstrap: got {bootstrap!r}, expected a non-negative integer")
    records = store.load(out)
    if not records:
        raise ConfigError(f"{out}: holds no finished runs (no runs/*/summary.json); "
                          "expected the --out folder of a sweep")
    cfg = _sweep_yaml(out)
    targets = list(targets or cfg.get("targets") or records[0]["config"].get("targets") or [])
    if not targets:
        raise ConfigError(f"targets: {out} names none; expected at least one, e.g. eval_loss<=1.0")
    _check_metrics(records, targets)
    table = run_table(records, targets)
    results = [analyze_target(t, table, bootstrap, np.random.default_rng([seed, i]))
               for i, t in enumerate(targets)]
    rules_entry, rules_grids = next(((e, g) for e, g in results if e["points"]), results[0])
    runs = [{k: r[k] for k in ("run_id", "batch_size", "learning_rate", "seed", "hyperparameters",
                               "status", "steps_to_target", "examples_to_target")} for r in table]
    return {"version": 1, "sweep": _sweep_section(out, cfg, records, table),
            "primary_target": targets[0], "runs": runs, "targets": [e for e, _ in results],
            "lr_rules": lr_rules(rules_entry["name"], rules_entry["points"], rules_grids)}


def write(out: str | Path, analysis: dict) -> Path:
    """Write <out>/analysis.json atomically (non-finite numbers become null)."""
    path = Path(out) / "analysis.json"
    store.write_json(path, analysis)
    return path


def _fmt(value: float | None, spec: str = ".4g") -> str:
    return "-" if value is None else format(value, spec)


def summary_table(analysis: dict) -> str:
    """Plain-text digest for the terminal: best LR and steps per batch size, then the fit."""
    lines = []
    for t in analysis["targets"]:
        lines += [f"target {t['name']}",
                  f"  {'batch':>7} {'best lr':>10} {'edge':>5} {'steps':>10} {'examples':>12}"]
        lines += [f"  {p['batch_size']:>7} {p['best_lr']:>10.4g} {p['at_edge'] or '':>5} "
                  f"{p['steps']:>10.1f} {p['examples']:>12.0f}" for p in t["points"]]
        if t["unreached_batch_sizes"]:
            lines.append(f"  not reached at B = {', '.join(map(str, t['unreached_batch_sizes']))}")
        ci = t["b_crit_ci"]
        ci_text = f" [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else ""
        lines.append(f"  S_min {_fmt(t['s_min'])} steps, E_min {_fmt(t['e_min'])} examples, "
                     f"B_crit {_fmt(t['b_crit'])}{ci_text}, B_simple {_fmt(t['b_simple'])}")
    if analysis["lr_rules"]:
        lines.append(analysis["lr_rules"]["summary"])
    return "\n".join(lines)
