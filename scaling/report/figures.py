"""Figures of a sweep, drawn from analysis.json and the run records (docs/results-format.md).

One function per figure; each returns the path it wrote, or None when its data do not exist
(no target reached, no noise-scale measurements), so writing them never fails on a sparse
sweep (scaling.report.views writes every view's). Here the trade-off figures (steps against batch size, examples against steps); the
learning-rate figures in scaling.report.lr_figures, B_crit against the target in
scaling.report.target_figures, the noise-scale figure (also drawn for a single run by
`scaling gns`) in scaling.report.noise_figure, the shared look and the one convention for
censored points in scaling.report.style.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaling.analysis.contract import Analysis, Fit, Point, Target
from scaling.analysis.intervals import describe
from scaling.formatting import estimate, number
from scaling.report.figure_data import (b_crit_reading, batch_label, fit, lr_target,
                                        targets_with_points, unit)
from scaling.report.lr_figures import heatmap, lr_vs_batch
from scaling.report.noise_figure import loss_key, noise_scale_vs_loss, noise_series
from scaling.report.style import (BAND_ALPHA, band, batch_axis, colour, figure, geom, legend,
                                  log_limits, mark, proxy, save, tidy_log_axes)
from scaling.report.target_figures import bcrit_vs_target
from scaling.report.text_check import place_labels

__all__ = ["FIGURES", "noise_scale_vs_loss"]


def _target_label(t: Target) -> str:
    """A target's legend entry: its name and B_crit as the report prints it."""
    fitted = fit(t)
    if not fitted:
        return f"{t['name']} (no fit)"
    shown = estimate(fitted["b_crit"], fitted["b_crit_ci"], fitted["identification"])
    return f"{t['name']}: $B_{{crit}}$ {shown}"


def _fit_key(targets: list[tuple[Target, list[Point]]], curve: str) -> tuple[Any, str]:
    """The legend entry of the fitted curves: what their shaded interval resamples (the
    first fit's `interval` record), or why there is none."""
    fits = [fit(t) for t, _ in targets if fit(t)]
    record = fits[0]["interval"] if fits else None
    shaded = "shaded: " if any(f["band"] for f in fits) else ""
    return proxy(ls="-"), f"{curve}\n{shaded}{describe(record)}"


def _edges_and_points(ax: Any, xs: list[float], ys: list[float], pts: list[Point],
                      c: Any) -> None:
    """Measured points as dots, those whose best rate is at an edge of the rates tried in
    the edge style."""
    plain = [(x, y) for x, y, p in zip(xs, ys, pts) if not p["at_edge"]]
    edge = [(x, y) for x, y, p in zip(xs, ys, pts) if p["at_edge"]]
    if plain:
        ax.plot(*zip(*plain), "o", color=c, ms=5, zorder=3)
    if edge:
        mark(ax, "edge", *zip(*edge), c, zorder=3)


# ---------------------------------------------------------------- 1. steps vs batch size


def _steps_curve(ax: Any, fitted: Fit, grid: list[float], c: Any) -> list[float]:
    """The fitted S(B) with its band and B_crit on it (a point at S = 2 S_min, or a bound at
    the edge of the batch sizes fitted); the steps drawn."""
    s = lambda b: fitted["s_min"] + fitted["e_min"] / b  # noqa: E731
    ax.plot(grid, [s(b) for b in grid], "-", color=c, lw=1.4, zorder=2)
    shown = [s(grid[0]), s(grid[-1])]
    found = fitted["band"]
    if found:
        band(ax, found["batch_sizes"], found["low"], found["high"], c)
        shown += found["low"] + found["high"]
    kind, at = b_crit_reading(fitted)
    if kind == "point":
        ax.plot([at], [s(at)], "D", color=c, mec="black", mew=0.8, ms=7, zorder=5)
    elif kind:
        mark(ax, kind, [at], [s(at)], c, axis="x", zorder=5)
    return shown


def _unreached(ax: Any, t: Target, c: Any) -> None:
    """Batch sizes that never reached the target, along the top of the axes."""
    sizes = t["unreached_batch_sizes"]
    if sizes:
        mark(ax, "not_reached", sizes, [0.96] * len(sizes), c, transform=ax.get_xaxis_transform(),
             clip_on=False, zorder=5)


def steps_vs_batch(analysis: Analysis, records: list[dict], path: Path) -> Path | None:
    """Steps to each target against the batch size (log-log): the best rate's (dots; at an
    edge of the rates tried in the edge style) and the optimum's that the fit uses (bars); the
    fitted S(B) with its band and B_crit on it; perfect scaling from the smallest batch."""
    targets = targets_with_points(analysis)
    if not targets:
        return None
    fig, ax = figure(7.8, 4.6)
    sizes = [p["batch_size"] for t, pts in targets for p in pts] + \
        [b for t, _ in targets for b in t["unreached_batch_sizes"]]
    grid = geom(min(sizes) / 1.4, max(sizes) * 1.4)
    shown = [p["steps"] for _, pts in targets for p in pts]
    handles = []
    for i, (t, pts) in enumerate(targets):
        c, b0, s0 = colour(i), pts[0]["batch_size"], pts[0]["steps"]
        _edges_and_points(ax, [p["batch_size"] for p in pts], [p["steps"] for p in pts], pts, c)
        # read by the parabola (a curvature): a bracket with a bounded neighbour has no optimum
        opt = [p for p in pts if p["optimum"] and p["optimum"]["curvature"] is not None]
        ax.plot([p["batch_size"] for p in opt], [p["optimum"]["steps"] for p in opt], "_",
                color=c, ms=12, mew=2, zorder=4)
        ax.plot(grid, [s0 * b0 / b for b in grid], ":", color=c, lw=1)
        fitted = fit(t)
        if fitted:
            shown += _steps_curve(ax, fitted, grid, c)
        _unreached(ax, t, c)
        handles.append((proxy(marker="o", ls="-", color=c, ms=5), _target_label(t)))
    handles += [(proxy(marker="_", ms=12, mew=2), "at the optimum between rates (fitted)"),
                _fit_key(targets, "fit S(B) = $S_{min}$ + $E_{min}$/B"),
                (proxy(marker="D", mec="black", mfc="white"),
                 "$B_{crit}$ on the fit, at 2 $S_{min}$"),
                (proxy(ls=":"), "perfect scaling (slope -1)")]
    lo, hi = log_limits(shown, 1.6)
    ax.set_ylim(lo, hi * (2.0 if any(t["unreached_batch_sizes"] for t, _ in targets) else 1))
    ax.set(yscale="log", ylabel="steps to target (best rate per batch size)",
           title="Steps to target vs batch size")
    batch_axis(ax, sizes, batch_label(analysis))
    ax.grid(True, which="major", alpha=0.3)
    legend(ax, extra=handles)
    return save(fig, path)


# ---------------------------------------------------------------- 2. examples vs steps


SCHEDULE_MARKERS = ("P", "X", "h", "8", "p")  # one per batch-size schedule, every target


def _tradeoff_curve(ax: Any, fitted: Fit, pts: list[Point], c: Any) -> None:
    """E/E_min - 1 = 1/(S/S_min - 1) until E (or S) is 3x the largest measured, its band
    (S(B) in [low, high] at each B is the segment E = S B), B_crit at (2 S_min, 2 E_min)."""
    s_min, e_min = fitted["s_min"], fitted["e_min"]
    k = max(3 * max(p["examples"] for p in pts) / e_min, 4) - 1
    k_s = max(3 * max(p["steps"] for p in pts) / s_min, 4) - 1
    s = [x for x in geom(s_min * (1 + 1 / k), s_min * (1 + k_s)) if x > s_min]
    ax.plot(s, [e_min * x / (x - s_min) for x in s], "-", color=c, lw=1.4, zorder=2)
    found = fitted["band"]
    if found:
        sizes = found["batch_sizes"]
        xs = found["low"] + found["high"][::-1]
        ys = [v * b for v, b in zip(found["low"], sizes)] + \
            [v * b for v, b in zip(found["high"][::-1], sizes[::-1])]
        ax.fill(xs, ys, color=c, alpha=BAND_ALPHA, lw=0)
    if b_crit_reading(fitted)[0] == "point":
        ax.plot([2 * s_min], [2 * e_min], "*", color=c, ms=13, mec="black", mew=0.6, zorder=5)


def _schedules(ax: Any, analysis: Analysis, t: Target, c: Any, first: bool) -> None:
    for j, sched in enumerate(analysis["schedules"]):
        for e in (e for e in sched["targets"] if e["target"] == t["name"] and e["reached"]):
            ax.plot([e["steps"]], [e["examples"]], SCHEDULE_MARKERS[j % len(SCHEDULE_MARKERS)],
                    color=c, mec="black", mew=0.6, ms=8, zorder=5,
                    label=f"schedule {sched['name']}" if first else None)
            first = False


def examples_vs_steps(analysis: Analysis, records: list[dict], path: Path) -> Path | None:
    """The McCandlish et al. trade-off: (S/S_min - 1)(E/E_min - 1) = 1 with its band, B_crit
    at (2 S_min, 2 E_min); points labelled by batch size where a label fits; batch-size
    schedules as their own markers on the same axes."""
    targets = targets_with_points(analysis)
    if not targets:
        return None
    fig, ax = figure(7.8, 4.8)
    handles = []
    for i, (t, pts) in enumerate(targets):
        c = colour(i)
        _edges_and_points(ax, [p["steps"] for p in pts], [p["examples"] for p in pts], pts, c)
        fitted = fit(t)
        if fitted:
            _tradeoff_curve(ax, fitted, pts, c)
        _schedules(ax, analysis, t, c, i == 0)
        handles.append((proxy(marker="o", ls="-", color=c, ms=5), _target_label(t)))
    handles += [_fit_key(targets, "fitted trade-off"),
                (proxy(marker="*", mec="black", mfc="white", ms=10),
                 "$B_{crit}$ at (2 $S_{min}$, 2 $E_{min}$)")]
    ax.set(xscale="log", yscale="log", xlabel="steps to target",
           ylabel=f"{unit(analysis)} to target",
           title="Steps vs data: the trade-off (points labelled by batch size)")
    ax.grid(True, which="major", alpha=0.3)
    legend(ax, extra=handles)
    tidy_log_axes(fig)  # the ticks as saved, so the layout the labels see is the final one
    place_labels(ax, [(p["steps"], p["examples"], number(p["batch_size"]), colour(i))
                      for i, (_, pts) in enumerate(targets) for p in pts], fontsize=6.5,
                 zorder=6, bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7,
                                 "pad": 0.4})
    return save(fig, path)


# ---------------------------------------------------------------- 4. noise scale vs loss


def best_runs(analysis: Analysis) -> set[str] | None:
    """Run ids at the best grid LR of each batch size for the LR-rules target."""
    target = lr_target(analysis)
    best = {(p["batch_size"], p["best_lr"]) for p in (target["points"] if target else [])}
    runs = {r["run_id"] for r in analysis["runs"]
            if (r["batch_size"], r["learning_rate"]) in best}
    return runs or None


def noise_vs_loss(analysis: Analysis, records: list[dict], path: Path) -> Path | None:
    """The sweep's noise-scale figure: best-LR runs bold, each loss target's B_crit at its
    loss; None if no data."""
    loss = loss_key(records)
    if not noise_series(records, "b_simple", loss) and not noise_series(records, "b_noise", loss):
        return None
    return noise_scale_vs_loss(records, path, analysis["targets"], best_runs(analysis))


FIGURES: dict[str, Callable[[Analysis, list[dict], Path], Path | None]] = {  # the steps view's
    "steps_vs_batch.png": steps_vs_batch,
    "examples_vs_steps.png": examples_vs_steps,
    "lr_vs_batch.png": lr_vs_batch,
    "noise_vs_loss.png": noise_vs_loss,
    "bcrit_vs_target.png": bcrit_vs_target,
    "heatmap.png": heatmap,
}
