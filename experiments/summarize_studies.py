"""results/README.md's tables, from the committed study outputs (never typed by hand).

Reads results/<study>/analysis.json and study.json for every study folder, plus
results/nqm/exact.json and results/lr_rules/rules.json where present, and rewrites the part
of results/README.md above the line DISCUSSION_MARKER: the tables, then the discussion of each
study from experiments/results_prose.py's templates, so that no number in it goes stale. Below
the marker only what cannot be rendered is kept: the figures to look at and the record of
earlier measurements, each number with the commit that measured it.

    python experiments/summarize_studies.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import yaml

from scaling.analysis import contract
from scaling.analysis.intervals import ONE_SEED, describe, width_floor
from scaling.analysis.sections import LRRules
from scaling.formatting import estimate, interval, number as num, span
from scaling.report.answer import lr_sentence
from scaling.report.branch_report import point_interval

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
sys.path.insert(0, str(ROOT / "experiments"))
import results_prose  # noqa: E402  (the discussion's templates, beside this script)
DISCUSSION_MARKER = "<!-- discussion: written by hand below this line, kept on regeneration -->"


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _has_records(value) -> bool:
    """Whether an analysis holds any `interval` record: analysed since intervals say what they
    resample (an older one is listed as not re-analysed, its intervals left out)."""
    if isinstance(value, dict):
        record = value.get("interval")
        return (isinstance(record, dict) and "resamples" in record) or any(
            map(_has_records, value.values()))
    return isinstance(value, list) and any(map(_has_records, value))


def _identified(t: dict) -> bool:
    return ((t.get("fit") or {}).get("identification") or {}).get("identified", True)


def _b_crit_cells(t: dict, fresh: bool) -> tuple[str, str]:
    """B_crit with its interval (or the bound it is), and what the interval resamples."""
    fit = t.get("fit") or {}
    if not fresh:
        return num(t.get("b_crit")), "not re-analysed (interval left out)"
    if t.get("b_crit") is None:
        return "no fit", "-"
    return (estimate(t["b_crit"], t.get("b_crit_ci"), fit.get("identification")),
            describe(t.get("interval")))


def study_rows(name: str, analysis: dict, study: dict | None) -> list[str]:
    """One table row per target of one study."""
    sweep, rows = analysis["sweep"], []
    rules = analysis.get("lr_rules") or {}
    breaks = rules.get("linear_breaks_at")
    finding = ("linear LR scaling holds over the grid" if rules and breaks is None else
               f"linear LR scaling over-shoots from B = {num(breaks)}" if breaks else "-")
    wall = f"{study.get('runs_wall_s', study['wall_s']) / 60:.1f} min" if study else "-"
    fresh = _has_records(analysis)
    seeds = len(sweep.get("seeds") or [])
    for t in analysis["targets"]:
        b_crit, over = _b_crit_cells(t, fresh)
        rows.append(
            f"| {name} | {sweep['task']} | {sweep['optimizer']} | {seeds} | {t['name']} | "
            f"{b_crit} | {over} | {num(t.get('b_simple'))} | "
            f"{num(t.get('b_simple_over_b_crit') if _identified(t) else None)} | "
            f"{finding if t['name'] == rules.get('target') else ''} | {wall} |")
    return rows


def studies_table() -> list[str]:
    lines = ["| study | task | optimizer | seeds | target | B_crit [95% interval] | interval | "
             "B_simple at target | B_simple / B_crit | learning-rate finding | wall time |",
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
            "characters for charlm. A bound ('< 16', '> 4,096') is a B_crit the runs do not "
            "place; 'not re-analysed' marks a study analysed before intervals said what they "
            "resample (its old interval resampled batch sizes or under-covered, so it is left "
            "out; its point estimate stands). Wall time: training recorded in the run files "
            "(sum over vmapped groups, compile included), on the host named under Commands.")
    return lines + ["", unit, "", "Commands:", ""] + commands


def state_table() -> list[str]:
    """Which studies were analysed since intervals say what they resample, when each trained,
    and whether its run files travel with it (runs.tar.xz) for `scaling analyze` to redo."""
    rows = []
    for folder in sorted(p for p in RESULTS.iterdir() if (p / "analysis.json").is_file()):
        analysis, study = _load(folder / "analysis.json"), _load(folder / "study.json")
        packed = any(folder.rglob("runs.tar.xz"))  # its own, its cells' or base/ and branches/
        rows.append(f"| {folder.name} | {'yes' if _has_records(analysis) else 'no'} | "
                    f"{(study or {}).get('date', '-')[:10]} | {'yes' if packed else 'no'} |")
    return ["", "## Which studies are current", "",
            "Analysed with intervals that say what they resample (and bounds where the runs do "
            "not place a value), when each last trained (study.json; '-' for imported or "
            "README-command folders), and whether its run files are committed in runs.tar.xz "
            "so that `scaling analyze` redoes its numbers without retraining.", "",
            "| study | re-analysed | trained | run files committed |", "|---|---|---|---|"] + rows


def _wide_cells(results: list[dict]) -> str:
    """The default cells whose width over the sd spread exceeds 2 at the low end of its
    interval, as 'precond eval_loss<=0.259369 (2.88 [2.23, 4.28])'; 'no target' if none."""
    wide = [f"{res['spectrum']} {c['target']} ({c['width_over_sd']:.2f} "
            f"[{c['width_over_sd_ci'][0]:.2f}, {c['width_over_sd_ci'][1]:.2f}])"
            for res in results for c in results_prose.default_cells(res)
            if c.get("width_over_sd_ci") and c["width_over_sd_ci"][0] > 2]
    return ", ".join(wide) or "no target"


def _measured_subsets(results: list[dict]) -> list[dict]:
    """Every spectrum's random-subset cells (coverage.py's subset_cells) with a width read."""
    return [c for res in results for c in res.get("subset_cells") or []
            if c["width_over_sd"] is not None]


def _subset_widths(results: list[dict]) -> str:
    """The default interval's median width over the random subsets' sd spread, as a range."""
    return span([c["width_over_sd"] for c in _measured_subsets(results)], lambda v: f"{v:.2f}")


def _subsets_sentence(results: list[dict]) -> str:
    """What the random 3-seed subsets give against the disjoint groups, where measured."""
    found = _measured_subsets(results)
    if not found:
        return ""
    moved = [c["sd_log"] / c["sd_log_groups"] for c in found if c["sd_log_groups"]]
    highest = max(c["width_over_sd_ci"][1] for c in found if c.get("width_over_sd_ci"))
    return (f"But one partition into groups is one draw of the spread. Over "
            f"{found[0]['subsets']} random 3-seed subsets of the same seeds, each a 3-seed "
            f"experiment of its own, which average over the partitions (they overlap, so their "
            f"intervals come from a jackknife over blocks of seeds, not a binomial), the sd of "
            f"log B_crit is {span(moved, lambda v: f'{v:.2f}')}x the groups', the width "
            f"{_subset_widths(results)}x the sd spread at every spectrum and target (the "
            f"highest upper end {highest:.2f}x), near the {width_floor(3):.2f}x floor of an "
            f"interval on 3 seeds, and the coverage "
            f"{span([c['coverage'] for c in found], lambda v: f'{v:.0%}')}. ")


def coverage_table() -> list[str]:
    """The default interval's measured coverage on the NQM, beside the headline table."""
    results = _load(RESULTS / "coverage" / "coverage.json")
    if not results:
        return []
    rows = []
    for res in results:
        cells = results_prose.default_cells(res)
        ones = [c for c in res["cells"] if c["group_size"] == 1]
        cover = [c["coverage"] for c in cells]
        width = [c["median_width_over_spread"] for c in cells]
        over_sd = [c.get("width_over_sd") for c in cells if c.get("width_over_sd") is not None]
        subsets = _measured_subsets([res])
        ratio = [c["median_ratio"] for c in cells + ones]
        dof = [c["width_dof"] for c in cells if c.get("width_dof") is not None]
        rows.append(f"| {res['spectrum']} | {len(cells)} | {cells[0]['groups']} | "
                    f"{min(cover):.0%}-{max(cover):.0%} | {min(width):.2f}-{max(width):.2f} | "
                    f"{span(over_sd, lambda v: f'{v:.2f}')} | "
                    f"{span([c['width_over_sd'] for c in subsets], lambda v: f'{v:.2f}')} | "
                    f"{span([c['coverage'] for c in subsets], lambda v: f'{v:.0%}')} | "
                    f"{span(dof, lambda v: f'{v:.1f}')} | {min(ratio):.3f}-{max(ratio):.3f} |")
    groups, bias = results[0]["cells"][0]["groups"], results[0]["percentile_spread_bias"]
    return ["", "## How often the intervals hold the truth", "",
            "The default interval (leave-one-seed-out jackknife with the cross-fitted "
            "selection) against the closed form of the noisy quadratic model, per spectrum over "
            "its targets, from `python experiments/coverage.py` "
            "([coverage/report.md](coverage/report.md)): the share of nominal-95% intervals "
            "of 3-seed groups that hold the closed form's B_crit, their median width over the "
            "groups' own spread, and the point estimate's median ratio to the truth (3-seed "
            "and 1-seed groups; with 1 seed there is no interval).", "",
            "| spectrum | targets | 3-seed groups | coverage | width / spread | "
            "width / sd spread | random subsets: width / sd spread | coverage | width dof | "
            "median ratio to truth |",
            "|---|---|---|---|---|---|---|---|---|---|"] + rows + [
            "", "With 3 seeds an interval that holds its level cannot be much narrower than "
            "twice the spread: its variance rests on the 3 seeds, which every batch size "
            "shares, so it carries about 2 degrees of freedom (width dof: measured "
            "across the groups), takes t(2) standard errors each side, and with an unbiased "
            f"standard error its median width is {width_floor(3):.2f}x the spread. The spread "
            "itself is read from the groups: their 2.5-97.5% percentiles (width / spread), "
            f"which with {groups} groups read low (for normal values {bias:.2f}x the "
            f"population's, so that even an unbiased interval reads {width_floor(3) / bias:.2f}x), "
            "or 2 x 1.96 x their sd (width / sd spread), unbiased for normal values; with so few "
            "groups either is uncertain ([coverage/report.md](coverage/report.md) gives each "
            f"target's interval); against the groups' sd the width is above 2x beyond its "
            f"interval at {_wide_cells(results)}. {_subsets_sentence(results)}The pooled "
            "interval, which counts each batch size's seeds as independent, is narrower and "
            "under-covers; [coverage/report.md](coverage/report.md) gives both."]


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
                         f"{'>= ' if pt['at_edge'] else ''}{num(pt['local_b_crit'])} | "
                         f"{point_interval(pt)} | "
                         f"{num(by_tol.get('0.05'))} | "
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
    methods = sorted({c["interval"]["method"] for _, a, _ in studies for s in a["schedules"]
                      for t in s["targets"] for c in t.get("comparisons", [])
                      if c["interval"]["method"]})  # unreached targets have no comparisons
    lines = ["", "## Batch-size schedules against fixed batch sizes", "",
             "At each schedule's best learning rate, mean over seeds; ratios to the batch size it "
             "starts from and to the batch size with the fewest steps, 95% intervals over seeds "
             f"({', '.join(methods) or 'none'}; the jackknife leaves each seed's scheduled run "
             "and fixed run out together); "
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
        default, selection = res["default"]
        for ti, name in enumerate(res["targets"]):
            cells = []
            for reading, how in ((default, selection), ("first", "min")):  # as the study reads
                rows = [r for r in res["rows"] if r["reading"] == reading and r["target"] == ti
                        and r["selection"] == how]
                ratios = np.array([r["b_crit"] / r["exact_grid"] if r["b_crit"] and r["exact_grid"]
                                   else np.nan for r in rows])
                inside = [r["ci"][0] <= r["exact_grid"] <= r["ci"][1] for r in rows if r["ci"]]
                cells += [f"{np.nanmedian(ratios):.2f}",
                          f"{np.mean(np.abs(ratios - 1) <= 0.1):.0%}", f"{np.mean(inside):.0%}"]
            lines.append(f"| {res['spectrum']} | {name} | " + " | ".join(cells) + " |")
    return lines + ["", f"Inside interval: {results[0]['interval']}; the default's selection "
                    f"{results[0]['default'][1]}, first crossing's min. From `python "
                    "experiments/steps_to_target.py`; details in "
                    "[steps_to_target/report.md](steps_to_target/report.md)."]


def search_table() -> list[str]:
    """The steps-to-target study's search arm: the table its search.md gives (written by
    steps_to_target.py --search from search.json)."""
    path = RESULTS / "steps_to_target" / "search.md"
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    table = [line for line in lines if line.startswith("|")]
    held = [line for line in lines if line.startswith("The interval holds")]
    return ["", "With the learning-rate search (the sweep as a user runs it: five rates half a "
            "decade apart, 0.01 to 1, then the search and the stopping of dominated runs; 3 "
            "seeds), against the closed form's optimum over a fine grid:", ""] + table + [
            "", " ".join(held + ["From `python experiments/steps_to_target.py --search`; "
                                 "[steps_to_target/search.md](steps_to_target/search.md)."])]


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


def _fitted(fit: dict, key: str) -> str:
    """A fitted parameter with its interval, or the bound it is where the fit does not place
    it (an analysis from before fits carried their identification: the bare number)."""
    return estimate(fit.get(key), fit.get(f"{key}_ci"),
                    (fit.get("identification") or {}).get(key))


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
                        f"{_fitted(fit, 'b_peak')} | "
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


MCCANDLISH_STUDIES = (("nqm", "NQM"), ("quickstart", "quickstart (mnist1d MLP)"),
                      ("mnist1d_mlp", "mnist1d MLP"), ("mnist1d_cnn_adam", "CNN with Adam"),
                      ("charlm", "charlm"))


def _harder(targets: list[dict]) -> list[dict]:
    """One metric's targets from easy to hard: loss targets by falling value, accuracy by
    rising value (the metric of the first target)."""
    metric = targets[0]["metric"]
    same = [t for t in targets if t["metric"] == metric and t.get("b_crit") is not None]
    return sorted(same, key=lambda t: t["value"], reverse=targets[0]["op"] == "<=")


def _study_b_crits(name: str, label: str, analysis: dict) -> str:
    fresh = _has_records(analysis)
    shown = [estimate(t["b_crit"], t.get("b_crit_ci"), (t.get("fit") or {}).get("identification"))
             if fresh else num(t["b_crit"]) for t in _harder(analysis["targets"])]
    seeds = len(analysis["sweep"].get("seeds") or [])
    record = analysis["targets"][0].get("interval") or {}
    over = ("not re-analysed: no interval shown" if not fresh else
            "no interval" if record.get("why") == ONE_SEED else describe(record))
    return (f"{label} ({seeds} seed{'s' if seeds != 1 else ''}; {over}), "
            f"{', '.join(t['name'] for t in _harder(analysis['targets']))}: {', '.join(shown)}")


def _ratio_range(analysis: dict, key: str) -> tuple[float, float] | None:
    values = [t[key] for t in analysis["targets"] if t.get(key) is not None and _identified(t)]
    return (min(values), max(values)) if values else None


def _nqm_paragraph() -> list[str]:
    exact, cover = _load(RESULTS / "nqm" / "exact.json"), _load(RESULTS / "coverage" / "coverage.json")
    lines = []
    if exact:
        ratios = [t["b_crit_ratio"] for t in exact["targets"] if t.get("b_crit_ratio")]
        inside = sum(1 for t in exact["targets"] if t["sweep"].get("b_crit_ci") and t.get("fit")
                     and t["sweep"]["b_crit_ci"][0] <= t["fit"]["b_crit"] <= t["sweep"]["b_crit_ci"][1])
        lines.append(f"On the NQM, where the expected loss of SGD is known in closed form, the "
                     f"sweep's B_crit is {min(ratios):.2f}-{max(ratios):.2f}x the exact one at the "
                     f"best of {exact['fine_lrs']} learning rates, and its interval holds the "
                     f"exact value at {inside} of {len(exact['targets'])} targets "
                     "([nqm/exact.md](nqm/exact.md)).")
    if cover:
        cells = [c for r in cover for c in results_prose.default_cells(r)]
        ones = [c["median_ratio"] for r in cover for c in r["cells"] if c["group_size"] == 1]
        lines.append(f"Over {len(cover)} NQM spectra and {len(cells)} targets, the default "
                     f"interval of 3 seeds held the closed form's B_crit in "
                     f"{min(c['coverage'] for c in cells):.0%}-{max(c['coverage'] for c in cells):.0%} "
                     f"of {cells[0]['groups']} groups each (nominal 95%), at "
                     f"{min(c['median_width_over_spread'] for c in cells):.1f}-"
                     f"{max(c['median_width_over_spread'] for c in cells):.1f}x the groups' own "
                     f"spread ({_subset_widths(cover)}x the spread over random 3-seed subsets, "
                     "which one partition into groups reads less surely); the point estimate's "
                     "median ratio to the truth is "
                     f"{min(c['median_ratio'] for c in cells):.3f}-"
                     f"{max(c['median_ratio'] for c in cells):.3f} with 3 seeds and "
                     f"{min(ones):.3f}-{max(ones):.3f} with 1 (table above).")
    return ["**The pipeline against a known answer.** " + " ".join(lines), ""] if lines else []


def mccandlish_section() -> list[str]:
    """'What the data show, against McCandlish et al. (2018)', every number read from the
    studies' analysis.json (and nqm/exact.json, coverage/coverage.json)."""
    studies = [(n, label, a) for n, label in MCCANDLISH_STUDIES
               if (a := _load(RESULTS / n / "analysis.json"))]
    if not studies:
        return []
    lines = ["", "## What the data show, against McCandlish et al. (2018)", "",
             "Rendered from the studies' analysis.json by experiments/summarize_studies.py. All "
             "runs are on a 2-core CPU, so the models and data sets are small.", ""]
    lines += _nqm_paragraph()
    lines += ["**B_crit per target, from easy to hard** (in each study's batch unit; a bound "
              "where the runs do not place it):", ""]
    lines += [f"- {_study_b_crits(n, label, a)}" for n, label, a in studies] + [""]
    rises = []
    for n, label, a in studies:
        simple = [t["b_simple"] for t in _harder(a["targets"]) if t.get("b_simple")]
        if len(simple) >= 2:
            rises.append(f"{label} {num(simple[0])} to {num(simple[-1])}")
    lines += ["**The noise scale at the targets, from easy to hard** (B_simple at the crossing): "
              + "; ".join(rises) + ".", ""]
    ratios, outside = [], []
    for n, label, a in studies:
        r = _ratio_range(a, "b_simple_over_b_crit")
        if r:
            ratios.append(f"{label} {r[0]:.2g}-{r[1]:.2g}")
            outside += [f"{label} {t['name']} ({t['b_simple_over_b_crit']:.2g}x)"
                        for t in a["targets"] if t.get("b_simple_over_b_crit") and _identified(t)
                        and not 0.1 <= t["b_simple_over_b_crit"] <= 10]
    lines += ["**B_simple against B_crit.** The paper's pattern is B_simple within about an order "
              "of magnitude of B_crit, usually above it. Here B_simple / B_crit is "
              + "; ".join(ratios) + ". "
              + (f"Outside an order of magnitude: {', '.join(outside)}. " if outside else
                 "All are within an order of magnitude. ")
              + "On the NQM this is expected from theory: B_simple = tr(Sigma)/|G|^2 ignores "
              "curvature, and with curvatures spread over two orders of magnitude it exceeds the "
              "curvature-weighted B_noise = tr(H Sigma)/(G^T H G) that governs B_crit for SGD.", ""]
    noise = [(label, _ratio_range({"targets": [dict(t, ratio=t["b_noise"] / t["b_crit"])
                                               for t in a["targets"] if t.get("b_noise")
                                               and t.get("b_crit")]}, "ratio"))
             for n, label, a in studies]
    noise = [f"{label} {r[0]:.2g}-{r[1]:.2g}x" for label, r in noise if r]
    if noise:
        lines += ["**B_noise against B_crit** (where a study measures it, from Hessian-vector "
                  "products on a batch independent of the gradients): " + "; ".join(noise)
                  + ". These rest on few Hessian points per run and are the noisiest column.", ""]
    sentences = [f"- {label}: {text}" for n, label, a in studies if a.get("lr_rules")
                 and (text := lr_sentence(contract.filled(a["lr_rules"], LRRules)))]
    if sentences:
        lines += ["**Learning rates**, read from the measured optima (the report's first screen):",
                  ""] + sentences + [""]
    return lines


def render(old: str) -> str:
    """results/README.md as the committed studies give it: the tables rendered, the discussion
    below DISCUSSION_MARKER kept from `old`."""
    discussion = old.split(DISCUSSION_MARKER, 1)[1] if DISCUSSION_MARKER in old else "\n"
    head = ["# Results of the studies", "",
            "Generated by `python experiments/summarize_studies.py` from the study folders "
            "below; each folder has analysis.json, report.md and figures/, and where it stays "
            "small runs.tar.xz, the run files that `scaling analyze` re-reads without "
            "retraining (`python experiments/run_study.py NAME --pack` packs a study's sweep "
            "folders so after it trains).", "", "## Critical batch size per study and target", ""]
    text = "\n".join(head + studies_table() + state_table() + coverage_table() + laws_table()
                     + branch_table() + schedules_table() + surge_table() + hyper_table()
                     + steps_to_target_table() + search_table() + nqm_table()
                     + rules_table() + mccandlish_section()
                     + results_prose.sections(RESULTS)) + "\n\n"
    return text + DISCUSSION_MARKER + discussion


def main() -> int:
    path = RESULTS / "README.md"
    path.write_text(render(path.read_text() if path.is_file() else ""))
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
