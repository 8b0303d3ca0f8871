"""<out>/report.md: the sweep in brief, its run arithmetic, each view's sections (the fits, the
LR rules; the fixed-budget reading: scaling.report.views), the throughput, the figures, and a
plain-language conclusion written from the numbers (docs/results-format.md).

Everything here is read from analysis.json (see scaling.analysis) and sweep.yaml; nothing is
recomputed except the conclusion's closed forms, so the report and the JSON never disagree.
"""

from __future__ import annotations

import os
from pathlib import Path

from scaling.analysis import contract, in_use
from scaling.analysis.contract import Analysis
from scaling.store.cost import cost_line
from scaling.config import Config, ConfigError, learning_rates
from scaling.config.load import load_folder
from scaling.config.arithmetic import Arithmetic, format_table
from scaling.config.names import OPTIMIZER_TABLE
from scaling.config.optimizer_rules import weight_decay_tau
from scaling.formatting import count, markdown_table, number, percent
from scaling.report import answer, budget_report, views
from scaling.store import atomic_write, layout, read_arithmetic


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


def _sweep(out: Path, analysis: Analysis) -> list[str]:
    sw = analysis["sweep"]
    statuses = ", ".join(f"{n} {k}" for k, n in sw["statuses"].items())
    lines = ["## Sweep", ""]
    imported = budget_report.import_lines(out)
    if imported:
        return lines + imported + [f"- runs analysed: {number(sw['num_runs'])} ({statuses})",
                                   ""]
    try:
        cfg = load_folder(out / layout.SWEEP_YAML)
    except ConfigError as err:
        cfg = None
        lines += [f"(sweep.yaml could not be read: {err})", ""]
    if cfg is not None:
        lines += _config_section(cfg)
    lines += [f"- runs analysed: {number(sw['num_runs'])}" + (f" ({statuses})" if statuses else "")]
    spent = cost_line(analysis["cost"])
    return lines + ([f"- {spent}"] if spent else []) + [""] + _arithmetic(out, cfg)


def _throughput(analysis: Analysis) -> list[str]:
    rows = analysis["throughput"]
    if not rows:
        return []
    header = ["batch", "runs", "examples/s", "run-steps/s", "model FLOP/s", "MFU"]
    body = [[r["batch_size"], r["runs"], number(r["examples_per_s"]),
             number(r["run_steps_per_s"]), count(r["model_flops_per_s"]), percent(r["mfu"])]
            for r in rows]
    source = rows[0]["peak_source"]
    mfu = (f"MFU is their rate over the peak of {source}."
           if any(r["mfu"] is not None for r in rows) else f"No MFU: {source}.")
    return ["## Throughput", "",
            "Per batch size, the mean over its runs of their group's training speed (compile "
            "time left out). Model FLOPs are one run's forward and backward pass: 6 N + 12 L T d "
            f"per token for the language models' own networks, XLA's count otherwise. {mfu}",
            ""] + markdown_table(header, body) + [""]


def _figures(out: Path, figures: list[Path]) -> list[str]:
    lines = ["## Figures", ""]
    for path in figures:
        rel = Path(os.path.relpath(Path(path), out)).as_posix()
        stem = Path(path).stem
        lines += [f"![{stem}]({rel})", "", views.caption(stem), ""]
    return lines if figures else []


# ---------------------------------------------------------------- conclusion


def conclusion(analysis: Analysis) -> list[str]:
    """Plain-language sentences built from the numbers (one bullet each): each view's, then
    the searched hyperparameters' rules."""
    sentences = views.conclusion(analysis)
    sentences += [analysis["hyper_rules"]["summary"]] if analysis["hyper_rules"] else []
    return ["## Notes", ""] + [f"- {s}" for s in sentences] + [""] if sentences else []


def write(out: Path, analysis: dict, figures: list[Path]) -> Path:
    """Write <out>/report.md (atomically) and return its path; the analysis is read through
    the contract (contract.filled), so every key its types name is there."""
    out, analysis = Path(out), contract.filled(analysis)
    name = analysis["sweep"]["name"] or out.name
    lines = [f"# Scaling report: {name}", "", *in_use.note(analysis)]
    lines += answer.section(analysis) + conclusion(analysis) + _sweep(out, analysis)
    lines += views.sections(analysis)
    lines += _throughput(analysis)
    lines += _figures(out, figures)
    path = out / layout.REPORT
    atomic_write(path, "\n".join(lines).rstrip() + "\n")
    return path
