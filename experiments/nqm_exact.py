"""The NQM study against its closed form: B_crit and the whole S(B) curve, sweep vs exact.

Run after the sweep (python experiments/run_study.py nqm). For every target of the sweep, the
exact reference takes the expected-loss curve of SGD (scaling.tasks.nqm, closed form), the best
constant learning rate per batch size, steps to target from it, and fits S(B) = S_min + E_min / B
the way the analysis does: once over the sweep's own learning rates (what the sweep can
resolve) and once over a fine grid spanning their range (the truth; the difference is the
learning-rate grid's coarseness). Writes <dir>/exact.json, <dir>/exact.md and
<dir>/figures/nqm_exact.png.

    python experiments/nqm_exact.py results/nqm
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from scaling import config as config_mod, store
from scaling.analysis.points import fit_steps
from scaling.analysis.nqm_reference import closed_form_b_crit
from scaling.config import learning_rates, parse_target
from scaling.formatting import interval, number as num
from scaling.config.arithmetic import for_config

FINE_LRS = 200  # reference learning rates, log-spaced over the sweep's range


def _exact(cfg: config_mod.Config, value: float, lrs: list[float]) -> tuple[list, dict | None]:
    """Per batch size the fewest expected steps over `lrs`, and the S(B) fit through them."""
    budgets = [for_config(cfg, b, 1).total_steps for b in cfg.batch.sizes]
    result = closed_form_b_crit(cfg.task.options, cfg.batch.sizes, value, budgets, np.asarray(lrs))
    return result["steps"], result["fit"]


def first_grid(cfg: config_mod.Config) -> list[float]:
    """Every learning rate of the sweep's first grid, ascending (the search's rounds aside)."""
    return sorted({lr for b in cfg.batch.sizes for lr in learning_rates(cfg.learning_rate, b)})


def exact_target(cfg: config_mod.Config, target: str) -> dict:
    """Exact steps to `target` per batch size at the best LR, and the S(B) fit through them,
    over a fine learning-rate grid and over the sweep's first grid."""
    metric, op, value = parse_target(target)
    if (metric, op) != ("eval_loss", "<="):
        raise SystemExit(f"error: {target}: the exact reference covers eval_loss<=x targets only")
    sizes = cfg.batch.sizes
    grid = first_grid(cfg)
    steps, fit = _exact(cfg, value, list(np.geomspace(grid[0], grid[-1], FINE_LRS)))
    _, grid_fit = _exact(cfg, value, grid)
    return {"name": target, "steps": dict(zip(map(str, sizes), steps)), "fit": fit,
            "grid_fit": grid_fit}


def compare(out: Path) -> dict:
    cfg = config_mod.load(out / "sweep.yaml")
    if cfg.task.name != "nqm" or cfg.optimizer.name != "sgd":
        raise SystemExit(f"error: {out}: the exact reference needs an nqm sweep with sgd")
    analysis = json.loads((out / "analysis.json").read_text())
    rows = []
    for entry in analysis["targets"]:
        exact = exact_target(cfg, entry["name"])
        exact["sweep"] = {"b_crit": entry["b_crit"], "b_crit_ci": entry["b_crit_ci"],
                          "steps": {str(p["batch_size"]): fit_steps(p) for p in entry["points"]},
                          "first_crossing_b_crit": entry["first_crossing"]["b_crit"]}
        if exact["fit"] and entry["b_crit"]:
            exact["b_crit_ratio"] = entry["b_crit"] / exact["fit"]["b_crit"]
        if exact["grid_fit"] and entry["b_crit"]:
            exact["b_crit_ratio_grid"] = entry["b_crit"] / exact["grid_fit"]["b_crit"]
        rows.append(exact)
    first = first_grid(cfg)
    return {"lr_range": [first[0], first[-1]],
            "fine_lrs": FINE_LRS, "reached": analysis["reached"]["definition"], "targets": rows}


def markdown(result: dict) -> str:
    lines = ["# NQM: sweep against the closed form", "",
             "Exact: expected loss of SGD in closed form, best constant learning rate per batch "
             f"size: of {result['fine_lrs']} in [{result['lr_range'][0]:.3g}, "
             f"{result['lr_range'][1]:.3g}] (fine), or of the sweep's first grid (grid). Sweep: "
             f"the measured runs read as {result['reached']}, mean over seeds, at each batch "
             "size's optimum between the rates its search tried (the best rate tried where it "
             "has no neighbour on each side); beside it, the same runs read at the first crossing.",
             "", "| target | exact B_crit (fine) | exact B_crit (grid) | sweep B_crit | 95% "
             "interval | sweep / exact (grid) | sweep / exact (fine) | first crossing B_crit |",
             "|---|---|---|---|---|---|---|---|"]
    for t in result["targets"]:
        ex, grid, sw = t["fit"], t["grid_fit"], t["sweep"]
        lines.append(f"| {t['name']} | {num(ex and ex['b_crit'])} | {num(grid and grid['b_crit'])}"
                     f" | {num(sw['b_crit'])} | {interval(sw['b_crit_ci'])} | "
                     f"{num(t.get('b_crit_ratio_grid'))} | {num(t.get('b_crit_ratio'))} | "
                     f"{num(sw['first_crossing_b_crit'])} |")
    lines += ["", "Steps to target per batch size (exact, fine / sweep):", ""]
    sizes = list(result["targets"][0]["steps"])
    lines += ["| target | " + " | ".join(f"B={b}" for b in sizes) + " |",
              "|---|" + "---|" * len(sizes)]
    for t in result["targets"]:
        cells = [f"{num(t['steps'][b])} / {num(t['sweep']['steps'].get(b))}" for b in sizes]
        lines.append(f"| {t['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n![exact vs sweep](figures/nqm_exact.png)\n"


def figure(result: dict, path: Path) -> Path:
    from scaling.report.style import OKABE_ITO, pyplot, save

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for t, colour in zip(result["targets"], OKABE_ITO):
        sizes = np.array([int(b) for b, s in t["steps"].items() if s])
        ax.plot(sizes, [t["steps"][str(b)] for b in sizes], "-", color=colour,
                label=f"{t['name']} exact")
        measured = [(int(b), s) for b, s in t["sweep"]["steps"].items() if s]
        if measured:
            ax.plot(*zip(*measured), "o", color=colour, label=f"{t['name']} sweep")
    ax.set(xscale="log", yscale="log", xlabel="batch size (examples)", ylabel="steps to target",
           title="NQM: steps to target, closed form vs sweep")
    ax.legend(fontsize=8)
    return save(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", type=Path, help="the nqm study folder (with analysis.json)")
    out = parser.parse_args(argv).dir
    result = compare(out)
    store.write_json(out / "exact.json", result)
    store.atomic_write(out / "exact.md", markdown(result))
    figure(result, out / "figures" / "nqm_exact.png")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
