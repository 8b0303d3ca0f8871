"""Figures of a sweep, drawn from analysis.json and the run records (docs/results-format.md).

One function per figure; each returns the path it wrote, or None when its data do not exist
(no target reached, no noise-scale measurements), so `write_all` never fails on a sparse
sweep. The shared look lives in scaling.report.style, the noise-scale figure (also drawn for a
single run by `scaling gns`) in scaling.report.noise_figure.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from scaling.formatting import number
from scaling.report import budget_figures
from scaling.report.noise_figure import loss_key, noise_scale_vs_loss, noise_series
from scaling.report.style import OKABE_ITO, RULE_COLOURS, batch_axis, colour, geom, pyplot, save
from scaling.report.tables import cell_text, cells
from scaling.store.rows import positive

__all__ = ["FIGURES", "noise_scale_vs_loss", "write_all"]

def _unit(analysis: dict) -> str:
    return (analysis.get("sweep") or {}).get("unit") or "examples"


def _batch_label(analysis: dict) -> str:
    per = "sequences" if _unit(analysis) == "tokens" else "examples"
    return f"batch size ({per} per step)"


def _points(target: dict) -> list[dict]:
    """A target's points with usable steps and examples, in batch-size order."""
    pts = [p for p in target.get("points") or [] if positive(p.get("steps"))
           and positive(p.get("examples"))]
    return sorted(pts, key=lambda p: p["batch_size"])


def _fit(target: dict) -> dict | None:
    fit = target.get("fit")
    ok = fit and positive(fit.get("s_min")) and positive(fit.get("e_min"))
    return fit if ok else None



def _targets_with_points(analysis: dict) -> list[tuple[dict, list[dict]]]:
    """(target, its best points) for every target some batch size reached."""
    targets = [(t, _points(t)) for t in analysis.get("targets") or []]
    return [(t, pts) for t, pts in targets if pts]


# ---------------------------------------------------------------- 1. steps vs batch size


def steps_vs_batch(analysis: dict, records: list[dict], path: Path) -> Path | None:
    """Steps to each target vs batch size (log-log): the best rate's (dots) and, where
    bracketed, the optimum's that the fit uses (bars); the fitted S(B) and perfect scaling."""
    targets = _targets_with_points(analysis)
    if not targets:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    sizes = [p["batch_size"] for _, pts in targets for p in pts]
    grid = geom(min(sizes) / 1.4, max(sizes) * 1.4)
    shown = [p["steps"] for _, pts in targets for p in pts]
    for i, (t, pts) in enumerate(targets):
        c, b0, s0 = colour(i), pts[0]["batch_size"], pts[0]["steps"]
        ax.plot([p["batch_size"] for p in pts], [p["steps"] for p in pts], "o", color=c,
                label=t["name"], zorder=3)
        opt = [p for p in pts if (p.get("optimum") or {}).get("bracketed")]
        ax.plot([p["batch_size"] for p in opt], [p["optimum"]["steps"] for p in opt], "_",
                color=c, ms=12, mew=2, zorder=4)
        ax.plot(grid, [s0 * b0 / b for b in grid], ":", color=c, lw=1)
        fit = _fit(t)
        if fit:
            ax.plot(grid, [fit["s_min"] + fit["e_min"] / b for b in grid], "-", color=c, lw=1.5,
                    label=f"fit: $B_{{crit}}$={number(fit['b_crit'])}, $S_{{min}}$={number(fit['s_min'])}")
            ax.axhline(fit["s_min"], color=c, lw=0.6, ls="--", alpha=0.6)
            shown.append(fit["s_min"])
    ax.plot([], [], "_", color="black", ms=12, mew=2,
            label="at the optimum between rates (fitted)")
    ax.plot([], [], ":", color="black", lw=1, label="perfect scaling (slope -1)")
    if any(_fit(t) for t, _ in targets):
        ax.plot([], [], "--", color="black", lw=0.6, label="$S_{min}$ (fewest steps)")
    ax.set_ylim(min(shown) / 1.6, max(shown) * 1.6)  # perfect-scaling lines run on below
    ax.set(yscale="log", ylabel="steps to target",
           title="Steps to target vs batch size (best LR per batch size)")
    batch_axis(ax, sizes, _batch_label(analysis))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    return save(fig, path)


# ---------------------------------------------------------------- 2. examples vs steps


SCHEDULE_MARKERS = ("D", "P", "X", "v", "h")  # one per batch-size schedule, every target


def examples_vs_steps(analysis: dict, records: list[dict], path: Path) -> Path | None:
    """The McCandlish et al. trade-off: (S/S_min - 1)(E/E_min - 1) = 1, B_crit at (2S_min, 2E_min);
    batch-size schedules as their own markers on the same axes."""
    targets = _targets_with_points(analysis)
    if not targets:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    unit = _unit(analysis)
    for i, (t, pts) in enumerate(targets):
        c = colour(i)
        ax.plot([p["steps"] for p in pts], [p["examples"] for p in pts], "o", color=c,
                label=f"{t['name']} (measured)", zorder=3)
        for p in pts:
            ax.annotate(f"{p['batch_size']}", (p["steps"], p["examples"]), fontsize=6,
                        color=c, xytext=(4, 3), textcoords="offset points")
        fit = _fit(t)
        if fit:
            s_min, e_min = fit["s_min"], fit["e_min"]
            # E/E_min - 1 = 1/(S/S_min - 1): stop where E (or S) is 3x the largest measured
            k = max(3 * max(p["examples"] for p in pts) / e_min, 4) - 1
            k_s = max(3 * max(p["steps"] for p in pts) / s_min, 4) - 1
            s = [x for x in geom(s_min * (1 + 1 / k), s_min * (1 + k_s)) if x > s_min]
            ax.plot(s, [e_min * x / (x - s_min) for x in s], "-", color=c, lw=1.5,
                    label=f"fit ($S_{{min}}$={number(s_min)}, $E_{{min}}$={number(e_min)})")
            ax.plot([2 * s_min], [2 * e_min], "*", color=c, ms=13, mec="black", mew=0.6,
                    zorder=4, label=f"$B_{{crit}}$={number(fit['b_crit'])} at (2 $S_{{min}}$, 2 $E_{{min}}$)")
            ax.axvline(s_min, color=c, lw=0.6, ls="--", alpha=0.6)
            ax.axhline(e_min, color=c, lw=0.6, ls="--", alpha=0.6)
        for j, sched in enumerate(analysis.get("schedules") or []):
            hit = [e for e in sched["targets"] if e["target"] == t["name"] and e["reached"]]
            for e in hit:
                ax.plot([e["steps"]], [e["examples"]], SCHEDULE_MARKERS[j % len(SCHEDULE_MARKERS)],
                        color=c, mec="black", mew=0.6, ms=8, zorder=5,
                        label=f"schedule {sched['name']}" if i == 0 else None)
    ax.set(xscale="log", yscale="log", xlabel="steps to target", ylabel=f"{unit} to target",
           title="Steps vs data: the trade-off (points labelled by batch size)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    return save(fig, path)


# ---------------------------------------------------------------- 3. learning rate vs batch size


def _lr_target(analysis: dict) -> dict | None:
    rules = analysis.get("lr_rules") or {}
    name = rules.get("target") or analysis.get("primary_target")
    for t in analysis.get("targets") or []:
        if t.get("name") == name:
            return t
    return None


def lr_vs_batch(analysis: dict, records: list[dict], path: Path) -> Path | None:
    """Measured optimal LR per batch size against the linear, sqrt, noise-scale and surge rules."""
    target = _lr_target(analysis)
    pts = [p for p in (target or {}).get("points") or [] if positive(p.get("best_lr"))]
    if not pts:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    tried = [(r["batch_size"], r["learning_rate"], r.get("status"))
             for r in analysis.get("runs") or [] if positive(r.get("learning_rate"))]
    if tried:
        ax.plot([b for b, _, s in tried if s != "diverged"],
                [lr for _, lr, s in tried if s != "diverged"], ".", color="0.75", ms=4,
                label="grid point tried")
        div = [(b, lr) for b, lr, s in tried if s == "diverged"]
        if div:
            ax.plot(*zip(*div), "x", color="0.55", ms=5, label="diverged")
    pts = sorted(pts, key=lambda p: p["batch_size"])
    ax.plot([p["batch_size"] for p in pts], [p["best_lr"] for p in pts], "o", color="black",
            mfc="none", ms=8, label="best grid LR", zorder=3)
    refined = [p for p in pts if positive(p.get("refined_lr"))]
    if refined:
        ax.plot([p["batch_size"] for p in refined], [p["refined_lr"] for p in refined], "o",
                color="black", ms=4, label="refined optimum (parabola in log LR)", zorder=4)
    for edge, marker in (("high", "^"), ("low", "v")):
        at = [p for p in pts if p.get("at_edge") == edge]
        if at:
            ax.plot([p["batch_size"] for p in at], [p["best_lr"] for p in at], marker,
                    color="black", ms=13, mfc="none", mew=1.2, zorder=5,
                    label=f"optimum at the grid's {edge} edge")
    for name, rows in ((analysis.get("lr_rules") or {}).get("rules") or {}).items():
        rows = sorted((r for r in rows if positive(r.get("learning_rate"))),
                      key=lambda r: r["batch_size"])
        if rows:
            ax.plot([r["batch_size"] for r in rows], [r["learning_rate"] for r in rows], "-",
                    color=RULE_COLOURS.get(name, "0.3"), lw=1.5, label=f"{name} rule")
    ax.set(yscale="log", ylabel="learning rate",
           title=f"Optimal learning rate vs batch size ({target['name']})")
    batch_axis(ax, [p["batch_size"] for p in pts] + [b for b, _, _ in tried],
                _batch_label(analysis))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    return save(fig, path)


def best_runs(analysis: dict) -> set[str] | None:
    """Run ids at the best grid LR of each batch size for the LR-rules target."""
    target = _lr_target(analysis)
    best = {(p["batch_size"], p["best_lr"]) for p in (target or {}).get("points") or []}
    runs = {r["run_id"] for r in analysis.get("runs") or []
            if (r["batch_size"], r["learning_rate"]) in best}
    return runs or None


def noise_vs_loss(analysis: dict, records: list[dict], path: Path) -> Path | None:
    """The sweep's noise-scale figure: best-LR runs bold, each target's B_crit; None if no data."""
    loss = loss_key(records)
    if not noise_series(records, "b_simple", loss) and not noise_series(records, "b_noise", loss):
        return None
    b_crit = {t["name"]: t.get("b_crit") for t in analysis.get("targets") or []}
    return noise_scale_vs_loss(records, path, b_crit, best_runs(analysis))


# ---------------------------------------------------------------- 5. B_crit vs target


def _tried_sizes(analysis: dict) -> list[int]:
    return sorted({r["batch_size"] for r in analysis.get("runs") or []}
                  | set((analysis.get("sweep") or {}).get("batch_sizes") or []))


def _bcrit_panel(ax: Any, metric: str, targets: list[dict], analysis: dict,
                 sizes: list[int]) -> tuple[float, float]:
    """One metric's panel of bcrit_vs_target; the y range its values need."""
    values: list[float] = []
    if sizes:
        ax.axhspan(min(sizes), max(sizes), color="0.92", zorder=0,
                   label="batch sizes tried")
        values += [min(sizes), max(sizes)]
    crit = [t for t in targets if positive(t.get("b_crit"))]
    for t in crit:
        ci = t.get("b_crit_ci")
        err = None
        if ci and positive(ci[0]) and positive(ci[1]):
            err = [[max(t["b_crit"] - ci[0], 0)], [max(ci[1] - t["b_crit"], 0)]]
            values += ci
        values.append(t["b_crit"])
        ax.errorbar([t["value"]], [t["b_crit"]], yerr=err, fmt="o", color=OKABE_ITO[0],
                    capsize=4, zorder=3, label="$B_{crit}$ (95% CI)" if t is crit[0] else None)
    over = [t for t in targets if positive((t.get("overhead_b_crit") or {}).get("fitted"))]
    if over:
        values += [t["overhead_b_crit"]["fitted"] for t in over]
        ax.plot([t["value"] for t in over], [t["overhead_b_crit"]["fitted"] for t in over],
                "^", color=OKABE_ITO[2], zorder=3, label="20% overhead (fitted)")
    for law in analysis.get("b_crit_power_law") or []:
        if law["metric"] == metric and law["alpha_b"] is not None:
            xs = geom(min(t["value"] for t in targets), max(t["value"] for t in targets), 50)
            ax.plot(xs, [law["b_star"] * x ** law["exponent"] for x in xs], "-",
                    color=OKABE_ITO[0], lw=1, label=f"power law, $\\alpha_B$={law['alpha_b']:.2g}")
    simple = [t for t in targets if positive(t.get("b_simple"))]
    if simple:
        values += [t["b_simple"] for t in simple]
        ax.plot([t["value"] for t in simple], [t["b_simple"] for t in simple], "s",
                color=OKABE_ITO[1], zorder=3, label="$B_{simple}$ near the crossing")
    ax.set_xlabel(f"{metric} target (harder to the right)")
    ax.margins(x=0.2)
    xs = [t["value"] for t in targets]
    if len(set(xs)) == 1:
        ax.set_xticks(xs, [f"{xs[0]:g}"])
    if targets[0].get("op") == "<=":
        ax.invert_xaxis()
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return min(values) / 2, max(values) * 2


def bcrit_vs_target(analysis: dict, records: list[dict], path: Path) -> Path | None:
    """B_crit (bootstrap CI) and B_simple against the target value, one panel per metric."""
    by_metric: dict[str, list[dict]] = {}
    for t in analysis.get("targets") or []:
        if positive(t.get("b_crit")) or positive(t.get("b_simple")):
            by_metric.setdefault(t.get("metric") or t["name"], []).append(t)
    if not by_metric:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, len(by_metric), figsize=(4.2 * len(by_metric) + 0.6, 4.2),
                             squeeze=False, sharey=True)
    sizes = _tried_sizes(analysis)
    lims = [_bcrit_panel(ax, metric, targets, analysis, sizes)
            for ax, (metric, targets) in zip(axes[0], by_metric.items())]
    axes[0][0].set_yscale("log")
    axes[0][0].set_ylim(min(lo for lo, _ in lims), max(hi for _, hi in lims))
    axes[0][0].set_ylabel(f"batch size ({'sequences' if _unit(analysis) == 'tokens' else 'examples'})")
    fig.suptitle("Critical batch size vs target")
    fig.tight_layout()
    return save(fig, path)


# ---------------------------------------------------------------- 6. heatmap


def _heatmap_target(analysis: dict) -> str | None:
    """The primary target, or the LR-rules target when no cell reached the primary one."""
    primary = analysis.get("primary_target")
    if primary and any(c["reached"] for c in cells(analysis, primary).values()):
        return primary
    fallback = _lr_target(analysis)
    return fallback["name"] if fallback and fallback.get("points") else primary


def heatmap(analysis: dict, records: list[dict], path: Path) -> Path | None:
    """Steps to target over (batch size, LR); diverged, unreached and censored (stopped as
    dominated: "> s") cells marked."""
    target = _heatmap_target(analysis)
    by_cell = cells(analysis, target) if target else {}
    if not by_cell:
        return None
    import matplotlib.colors as mcolors  # matplotlib loads on the first figure (style.pyplot)

    plt = pyplot()
    sizes = sorted({b for b, _ in by_cell})
    rates = sorted({lr for _, lr in by_cell}, reverse=True)
    grid = np.full((len(rates), len(sizes)), np.nan)
    for (b, lr), cell in by_cell.items():
        if cell["steps"] is not None:
            grid[rates.index(lr), sizes.index(b)] = cell["steps"]
    fig, ax = plt.subplots(figsize=(0.9 * len(sizes) + 3.0, 0.5 * len(rates) + 2.0))
    values = grid[np.isfinite(grid)]
    norm = None
    if values.size:
        norm = mcolors.LogNorm(values.min(), max(values.max(), values.min() * 1.01))
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", norm=norm, aspect="auto")
        fig.colorbar(image, ax=ax, label="steps to target (mean over seeds)")
    best = {p["batch_size"]: p["best_lr"] for t in analysis.get("targets") or []
            if t.get("name") == target for p in t.get("points") or []}
    for (b, lr), cell in by_cell.items():
        x, y = sizes.index(b), rates.index(lr)
        if cell["steps"] is not None:
            dark = norm(cell["steps"]) < 0.6
            ax.text(x, y, number(cell["steps"]), ha="center", va="center", fontsize=7,
                    color="white" if dark else "black")
        else:
            ax.add_patch(plt.Rectangle(
                (x - 0.5, y - 0.5), 1, 1, facecolor="0.97" if cell["diverged"] else "0.85",
                hatch="xx" if cell["diverged"] else "//" if cell["censored"] else None,
                edgecolor="0.7", lw=0))
            ax.text(x, y, cell_text(cell).replace("not reached", "not\nreached"), ha="center",
                    va="center", fontsize=6.5, color="black",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.8}
                    if cell["diverged"] or cell["censored"] else None)
        if best.get(b) == lr:
            ax.add_patch(plt.Rectangle((x - 0.47, y - 0.47), 0.94, 0.94, fill=False,
                                       edgecolor="#D55E00", lw=2.2))
    ax.set_xticks(range(len(sizes)), [str(b) for b in sizes])
    ax.set_yticks(range(len(rates)), [f"{lr:.3g}" for lr in rates])
    ax.set(xlabel=_batch_label(analysis), ylabel="learning rate",
           title=f"Steps to {target} (orange box: best LR per batch size; > s: stopped)")
    ax.set_xlim(-0.5, len(sizes) - 0.5)
    ax.set_ylim(len(rates) - 0.5, -0.5)
    return save(fig, path)


FIGURES: dict[str, Callable[[dict, list[dict], Path], Path | None]] = {
    "steps_vs_batch.png": steps_vs_batch,
    "examples_vs_steps.png": examples_vs_steps,
    "lr_vs_batch.png": lr_vs_batch,
    "noise_vs_loss.png": noise_vs_loss,
    "bcrit_vs_target.png": bcrit_vs_target,
    "heatmap.png": heatmap,
}


def write_all(analysis: dict, records: list[dict], folder: Path) -> list[Path]:
    """Every figure whose data exist (the fixed-budget view's too), written under `folder`;
    returns the paths written."""
    written = []
    for name, draw in {**FIGURES, **budget_figures.FIGURES}.items():
        path = draw(analysis, records, Path(folder) / name)
        if path is not None:
            written.append(path)
    return written
