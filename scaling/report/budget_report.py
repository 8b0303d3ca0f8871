"""report.md's fixed-budget section (read from analysis.json's `fixed_budget`): `REPORT`, the
fixed-budget view's report, which its registry line names (scaling.config.names.VIEW_TABLE);
and the lines that describe an imported folder's source in place of a config."""

from __future__ import annotations

from pathlib import Path

import yaml

from scaling.analysis.contract import Analysis
from scaling.analysis.view import ViewReport
from scaling.formatting import edge_bound, estimate, markdown_table, number
from scaling.report import budget_figures
from scaling.store import layout

LANDSCAPE_CAPTION = ("The final metric over learning rate x batch size (filled contours, mean "
                     "over seeds; values worse than the 70th percentile share the last "
                     "colour), each batch size's optimal learning rate (95% interval), the "
                     "optimum (star), the measured arg-min (square) and the learning-rate "
                     "rules (dashed).")
EDGE_TEXT = {"low": "at the smallest tried (no interpolation)",
             "high": "at the largest tried (no interpolation)"}


def _per_batch(cell: dict) -> list[str]:
    rows = [[p["batch_size"], number(p.get("best_lr")), number(p.get("best_value"), 4),
             edge_bound(p.get("learning_rate"), p.get("learning_rate_ci"), p.get("at_edge")),
             estimate(p.get("value"), p.get("value_ci")),
             "yes" if p.get("interpolated") else p.get("at_edge") or "no (a neighbour failed)",
             f"{p.get('num_complete')}/{p.get('num_lrs')}", p.get("num_diverged")]
            for p in cell.get("per_batch") or []]
    return markdown_table(["batch", "best grid LR", f"its {cell['metric']}",
                           "optimal LR [95% CI]", f"{cell['metric']} there [95% CI]",
                           "interpolated", "LRs complete/tried", "diverged"], rows)


def optimum_sentence(cell: dict, unit: str) -> str:
    """The cell's optimum in a sentence, with the measured arg-min beside it."""
    opt, best = cell.get("optimum") or {}, cell.get("best") or {}
    if opt.get("batch_size") is None:
        return "No batch size has a learning rate that every seed finished."
    edge = EDGE_TEXT.get(opt.get("at_edge"))
    where = f" ({edge}: the optimum may lie beyond the batch sizes tried)" if edge else \
        (" (interpolated)" if opt.get("interpolated") else "")
    return (f"The lowest final {cell['metric']} is at B_opt = "
            f"{edge_bound(opt['batch_size'], opt.get('batch_size_ci'), opt.get('at_edge'))} "
            f"{unit}{where}, learning "
            f"rate {estimate(opt['learning_rate'], opt.get('learning_rate_ci'))}, where it is "
            f"{estimate(opt['value'], opt.get('value_ci'))}; the measured arg-min is B = "
            f"{best.get('batch_size')}, learning rate {number(best.get('learning_rate'))} "
            f"({number(best.get('value'), 4)}).")


def conclusion(analysis: Analysis) -> list[str]:
    """The fixed-budget sentences of report.md's conclusion: the optimum, and where the grid's
    edges leave it uncertain."""
    fb = analysis.get("fixed_budget")
    if not fb or len(fb["cells"]) != 1:
        return []
    cell = fb["cells"][0]
    out = [optimum_sentence(cell, fb["batch_unit"])]
    for edge in ("low", "high"):
        sizes = [str(p["batch_size"]) for p in cell.get("per_batch") or [] if p["at_edge"] == edge]
        if sizes:
            out.append(f"At B = {', '.join(sizes)} the best learning rate is the {edge}est one "
                       "tried: the optimum may lie beyond it, and B_opt, read from these batch "
                       "sizes' best values, with it; widen the learning-rate grid there.")
    if cell.get("lr_rules"):
        out.append("Learning-rate rules against these optima: " + cell["lr_rules"]["summary"])
    return out


def _rules(cell: dict) -> list[str]:
    rules = cell.get("lr_rules")
    if not rules:
        return ["The learning-rate rules need optima at two or more batch sizes.", ""]
    fit = rules.get("noise_scale_fit")
    lines = [f"Learning-rate rules from B = {rules['reference']['batch_size']} at LR "
             f"{number(rules['reference']['learning_rate'])}" +
             (f"; noise-scale rule fitted to the optima: eps_max {number(fit['eps_max'])}, "
              f"B_noise {number(fit['b_noise'])}" if fit else "") + ".", ""]
    optimum = {o["batch_size"]: o["learning_rate"] for o in rules.get("optima") or []}
    rows = [[name.replace("_", "-"), r["batch_size"], number(optimum.get(r["batch_size"])),
             number(r["learning_rate"]), number(r["ratio_to_optimum"]), number(r["value"], 4),
             "-" if r["excess"] is None else f"{r['excess']:.4f}", r.get("note") or "-"]
            for name, entries in rules["rules"].items() for r in entries]
    return lines + markdown_table(["rule", "batch", "optimal LR", "predicted LR",
                                   "ratio to optimum", f"{cell['metric']} there",
                                   "excess over the optimum", "note"], rows) + \
        ["", rules["summary"], ""]


def section(analysis: Analysis) -> list[str]:
    """report.md's `## Fixed budget` for a folder analysed with that view (else nothing)."""
    fb = analysis.get("fixed_budget")
    if not fb or len(fb["cells"]) != 1:
        return []
    cell, unit = fb["cells"][0], fb["batch_unit"]
    how = cell.get("interval") or {}
    lines = ["## Fixed budget: the final metric at the end of every run", "",
             f"Each run's last {cell['metric']} ({'lower' if cell['lower_is_better'] else 'higher'}"
             f" is better), mean over {cell['seeds']} seed(s) per batch size and learning rate. "
             "Per batch size the best learning rate is read between grid points by a parabola "
             "in (log lr, log metric) through the best and its two neighbours; B_opt likewise "
             "in log B. Intervals: " + (how.get("definition") or "none (no bootstrap)") +
             (f" (noise {how['sigma_log']:.2g} in log metric)" if how.get("sigma_log") else "")
             + ".", "", optimum_sentence(cell, unit), ""]
    b_crit = cell.get("b_crit")
    if b_crit:
        lines += [f"Beside it, B_crit at {b_crit['target']} is "
                  f"{estimate(b_crit['value'], b_crit.get('ci'))} (the steps view).", ""]
    return lines + _per_batch(cell) + [""] + _rules(cell)


def import_lines(out: Path) -> list[str]:
    """report.md's description of an imported folder, from its sweep.yaml `import` section
    (nothing for a folder a sweep trained)."""
    path = Path(out) / layout.SWEEP_YAML
    record = (yaml.safe_load(path.read_text()) or {}).get("import") if path.is_file() else None
    if not record:
        return []
    per = record.get("tokens_per_example")
    sources = ", ".join(f"`{s['path']}` (sha256 {str(s['sha256'])[:12]}...)"
                        if isinstance(s.get("sha256"), str) else f"`{s['path']}`"
                        for s in record.get("sources") or [])
    columns = ", ".join(f"{k} = `{v}`" for k, v in (record.get("columns") or {}).items())
    return [f"- imported ({record.get('kind')}) from {sources}",
            f"- batch sizes in {record.get('unit')}" +
            (f", {number(per)} tokens per example" if per else ""),
            f"- columns: {columns or 'by their own names'}",
            f"- runs: {number(record.get('runs'))}",
            f"- command: `{record.get('command')}`"]


REPORT = ViewReport(section, conclusion, budget_figures.FIGURES, {"landscape": LANDSCAPE_CAPTION})
