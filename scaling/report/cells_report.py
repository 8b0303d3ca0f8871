"""A multi-cell folder's report.md, figures and terminal summary: the laws across the cells and
each cell's optimum, read from the parent's analysis.json (scaling.analysis.cells). Each cell
has its own report beside its runs."""

from __future__ import annotations

import os
from pathlib import Path

from scaling.analysis import in_use
from scaling.analysis.sections import Law
from scaling.formatting import (count, edge_bound, estimate, interval, markdown_table, number,
                                text_table, unpinned)
from scaling.report import budget_report, law_figures
from scaling.store import atomic_write, layout

LAW_NAMES = {"learning_rate": "optimal learning rate eta*",
             "batch_size": "optimal batch size B_opt", "loss": "final metric at the optimum",
             "b_crit": "critical batch size B_crit (primary target, against the budget)",
             "b_crit_data": "critical batch size B_crit (every target, against its E_min)"}
CAPTIONS = {
    "optima_vs_budget": "Each cell's optimum (its interval as a bar; a bound or the edge style "
                        "where it sits at an edge of what the cell tried) against its budget D, "
                        "one colour per model size N with points of one D set apart, the "
                        "measured arg-min (squares), the fitted law (lines; dotted where its "
                        "cells' optima sit at an edge), B_opt's law in D alone and the largest "
                        "batch size tried; at a billion tokens and more, Li et al. 2025's Step "
                        "Law (dash-dot, its batch size converted from tokens to the batch unit).",
    "b_crit_vs_data": "Left: B_crit of every cell and target (its interval as a bar; hollow "
                      "where the interval runs past 8x the largest batch tried, left out of the "
                      "law; a diamond where the batch sizes fitted do not identify it) against "
                      "the data the target needs (E_min, its fewest examples or tokens). Right: "
                      "each cell's B_opt against its budget. One colour per N, with the fitted "
                      "laws and the largest batch size tried."}


def _bound(law: Law) -> str:
    """A suffix for an exponent read from optima at the edge of the values tried: a bound,
    not a finding (the law's note says which cells)."""
    return "" if law["identification"]["identified"] else " (bound)"


def _exponent(law: Law, name: str) -> str:
    value = law["exponents"].get(name)
    if value is None:
        return "left out: " + law["left_out"].get(name, "not fitted")
    return f"{value:.3f} {interval(law['exponents_ci'].get(name))}{_bound(law)}"


def _alone(law: Law, name: str) -> str:
    fit = law["alone"].get(name)
    return "-" if not fit else \
        f"{fit['exponent']:.3f} {interval(fit.get('exponent_ci'))}{_bound(law)}"


def _non_embedding(law: Law) -> str:
    """The exponent of N in the same law with N counted without the embeddings."""
    fit = law.get("non_embedding")
    if not fit or fit["exponents"].get("params") is None:
        return "-"
    return (f"{fit['exponents']['params']:.3f} {interval(fit['exponents_ci'].get('params'))}"
            f"{_bound(law)}")


def _argmin(law: Law) -> str:
    fit = law["argmin"]
    if not fit:
        return "-"
    parts = [f"{k} {v:.3f}" for k, v in fit["exponents"].items() if v is not None]
    alone = fit.get("alone") or {}
    return ", ".join(parts) + (f"; D alone {alone['tokens']:.3f}" if alone.get("tokens")
                               is not None else "")


def laws_table(analysis: dict) -> list[str]:
    laws = analysis["fixed_budget"]["laws"]
    rows = [[LAW_NAMES.get(name, name), _coefficient(law),
             _exponent(law, "params"), _non_embedding(law), _exponent(law, "tokens"),
             _alone(law, "tokens"), _argmin(law), number(law["rms_log_residual"]),
             number(law["num_cells"])]
            for name, law in laws.items() if law]
    return markdown_table(["law", "coefficient [95% CI]", "exponent of N [95% CI]",
                           "exponent of N without embeddings [95% CI]",
                           "exponent of D [95% CI]", "D alone [95% CI]",
                           "measured arg-min: exponents", "rms log residual", "cells"], rows)


def _coefficient(law: Law) -> str:
    """The law's prefactor (its value at N = D = 1, far outside the cells) with its interval,
    unless the interval spans more than formatting.WIDE: the exponents' uncertainty,
    extrapolated."""
    ci = law["coefficient_ci"]
    return unpinned(law["coefficient"], ci) or estimate(law["coefficient"], ci)


def _law_notes(analysis: dict) -> list[str]:
    """Per law: its exponents printed as bounds and why, why it has no interval, and which
    B_crit readings it left out."""
    laws = analysis["fixed_budget"]["laws"]
    notes = []
    for name, law in laws.items():
        if not law:
            continue
        label = LAW_NAMES.get(name, name)
        why_bound = law["identification"]["why"]
        if why_bound:
            notes.append(f"- {label}: {why_bound}.")
        why_none = law["interval"]["why"]
        if law["coefficient"] is not None and why_none:
            notes.append(f"- {label}: no interval, {why_none}.")
        if law["left_out"].get("points"):
            notes.append(f"- {label}: left out {law['left_out']['points']}.")
    return [""] + notes if notes else []


def _cells_table(analysis: dict) -> list[str]:
    rows = []
    for c in analysis["fixed_budget"]["cells"]:
        opt, best, b_crit = c.get("optimum") or {}, c.get("best") or {}, c.get("b_crit") or {}
        link = f"[{c['name']}]({c['folder']}/report.md)"
        rows.append([link, count(c.get("params")), count(c.get("tokens") or c.get("examples")),
                     count(c.get("compute")), number(c.get("num_runs")),
                     (c.get("interval") or {}).get("resamples") or "-",
                     f"{best.get('batch_size')}, {number(best.get('learning_rate'))}",
                     edge_bound(opt.get("batch_size"), opt.get("batch_size_ci"),
                                opt.get("at_edge")),
                     estimate(opt.get("learning_rate"), opt.get("learning_rate_ci")),
                     estimate(opt.get("value"), opt.get("value_ci")), opt.get("at_edge") or "-",
                     estimate(b_crit.get("value"), b_crit.get("ci"))])
    return markdown_table(["cell", "N", "D", "C (FLOPs)", "runs", "interval", "arg-min B, LR",
                           "B_opt [95% CI]", "eta* [95% CI]", "metric there [95% CI]",
                           "B_opt at edge", "B_crit [95% CI]"], rows)


def _method(analysis: dict) -> list[str]:
    fb, manifest = analysis["fixed_budget"], analysis.get("manifest") or {}
    per = manifest.get("tokens_per_example")
    return [f"Metric: final {fb['metric']} ({'lower' if fb['lower_is_better'] else 'higher'} is "
            f"better). Batch sizes in {fb['batch_unit']}" +
            (f" ({number(per)} tokens each)" if per else "") + f"; D in {fb['budget_unit']}; "
            f"compute C: {manifest.get('compute_source')}.",
            "",
            "Each law is y = coefficient x N^a x D^b, least squares on log y over the cells; a "
            "variable spanning less than 2x across the cells is left out. Intervals: 2.5 and "
            "97.5 percentiles over bootstrap draws that resample the cells and, within each "
            "cell, its seeds (or, with one seed per point, add noise of the spread its "
            "landscape shows). \"D alone\" fits the law in D only (as Step Law and Power Lines "
            "fit the batch size); the last columns fit the measured arg-min of each cell "
            "instead of the optimum read between grid points.", ""]


def write(out: Path, analysis: dict, figures: list[Path]) -> Path:
    """Write <out>/report.md (atomically) and return its path."""
    out = Path(out)
    lines = [f"# Scaling laws: {analysis['sweep']['name']}", "", *in_use.note(analysis),
             f"{analysis['sweep']['cells']} cells, {number(analysis['sweep']['num_runs'])} runs.",
             *_cooldown_lines(analysis),
             "", "## Laws across the cells", ""] + _method(analysis) + laws_table(analysis) + \
        _law_notes(analysis) + ["", "## Cells", ""] + _cells_table(analysis) + [""]
    imported = budget_report.import_lines(out)
    if imported:
        lines += ["## Source", ""] + imported + [""]
    lines += ["## Figures", ""] if figures else []
    for path in figures:
        rel = Path(os.path.relpath(path, out)).as_posix()
        lines += [f"![{Path(path).stem}]({rel})", "", CAPTIONS.get(Path(path).stem, ""), ""]
    target = out / layout.REPORT
    atomic_write(target, "\n".join(lines).rstrip() + "\n")
    return target


def _cooldown_lines(analysis: dict) -> list[str]:
    """A cooldown sweep's cost against separate runs per budget (nothing for other folders)."""
    c = analysis.get("cooldowns")
    if not c or not c["examples_separate"]:
        return []
    return ["", f"The budgets share their stable runs (cooldown branches): "
            f"{number(c['examples_trained'])} examples trained, against "
            f"{number(c['examples_separate'])} for separate runs per budget "
            f"({c['ratio']:.2f}x)."]


def write_figures(analysis: dict, folder: Path) -> list[Path]:
    paths = [law_figures.optima_vs_budget(analysis, Path(folder) / "optima_vs_budget.png"),
             law_figures.b_crit_vs_data(analysis, Path(folder) / "b_crit_vs_data.png")]
    return [p for p in paths if p]


def summary_table(analysis: dict) -> str:
    """The laws for the terminal, one line each."""
    laws = analysis["fixed_budget"]["laws"]
    rows = [[name, number(law["coefficient"]), _exponent(law, "params"),
             _exponent(law, "tokens"), _alone(law, "tokens")]
            for name, law in laws.items() if law]
    table = f"{analysis['sweep']['cells']} cells\n" + text_table(
        ["law", "coefficient", "exponent of N", "exponent of D", "D alone"], rows)
    return "\n".join([table, *_cooldown_lines(analysis)[1:]])
