"""Batch ramps against the learning-rate decay they stand in for, on the noisy quadratic model
in closed form (no training, seconds): where halving the rate can be traded for doubling the
batch under SGD, and by how much Seesaw's 1/sqrt(2) cut (Meterez et al. 2025, derived for
normalized SGD) differs from it there.

    python experiments/seesaw_nqm.py            # writes results/seesaw_nqm/{table.json,README.md}

Each case: SGD on the default 100-dimensional NQM (h_i = c_i = 1/i), a step decay over 5 phases
of E examples each (the rate halving at each), against a ramp that doubles the batch at the
same examples and multiplies the rate by `cut` instead. The figure of merit is the ramp's exact
expected loss over the decay's at the end of every phase after the first.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scaling.analysis.nqm_reference import ramp_against_decay
from scaling.tasks.nqm import NQMOptions

OUT = Path(__file__).resolve().parents[1] / "results" / "seesaw_nqm"
CUTS = {"keep the rate (SGD's equivalence)": 1.0, "Seesaw, rate / sqrt(2)": 2**-0.5}
LRS, BATCHES, EXAMPLES = (0.02, 0.2, 1.0), (4, 64), (2**12, 2**16)
TOLERANCE = 0.05


def cases() -> list[dict]:
    options, out = NQMOptions(), []
    for lr in LRS:
        for batch in BATCHES:
            for examples in EXAMPLES:
                row = {"lr": lr, "batch": batch, "phase_examples": examples}
                for name, cut in CUTS.items():
                    row[name] = ramp_against_decay(options, lr, batch, examples, 5, cut)
                out.append(row)
    return out


def worst(ratios: list[float]) -> float:
    """The largest relative gap from the decay run over the phases."""
    return max(abs(r - 1) for r in ratios)


def markdown(rows: list[dict]) -> str:
    names = list(CUTS)
    lines = ["# Batch ramps against learning-rate decay on the NQM (closed form)", "",
             "Command: `python experiments/seesaw_nqm.py` (seconds; no training). SGD on the "
             "100-dimensional NQM, 5 phases of E examples, the rate halving at each phase (the "
             "decay run) against a batch doubling there with the rate kept, or cut by sqrt(2) "
             "(Seesaw). Each cell: the ramp's exact expected loss over the decay's at the end of "
             "phases 2-5, and the worst gap.", "",
             "| lr | B | E | " + " | ".join(names) + " |", "|---|---|---|---|---|"]
    for r in rows:
        cells = [", ".join(f"{x:.3f}" for x in r[n]) + f" (worst {worst(r[n]):.1%})" for n in names]
        lines.append(f"| {r['lr']:g} | {r['batch']} | {r['phase_examples']:,} | "
                     + " | ".join(cells) + " |")
    keep = [worst(r[names[0]]) for r in rows]
    seesaw = [worst(r[names[1]]) for r in rows]
    held = [r for r in rows if worst(r[names[0]]) <= TOLERANCE]
    by_lr = {lr: [worst(r[names[0]]) <= TOLERANCE for r in rows if r["lr"] == lr] for lr in LRS}
    lines += ["", f"Keeping the rate and doubling the batch is within {TOLERANCE:.0%} of the decay "
              f"run in {len(held)} of {len(rows)} cases (worst gaps {min(keep):.1%} to "
              f"{max(keep):.1%}); by learning rate: "
              + ", ".join(f"lr {lr:g}: {sum(v)} of {len(v)}" for lr, v in by_lr.items())
              + ". Where lr x h_max is small SGD's noise sets the loss and the two runs agree; "
              "near the stability limit the ramp's fewer steps leave curvature unresolved.", "",
              f"Seesaw's sqrt(2) cut is within {TOLERANCE:.0%} in "
              f"{sum(w <= TOLERANCE for w in seesaw)} of {len(rows)} cases (worst gaps "
              f"{min(seesaw):.1%} to {max(seesaw):.1%}), lower or higher than the decay by up to "
              f"{max(seesaw):.0%}. Under plain SGD the trade is a halved rate for a doubled "
              "batch at the same rate; the sqrt(2) cut is Seesaw's for normalized SGD (an Adam "
              "proxy) in a variance-dominated regime, which this closed form does not model. "
              "Weak: one spectrum, step decay only, SGD only; Adam is not covered here."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rows = cases()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.json").write_text(json.dumps(rows, indent=1) + "\n")
    (args.out / "README.md").write_text(markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
