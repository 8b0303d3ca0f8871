"""Steps to target on the NQM against its closed form: which rule for "reached" and which
learning-rate selection recover the exact critical batch size where losses are noisy.

For each spectrum one sweep trains every batch size x learning rate x seed to its budget (no
stop at targets, so every rule can be read from the same runs). The seeds are then cut into
disjoint groups of n (n = 2, 3, 5), and each group is analysed as a sweep of its own under
every reading (rule, window) and selection, on three batch grids and two learning-rate grids
(the sweep's 10 rates, and every other one). Each B_crit is divided by the closed form's: the
best constant learning rate of the same grid (the estimator's own error), and of a fine search
(the grid's coarseness on top). Rule ema is judged against the closed form of the moving
average (decay 0.9), a different quantity.

    python experiments/steps_to_target.py                   # ~25 min on 2 cores
    python experiments/steps_to_target.py --spectra noise   # one spectrum
    python experiments/steps_to_target.py --search          # the search arm only
    python experiments/steps_to_target.py --search --render # search.md again from search.json

Writes results/steps_to_target/{results.json, report.md}; the run files stay under
results/steps_to_target/<spectrum>/runs (not committed; a rerun resumes them).

The search arm (--search) is the sweep as a user runs it: per spectrum, a coarse grid of five
rates half a decade apart (0.01 to 1, below the optimum at the large batches), the
learning-rate search and the stopping of dominated runs on, SEARCH_SEEDS seeds, the default
reading, B_crit from the analysis (the optimum read between the rates tried) against the
closed form's optimum over a fine grid up to the stability bound. It writes
results/steps_to_target/{search.json, search.md}; its runs under <spectrum>-search/runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Callable

import numpy as np

from scaling import config as config_mod, store
from scaling.analysis import analyze, intervals
from scaling.analysis.fit import fit_with_interval
from scaling.analysis.nqm_reference import closed_form_b_crit
from scaling.analysis.points import best_point
from scaling.analysis.table import lr_curves, run_table
from scaling.config.targets import Reach
from scaling.sweep import runner
from scaling.tasks.nqm import NQMOptions, spectra

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "steps_to_target"
SIZES = [2, 4, 8, 16, 32, 64, 128, 256, 512]
LRS = [float(v) for v in np.geomspace(0.1, 1.9, 10)]
SEEDS = list(range(15))
MAX_STEPS = 3000
EMA_DECAY = 0.9
FINE_LRS = 150
# Spectra: curvature h_i = i^-h_power, per-example noise variance c_i = c_scale i^-c_power.
SPECTRA = {
    "noise": ({"dim": 100, "h_power": 1.0, "c_power": 1.0}, (0.2, 0.1, 0.05),
              "h = c = 1/i: the noise sits in the first coordinates"),
    "peaked": ({"dim": 100, "h_power": 1.0, "c_power": 2.0}, (0.2, 0.1, 0.05),
               "h = 1/i, c = 1/i^2: nearly all the noise in the first coordinate"),
    "spread": ({"dim": 200, "h_power": 0.8, "c_power": 0.0, "c_scale": 0.03}, (0.1, 0.05, 0.02),
               "h = i^-0.8, c = 0.03: the noise spread over every coordinate (the nqm study)"),
}
BATCH_GRIDS = {"2-512 x2": SIZES, "8-512 x2": SIZES[2:], "2-512 x4": SIZES[::2]}
LR_GRIDS = {"10 rates": LRS, "5 rates": LRS[::2]}
SEED_COUNTS = (2, 3, 5)
READINGS = {"first": Reach("first"), "sustained 1.5": Reach("sustained", 1.5),
            "smoothed 1.25": Reach("smoothed", 1.25), "smoothed 1.5": Reach("smoothed", 1.5),
            "smoothed 2": Reach("smoothed", 2.0), "ema 0.9": Reach("ema")}
SELECTIONS = ("min", "crossfit")
DEFAULT = ("smoothed 1.5", "crossfit")  # the analysis's default reading and selection
INTERVAL = ("the 95% interval over the group's seeds (leave-one-seed-out jackknife, the "
            "analysis's default)")
BOOTSTRAP = 200


COARSE_LRS = [0.01, 0.0316228, 0.1, 0.316228, 1.0]
SEARCH_SEEDS = [0, 1, 2]


def _nqm_sweep(name: str, task: dict, targets: list[str], *overrides: str) -> config_mod.Config:
    """The study's NQM sweep with SGD (batch sizes SIZES, MAX_STEPS steps), then `overrides`."""
    return config_mod.from_dict(config_mod.apply_overrides({
        "name": f"steps_to_target-{name}", "task": {"name": "nqm", **task},
        "optimizer": {"name": "sgd"}, "schedule": {"name": "constant"},
        "batch": {"sizes": SIZES}, "budget": {"max_steps": MAX_STEPS}, "targets": targets,
        "eval": {"every": 2, "points_per_decade": 20}, "train": {"chunk_steps": 500},
        "parallel": {"data": 1, "runs": 1}, "gns": {"enabled": False}}, list(overrides)))


def sweep_config(name: str, task: dict, targets: list[str]) -> config_mod.Config:
    """Every rate of the grid trained to the budget (no search: the grids are cut afterwards)."""
    return _nqm_sweep(name, task, targets, f"learning_rate={{values: {LRS}, search: false}}",
                      f"seeds={SEEDS}", f"eval.ema_decay={EMA_DECAY}",
                      "train.stop_at_targets=false")


def exact(options, value: float, sizes: list[int], lrs: list[float], ema: bool) -> float | None:
    """B_crit of the closed form: fewest expected steps over `lrs` per batch size, fitted."""
    return closed_form_b_crit(options, sizes, value, MAX_STEPS, np.asarray(lrs),
                              EMA_DECAY if ema else None)["b_crit"]


def references(options, targets: list[float]) -> dict:
    """Closed-form B_crit per (target, batch grid, LR grid, plain/ema); 'fine' is the search."""
    out = {}
    for (ti, value), (bg, sizes), ema in itertools.product(
            enumerate(targets), BATCH_GRIDS.items(), (False, True)):
        for lg, lrs in LR_GRIDS.items():
            out[ti, bg, lg, ema] = exact(options, value, sizes, lrs, ema)
        out[ti, bg, "fine", ema] = exact(options, value, sizes,
                                         list(np.geomspace(min(LRS), max(LRS), FINE_LRS)), ema)
    return out


def measure(table: list[dict], target: str, sizes: list[int], lrs: list[float], seeds: list[int],
            how: str, bootstrap: int, rng: np.random.Generator) -> tuple[float | None, list | None]:
    """(B_crit, its interval) of the runs with these batch sizes, learning rates and seeds."""
    keep = set(sizes), {round(lr, 12) for lr in lrs}, set(seeds)
    runs = [r for r in table if r["batch_size"] in keep[0]
            and round(r["learning_rate"], 12) in keep[1] and r["seed"] in keep[2]]
    by_size = lr_curves(runs, target)
    points = [p for b, g in by_size.items() if (p := best_point(b, g, how))]
    points = [p for p in points if p["steps"] > 0]
    fit = fit_with_interval(by_size, points, bootstrap, rng, how)
    return (fit["b_crit"], fit["b_crit_ci"]) if fit else (None, None)


def search_config(name: str, task: dict, targets: list[str]) -> config_mod.Config:
    """The sweep as a user runs it: a coarse grid, the search and stopping on (the defaults)."""
    return _nqm_sweep(f"{name}-search", task, targets, f"learning_rate.values={COARSE_LRS}",
                      f"seeds={SEARCH_SEEDS}")


def _targets(name: str) -> tuple[NQMOptions, list[float], list[str]]:
    """A spectrum's NQM options, its targets' values and their names."""
    task, fractions, _ = SPECTRA[name]
    options = config_mod.from_dict({"task": {"name": "nqm", **task}, "budget": {"max_steps": 1},
                                    "learning_rate": {"values": [0.1]}}).task.options
    h, _ = spectra(options)
    start_loss = 0.5 * float(np.sum(h)) * options.init_scale ** 2
    values = [f * start_loss for f in fractions]
    return options, values, [f"eval_loss<={v:.6g}" for v in values]


def search_arm(name: str) -> dict:
    """The search arm of one spectrum: per target, B_crit and its interval against the fine
    closed form, with the runs and examples trained."""
    options, values, names = _targets(name)
    out = OUT / f"{name}-search"
    runner.run(search_config(name, SPECTRA[name][0], names), out, quiet=True)
    result = analyze.analyze(out, bootstrap=BOOTSTRAP)
    records = store.load(out)
    rows = []
    for t, value in zip(result["targets"], values):
        rows.append({"target": t["name"], "b_crit": _round(t["b_crit"]),
                     "ci": t["b_crit_ci"] and [_round(v) for v in t["b_crit_ci"]],
                     "interval": intervals.describe(t["interval"]),
                     "exact_fine": _round(closed_form_b_crit(options, SIZES, value,
                                                             MAX_STEPS)["b_crit"])})
    return {"spectrum": name, "runs": len(records), "train_s": round(store.training_seconds(records), 1),
            "examples": int(sum(r["summary"]["examples"] for r in records)),
            "cost": result.get("cost"), "rows": rows}


def _text(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.3f}"


def _intervals_named(results: list[dict]) -> str:
    """What the search arm's intervals are, as the analysis recorded them (one line each kind)."""
    kinds = sorted({r["interval"] for res in results for r in res["rows"]})
    return "; ".join(kinds)


def search_markdown(results: list[dict]) -> str:
    lines = ["# Steps to target with the learning-rate search", "",
             "Generated by `python experiments/steps_to_target.py --search`. Per spectrum one "
             f"sweep as a user runs it: batch sizes {SIZES[0]}..{SIZES[-1]}, a first grid of "
             f"{len(COARSE_LRS)} rates {COARSE_LRS[0]:g}..{COARSE_LRS[-1]:g} half a decade apart, "
             "the search and the stopping of dominated runs on (the defaults), "
             f"{len(SEARCH_SEEDS)} seeds, the default reading. Exact: the closed form's fewest "
             "steps over a fine grid up to the stability bound. Intervals: "
             f"{_intervals_named(results)}.", "",
             "| spectrum | target | B_crit [interval] | exact (fine) | ratio | runs | "
             "examples trained | training |", "|---|---|---|---|---|---|---|---|"]
    for res in results:
        for r in res["rows"]:
            ratio = _text(r["b_crit"] / r["exact_fine"] if r["b_crit"] and r["exact_fine"] else None)
            ci = f" [{r['ci'][0]:.4g}, {r['ci'][1]:.4g}]" if r["ci"] else ""
            found = "-" if r["b_crit"] is None else f"{r['b_crit']:.4g}{ci}"
            lines.append(f"| {res['spectrum']} | {r['target']} | {found} | "
                         f"{r['exact_fine']:.4g} | {ratio} | {res['runs']} | "
                         f"{res['examples']:,} | {res['train_s'] / 60:.1f} min |")
    held = [r["ci"][0] <= r["exact_fine"] <= r["ci"][1] for res in results for r in res["rows"]
            if r["ci"] and r["exact_fine"]]
    return "\n".join(lines + ["", f"The interval holds the exact value at {sum(held)} of "
                               f"{len(held)} targets.", ""])


def study(name: str) -> dict:
    task, fractions, about = SPECTRA[name]
    options, values, names = _targets(name)
    out = OUT / name
    runner.run(sweep_config(name, task, names), out, quiet=True)
    refs = references(options, values)
    records = store.load(out)
    train_s = store.training_seconds(records)
    rows, rng = [], np.random.default_rng(0)
    for reading, reach in READINGS.items():
        table = run_table(records, names, reach)
        ema = reach.rule == "ema"
        for (ti, target), (bg, sizes), (lg, lrs), n, how in itertools.product(
                enumerate(names), BATCH_GRIDS.items(), LR_GRIDS.items(), SEED_COUNTS, SELECTIONS):
            bootstrap = BOOTSTRAP if (reading, how) in (DEFAULT, ("first", "min")) else 0
            for g in range(len(SEEDS) // n):
                b_crit, ci = measure(table, target, sizes, lrs, SEEDS[g * n:(g + 1) * n], how,
                                     bootstrap, rng)
                rows.append({"reading": reading, "selection": how, "target": ti, "batch_grid": bg,
                             "lr_grid": lg, "seeds": n, "group": g, "b_crit": _round(b_crit),
                             "ci": ci and [_round(v) for v in ci],
                             "exact_grid": _round(refs[ti, bg, lg, ema]),
                             "exact_fine": _round(refs[ti, bg, "fine", ema])})
    return {"spectrum": name, "about": about, "options": task, "targets": names,
            "default": list(DEFAULT), "interval": INTERVAL,
            "fractions_of_start": list(fractions), "train_s": round(train_s, 1), "rows": rows}


def _round(value: float | None) -> float | None:
    """4 significant digits: enough for ratios to 0.1%, and a results file a tenth the size."""
    return None if value is None else float(f"{value:.4g}")


def _ratios(rows: list[dict], ref: str = "exact_grid") -> np.ndarray:
    return np.array([r["b_crit"] / r[ref] if r["b_crit"] and r[ref] else math.nan for r in rows])


def _cell(ratios: np.ndarray) -> str:
    """median [10th, 90th percentile] (share within 10%, share with no fit)."""
    ok = ratios[np.isfinite(ratios)]
    if not ok.size:
        return "-"
    lo, mid, hi = np.percentile(ok, [10, 50, 90])
    within = np.mean(np.abs(ratios - 1) <= 0.1)
    return f"{mid:.2f} [{lo:.2f}, {hi:.2f}] {within:.0%}"


def _coverage(rows: list[dict], ref: str = "exact_grid") -> str:
    inside = [r["ci"][0] <= r[ref] <= r["ci"][1] for r in rows if r["ci"] and r[ref]]
    return f"{np.mean(inside):.0%} of {len(inside)}" if inside else "-"


def _select(rows: list[dict], **match) -> list[dict]:
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


def markdown(results: list[dict]) -> str:
    lines = ["# Steps to target: which reading recovers the closed form", "",
             "Generated by `python experiments/steps_to_target.py`. NQM with SGD, batch sizes "
             f"{SIZES[0]}..{SIZES[-1]}, {len(LRS)} learning rates {LRS[0]:.3g}..{LRS[-1]:.3g} "
             f"(log-spaced), {len(SEEDS)} seeds cut into disjoint groups; each group analysed "
             "as a sweep of its own.", "",
             "Cells: median of B_crit / exact B_crit over the groups [10th, 90th percentile] and "
             "the share of groups within 10% of exact. Exact: the closed form at the best "
             "learning rate of the same grid (the moving average's own closed form for ema).", ""]
    for res in results:
        rows, names = res["rows"], res["targets"]
        default = tuple(res["default"])
        lines += [f"## {res['spectrum']}: {res['about']}", "",
                  f"Targets {', '.join(names)} ({', '.join(f'{f:g}' for f in res['fractions_of_start'])}"
                  f" of the starting loss); training {res['train_s'] / 60:.1f} min.", "",
                  "All batch grids, 10 learning rates, 3 seeds:", "",
                  "| reading | selection | " + " | ".join(names) + " |",
                  "|---|---|" + "---|" * len(names)]
        for reading, how in itertools.product(READINGS, SELECTIONS):
            cells = [_cell(_ratios(_select(rows, reading=reading, selection=how, target=ti,
                                           lr_grid="10 rates", seeds=3)))
                     for ti in range(len(names))]
            bold = "**" if (reading, how) == default else ""
            lines.append(f"| {bold}{reading}{bold} | {bold}{how}{bold} | " + " | ".join(cells) + " |")
        lines += ["", f"The default ({default[0]}, {default[1]}) per grid and seed count; "
                  "against exact on the grid, against the fine search, and how often the "
                  f"closed form lies inside {res['interval']}:", "",
                  "| batch grid | LR grid | seeds | target | vs exact (grid) | vs exact (fine) | "
                  "inside interval | first crossing, min: vs exact (grid) | inside interval |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for bg, lg, n, ti in itertools.product(BATCH_GRIDS, LR_GRIDS, SEED_COUNTS, range(len(names))):
            mine = _select(rows, reading=default[0], selection=default[1], batch_grid=bg,
                           lr_grid=lg, seeds=n, target=ti)
            old = _select(rows, reading="first", selection="min", batch_grid=bg, lr_grid=lg,
                          seeds=n, target=ti)
            lines.append(f"| {bg} | {lg} | {n} | {names[ti]} | {_cell(_ratios(mine))} | "
                         f"{_cell(_ratios(mine, 'exact_fine'))} | {_coverage(mine)} | "
                         f"{_cell(_ratios(old))} | {_coverage(old)} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spectra", nargs="+", choices=list(SPECTRA), default=list(SPECTRA))
    parser.add_argument("--search", action="store_true",
                        help="run the search arm only (search.json, search.md)")
    parser.add_argument("--render", action="store_true",
                        help="write the markdown again from the committed json, no training")
    args = parser.parse_args(argv)
    name, arm, render, report = (("search", search_arm, search_markdown, None) if args.search
                                 else ("results", study, markdown, "report"))
    results = (json.loads((OUT / f"{name}.json").read_text()) if args.render
               else [arm(spectrum) for spectrum in args.spectra])
    _write(name, results, render, report)
    return 0


def _write(name: str, results: list[dict], render: Callable[[list[dict]], str],
           report: str | None = None) -> None:
    """results/steps_to_target/<name>.json and its markdown (<report or name>.md), printed."""
    store.atomic_write(OUT / f"{name}.json", store.dumps(results) + "\n")
    text = render(results)
    store.atomic_write(OUT / f"{report or name}.md", text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
