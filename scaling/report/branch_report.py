"""The report of a `scaling branch` folder: the local critical batch size along training against
the base's noise scales (figure and report.md), read from analysis.json's "branching"."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from scaling.analysis import in_use
from scaling.formatting import interval, markdown_table, number, percent
from scaling.report.style import (OKABE_ITO, batch_axis, batch_colours, figure, legend,
                                  log_limits, mark, proxy, save)
from scaling.store import atomic_write, layout
from scaling.store.rows import positive

CAPTIONS = {
    "local_b_crit": "Local critical batch size at each branch point (its interval over seeds as "
                    "a bar; a triangle where it is a bound: pointing up where every factor "
                    "kept up, down where even the smallest fell behind), against the base "
                    "run's B_simple and B_noise there; the grey band is the range of batch "
                    "sizes the branches tried.",
    "branch_ratios": "Each factor's loss at the window's end over the k = 1 reference's, per "
                     "point (log scale); below the dashed line a branch keeps up with it; a "
                     "factor with no loss at any rate is marked as diverged along the top.",
}


def _local_points(ax: Any, points: list[dict], smallest: int) -> list[float]:
    """Each point's local critical batch size: measured (its interval as a bar, a line
    joining neighbours only), a lower bound where every factor kept up, an upper bound where
    even the smallest factor fell behind; the values drawn."""
    measured = [not p["at_edge"] and p["local_b_crit"] > smallest for p in points]
    xs = [p["examples"] for p in points]
    ys = [p["local_b_crit"] if ok else float("nan") for p, ok in zip(points, measured)]
    cis = [p["local_b_crit_ci"] or [y, y] for p, y in zip(points, ys)]
    ax.errorbar(xs, ys, yerr=[[max(y - lo, 0) for y, (lo, _) in zip(ys, cis)],
                              [max(hi - y, 0) for y, (_, hi) in zip(ys, cis)]],
                fmt="o-", color=OKABE_ITO[0], capsize=4, zorder=3,
                label="local critical batch size (bar: its interval)")
    for kind, chosen in (("lower", [p for p in points if p["at_edge"]]),
                         ("upper", [p for p, ok in zip(points, measured)
                                    if not ok and not p["at_edge"]])):
        if chosen:
            mark(ax, kind, [p["examples"] for p in chosen], [p["local_b_crit"] for p in chosen],
                 OKABE_ITO[0], zorder=4)
    return [p["local_b_crit"] for p in points] + [v for ci in cis for v in ci
                                                  if positive(v)]


def local_b_crit_figure(branching: dict, path: Path) -> Path | None:
    """Local critical batch size (a bound where every factor, or none, kept up), B_simple and
    B_noise against the examples at each point."""
    points = [p for p in branching["points"] if positive(p.get("local_b_crit"))]
    if not points:
        return None
    fig, ax = figure(7.4, 4.4)
    b0 = branching["base"]["batch_size"]
    tried = [b["batch_size"] for p in branching["points"] for b in p["branches"]] + [b0]
    ax.axhspan(min(tried), max(tried), color="0.92", zorder=0)
    values = _local_points(ax, points, b0) + tried
    for key, label, colour in (("b_simple", "$B_{simple}$ of the base", OKABE_ITO[1]),
                               ("b_noise", "$B_{noise}$ of the base", OKABE_ITO[2])):
        series = [(p["examples"], p[key]) for p in branching["points"] if positive(p.get(key))]
        if series:
            ax.plot(*zip(*series), "s--", color=colour, ms=5, label=label)
            values += [v for _, v in series]
    unit = branching.get("unit", "examples")
    ax.set(xscale="log", yscale="log", ylim=log_limits(values, 1.6),
           xlabel=f"{unit} seen by the base at the branch point",
           ylabel=f"batch size ({unit})",
           title=f"Local critical batch size (base batch {number(b0)}, "
                 f"tolerance {branching['tolerance']:.3g})")
    ax.grid(True, which="major", alpha=0.3)
    legend(ax, extra=[(proxy(marker="s", color="0.88", ms=9), "batch sizes the branches tried")])
    return save(fig, path)


def ratios_figure(branching: dict, path: Path) -> Path | None:
    """Loss over the reference's against the branch batch size (log), one line per point;
    a factor with no loss at any rate marked as diverged along the top."""
    points = [p for p in branching["points"] if p["branches"]]
    if not points:
        return None
    fig, ax = figure(7.4, 4.4)
    colours = batch_colours([p["examples"] for p in points])
    unit = branching.get("unit", "examples")
    for p in points:
        rows = [(b["batch_size"], b["ratio"]) for b in p["branches"] if positive(b.get("ratio"))]
        if rows:
            ax.plot(*zip(*rows), "o-", color=colours[p["examples"]], ms=4,
                    label=f"at {number(p['examples'])} {unit}")
        failed = [b["batch_size"] for b in p["branches"] if not positive(b.get("ratio"))]
        if failed:
            mark(ax, "diverged", failed, [0.95] * len(failed), colours[p["examples"]],
                 transform=ax.get_xaxis_transform(), clip_on=False)
    ax.axhline(1 + branching["tolerance"], color="0.3", ls="--", lw=1,
               label=f"1 + tolerance ({branching['tolerance']:.3g})")
    ax.set_yscale("log")
    batch_axis(ax, [b["batch_size"] for p in points for b in p["branches"]],
               f"branch batch size ({unit} per step)")
    ax.set_ylabel(f"{branching['metric']} / k = 1 reference's")
    ax.set_title("Branches against the reference at the window's end")
    ax.grid(True, which="major", alpha=0.3)
    legend(ax, title="branch point", title_fontsize=7)
    return save(fig, path)


def write_figures(analysis: dict, folder: Path) -> list[Path]:
    branching = analysis["branching"]
    drawn = [local_b_crit_figure(branching, folder / "local_b_crit.png"),
             ratios_figure(branching, folder / "branch_ratios.png")]
    return [p for p in drawn if p is not None]


def _points_table(branching: dict) -> list[str]:
    factors = sorted({b["factor"] for p in branching["points"] for b in p["branches"]})
    header = ([f"point ({branching.get('unit', 'examples')})", "k=1 (lr factor)",
               "base s.e."] + [f"k={k}" for k in factors]
              + ["local B_crit", "95% interval over seeds", "B_simple", "B_noise", "local / B_simple"])
    rows = []
    for p in branching["points"]:
        by_k = {b["factor"]: b for b in p["branches"]}
        cells = [f"{number(by_k[k]['ratio'], 3)}{'' if by_k[k]['within'] else ' ✗'}"
                 if k in by_k else "-" for k in factors]
        local = f">= {number(p['local_b_crit'])}" if p["at_edge"] else number(p["local_b_crit"])
        ref, sem = p["reference"], p.get("base_loss_sem")
        rel = percent(sem / p["base_loss"]) if sem is not None and p["base_loss"] else "-"
        rows.append([number(p["examples"]),
                     f"{number(p['reference_loss'], 4)} ({number(ref['best_lr_factor'])})", rel,
                     *cells, local,
                     point_interval(p),
                     number(p["b_simple"]),
                     number(p["b_noise"]), number(p["local_over_b_simple"])])
    return markdown_table(header, rows)


MIN_DISTINCT = 3  # local values below this many distinct ones: no correlation worth quoting


def point_interval(point: dict) -> str:
    """A point's interval over seeds: none at a lower bound; 'every factor decided' where each
    factor is clearly within or clearly behind, so the set holds one batch size (the local
    B_crit is one of the branch batch sizes); '>= hi' where no factor tried is clearly behind."""
    ci = point["local_b_crit_ci"]
    if point["at_edge"] or not ci:
        return "-"
    if ci[0] == ci[1]:
        return "every factor decided"
    if point.get("local_b_crit_ci_open_above"):
        return f"[{number(ci[0])}, >= {number(ci[1])}]"
    return interval(ci)


def _local(point: dict) -> str:
    """A point's local B_crit: '>= 128' where every factor kept up (a lower bound)."""
    return f">= {number(point['local_b_crit'])}" if point["at_edge"] else \
        number(point["local_b_crit"])


def conclusion(branching: dict) -> list[str]:
    """Plain sentences from the numbers."""
    points = [p for p in branching["points"] if p["local_b_crit"] is not None]
    out = []
    if points:
        first, last = points[0], points[-1]
        unit = branching.get("unit", "examples")
        out.append(f"The local critical batch size went from {_local(first)} at "
                   f"{number(first['examples'])} {unit} to {_local(last)} at "
                   f"{number(last['examples'])}.")
        wide = [p for p in points if p["local_b_crit_ci"]
                and p["local_b_crit_ci"][1] >= 4 * p["local_b_crit_ci"][0]]
        if wide:
            out.append(f"At {len(wide)} of {len(points)} points the interval spans a factor of 4 "
                       "or more: the branches' losses differ by less than the seeds' spread "
                       "there; more seeds or a longer window would narrow it.")
        edge = [p for p in points if p["at_edge"]]
        if edge:
            out.append(f"At {len(edge)} point(s) every factor kept up, so the value there is a "
                       "lower bound: larger factors would be needed to find it.")
    rows = [r for p in points for r in [p["reference"], *p["branches"]]]
    edge = [r for r in rows if r.get("best_at_grid_edge")]
    if edge:
        out.append(f"{len(edge)} of {len(rows)} factor readings took the learning-rate grid's "
                   "smallest or largest factor: the grid does not bracket their best rate, and "
                   "a short window rewards a lower rate (it anneals the loss at once), so "
                   "read those with care.")
    agree = branching.get("noise_scale_agreement")
    if agree:
        distinct = len({p["local_b_crit"] for p in points})
        corr = agree["log_correlation"] if distinct >= MIN_DISTINCT else None
        out.append(f"Across {agree['points']} points the local critical batch size was "
                   f"{number(agree['ratio_min'])}x to {number(agree['ratio_max'])}x B_simple "
                   f"(median {number(agree['ratio_median'])}x)"
                   + (f"; the correlation of their logarithms is {corr:.2f}." if corr is not None
                      else "."))
    return ["## Conclusion", ""] + [f"- {s}" for s in out] + [""] if out else []


def write(out: Path, analysis: dict, figures: list[Path]) -> Path:
    """Write <out>/report.md of a branch folder (atomically)."""
    out = Path(out)
    b = analysis["branching"]
    base = b["base"]
    lines = [f"# Branched measurement: {out.name}", "", *in_use.note(analysis)] + conclusion(b)
    lines += ["## Setup", "",
              f"- Base: batch {base['batch_size']}, learning rate {number(base['learning_rate'], 4)}, "
              f"seeds {', '.join(map(str, base['seeds']))}.",
              f"- Branches: {b['window']:,} examples each, learning rate by the {b['lr_rule']} rule "
              "(times the best factor of the grid), judged by "
              f"{b['metric']} averaged over the last {b['average']} of {b['evals']} evaluation "
              f"points of the window; tolerance {b['tolerance']:.3g} (relative).",
              "- base s.e.: the standard error of the base's value over seeds, relative; a "
              "tolerance below it reads noise.",
              "- Each factor k is read at its best learning-rate factor; the reference is k = 1 "
              "read the same way (the base continued, factor 1, or B0 at the grid's other "
              "factors). The local critical batch size is the largest branch batch size whose "
              "every smaller factor keeps within the tolerance of the reference; ✗ marks a "
              "factor that falls behind.",
              "", "## Loss over the reference's, per factor", ""] + _points_table(b) + [""]
    lines += ["## Figures", ""]
    for path in figures:
        rel = Path(os.path.relpath(Path(path), out)).as_posix()
        lines += [f"![{Path(path).stem}]({rel})", "", CAPTIONS.get(Path(path).stem, ""), ""]
    path = out / layout.REPORT
    atomic_write(path, "\n".join(lines).rstrip() + "\n")
    return path


def summary_table(analysis: dict) -> str:
    """Plain text for the terminal: one line per point."""
    b: dict[str, Any] = analysis["branching"]
    lines = [f"base batch {b['base']['batch_size']}, window {b['window']:,} examples, "
             f"tolerance {b['tolerance']:.3g}"]
    for p in b["points"]:
        ratios = ", ".join(f"k={r['factor']}: {number(r['ratio'], 3)}" for r in p["branches"])
        lines.append(f"  {number(p['examples'])} {b.get('unit', 'examples')}: local B_crit "
                     f"{_local(p)}"
                     f"{'' if point_interval(p) == '-' else ' ' + point_interval(p)}, B_simple "
                     f"{number(p['b_simple'])} ({ratios})")
    return "\n".join(lines)
