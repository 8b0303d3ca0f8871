"""<out>/report.md: the sweep in brief, its run arithmetic, the fits, the LR rules, the figures,
and a plain-language conclusion written from the numbers (docs/results-format.md).

Everything here is read from analysis.json (see scaling.analysis) and sweep.yaml; nothing is
recomputed except the conclusion's closed forms, so the report and the JSON never disagree.
"""

from __future__ import annotations

import os
from pathlib import Path

from scaling.analysis import in_use
from scaling.store.cost import cost_line
from scaling.analysis.definitions import DEFINITIONS
from scaling.analysis.table import unreached_lines
from scaling.report.crossing import crossing_lines
from scaling.report.schedules_report import schedules_section
from scaling.config import Config, ConfigError, learning_rates
from scaling.config.load import load_folder
from scaling.config.arithmetic import Arithmetic, format_table
from scaling.config.names import OPTIMIZER_TABLE
from scaling.config.optimizer_rules import weight_decay_tau
from scaling.analysis.intervals import describe, identify
from scaling.formatting import bound, count, estimate, interval, markdown_table, number, percent
from scaling.report import answer, budget_report
from scaling.report.captions import CAPTIONS
from scaling.report.hyper_rules import hyper_rules_section
from scaling.report.lr_rules import lr_conclusion, lr_rules_section
from scaling.report.tables import best_lr_section
from scaling.store import atomic_write, read_arithmetic

POOR_FIT = 0.15  # rms residual of log steps above which a fit is called poor (~16% typical error)
WIDE_CI = 4.0  # B_crit interval hi/lo above which it is called wide


# ---------------------------------------------------------------- the sweep in brief


def _model(cfg: Config) -> str:
    m = cfg.model
    shape = {"mlp": f"hidden {m.hidden}", "cnn": f"channels {m.channels}",
             "transformer": f"d_model {m.d_model}, {m.num_layers} layers, {m.num_heads} heads",
             "gpt": f"{m.preset + ' preset: ' if m.preset else ''}d_model {m.d_model}, "
                    f"{m.num_layers} layers, {m.num_heads} heads, {m.positions} positions"}
    return m.name + (f" ({shape[m.name]})" if m.name in shape else "")


def _scalar(value: float | list[float]) -> str:
    """A setting that may be a grid axis (a list): 0.9, or [0, 0.9]."""
    return f"[{', '.join(f'{v:g}' for v in value)}]" if isinstance(value, list) else f"{value:g}"


def _optimizer(cfg: Config) -> str:
    o, family = cfg.optimizer, OPTIMIZER_TABLE[cfg.optimizer.name]
    extra = []
    if family.uses_momentum:
        extra.append(f"momentum {_scalar(o.momentum)}")
    if family.adaptive:
        b2 = (f"b2 by the half_life rule from {o.b2:g} at batch {o.b2_ref_batch}" if o.b2_rule
              else f"b2 {_scalar(o.b2)}")
        extra.append(f"b1 {o.b1:g}, {b2}, eps {o.eps:g}")
    if o.weight_decay_rule:
        extra.append(f"weight decay by the timescale rule (tau {weight_decay_tau(cfg):.4g})")
    elif o.weight_decay:
        extra.append(f"weight decay {_scalar(o.weight_decay)}")
    return o.name + (f" ({', '.join(extra)})" if extra else "")


def _learning_rates(cfg: Config) -> str:
    lr = cfg.learning_rate
    if lr.mode != "grid":
        own = {"noise_scale": f"eps_max={number(lr.eps_max)}, B_noise={number(lr.b_noise)}",
               "surge": f"eta_max={number(lr.eta_max)}, B_peak={number(lr.b_peak)}"}
        reference = f"reference B={number(lr.batch_ref)}, LR={number(lr.lr_ref)}"
        return f"rule {lr.rule} ({own.get(lr.rule, reference)})"
    return ", ".join(number(v) for v in learning_rates(lr, min(cfg.batch.sizes)))


def _seeds(seeds: list[int]) -> str:
    """'1 seed (0)', '3 seeds (0, 1, 2)': how many first, since intervals depend on it."""
    return f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} ({', '.join(map(str, seeds))})"


def _config_section(cfg: Config) -> list[str]:
    s, bud = cfg.schedule, cfg.budget
    task_opts = ", ".join(f"{k} {v}" for k, v in vars(cfg.task.options).items()) \
        if cfg.task.options is not None else ""
    budget = ", ".join(f"{k} {number(v)}" for k, v in bud.limits().items())
    sched = s.name + (f", warm-up {s.warmup_fraction:g} of the run" if s.warmup_fraction else "")
    return [f"- task: {cfg.task.name}" + (f" ({task_opts})" if task_opts else ""),
            f"- model: {_model(cfg)}",
            f"- optimizer: {_optimizer(cfg)}",
            f"- schedule: {sched}",
            f"- batch sizes: {', '.join(str(b) for b in cfg.batch.sizes)}",
            f"- learning rates: {_learning_rates(cfg)}",
            f"- seeds: {_seeds(cfg.seeds)}",
            f"- budget per run: {budget or 'none'}",
            f"- targets: {', '.join(cfg.targets)}"]


def _arithmetic(out: Path, cfg: Config | None) -> list[str]:
    """The run arithmetic the sweep recorded (a folder from before it did shows none), with
    the rules' learning rates only where the sweep set its rates by a rule."""
    recorded = read_arithmetic(out)
    if not recorded:
        return []
    ruled = cfg is None or cfg.learning_rate.mode != "grid"
    return ["### Run arithmetic", "", "```",
            format_table([Arithmetic(**a) for a in recorded], rule_columns=ruled), "```", ""]


def _sweep(out: Path, analysis: dict) -> list[str]:
    sw = analysis.get("sweep") or {}
    statuses = ", ".join(f"{n} {k}" for k, n in (sw.get("statuses") or {}).items())
    lines = ["## Sweep", ""]
    imported = budget_report.import_lines(out)
    if imported:
        return lines + imported + [f"- runs analysed: {number(sw.get('num_runs'))} ({statuses})",
                                   ""]
    try:
        cfg = load_folder(out / "sweep.yaml")
    except ConfigError as err:
        cfg = None
        lines += [f"(sweep.yaml could not be read: {err})", ""]
    if cfg is not None:
        lines += _config_section(cfg)
    lines += [f"- runs analysed: {number(sw.get('num_runs'))}" + (f" ({statuses})" if statuses else "")]
    spent = cost_line(analysis.get("cost"))
    return lines + ([f"- {spent}"] if spent else []) + [""] + _arithmetic(out, cfg)


# ---------------------------------------------------------------- tables


SELECTION_TEXT = {
    "min": "the learning rate with the fewest steps, mean over seeds (optimistic: the luckiest "
           "of several noisy means)",
    "crossfit": "chosen on the other seeds and measured on each held-out seed, mean over seeds "
                "(cross-fitted, free of the winner's curse)"}


def _percent(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.0f}%"


def _reading(analysis: dict) -> list[str]:
    """How steps to target were read: the rule, the selection, and what the selection moved."""
    reached, how = analysis.get("reached"), analysis.get("lr_selection")
    if not reached:
        return []
    lines = ["## How steps to target are read", "",
             f"- reached: {reached.get('definition')}",
             f"- learning rate per batch size: {SELECTION_TEXT.get(how, how)}"]
    shifts = [p["steps_crossfit"] / p["steps_min"] for t in analysis.get("targets") or []
              for p in t.get("points") or [] if p.get("steps_crossfit") and p.get("steps_min")]
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


def _first_crossing(t: dict, first: dict) -> str:
    """The first-crossing B_crit, as a bound where it lies outside the batch sizes fitted."""
    sizes = [p["batch_size"] for p in t.get("points") or []]
    if first.get("b_crit") is None or not sizes:
        return estimate(first.get("b_crit"), first.get("b_crit_ci"))
    status = identify(first["b_crit"], first.get("b_crit_ci"), min(sizes), max(sizes))
    return estimate(first["b_crit"], first.get("b_crit_ci"), status)


def _fits(analysis: dict) -> list[str]:
    rows = []
    for t in analysis.get("targets") or []:
        fit, reg = t.get("fit") or {}, t.get("regimes") or {}
        first = t.get("first_crossing") or {}
        status = fit.get("identification")
        shown = estimate(t.get("b_crit"), t.get("b_crit_ci"), status)
        bold = f"**{shown.split(' [')[0]}**" + shown[len(shown.split(' [')[0]):] \
            if t.get("b_crit") is not None and (status or {}).get("identified", True) else shown
        rows.append([t["name"], number(fit.get("num_points")),
                     answer.s_min_text(t), answer.e_min_text(t), bold,
                     _first_crossing(t, first),
                     t.get("b_simple"), t.get("b_noise"),
                     t.get("b_simple_over_b_crit") if (status or {}).get("identified", True)
                     else None,
                     fit.get("rms_log_residual"), reg.get("perfect_scaling_until"),
                     reg.get("steps_plateau_from"),
                     ", ".join(str(b) for b in t.get("unreached_batch_sizes") or []) or "-"])
    header = ["target", "points", "S_min [95% CI]", "E_min [95% CI]", "B_crit [95% CI]",
              "B_crit, first crossing", "B_simple", "B_noise", "B_simple/B_crit", "rms log residual",
              "perfect scaling until B", "plateau from B", "not reached at B"]
    definitions = {(t.get("regimes") or {}).get("definition") for t in analysis.get("targets") or []}
    notes = [f"Regimes: {d}" for d in sorted(d for d in definitions if d)]
    intervals = sorted({describe(t.get("interval")) for t in analysis.get("targets") or []
                        if t.get("fit")})
    notes += [f"Intervals: {', '.join(intervals)}."] if intervals else []
    return ["## Trade-off fits: S(B) = S_min + E_min / B", ""] + markdown_table(header, rows) + [""] \
        + notes + ([""] if notes else [])


def _definitions(analysis: dict) -> list[str]:
    """B_crit by the other definitions beside E_min / S_min, and the power law across targets."""
    shown = [d for d in DEFINITIONS if any(t.get(d.key) for t in analysis.get("targets") or [])]
    targets = [t for t in analysis.get("targets") or [] if all(t.get(d.key) for d in shown)]
    if not shown or not targets:
        return []
    header = ["target", "E_min / S_min"] + [name for d in shown for name, _ in d.columns]
    rows = [[t["name"], bound((t.get("fit") or {}).get("identification")) or number(t.get("b_crit"))]
            + [number(read(t[d.key])) for d in shown for _, read in d.columns] for t in targets]
    lines = ["## Other definitions of the critical batch size", "",
             "McCandlish et al.'s E_min / S_min beside " + "; ".join(d.text for d in shown) + ".",
             ""] + markdown_table(header, rows) + [""]
    for fit in analysis.get("b_crit_power_law") or []:
        alpha = "-" if fit["alpha_b"] is None else f"{fit['alpha_b']:.3g}"
        lines += [f"- Across the {fit['num_targets']} {fit['metric']} targets: B_crit = "
                  f"{number(fit['b_star'])} x L^{fit['exponent']:.3g} (95% interval of the "
                  f"exponent {interval(fit['exponent_ci'])}), so alpha_B = {alpha} in "
                  "B_crit = B_* / L^(1/alpha_B) (Kaplan et al. 2020)."]
    return lines + ([""] if analysis.get("b_crit_power_law") else [])


def _throughput(analysis: dict) -> list[str]:
    rows = analysis.get("throughput") or []
    if not rows:
        return []
    header = ["batch", "runs", "examples/s", "run-steps/s", "model FLOP/s", "MFU"]
    body = [[r["batch_size"], r["runs"], number(r["examples_per_s"]),
             number(r["run_steps_per_s"]), count(r["model_flops_per_s"]), percent(r["mfu"])]
            for r in rows]
    return ["## Throughput", "",
            "Per batch size, the mean over its runs of their group's training speed (compile "
            "time left out). Model FLOPs are one run's forward and backward pass: 6 N + 12 L T d "
            "per token for the language models' own networks, XLA's count otherwise; MFU is "
            f"their rate over the peak of {rows[0]['peak_source']} ('-' without a published "
            "peak, as on CPU; train.peak_tflops gives one).", ""] \
        + markdown_table(header, body) + [""]


def _figures(out: Path, figures: list[Path]) -> list[str]:
    lines = ["## Figures", ""]
    for path in figures:
        rel = Path(os.path.relpath(Path(path), out)).as_posix()
        stem = Path(path).stem
        lines += [f"![{stem}]({rel})", "", CAPTIONS.get(stem, stem), ""]
    return lines if figures else []


# ---------------------------------------------------------------- conclusion


def ideal_share(batch_size: float, b_crit: float) -> float:
    """Share of the ideal 2x step reduction that doubling B buys under S = S_min + E_min/B.

    (S(B) - S(2B)) / (S(B) / 2) = B_crit / (B + B_crit): 1/2 at B = B_crit.
    """
    return b_crit / (batch_size + b_crit)


def _target_conclusion(t: dict) -> list[str]:
    name, fit = t["name"], t.get("fit")
    out = []
    unreached = t.get("unreached_batch_sizes") or []
    if unreached and not t.get("points"):
        return [f"{name} was not reached at any batch size or learning rate within the budget: "
                "no fit; a larger budget or an easier target would give one."]
    out += [f"{name} was {line}." for line in unreached_lines(t)]
    edges = [p for p in t.get("points") or [] if p.get("at_edge")]
    if edges:
        out.append(f"For {name} the best learning rate sits at the grid's edge at batch size "
                   + ", ".join(f"{p['batch_size']} ({p['at_edge']})" for p in edges)
                   + ": the true optimum may lie outside the grid there, so those points "
                   "(and the fit) may overstate the steps needed; widen the grid.")
    cross = t.get("crossing") or {}
    if cross.get("crossed"):
        return out + crossing_lines(name, cross)
    if not fit or t.get("b_crit") is None:
        out.append(f"No trade-off fit for {name}: it needs the target reached at two or more "
                   "batch sizes.")
        return out
    status = fit.get("identification") or {}
    if not status.get("identified", True):
        out.append(f"For {name}, B_crit is not identified by these runs: {bound(status)} "
                   f"({status.get('why')}).")
        return out
    b = t["b_crit"]
    sizes = [p["batch_size"] for p in t.get("points") or []]
    if sizes and b < min(sizes) / 2:
        out.append(f"For {name}, steps hardly fall with the batch size: B_crit lies below the "
                   f"smallest batch size tried ({min(sizes)}; the fit gives {number(b)}), so these "
                   "runs cannot place it; a harder target, or smaller batches, would.")
        return out
    record = t.get("interval") or {}
    over = f" ({describe(record)})" if record.get("resamples", "none") != "none" else ""
    out.append(f"For {name}, B_crit is about {estimate(b, t.get('b_crit_ci'), status)}{over}: "
               f"beyond a batch of about {number(b)} each "
               "doubling of the batch buys less than half of the ideal 2x speed-up in steps"
               + (f" (at B={max(sizes)}, {100 * ideal_share(max(sizes), b):.0f}% of it)"
                  if sizes and max(sizes) > b else "") + ".")
    return out + _fit_caveats(t, fit, b, sizes)


def _fit_caveats(t: dict, fit: dict, b: float, sizes: list[int]) -> list[str]:
    """What qualifies a target's B_crit: the first crossing's reading, a wide interval, a poor
    fit, an extrapolation, and B_simple beside it."""
    out = []
    ci = t.get("b_crit_ci")
    first = t.get("first_crossing") or {}
    if first.get("outside_interval"):
        out.append(f"Read at the first crossing with the fewest mean steps, B_crit would be "
                   f"{number(first.get('b_crit'))}, outside this interval ({interval(ci)}): there "
                   "the metric's noise moves the answer more than the seeds do.")
    if ci and ci[0] and ci[1] and ci[1] / ci[0] > WIDE_CI:
        out.append(f"The interval for B_crit is wide ({interval(ci)}, a factor "
                   f"{ci[1] / ci[0]:.3g}): read it as an order of magnitude; more seeds or batch "
                   "sizes would narrow it.")
    rms = fit.get("rms_log_residual")
    if rms is not None and rms > POOR_FIT:
        out.append(f"The fit is poor (rms residual of log steps {rms:.2f}), so S(B) = S_min + "
                   "E_min/B describes these points only roughly.")
    if sizes and b > max(sizes):
        out.append(f"B_crit lies above the largest batch size tried ({max(sizes)}): an "
                   "extrapolation.")
    ratio = t.get("b_simple_over_b_crit")
    if ratio is not None:
        within = "within" if 0.1 <= ratio <= 10 else "not within"
        out.append(f"B_simple at the crossing is {ratio:.2g}x B_crit ({within} an order of "
                   "magnitude).")
    return out


def conclusion(analysis: dict) -> list[str]:
    """Plain-language sentences built from the numbers (one bullet each)."""
    sentences = [s for t in analysis.get("targets") or [] for s in _target_conclusion(t)]
    sentences += lr_conclusion(analysis) + budget_report.conclusion(analysis)
    sentences += [analysis["hyper_rules"]["summary"]] if analysis.get("hyper_rules") else []
    return ["## Notes", ""] + [f"- {s}" for s in sentences] + [""] if sentences else []


def write(out: Path, analysis: dict, figures: list[Path]) -> Path:
    """Write <out>/report.md (atomically) and return its path."""
    out = Path(out)
    name = (analysis.get("sweep") or {}).get("name") or out.name
    lines = [f"# Scaling report: {name}", "", *in_use.note(analysis)]
    lines += answer.section(analysis) + conclusion(analysis) + _sweep(out, analysis) + budget_report.section(analysis)
    steps = [_reading, _fits, best_lr_section, _definitions, schedules_section, lr_rules_section,
             hyper_rules_section]
    lines += [line for part in steps if analysis.get("targets") for line in part(analysis)]
    lines += _throughput(analysis)
    lines += _figures(out, figures)
    path = out / "report.md"
    atomic_write(path, "\n".join(lines).rstrip() + "\n")
    return path
