"""results/README.md's tables, from the committed study outputs (never typed by hand).

Reads results/<study>/analysis.json and study.json for every study folder, plus
results/nqm/exact.json and results/lr_rules/rules.json where present, and rewrites the part
of results/README.md above the line DISCUSSION_MARKER; the discussion below it is kept.

    python experiments/summarize_studies.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import yaml

from scaling.formatting import interval, number as num

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
DISCUSSION_MARKER = "<!-- discussion: written by hand below this line, kept on regeneration -->"


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def study_rows(name: str, analysis: dict, study: dict | None) -> list[str]:
    """One table row per target of one study."""
    sweep, rows = analysis["sweep"], []
    rules = analysis.get("lr_rules") or {}
    breaks = rules.get("linear_breaks_at")
    finding = ("linear LR scaling holds over the grid" if rules and breaks is None else
               f"linear LR scaling over-shoots from B = {breaks}" if breaks else "-")
    wall = f"{study.get('runs_wall_s', study['wall_s']) / 60:.1f} min" if study else "-"
    smallest = min(sweep.get("batch_sizes") or [0])
    for t in analysis["targets"]:
        ci = t.get("b_crit_ci")
        ratio = t.get("b_simple_over_b_crit")
        b_crit = num(t.get("b_crit"))
        if t.get("b_crit") is not None and t["b_crit"] < smallest / 2:  # steps flat in B
            b_crit, ratio = f"below {smallest} (steps flat)", None
        rows.append(
            f"| {name} | {sweep['task']} | {sweep['optimizer']} | {t['name']} | "
            f"{b_crit} | " + interval(ci)
            + f" | {num(t.get('b_simple'))} | {num(ratio)} | {num(t.get('b_noise'))} | "
            + f"{finding if t['name'] == rules.get('target') else ''} | {wall} |")
    return rows


def studies_table() -> list[str]:
    lines = ["| study | task | optimizer | target | B_crit | 95% interval | B_simple at target | "
             "B_simple / B_crit | B_noise at target | learning-rate finding | wall time |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    commands = []
    for folder in sorted(p for p in RESULTS.iterdir() if (p / "analysis.json").is_file()):
        analysis, study = _load(folder / "analysis.json"), _load(folder / "study.json")
        if analysis.get("kind") not in ("branch", "cells"):
            lines += study_rows(folder.name, analysis, study)
        imported = (yaml.safe_load((folder / "sweep.yaml").read_text()) or {}).get("import") \
            if (folder / "sweep.yaml").is_file() else None
        if imported:
            commands.append(f"- {folder.name}: `{imported['command']}`, then "
                            f"`scaling analyze results/{folder.name}`")
        elif study:
            commands.append(f"- {folder.name}: `{study['command']}` "
                            f"({study.get('date', '')}, commit {study.get('git_commit')}, "
                            f"{study.get('host', '')})")
        else:
            commands.append(f"- {folder.name}: `scaling sweep configs/{folder.name}.yaml "
                            f"--out results/{folder.name}` (README's main command)")
    unit = ("B_crit and B_simple in the sweep's batch unit: examples, or sequences of 64 "
            "characters for charlm. Wall time: training recorded in the run files (sum over "
            "vmapped groups, compile included), on the host named under Commands.")
    return lines + ["", unit, "", "Commands:", ""] + commands


def _study_folders(kind: str) -> list[tuple[str, dict, dict | None]]:
    """(name, analysis, study record) of every study of a kind: branch, or sweeps with
    batch-size schedules (schedules)."""
    out = []
    for folder in sorted(p for p in RESULTS.iterdir() if (p / "analysis.json").is_file()):
        analysis = _load(folder / "analysis.json")
        if (kind == "branch") == (analysis.get("kind") == "branch") and (
                kind == "branch" or analysis.get("schedules")):
            out.append((folder.name, analysis, _load(folder / "study.json")))
    return out


def _exponent(law: dict, name: str) -> str:
    value = law["exponents"].get(name)
    return "left out" if value is None else f"{value:.3f} {interval(law['exponents_ci'][name])}"


def laws_table() -> list[str]:
    """The laws across the cells of every multi-cell study (the fixed-budget view)."""
    studies = [(p.name, _load(p / "analysis.json")) for p in sorted(RESULTS.iterdir())
               if (p / "cells.json").is_file() and (p / "analysis.json").is_file()]
    if not studies:
        return []
    lines = ["", "## Scaling laws at a fixed budget", "",
             "Per study, each optimum across its cells fitted as c N^a D^b (least squares in "
             "log space; 95% bootstrap intervals over cells and, within each cell, its seeds or "
             "its noise; [docs/analysis.md](../docs/analysis.md#laws-across-cells)); \"D "
             "alone\" fits D only; the last column fits each cell's measured arg-min instead.",
             "", "| study | law | coefficient | exponent of N | exponent of D | D alone | "
             "arg-min: N, D, D alone |", "|---|---|---|---|---|---|---|"]
    for name, analysis in studies:
        for key, law in analysis["fixed_budget"]["laws"].items():
            if not law or law["coefficient"] is None:
                continue
            alone = (law.get("alone") or {}).get("tokens")
            arg = law.get("argmin") or {}
            arg_text = ", ".join("-" if v is None else f"{v:.3f}" for v in (
                arg.get("exponents", {}).get("params"), arg.get("exponents", {}).get("tokens"),
                (arg.get("alone") or {}).get("tokens")))
            lines.append(f"| {name} | {key} | {num(law['coefficient'])} | "
                         f"{_exponent(law, 'params')} | {_exponent(law, 'tokens')} | "
                         + (f"{alone['exponent']:.3f} {interval(alone['exponent_ci'])}"
                            if alone else "-") + f" | {arg_text} |")
    units = "; ".join(f"{name}: {_unit(analysis)}" for name, analysis in studies)
    return lines + ["", f"Batch sizes in each study's unit ({units}); D in tokens; b_crit is the "
                    "primary target's B_crit against the budget, b_crit_data every target's "
                    "against the data it needs (E_min)."]


def _unit(analysis: dict) -> str:
    """'sequences of 2,048 tokens', or the unit alone."""
    manifest = analysis.get("manifest") or {}
    per = manifest.get("tokens_per_example")
    return f"{manifest.get('batch_unit')}" + (f" of {num(per)} tokens" if per else "")


def branch_table() -> list[str]:
    """The local critical batch size along training, one row per branch point."""
    studies = _study_folders("branch")
    if not studies:
        return []
    lines = ["", "## The critical batch size along training (branched runs)", "",
             "From `scaling branch` ([docs/branching.md](../docs/branching.md)): the largest "
             "branch batch whose every smaller factor keeps within the tolerance of the k = 1 "
             "reference over one window, 95% bootstrap interval over seeds; the same reading "
             "at tolerances 0.05 and 0.1; the base's B_simple and B_noise at the point.", "",
             "| study | point (examples or sequences seen) | reference loss | local B_crit | 95% interval | "
             "at 0.05 | at 0.1 | B_simple | B_noise | local / B_simple | wall time |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, analysis, study in studies:
        b = analysis["branching"]
        wall = f"{study.get('runs_wall_s', study['wall_s']) / 60:.1f} min" if study else "-"
        for pt in b["points"]:
            by_tol = pt.get("local_b_crit_by_tolerance") or {}
            lines.append(f"| {name} | {num(pt['examples'])} | {num(pt.get('reference_loss'), 4)} | "
                         f"{num(pt['local_b_crit'])}{' (every k)' if pt['at_edge'] else ''} | "
                         f"{interval(pt['local_b_crit_ci'])} | {num(by_tol.get('0.05'))} | "
                         f"{num(by_tol.get('0.1'))} | {num(pt['b_simple'])} | "
                         f"{num(pt['b_noise'])} | {num(pt['local_over_b_simple'])} | {wall} |")
    return lines + ["", "Tolerance and window per study: "
                    + "; ".join(f"{n}: {a['branching']['tolerance']:g}, "
                                f"{a['branching']['window']:,} {a['branching'].get('unit', 'examples')}, base batch "
                                f"{a['branching']['base']['batch_size']}"
                                for n, a, _ in studies) + "."]


def schedules_table() -> list[str]:
    """Each study's batch-size schedules against its fixed batch sizes, per target."""
    studies = _study_folders("schedules")
    if not studies:
        return []
    lines = ["", "## Batch-size schedules against fixed batch sizes", "",
             "At each schedule's best learning rate, mean over seeds; ratios to the batch size it "
             "starts from and to the batch size with the fewest steps, 95% bootstrap intervals; "
             "against the fixed batch sizes' fitted trade-off, its examples over the fit's at the "
             "same steps and its steps over the fit's at the same examples "
             "([docs/schedules.md](../docs/schedules.md)).", "",
             "| study | schedule | target | steps | examples | steps / start | examples / start "
             "| fewest-steps batch | steps / it | examples / it | vs fit: examples, steps |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    cell = lambda c, k: f"{num(c[k])} {interval(c[k + '_ci'])}"
    for name, analysis, _ in studies:
        for sched in analysis["schedules"]:
            for t in sched["targets"]:
                if not t["reached"]:
                    lines.append(f"| {name} | {sched['name']} | {t['target']} | not reached | "
                                 + "- | " * 7 + "|")
                    continue
                by = {c["against"]: c for c in t["comparisons"]}
                start, few = by.get("start"), by.get("fewest_steps")
                lines.append(
                    f"| {name} | {sched['name']} | {t['target']} | {num(t['steps'])} | "
                    f"{num(t['examples'])} | "
                    + (f"{cell(start, 'steps_ratio')} | {cell(start, 'examples_ratio')} | "
                       if start else "- | - | ")
                    + (f"{few['batch_size']} | {cell(few, 'steps_ratio')} | "
                       f"{cell(few, 'examples_ratio')} | " if few else "- | - | - | ")
                    + (f"{num(t['vs_fit']['examples_ratio'])}, {num(t['vs_fit']['steps_ratio'])} |"
                       if t.get("vs_fit") else "- |"))
    return lines


def nqm_table() -> list[str]:
    exact = _load(RESULTS / "nqm" / "exact.json")
    if not exact:
        return []
    lines = ["", "## NQM against the closed form", "",
             "| target | exact B_crit (fine) | exact B_crit (first grid) | sweep B_crit | 95% "
             "interval | sweep / exact (first grid) | sweep / exact (fine) | first crossing |",
             "|---|---|---|---|---|---|---|---|"]
    for t in exact["targets"]:
        sw = t["sweep"]
        lines.append(f"| {t['name']} | {num((t['fit'] or {}).get('b_crit'))} | "
                     f"{num((t['grid_fit'] or {}).get('b_crit'))} | {num(sw['b_crit'])} | "
                     f"{interval(sw['b_crit_ci'])} | {num(t.get('b_crit_ratio_grid'))} | "
                     f"{num(t.get('b_crit_ratio'))} | {num(sw['first_crossing_b_crit'])} |")
    return lines + ["", "From `python experiments/nqm_exact.py results/nqm`; details in "
                    "[nqm/exact.md](nqm/exact.md)."]


def steps_to_target_table() -> list[str]:
    """The reading study in brief: default vs first crossing per spectrum and target."""
    results = _load(RESULTS / "steps_to_target" / "results.json")
    if not results:
        return []
    lines = ["", "## Steps to target against the closed form", "",
             "B_crit / exact (closed form at the sweep's learning rates): median over every "
             "batch grid, learning-rate grid and seed group (2, 3, 5 seeds), the share within "
             "10%, and how often the exact value is inside the 95% interval.", "",
             "| spectrum | target | smoothed (default) | within 10% | inside interval | "
             "first crossing | within 10% | inside interval |", "|---|---|---|---|---|---|---|---|"]
    for res in results:
        for ti, name in enumerate(res["targets"]):
            cells = []
            for reading in ("smoothed 1.5", "first"):
                rows = [r for r in res["rows"] if r["reading"] == reading and r["target"] == ti
                        and r["selection"] == "min"]
                ratios = np.array([r["b_crit"] / r["exact_grid"] if r["b_crit"] and r["exact_grid"]
                                   else np.nan for r in rows])
                inside = [r["ci"][0] <= r["exact_grid"] <= r["ci"][1] for r in rows if r["ci"]]
                cells += [f"{np.nanmedian(ratios):.2f}",
                          f"{np.mean(np.abs(ratios - 1) <= 0.1):.0%}", f"{np.mean(inside):.0%}"]
            lines.append(f"| {res['spectrum']} | {name} | " + " | ".join(cells) + " |")
    return lines + ["", "From `python experiments/steps_to_target.py`; details in "
                    "[steps_to_target/report.md](steps_to_target/report.md)."]


def search_table() -> list[str]:
    """The steps-to-target study's search arm: the table its search.md gives (written by
    steps_to_target.py --search from search.json)."""
    path = RESULTS / "steps_to_target" / "search.md"
    if not path.is_file():
        return []
    table = [line for line in path.read_text().splitlines() if line.startswith("|")]
    return ["", "With the learning-rate search (the sweep as a user runs it: five rates half a "
            "decade apart, 0.01 to 1, then the search and the stopping of dominated runs; 3 "
            "seeds), against the closed form's optimum over a fine grid:", ""] + table + [
            "", "From `python experiments/steps_to_target.py --search`; "
            "[steps_to_target/search.md](steps_to_target/search.md)."]


def rules_table() -> list[str]:
    rules = _load(RESULTS / "lr_rules" / "rules.json")
    if not rules:
        return []
    names = ("linear", "sqrt", "noise_scale")
    lines = ["", f"## Learning-rate rules on {rules['grid_study']} ({rules['target']})", "",
             "Steps to target at each rule's learning rate relative to the best grid learning "
             "rate (mean over seeds; '-': some seed missed the target or diverged).", "",
             "| batch | tuned lr | " + " | ".join(f"{n} lr | {n} cost" for n in names) + " |",
             "|---|---|" + "---|---|" * len(names)]
    for row in rules["rows"]:
        cells = [f"{row[n]['learning_rate']:.3g} | {num(row[n]['relative_steps'])}"
                 if n in row else "- | -" for n in names]
        lines.append(f"| {row['batch_size']} | {row['tuned_lr']:.3g} | " + " | ".join(cells) + " |")
    return lines + ["", "From `python experiments/lr_rules.py`; details in "
                    "[lr_rules/report.md](lr_rules/report.md)."]


def _optima_text(optima: list[dict]) -> str:
    return ", ".join(f"{o['batch_size']}: {o['learning_rate']:.2g}" for o in optima)


def surge_table() -> list[str]:
    """Adam's measured optima per batch size against the surge form, per study and target."""
    rows = []
    for folder in sorted(p for p in RESULTS.iterdir() if (p / "analysis.json").is_file()):
        analysis = _load(folder / "analysis.json")
        if analysis.get("kind") or analysis["sweep"]["optimizer"] not in ("adam", "adamw"):
            continue
        for t in analysis["targets"]:
            rules = t.get("lr_rules") or {}
            fit, falls = rules.get("surge_fit"), rules.get("optimum_falls")
            if not fit:
                continue
            scales = rules.get("noise_scales") or {}
            rows.append(f"| {folder.name} | {t['name']} | {_optima_text(rules['optima'])} | "
                        f"{num(fit['b_peak'])} {interval(fit.get('b_peak_ci'))} | "
                        f"{fit['eta_max']:.3g} | "
                        + (f"{falls['ratio']:.2g}x from B = {falls['peak_batch_size']} to "
                           f"{falls['largest_batch_size']}" if falls else "no") + " | "
                        f"{num(scales.get('b_simple'))} | {num(scales.get('b_simple_precond'))} |")
    if not rows:
        return []
    return ["", "## Adam's optimal learning rate against the surge form", "",
            "Per study with Adam and target: the measured optimum per batch size (B: lr, "
            "refined between the rates tried), the surge form 2 eta_max / (sqrt(B_peak / B) + "
            "sqrt(B / B_peak)) fitted to them (Li et al. 2024; 95% bootstrap interval on "
            "B_peak; at the edge of the search range, 100x past the batch sizes tried, when the "
            "optimum only rises), whether the optimum falls by 1.25x or more past its peak, and "
            "the measured noise scales ([docs/analysis.md](../docs/analysis.md)). Older "
            "folders analysed before the surge fit existed are left out.", "",
            "| study | target | optimum per batch size | B_peak [95%] | eta_max | optimum falls "
            "| B_simple | B_simple in Adam's metric |", "|---|---|---|---|---|---|---|---|"] + rows


def hyper_table() -> list[str]:
    """Each searched beta2 or weight decay against its rule, per study and target."""
    rows = []
    for folder in sorted(p for p in RESULTS.iterdir() if (p / "analysis.json").is_file()):
        analysis = _load(folder / "analysis.json")
        for t in analysis.get("targets") or []:
            for name, rule in ((t.get("hyper_rules") or {}).get("scalars") or {}).items():
                pts = rule["points"]
                rows.append(
                    f"| {folder.name} | {t['name']} | {name} | "
                    + ", ".join(f"{p['batch_size']}: {p['best']:.4g}"
                                + (f" ({p['at_edge']} edge)" if p["at_edge"] else "") for p in pts)
                    + " | " + ", ".join(num(p["measure"]) for p in pts) + " | "
                    + ", ".join("-" if p["rule_value"] is None else f"{p['rule_value']:.4g}"
                                for p in pts) + " | "
                    + ", ".join(num(p["relative_cost"]) for p in pts) + " | "
                    + ("-" if rule["exponent"] is None else f"{rule['exponent']:.2f}") + " |")
    if not rows:
        return []
    return ["", "## Beta2 and weight decay searched per batch size, against their rules", "",
            "Per study and target: the best value at each batch size (the fewest steps over the "
            "learning rates tried), what the rule keeps fixed (beta2: its half-life in examples, "
            "B ln(1/2) / ln(b2), Marek et al. 2025; weight decay: tau = B / (eta lambda D), Wang "
            "& Aitchison 2024), the rule's value from the smallest batch size's best and its "
            "cost in steps (interpolated between the values tried), and the exponent of the "
            "kept quantity in B: 0 where the rule holds, 1 for the half-life of a fixed beta2 "
            "([docs/analysis.md](../docs/analysis.md#beta2-and-weight-decay-against-their-rules)).",
            "", "| study | target | scalar | best per batch size | half-life or tau of the best "
            "| rule's value | rule's cost (steps / best) | exponent |",
            "|---|---|---|---|---|---|---|---|"] + rows


def main() -> int:
    path = RESULTS / "README.md"
    old = path.read_text() if path.is_file() else ""
    discussion = old.split(DISCUSSION_MARKER, 1)[1] if DISCUSSION_MARKER in old else "\n"
    head = ["# Results of the studies", "",
            "Generated by `python experiments/summarize_studies.py` from the study folders "
            "below; each folder has analysis.json, report.md and figures/ (the raw run files "
            "are not committed: rerun the command to get them).", "", "## Critical batch size "
            "per study and target", ""]
    text = "\n".join(head + studies_table() + laws_table() + branch_table() + schedules_table()
                     + surge_table() + hyper_table() + steps_to_target_table() + search_table()
                     + nqm_table()
                     + rules_table()) + "\n\n"
    path.write_text(text + DISCUSSION_MARKER + discussion)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
