"""Cooldown branches against separate runs per budget: configs/cooldowns_charlm.yaml trained
both ways, and what each reads.

    python experiments/cooldowns.py            # trains what is missing, then compares

1. The cooldown sweep (results/cooldowns_charlm): one stable run per batch size and learning
   rate to the largest budget, each smaller budget's decay branched from its saved state.
2. The same budgets as separate runs (results/cooldowns_charlm_separate: the config with its
   cooldowns turned into a scale axis over the budget), each run trained from step 0.

It prints and writes results/cooldowns_charlm/comparison.md and comparison.json: per run the
largest relative difference of eval_loss between the two at the steps both evaluated (the
protocol's claim: a cooldown run is the separate run), per budget the fixed-budget optima
(eta*, B_opt, the loss there) of both with their intervals and whether each lies in the
other's, the laws' exponents in D, and the examples each trained.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

import run_study  # noqa: E402  (the study runner beside this script)

NAME = "cooldowns_charlm"
PROTOCOL, SEPARATE = ROOT / "results" / NAME, ROOT / "results" / f"{NAME}_separate"
BUDGETS = ("scale={budget.max_tokens: [45000, 90000, 135000, 180000, 225000, 270000, 315000, "
           "360000]}")
QUANTITIES = (("learning_rate", "eta*"), ("batch_size", "B_opt"), ("value", "loss there"))


def train() -> None:
    """Each of the two sweeps, unless its analysis is there already."""
    if not (PROTOCOL / "analysis.json").is_file():
        run_study.run(NAME, PROTOCOL, [], quiet=True)
    if not (SEPARATE / "analysis.json").is_file():
        run_study.run(NAME, SEPARATE, ["budget.cooldowns=null", BUDGETS], quiet=True)


def run_differences() -> dict[str, float | None]:
    """Per cooldown cell, the largest relative eval_loss difference of any run to its separate
    twin at the steps both evaluated (each cell's runs read from its folder or its committed
    runs.tar.xz); None where no pair of rows was there to compare."""
    from scaling import store

    out: dict[str, float | None] = {}
    for cell in sorted((PROTOCOL / "cells").iterdir()):
        gaps = []
        twins = {r["run_id"]: r for r in store.load(SEPARATE / "cells" / cell.name)}
        for record in store.load(cell):
            twin = twins.get(record["run_id"])
            theirs = {r["step"]: r.get("eval_loss") for r in (twin["metrics"] if twin else [])}
            gaps += [abs(row["eval_loss"] - theirs[row["step"]]) / abs(theirs[row["step"]])
                     for row in record["metrics"] if row.get("eval_loss") is not None
                     and theirs.get(row["step"]) is not None]
        out[cell.name] = max(gaps) if gaps else None
    return out


def _optimum(cell: dict) -> dict[str, tuple[float, list[float] | None, str | None]]:
    opt = cell["optimum"]
    return {key: (opt[key], opt.get(f"{key}_ci"), opt.get("at_edge")) for key, _ in QUANTITIES}


def _inside(value: float, ci: list[float] | None) -> bool | None:
    return None if ci is None else ci[0] <= value <= ci[1]


def compare() -> dict:
    protocol = json.loads((PROTOCOL / "analysis.json").read_text())
    separate = json.loads((SEPARATE / "analysis.json").read_text())
    theirs = {c["name"]: c for c in separate["fixed_budget"]["cells"]}
    cells = []
    for mine in protocol["fixed_budget"]["cells"]:
        a, b = _optimum(mine), _optimum(theirs[mine["name"]])
        cells.append({"cell": mine["name"], **{key: {
            "cooldowns": a[key][0], "cooldowns_ci": a[key][1], "separate": b[key][0],
            "separate_ci": b[key][1], "each_in_the_others": [_inside(a[key][0], b[key][1]),
                                                             _inside(b[key][0], a[key][1])]}
            for key, _ in QUANTITIES}})
    laws = {name: {"cooldowns": law and law["exponents"]["tokens"],
                   "cooldowns_ci": law and law["exponents_ci"]["tokens"],
                   "separate": separate["fixed_budget"]["laws"][name]
                   and separate["fixed_budget"]["laws"][name]["exponents"]["tokens"],
                   "separate_ci": separate["fixed_budget"]["laws"][name]
                   and separate["fixed_budget"]["laws"][name]["exponents_ci"]["tokens"]}
            for name, law in protocol["fixed_budget"]["laws"].items()
            if name in ("learning_rate", "batch_size", "loss")}
    return {"cells": cells, "laws_in_d": laws, "examples": protocol["cooldowns"],
            "run_differences": run_differences(),
            "wall_s": {"cooldowns": _wall(PROTOCOL), "separate": _wall(SEPARATE)}}


def _wall(folder: Path) -> float | None:
    path = folder / "study.json"
    return json.loads(path.read_text())["runs_wall_s"] if path.is_file() else None


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _ci(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{_number(ci[0])}, {_number(ci[1])}]"


def markdown(result: dict) -> str:
    ex = result["examples"]
    lines = ["# Cooldown branches against separate runs per budget", "",
             "`python experiments/cooldowns.py` (configs/cooldowns_charlm.yaml: charlm, d_model "
             "32, Adam, WSD with a 20% linear decay, 8 budgets from 45k to 360k tokens, batch "
             "sizes 1-16 sequences of 16 characters x 5 learning rates, 2 seeds).", "",
             f"Examples trained: {ex['examples_trained']:,} with cooldowns, "
             f"{ex['examples_separate']:,} as separate runs ({ex['ratio']:.2f}x); training "
             f"seconds recorded in the run files: {_number(result['wall_s']['cooldowns'])} "
             f"against {_number(result['wall_s']['separate'])}.", "",
             "Largest relative difference of eval_loss between a cooldown run and its separate "
             "run, at the steps both evaluated: " + ", ".join(
                 f"{c} {'not measured (no run files)' if v is None else f'{v:.2g}'}"
                 for c, v in result["run_differences"].items()) + ".", "",
             "| budget | quantity | cooldowns [95% CI] | separate [95% CI] | each in the other's |",
             "|---|---|---|---|---|"]
    for cell in result["cells"]:
        for key, label in QUANTITIES:
            q = cell[key]
            both = " / ".join({True: "yes", False: "no", None: "-"}[v]
                              for v in q["each_in_the_others"])
            lines.append(f"| {cell['cell']} | {label} | {_number(q['cooldowns'])} "
                         f"{_ci(q['cooldowns_ci'])} | {_number(q['separate'])} "
                         f"{_ci(q['separate_ci'])} | {both} |")
    lines += ["", "| law in D | cooldowns: exponent [95% CI] | separate: exponent [95% CI] |",
              "|---|---|---|"]
    for name, law in result["laws_in_d"].items():
        lines.append(f"| {name} | {_number(law['cooldowns'])} {_ci(law['cooldowns_ci'])} | "
                     f"{_number(law['separate'])} {_ci(law['separate_ci'])} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    train()
    result = compare()
    from scaling import store

    store.write_json(PROTOCOL / "comparison.json", result)
    text = markdown(result)
    store.atomic_write(PROTOCOL / "comparison.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
