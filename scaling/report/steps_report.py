"""The steps view's part of report.md: how steps to target are read, the trade-off fits, each
batch size's best learning rate, the other definitions of B_crit, the schedules, the rules,
and the notes written from each target's numbers: `REPORT`, the steps view's report, which its
registry line names (scaling.config.names.VIEW_TABLE).
"""

from __future__ import annotations

from scaling.analysis.contract import Analysis, FirstCrossing, Fit, Target
from scaling.analysis.definitions import DEFINITIONS
from scaling.analysis.intervals import describe, identify
from scaling.analysis.sections import Identification
from scaling.analysis.table import unreached_lines
from scaling.analysis.view import ViewReport
from scaling.formatting import bound, estimate, interval, markdown_table, number
from scaling.report import answer, figures
from scaling.report.captions import CAPTIONS
from scaling.report.crossing import crossing_lines
from scaling.report.hyper_rules import hyper_rules_section
from scaling.report.lr_rules import lr_conclusion, lr_rules_section
from scaling.report.schedules_report import schedules_section
from scaling.report.tables import best_lr_section

POOR_FIT = 0.15  # rms residual of log steps above which a fit is called poor (~16% typical error)
WIDE_CI = 4.0  # B_crit interval hi/lo above which it is called wide


SELECTION_TEXT = {
    "min": "the learning rate with the fewest steps, mean over seeds (optimistic: the luckiest "
           "of several noisy means)",
    "crossfit": "chosen on the other seeds and measured on each held-out seed, mean over seeds "
                "(cross-fitted, free of the winner's curse)"}


def _percent(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.0f}%"


def _reading(analysis: Analysis) -> list[str]:
    """How steps to target were read: the rule, the selection, and what the selection moved."""
    reached, how = analysis["reached"], analysis["lr_selection"]
    if not reached:
        return []
    lines = ["## How steps to target are read", "",
             f"- reached: {reached['definition']}",
             f"- learning rate per batch size: {SELECTION_TEXT.get(how, how)}"]
    shifts = [p["steps_crossfit"] / p["steps_min"] for t in analysis["targets"]
              for p in t["points"] if p["steps_crossfit"] and p["steps_min"]]
    if shifts:
        mid = sorted(shifts)[len(shifts) // 2]
        lines.append(f"- cross-fitted steps (each seed read at the learning rate the other seeds "
                     f"chose) are {_percent(min(shifts))} to {_percent(max(shifts))} (median "
                     f"{_percent(mid)}) off the fewest mean steps, which are optimistic by at "
                     "most that much (the winner's curse; cross-fitting errs the other way "
                     "when it picks a worse learning rate)")
    lines += ["- beside it, B_crit as most papers read it: the first crossing and the fewest "
              "mean steps (column \"B_crit, first crossing\")", ""]
    return lines


def _first_crossing(t: Target, first: FirstCrossing) -> str:
    """The first-crossing B_crit, as a bound where it lies outside the batch sizes fitted."""
    sizes = [p["batch_size"] for p in t["points"]]
    if first["b_crit"] is None or not sizes:
        return estimate(first["b_crit"], first["b_crit_ci"])
    status = identify(first["b_crit"], first["b_crit_ci"], min(sizes), max(sizes))
    return estimate(first["b_crit"], first["b_crit_ci"], status)


def _identified(status: Identification | None) -> bool:
    """Whether a value is pinned by its data; one with no identification (no fit, or a file
    from before identifications) reads as pinned."""
    return not status or status["identified"]


def _fits(analysis: Analysis) -> list[str]:
    rows = []
    for t in analysis["targets"]:
        fit, reg = t["fit"], t["regimes"]
        status = fit and fit["identification"]
        shown = estimate(t["b_crit"], t["b_crit_ci"], status)
        bold = f"**{shown.split(' [')[0]}**" + shown[len(shown.split(' [')[0]):] \
            if t["b_crit"] is not None and _identified(status) else shown
        rows.append([t["name"], number(fit and fit["num_points"]),
                     answer.s_min_text(t), answer.e_min_text(t), bold,
                     _first_crossing(t, t["first_crossing"]),
                     t["b_simple"], t["b_noise"],
                     t["b_simple_over_b_crit"] if _identified(status) else None,
                     fit and fit["rms_log_residual"], reg["perfect_scaling_until"],
                     reg["steps_plateau_from"],
                     ", ".join(str(b) for b in t["unreached_batch_sizes"]) or "-"])
    header = ["target", "points", "S_min [95% CI]", "E_min [95% CI]", "B_crit [95% CI]",
              "B_crit, first crossing", "B_simple", "B_noise", "B_simple/B_crit", "rms log residual",
              "perfect scaling until B", "plateau from B", "not reached at B"]
    definitions = {t["regimes"]["definition"] for t in analysis["targets"]}
    notes = [f"Regimes: {d}" for d in sorted(d for d in definitions if d)]
    intervals = sorted({describe(t["interval"]) for t in analysis["targets"] if t["fit"]})
    notes += [f"Intervals: {', '.join(intervals)}."] if intervals else []
    return ["## Trade-off fits: S(B) = S_min + E_min / B", ""] + markdown_table(header, rows) + [""] \
        + notes + ([""] if notes else [])


def _definitions(analysis: Analysis) -> list[str]:
    """B_crit by the other definitions beside E_min / S_min, and the power law across targets."""
    shown = [d for d in DEFINITIONS if any(t[d.key] for t in analysis["targets"])]
    targets = [t for t in analysis["targets"] if all(t[d.key] for d in shown)]
    if not shown or not targets:
        return []
    header = ["target", "E_min / S_min"] + [name for d in shown for name, _ in d.columns]
    rows = [[t["name"], bound(t["fit"] and t["fit"]["identification"]) or number(t["b_crit"])]
            + [number(read(t[d.key])) for d in shown for _, read in d.columns] for t in targets]
    lines = ["## Other definitions of the critical batch size", "",
             "McCandlish et al.'s E_min / S_min beside " + "; ".join(d.text for d in shown) + ".",
             ""] + markdown_table(header, rows) + [""]
    for fit in analysis["b_crit_power_law"]:
        alpha = "-" if fit["alpha_b"] is None else f"{fit['alpha_b']:.3g}"
        lines += [f"- Across the {fit['num_targets']} {fit['metric']} targets: B_crit = "
                  f"{number(fit['b_star'])} x L^{fit['exponent']:.3g} (95% interval of the "
                  f"exponent {interval(fit['exponent_ci'])}), so alpha_B = {alpha} in "
                  "B_crit = B_* / L^(1/alpha_B) (Kaplan et al. 2020)."]
    return lines + ([""] if analysis["b_crit_power_law"] else [])


def ideal_share(batch_size: float, b_crit: float) -> float:
    """Share of the ideal 2x step reduction that doubling B buys under S = S_min + E_min/B.

    (S(B) - S(2B)) / (S(B) / 2) = B_crit / (B + B_crit): 1/2 at B = B_crit.
    """
    return b_crit / (batch_size + b_crit)


def _target_conclusion(t: Target) -> list[str]:
    name, fit = t["name"], t["fit"]
    out = []
    unreached = t["unreached_batch_sizes"]
    if unreached and not t["points"]:
        return [f"{name} was not reached at any batch size or learning rate within the budget: "
                "no fit; a larger budget or an easier target would give one."]
    out += [f"{name} was {line}." for line in unreached_lines(t)]
    edges = [p for p in t["points"] if p["at_edge"]]
    if edges:
        out.append(f"For {name} the best learning rate sits at the grid's edge at batch size "
                   + ", ".join(f"{p['batch_size']} ({p['at_edge']})" for p in edges)
                   + ": the true optimum may lie outside the grid there, so those points "
                   "(and the fit) may overstate the steps needed; widen the grid.")
    cross = t["crossing"]
    if cross and cross["crossed"]:
        return out + crossing_lines(name, cross)
    if not fit or t["b_crit"] is None:
        out.append(f"No trade-off fit for {name}: it needs the target reached at two or more "
                   "batch sizes.")
        return out
    status = fit["identification"]
    if not _identified(status):
        out.append(f"For {name}, B_crit is not identified by these runs: {bound(status)} "
                   f"({status['why']}).")
        return out
    b = t["b_crit"]
    sizes = [p["batch_size"] for p in t["points"]]
    if sizes and b < min(sizes) / 2:
        out.append(f"For {name}, steps hardly fall with the batch size: B_crit lies below the "
                   f"smallest batch size tried ({min(sizes)}; the fit gives {number(b)}), so these "
                   "runs cannot place it; a harder target, or smaller batches, would.")
        return out
    record = t["interval"]
    over = f" ({describe(record)})" if record and record["resamples"] != "none" else ""
    out.append(f"For {name}, B_crit is about {estimate(b, t['b_crit_ci'], status)}{over}: "
               f"beyond a batch of about {number(b)} each "
               "doubling of the batch buys less than half of the ideal 2x speed-up in steps"
               + (f" (at B={max(sizes)}, {100 * ideal_share(max(sizes), b):.0f}% of it)"
                  if sizes and max(sizes) > b else "") + ".")
    return out + _fit_caveats(t, fit, b, sizes)


def _fit_caveats(t: Target, fit: Fit, b: float, sizes: list[int]) -> list[str]:
    """What qualifies a target's B_crit: the first crossing's reading, a wide interval, a poor
    fit, an extrapolation, and B_simple beside it."""
    out = []
    ci = t["b_crit_ci"]
    first = t["first_crossing"]
    if first["outside_interval"]:
        out.append(f"Read at the first crossing with the fewest mean steps, B_crit would be "
                   f"{number(first['b_crit'])}, outside this interval ({interval(ci)}): there "
                   "the metric's noise moves the answer more than the seeds do.")
    if ci and ci[0] and ci[1] and ci[1] / ci[0] > WIDE_CI:
        out.append(f"The interval for B_crit is wide ({interval(ci)}, a factor "
                   f"{ci[1] / ci[0]:.3g}): read it as an order of magnitude; more seeds or batch "
                   "sizes would narrow it.")
    rms = fit["rms_log_residual"]
    if rms is not None and rms > POOR_FIT:
        out.append(f"The fit is poor (rms residual of log steps {rms:.2f}), so S(B) = S_min + "
                   "E_min/B describes these points only roughly.")
    if sizes and b > max(sizes):
        out.append(f"B_crit lies above the largest batch size tried ({max(sizes)}): an "
                   "extrapolation.")
    ratio = t["b_simple_over_b_crit"]
    if ratio is not None:
        within = "within" if 0.1 <= ratio <= 10 else "not within"
        out.append(f"B_simple at the crossing is {ratio:.2g}x B_crit ({within} an order of "
                   "magnitude).")
    return out


def section(analysis: Analysis) -> list[str]:
    """The steps view's sections of report.md (nothing for a folder with no targets)."""
    if not analysis["targets"]:
        return []
    parts = [_reading, _fits, best_lr_section, _definitions, schedules_section,
             lr_rules_section, hyper_rules_section]
    return [line for part in parts for line in part(analysis)]


def conclusion(analysis: Analysis) -> list[str]:
    """The steps view's notes: each target's, then the learning-rate rules'."""
    return [s for t in analysis["targets"] for s in _target_conclusion(t)] \
        + lr_conclusion(analysis)


REPORT = ViewReport(section, conclusion, figures.FIGURES, CAPTIONS)
