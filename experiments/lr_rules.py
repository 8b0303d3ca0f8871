"""Learning-rate rules measured: linear, square-root and noise-scale runs against the tuned optimum.

Builds on a finished grid study (default results/mnist1d_mlp, from
`python experiments/run_study.py mnist1d_mlp`). From its analysis.json it takes the reference
point (the smallest batch size and its refined optimal learning rate at the primary target) and
the noise-scale rule fitted to the optima (eps_max, B_noise). Then it trains, with the same
config and seeds, one run per batch size and seed at the learning rate each rule gives
(learning_rate.mode: rule), and compares steps to the primary target with the best grid run.

    python experiments/lr_rules.py                       # results/lr_rules from results/mnist1d_mlp
    python experiments/lr_rules.py --grid results/mnist1d_mlp --out results/lr_rules

Writes <out>/<rule>/ (the rule sweeps; runs/ is not committed), <out>/rules.json,
<out>/report.md, <out>/figures/lr_rules.png and <out>/study.json (wall time).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from scaling import store
from scaling.analysis.table import lr_curves, run_table
from scaling.cli.main import main as scaling_main
from scaling.formatting import number as num

ROOT = Path(__file__).resolve().parents[1]
RULES = ("linear", "sqrt", "noise_scale")


def rule_overrides(grid_analysis: dict, rule: str) -> list[str]:
    """learning_rate.* overrides that turn the grid study's config into one rule's sweep."""
    rules = grid_analysis["lr_rules"]
    ref = rules["reference"]
    out = ["learning_rate.mode=rule", f"learning_rate.rule={rule}", "learning_rate.min=null",
           "learning_rate.max=null", "learning_rate.num=null"]
    if rule == "noise_scale":
        fit = rules["noise_scale_fit"]
        return out + [f"learning_rate.eps_max={fit['eps_max']!r}",
                      f"learning_rate.b_noise={fit['b_noise']!r}"]
    return out + [f"learning_rate.batch_ref={ref['batch_size']}",
                  f"learning_rate.lr_ref={ref['learning_rate']!r}"]


def measured(folder: Path, target: str) -> dict[int, dict]:
    """Per batch size: the rule's learning rate and its mean steps to `target` over seeds
    (None unless every seed reached it), from the run files, read as the analysis reads them."""
    table = run_table(store.load(folder), [target])
    out = {}
    for size, (grid,) in lr_curves(table, target).items():
        steps = float(grid.means()[0])
        out[size] = {"learning_rate": grid.lrs[0], "steps": None if np.isnan(steps) else steps,
                     "diverged": sum(r["status"] == "diverged" for r in table
                                     if r["batch_size"] == size)}
    return out


def compare(grid_analysis: dict, per_rule: dict[str, dict[int, dict]]) -> dict:
    """Rule runs against the tuned optimum (best grid LR, mean over seeds) per batch size."""
    target = grid_analysis["lr_rules"]["target"]
    entry = next(t for t in grid_analysis["targets"] if t["name"] == target)
    best = {p["batch_size"]: p for p in entry["points"]}
    rows = []
    for size in sorted(best):
        row = {"batch_size": size, "tuned_lr": best[size]["refined_lr"] or best[size]["best_lr"],
               "tuned_steps": best[size]["steps"]}
        for rule, cells in per_rule.items():
            cell = cells.get(size)
            if cell is None:
                continue
            row[rule] = dict(cell, relative_steps=None if cell["steps"] is None
                             else cell["steps"] / best[size]["steps"])
        rows.append(row)
    return {"grid_study": grid_analysis["sweep"]["name"], "target": target,
            "reference": grid_analysis["lr_rules"]["reference"],
            "noise_scale_fit": grid_analysis["lr_rules"]["noise_scale_fit"], "rows": rows}


def markdown(result: dict, wall_s: float) -> str:
    ref, fit = result["reference"], result["noise_scale_fit"]
    lines = [f"# Learning-rate rules measured on {result['grid_study']}", "",
             f"Target: {result['target']}. Linear and square-root rules anchored at B = "
             f"{ref['batch_size']}, lr = {ref['learning_rate']:.4g} (the refined optimum there); "
             f"noise-scale rule lr = eps_max / (1 + B_noise / B) with eps_max = "
             f"{fit['eps_max']:.3g}, B_noise = {fit['b_noise']:.3g} fitted to the measured optima. "
             "Each cell: the rule's learning rate, and its steps to target relative to the best "
             "grid learning rate (mean over seeds; below 1 means the rule beat the grid; "
             "'-' means some seed never reached the target or diverged).", "",
             "| batch | tuned lr | tuned steps | " + " | ".join(RULES) + " |",
             "|---|---|---|" + "---|" * len(RULES)]
    for row in result["rows"]:
        cells = [f"{row[r]['learning_rate']:.3g}: {num(row[r]['relative_steps'])}x"
                 if r in row else "-" for r in RULES]
        lines.append(f"| {row['batch_size']} | {row['tuned_lr']:.3g} | {row['tuned_steps']:.1f} | "
                     + " | ".join(cells) + " |")
    lines += ["", f"Wall time of the rule sweeps: {wall_s:.0f} s.", "",
              "![rules](figures/lr_rules.png)", ""]
    return "\n".join(lines)


def figure(result: dict, path: Path) -> Path:
    from scaling.report.style import RULE_COLOURS, batch_axis, pyplot, save

    plt = pyplot()
    fig, (lr_ax, cost_ax) = plt.subplots(1, 2, figsize=(10, 4.2))
    sizes = [r["batch_size"] for r in result["rows"]]
    lr_ax.plot(sizes, [r["tuned_lr"] for r in result["rows"]], "ko-", label="tuned optimum")
    for rule in RULES:
        rows = [r for r in result["rows"] if rule in r]
        lr_ax.plot([r["batch_size"] for r in rows], [r[rule]["learning_rate"] for r in rows],
                   "s--", color=RULE_COLOURS[rule], label=rule)
        cost = [(r["batch_size"], r[rule]["relative_steps"]) for r in rows
                if r[rule]["relative_steps"] is not None]
        if cost:
            cost_ax.plot(*zip(*cost), "s-", color=RULE_COLOURS[rule], label=rule)
    cost_ax.axhline(1.0, color="black", lw=0.8, ls=":")
    lr_ax.set(yscale="log", ylabel="learning rate", title="Learning rate vs batch size")
    cost_ax.set(yscale="log", ylabel="steps to target / tuned steps",
                title=f"Cost of each rule ({result['target']})")
    for ax in (lr_ax, cost_ax):
        batch_axis(ax, sizes, "batch size (examples per step)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    return save(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grid", type=Path, default=ROOT / "results" / "mnist1d_mlp",
                        help="a finished grid study with analysis.json")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "lr_rules")
    args = parser.parse_args(argv)
    grid_analysis = json.loads((args.grid / "analysis.json").read_text())
    if not grid_analysis.get("lr_rules") or not grid_analysis["lr_rules"]["noise_scale_fit"]:
        raise SystemExit(f"error: {args.grid}/analysis.json has no fitted noise-scale rule")
    started, per_rule = time.perf_counter(), {}
    for rule in RULES:
        folder = args.out / rule
        argv = ["sweep", str(args.grid / "sweep.yaml"), *rule_overrides(grid_analysis, rule),
                "--out", str(folder), "--quiet", "--no-analyze"]
        if scaling_main(argv) != 0:
            return 1
        per_rule[rule] = measured(folder, grid_analysis["lr_rules"]["target"])
    wall_s = time.perf_counter() - started
    result = compare(grid_analysis, per_rule)
    store.write_json(args.out / "rules.json", result)
    figure(result, args.out / "figures" / "lr_rules.png")
    store.atomic_write(args.out / "report.md", markdown(result, wall_s))
    store.write_json(args.out / "study.json", {"study": "lr_rules", "wall_s": round(wall_s, 1),
                                               "command": "python experiments/lr_rules.py"})
    print(markdown(result, wall_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
