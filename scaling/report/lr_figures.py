"""The learning-rate figures of a sweep: the optimal learning rate against the batch size with
the rules' curves, and steps to target (or, in the fixed-budget view, the final metric)
against the learning rate, a line per batch size, with every run that gave no plain reading
marked the one way (scaling.report.style)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np

from scaling.analysis.contract import Analysis
from scaling.analysis.sections import LRRules
from scaling.config.learning_rates import scaled_lr
from scaling.formatting import estimate, number
from scaling.report import figure_data
from scaling.report.figure_data import batch_label, lr_target, mean_over_seeds
from scaling.report.style import (GREY, RULE_COLOURS, band, batch_axis, batch_colours, figure,
                                  geom, legend, log_limits, mark, proxy, save)
from scaling.store.rows import positive

FAILED_BAND = 0.84  # above this fraction of the axes' height: runs with no value, one row each


# ---------------------------------------------------------------- learning rate vs batch size


def _rule_curve(name: str, rules: LRRules, b: float, **params: float) -> float:
    """A rule's learning rate at batch size b: from the reference (linear, sqrt) or the fit's
    parameters (noise_scale: eps_max, b_noise; surge: eta_max, b_peak)."""
    ref = rules["reference"]
    if name in ("linear", "sqrt"):
        return scaled_lr(name, b, ref["batch_size"], ref["learning_rate"])
    return scaled_lr(name, b, None, None, **params)


FITS = {"noise_scale": ("noise_scale_fit", "eps_max", "b_noise"),
        "surge": ("surge_fit", "eta_max", "b_peak")}
SYMBOLS = {"b_noise": "$B_{noise}$", "b_peak": "$B_{peak}$"}


def _rules(ax: Any, rules: LRRules, sizes: list[int]) -> None:
    """Each rule's curve, drawn densely; a fitted rule only where it was fitted, shaded over
    the corners of its parameters' intervals where it has them."""
    grid = geom(min(sizes), max(sizes), 100)
    for name in rules["rules"]:
        c = RULE_COLOURS.get(name, GREY)
        if name not in FITS:
            ax.plot(grid, [_rule_curve(name, rules, b) for b in grid], "-", color=c, lw=1.4,
                    label=f"{name} rule (from the smallest batch size)")
            continue
        key, scale, size = FITS[name]
        fitted = rules[key]
        if not fitted:
            continue
        params = {scale: fitted[scale], size: fitted[size]}
        ax.plot(grid, [_rule_curve(name, rules, b, **params) for b in grid], "-", color=c,
                lw=1.4, label=f"{name.replace('_', '-')} fit, {SYMBOLS[size]} "
                              + estimate(fitted[size], fitted[f"{size}_ci"],
                                         fitted["identification"].get(size)))
        cis = [fitted[f"{scale}_ci"], fitted[f"{size}_ci"]]
        if all(cis):
            curves = [[_rule_curve(name, rules, b, **{scale: u, size: v}) for b in grid]
                      for u, v in itertools.product(*cis)]
            band(ax, grid, np.min(curves, axis=0), np.max(curves, axis=0), c)


def _tried(ax: Any, analysis: Analysis, target: str) -> list[float]:
    """Every (batch size, learning rate) tried, marked by its reading of `target`; the rates."""
    cells = figure_data.cells(analysis, target)
    for kind in ("reached", "dominated", "not_reached", "diverged"):
        xy = [(b, lr) for (b, lr), c in cells.items() if c["kind"] == kind]
        if xy and kind == "reached":
            ax.plot(*zip(*xy), ".", color="0.7", ms=4, label="rate tried, target reached")
        elif xy:
            mark(ax, kind, *zip(*xy), "0.55", ms=4.5)
    return [lr for _, lr in cells]


def lr_vs_batch(analysis: Analysis, records: list[dict], path: Path) -> Path | None:
    """Measured optimal learning rate per batch size (an optimum at an edge of the rates tried
    in the edge style) against the rules; every rate tried marked by its reading."""
    target = lr_target(analysis)
    pts = sorted((p for p in (target["points"] if target else []) if positive(p["best_lr"])),
                 key=lambda p: p["batch_size"])
    if not pts:
        return None
    fig, ax = figure(7.8, 4.6)
    rates = _tried(ax, analysis, target["name"]) + [p["best_lr"] for p in pts]
    inner = [p for p in pts if not p["at_edge"]]
    ax.plot([p["batch_size"] for p in inner], [p["best_lr"] for p in inner], "o", color="black",
            ms=6, label="best rate tried", zorder=4)
    edge = [p for p in pts if p["at_edge"]]
    if edge:
        mark(ax, "edge", [p["batch_size"] for p in edge], [p["best_lr"] for p in edge], "black",
             zorder=4)
    refined = [p for p in pts if positive(p["refined_lr"])]
    if refined:
        ax.plot([p["batch_size"] for p in refined], [p["refined_lr"] for p in refined], "+",
                color="#0072B2", ms=8, mew=1.6, zorder=5,
                label="optimum between rates (parabola in log LR)")
    sizes = [p["batch_size"] for p in pts] + [r["batch_size"] for r in analysis["runs"]]
    if analysis["lr_rules"]:
        _rules(ax, analysis["lr_rules"], [p["batch_size"] for p in pts])
    ax.set_ylim(*log_limits(rates, 1.4))
    ax.set(yscale="log", ylabel="learning rate",
           title=f"Optimal learning rate vs batch size ({target['name']})")
    batch_axis(ax, sizes, batch_label(analysis))
    ax.grid(True, which="major", alpha=0.3)
    legend(ax)
    return save(fig, path)


# ---------------------------------------------------------------- steps (or metric) vs rate


def _heatmap_target(analysis: Analysis) -> str | None:
    """The primary target, or the LR-rules target when no cell reached the primary one."""
    primary = analysis["primary_target"]
    cells = figure_data.cells(analysis, primary) if primary else {}
    if any(c["kind"] == "reached" for c in cells.values()):
        return primary
    fallback = lr_target(analysis)
    return fallback["name"] if fallback and fallback["points"] else primary


def _failed_band(ax: Any, values: list[float], log: bool) -> None:
    """y limits that leave the top of the axes to the runs with no value, shaded."""
    from matplotlib.patches import Rectangle  # matplotlib loads with the first figure

    lo, hi = log_limits(values, 1.3) if log else (min(values), max(values))
    if log:
        top = lo * (hi / lo) ** (1 / FAILED_BAND)
    else:
        pad = 0.05 * (hi - lo or abs(hi) or 1)
        lo, hi = lo - pad, hi + pad
        top = lo + (hi - lo) / FAILED_BAND
    ax.set_ylim(lo, top)
    ax.add_patch(Rectangle((0, FAILED_BAND), 1, 1 - FAILED_BAND, transform=ax.transAxes,
                           color="0.94", lw=0, zorder=0))


def _failed(ax: Any, kind: str, rates: list[float], row: int, rows: int, c: Any) -> None:
    """Runs with no value in the shaded band at the top, one row per batch size."""
    if rates:
        y = 1 - (1 - FAILED_BAND) * (row + 0.6) / (rows + 0.2)
        mark(ax, kind, rates, [y] * len(rates), c, transform=ax.get_xaxis_transform(), ms=4.5,
             clip_on=False)


def _best(ax: Any, lr: float, value: float, at_edge: str | None, c: Any) -> None:
    if at_edge:
        mark(ax, "edge", [lr], [value], c, zorder=5)
    else:
        ax.plot([lr], [value], "*", color=c, mec="black", mew=0.6, ms=11, zorder=5)


def _steps_lines(ax: Any, analysis: Analysis, target: str) -> list[float]:
    """One line per batch size through the rates whose every seed reached; bounds where runs
    were stopped as dominated; runs that diverged or never reached in the band; the best
    rate starred. Returns the steps drawn."""
    cells = figure_data.cells(analysis, target)
    sizes = sorted({b for b, _ in cells})
    colours = batch_colours(sizes)
    best = {p["batch_size"]: p for t in analysis["targets"] if t["name"] == target
            for p in t["points"]}
    values = []
    for i, b in enumerate(sizes):
        row = sorted((lr, c) for (size, lr), c in cells.items() if size == b)
        for kind in ("reached", "dominated"):
            xy = [(lr, c["steps"]) for lr, c in row if c["kind"] == kind]
            values += [y for _, y in xy]
            if xy and kind == "reached":
                ax.plot(*zip(*xy), "-o", color=colours[b], ms=3, lw=1.1, label=number(b))
            elif xy:
                mark(ax, kind, *zip(*xy), colours[b], ms=5)
        for kind in ("not_reached", "diverged"):
            _failed(ax, kind, [lr for lr, c in row if c["kind"] == kind], i, len(sizes),
                    colours[b])
        if b in best:
            _best(ax, best[b]["best_lr"], best[b]["steps"], best[b]["at_edge"], colours[b])
    return values


def _steps_vs_lr(analysis: Analysis, target: str, path: Path) -> Path | None:
    fig, ax = figure(7.8, 4.8)
    values = _steps_lines(ax, analysis, target)
    _failed_band(ax, values or [1.0, 10.0], log=True)  # nothing reached: only the band
    ax.set(xscale="log", yscale="log", xlabel="learning rate",
           ylabel=f"steps to target{mean_over_seeds(analysis)}",
           title=f"Steps to {target} vs learning rate")
    ax.grid(True, which="major", alpha=0.3)
    legend(ax, title=batch_label(analysis).replace(" per step", ""), title_fontsize=7,
           extra=[(proxy(marker="*", mec="black", mfc="white", ms=10), "best rate")])
    return save(fig, path)


def _metric_lines(ax: Any, cell: dict) -> list[float]:
    """The fixed-budget cell's final metric per batch size along the rates; diverged or
    incomplete runs in the band; each batch size's best rate starred. The values drawn."""
    sizes = sorted({g["batch_size"] for g in cell["grid"]})
    colours, best = batch_colours(sizes), {p["batch_size"]: p for p in cell["per_batch"]}
    values = []
    for i, b in enumerate(sizes):
        row = sorted((g["learning_rate"], g) for g in cell["grid"] if g["batch_size"] == b)
        done = [(lr, g["mean"]) for lr, g in row if g.get("mean") is not None]
        values += [y for _, y in done]
        if done:
            ax.plot(*zip(*done), "-o", color=colours[b], ms=3, lw=1.1, label=number(b))
        _failed(ax, "diverged", [lr for lr, g in row if g.get("mean") is None and g["diverged"]],
                i, len(sizes), colours[b])
        _failed(ax, "not_reached", [lr for lr, g in row if g.get("mean") is None
                                    and not g["diverged"]], i, len(sizes), colours[b])
        p = best.get(b)
        if p and p.get("best_value") is not None:
            _best(ax, p["best_lr"], p["best_value"], p.get("at_edge"), colours[b])
    return values


def _metric_vs_lr(analysis: Analysis, cell: dict, path: Path) -> Path | None:
    fig, ax = figure(7.8, 4.8)
    values = _metric_lines(ax, cell)
    if not values:
        return None
    lower = cell.get("lower_is_better", True)
    near = sorted(values)[:max(2, int(0.8 * len(values)))] if lower else \
        sorted(values)[-max(2, int(0.8 * len(values))):]
    _failed_band(ax, near, log=False)
    seeds = cell.get("seeds") or 1
    ax.set(xscale="log", xlabel="learning rate",
           ylabel=f"final {cell['metric']}" + (f" (mean over {seeds} seeds)" if seeds > 1 else ""),
           title=f"Final {cell['metric']} vs learning rate")
    ax.grid(True, which="major", alpha=0.3)
    legend(ax, title="batch size", title_fontsize=7,
           extra=[(proxy(marker="*", mec="black", mfc="white", ms=10), "best rate")])
    return save(fig, path)


def heatmap(analysis: Analysis, records: list[dict], path: Path) -> Path | None:
    """Steps to the primary target (the LR-rules target when no run reached it) against the
    learning rate, a line per batch size; in the fixed-budget view of one cell, its final
    metric. None without runs."""
    target = _heatmap_target(analysis)
    if target and figure_data.cells(analysis, target):
        return _steps_vs_lr(analysis, target, path)
    budget = analysis.get("fixed_budget")
    cells = budget["cells"] if budget else []
    if len(cells) == 1 and cells[0].get("grid"):
        return _metric_vs_lr(analysis, cells[0], path)
    return None
