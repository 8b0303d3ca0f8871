"""The figure of the fixed-budget view of one cell (docs/analysis.md): its landscape, the final
metric over learning rate x batch size with its optima and the learning-rate rules. Across the
cells of a parent folder: scaling.report.law_figures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from scaling.analysis.contract import Analysis
from scaling.formatting import count, number
from scaling.report.style import RULE_COLOURS, figure, legend, mark, save
from scaling.store.rows import positive

CONTOUR_LEVELS = 14
CLIP_QUANTILE = 0.7  # colours span the best value to this quantile; worse ones share a colour


def _cell(analysis: Analysis) -> dict | None:
    budget = analysis.get("fixed_budget")
    cells = budget["cells"] if budget else []
    return cells[0] if len(cells) == 1 and cells[0].get("grid") else None


def _levels(values: np.ndarray, lower: bool) -> np.ndarray:
    """Contour levels from the best value to the CLIP_QUANTILE one (the rest beyond them)."""
    lo, hi = (values.min(), np.quantile(values, CLIP_QUANTILE)) if lower else \
        (np.quantile(values, 1 - CLIP_QUANTILE), values.max())
    return np.linspace(lo, max(hi, lo * (1 + 1e-6) + 1e-12), CONTOUR_LEVELS)


def _ticks(ax: Any, lrs: list[float], sizes: list[int]) -> None:
    """Axes in log10 lr (1, 2, 5 per decade, within the grid) and log2 B (the batch sizes),
    labelled in plain numbers."""
    lo, hi = np.log10(min(lrs)), np.log10(max(lrs))
    ticks = [math.log10(m * 10.0 ** e) for e in range(math.floor(lo), math.ceil(hi) + 1)
             for m in (1, 2, 5)]
    ticks = [t for t in ticks if lo - 1e-9 <= t <= hi + 1e-9]
    ax.set_xticks(ticks, [number(10 ** t) for t in ticks])
    ax.set_xlim(lo - 0.05 * (hi - lo or 1), hi + 0.05 * (hi - lo or 1))
    ax.set_yticks(np.log2(sizes), [number(b) for b in sizes])
    ax.set_ylim(np.log2(min(sizes)) - 0.3, np.log2(max(sizes)) + 0.3)  # edge markers whole


def _contours(ax: Any, fig: Any, cell: dict) -> None:
    """Filled contours of the final metric; runs with no value marked (style.mark)."""
    grid, lower = cell["grid"], cell.get("lower_is_better", True)
    seeds = f" (mean over {cell['seeds']} seeds)" if (cell.get("seeds") or 1) > 1 else ""
    done = [g for g in grid if g.get("mean") is not None]
    x = np.log10([g["learning_rate"] for g in done])
    y = np.log2([g["batch_size"] for g in done])
    z = np.array([g["mean"] for g in done])
    if len(done) >= 3 and len(set(x)) > 1 and len(set(y)) > 1:
        levels = _levels(z, lower)
        filled = ax.tricontourf(x, y, z, levels=levels, cmap="viridis" if lower else
                                "viridis_r", extend="max" if lower else "min")
        fig.colorbar(filled, ax=ax, label=f"final {cell['metric']}{seeds}", format="%.4g")
    ax.plot(x, y, ".", color="0.2", ms=2.5, label="run finished (every seed)")
    for kind, diverged in (("diverged", True), ("not_reached", False)):
        failed = [g for g in grid if g.get("mean") is None and bool(g.get("diverged")) == diverged]
        if failed:
            mark(ax, kind, np.log10([g["learning_rate"] for g in failed]),
                 np.log2([g["batch_size"] for g in failed]), ms=4)


def _optima(ax: Any, cell: dict) -> None:
    per = [p for p in cell["per_batch"] if positive(p.get("learning_rate"))]
    x = np.log10([p["learning_rate"] for p in per])
    y = np.log2([p["batch_size"] for p in per])
    ax.plot(x, y, "-o", color="white", mec="black", ms=5, lw=1.2, zorder=4,
            label="optimal LR per batch size")
    edge = [(xi, yi) for p, xi, yi in zip(per, x, y) if p.get("at_edge")]
    if edge:
        mark(ax, "edge", *zip(*edge), "black", zorder=5)
    for p, xi, yi in zip(per, x, y):
        ci = p.get("learning_rate_ci")
        if ci and positive(ci[0]):
            ax.plot(np.log10(ci), [yi, yi], "-", color="white", lw=0.8, zorder=3)
    best, opt = cell.get("best"), cell.get("optimum") or {}
    if best:
        ax.plot(np.log10(best["learning_rate"]), np.log2(best["batch_size"]), "s", mfc="none",
                mec="#D55E00", ms=10, mew=1.6, zorder=5, label="measured arg-min")
    if opt.get("at_edge") and positive(opt.get("batch_size")):
        mark(ax, "upper" if opt["at_edge"] == "low" else "lower",
             [np.log10(opt["learning_rate"])], [np.log2(opt["batch_size"])], "black", zorder=6)
    elif positive(opt.get("learning_rate")) and positive(opt.get("batch_size")):
        ax.plot(np.log10(opt["learning_rate"]), np.log2(opt["batch_size"]), "*", color="#F0E442",
                mec="black", ms=15, zorder=6,
                label=f"optimum: B = {number(opt['batch_size'])}, "
                      f"LR = {number(opt['learning_rate'])}")


def _rules(ax: Any, cell: dict) -> None:
    for name, rows in ((cell.get("lr_rules") or {}).get("rules") or {}).items():
        rows = [r for r in rows if positive(r.get("learning_rate"))]
        if rows:
            ax.plot(np.log10([r["learning_rate"] for r in rows]),
                    np.log2([r["batch_size"] for r in rows]), "--",
                    color=RULE_COLOURS.get(name, "0.3"), lw=1.4, zorder=3,
                    label=f"{name.replace('_', '-')} rule")


def landscape(analysis: Analysis, records: list[dict], path: Path) -> Path | None:
    """The final metric over log learning rate x log batch size as filled contours, each batch
    size's optimal learning rate (95% interval), the cell's optimum and the rules."""
    cell = _cell(analysis)
    if cell is None:
        return None
    fig, ax = figure(7.4, 5.4)
    _contours(ax, fig, cell)
    _optima(ax, cell)
    _rules(ax, cell)
    fb = analysis["fixed_budget"]
    _ticks(ax, [g["learning_rate"] for g in cell["grid"]],
           sorted({g["batch_size"] for g in cell["grid"]}))
    ax.set(xlabel="learning rate", ylabel=f"batch size ({fb['batch_unit']})",
           title=f"Final {cell['metric']} at the budget" + _budget_text(cell))
    legend(ax, outside=False, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3)
    return save(fig, path)


FIGURES = {"landscape.png": landscape}  # a results folder's, beside scaling.report.figures' own


def _budget_text(cell: dict) -> str:
    budget = cell.get("tokens") or cell.get("examples")
    parts = ([f"N = {count(cell['params'])}"] if positive(cell.get("params")) else []) + \
        ([f"D = {count(budget)} {cell.get('budget_unit')}"] if positive(budget) else [])
    return f" ({', '.join(parts)})" if parts else ""
