"""Figures of the fixed-budget view (docs/analysis.md): one cell's landscape, the final metric
over learning rate x batch size with its optima and the learning-rate rules; and across the
cells of a parent folder, each optimum against the budget D, one line per model size N, with
the fitted law."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from scaling.analysis.laws import EXTRAPOLATION, extrapolated, target_points
from scaling.formatting import number
from scaling.report.budget_report import sci
from scaling.report.style import RULE_COLOURS, colour, geom, pyplot, save
from scaling.store.rows import positive

CONTOUR_LEVELS = 14
CLIP_QUANTILE = 0.7  # colours span the best value to this quantile; worse ones share a colour


def _cell(analysis: dict) -> dict | None:
    cells = (analysis.get("fixed_budget") or {}).get("cells") or []
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
    ax.set_yticks(np.log2(sizes), [str(b) for b in sizes])


def _contours(ax: Any, fig: Any, grid: list[dict], lower: bool, metric: str) -> None:
    done = [g for g in grid if g.get("mean") is not None]
    x = np.log10([g["learning_rate"] for g in done])
    y = np.log2([g["batch_size"] for g in done])
    z = np.array([g["mean"] for g in done])
    if len(done) >= 3 and len(set(x)) > 1 and len(set(y)) > 1:
        levels = _levels(z, lower)
        filled = ax.tricontourf(x, y, z, levels=levels, cmap="viridis" if lower else
                                "viridis_r", extend="max" if lower else "min")
        fig.colorbar(filled, ax=ax, label=f"final {metric} (mean over seeds)", format="%.4g")
    ax.plot(x, y, ".", color="0.2", ms=2.5, label="run finished (every seed)")
    failed = [g for g in grid if g.get("mean") is None]
    if failed:
        ax.plot(np.log10([g["learning_rate"] for g in failed]),
                np.log2([g["batch_size"] for g in failed]), "x", color="0.45", ms=4,
                label="diverged or incomplete")


def _optima(ax: Any, cell: dict) -> None:
    per = [p for p in cell["per_batch"] if positive(p.get("learning_rate"))]
    x = np.log10([p["learning_rate"] for p in per])
    y = np.log2([p["batch_size"] for p in per])
    ax.plot(x, y, "-o", color="white", mec="black", ms=5, lw=1.2, zorder=4,
            label="optimal LR per batch size")
    for p, xi, yi in zip(per, x, y):
        ci = p.get("learning_rate_ci")
        if ci and positive(ci[0]):
            ax.plot(np.log10(ci), [yi, yi], "-", color="white", lw=0.8, zorder=3)
    best, opt = cell.get("best"), cell.get("optimum") or {}
    if best:
        ax.plot(np.log10(best["learning_rate"]), np.log2(best["batch_size"]), "s", mfc="none",
                mec="#D55E00", ms=10, mew=1.6, zorder=5, label="measured arg-min")
    if positive(opt.get("learning_rate")) and positive(opt.get("batch_size")):
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


def landscape(analysis: dict, records: list[dict], path: Path) -> Path | None:
    """The final metric over log learning rate x log batch size as filled contours, each batch
    size's optimal learning rate (95% interval), the cell's optimum and the rules."""
    cell = _cell(analysis)
    if cell is None:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.4, 5.0))
    lower = cell.get("lower_is_better", True)
    _contours(ax, fig, cell["grid"], lower, cell["metric"])
    _optima(ax, cell)
    _rules(ax, cell)
    fb = analysis["fixed_budget"]
    _ticks(ax, [g["learning_rate"] for g in cell["grid"]],
           sorted({g["batch_size"] for g in cell["grid"]}))
    ax.set(xlabel="learning rate", ylabel=f"batch size ({fb.get('batch_unit', 'examples')})",
           title=f"Final {cell['metric']} at the budget" + _budget_text(cell))
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3)
    return save(fig, path)


FIGURES = {"landscape.png": landscape}  # a results folder's, beside scaling.report.figures' own


def _budget_text(cell: dict) -> str:
    budget = cell.get("tokens") or cell.get("examples")
    parts = ([f"N = {sci(cell['params'])}"] if positive(cell.get("params")) else []) + \
        ([f"D = {sci(budget)} {cell.get('budget_unit')}"] if positive(budget) else [])
    return f" ({', '.join(parts)})" if parts else ""


# ---------------------------------------------------------------- across cells


PANELS = (("learning_rate", "learning_rate", "optimal learning rate eta*"),
          ("batch_size", "batch_size", "optimal batch size B_opt"),
          ("loss", "value", "final metric at the optimum"))


def _budget(cell: dict) -> float | None:
    return cell.get("tokens") if positive(cell.get("tokens")) else cell.get("examples")


def _law_line(ax: Any, law: dict, params: float | None, budgets: list[float], c: str,
              style: str = "-") -> None:
    exps = law.get("exponents") or {}
    if law.get("coefficient") is None:
        return
    xs = geom(min(budgets) / 1.3, max(budgets) * 1.3, 50)
    scale = params ** exps["params"] if exps.get("params") is not None and params else 1.0
    ax.plot(xs, [law["coefficient"] * scale * x ** (exps.get("tokens") or 0.0) for x in xs],
            style, color=c, lw=1.2)


def _panel(ax: Any, cells: list[dict], law: dict | None, key: str, label: str) -> None:
    for i, n in enumerate(_sizes(cells)):
        mine = sorted((c for c in cells if c.get("params") == n and
                       positive((c.get("optimum") or {}).get(key))), key=_budget)
        if not mine:
            continue
        x = [_budget(c) for c in mine]
        y = [c["optimum"][key] for c in mine]
        ci = [c["optimum"].get(f"{key}_ci") or [v, v] for c, v in zip(mine, y)]
        err = [[max(v - lo, 0) for v, (lo, _) in zip(y, ci)],
               [max(hi - v, 0) for v, (_, hi) in zip(y, ci)]]
        ax.errorbar(x, y, yerr=err, fmt="o", color=colour(i), capsize=3, ms=5,
                    label=f"N = {sci(n)}" if n else "optimum (95% CI)")
        ax.plot(x, [c["best"][key] for c in mine], "s", mfc="none", mec=colour(i), ms=6)
        if law:
            _law_line(ax, law, n, [_budget(c) for c in cells], colour(i))
    ax.plot([], [], "s", mfc="none", mec="0.3", label="measured arg-min")
    if law and law.get("coefficient") is not None:
        ax.plot([], [], "-", color="0.3", label="fitted law")
    ax.set(xscale="log", yscale="log", ylabel=label)
    _budget_ticks(ax, [_budget(c) for c in cells])
    ax.grid(True, which="major", alpha=0.3)


def _budget_ticks(ax: Any, budgets: list[float]) -> None:
    """x ticks at 1, 2 and 5 per decade within the budgets, written 2e+10 (fixed, so the
    shared style leaves them)."""
    from matplotlib.ticker import NullLocator  # matplotlib loads with the first figure

    lo, hi = math.log10(min(budgets) / 1.3), math.log10(max(budgets) * 1.3)
    ticks = [m * 10.0 ** e for e in range(math.floor(lo), math.ceil(hi) + 1) for m in (1, 2, 5)
             if lo <= math.log10(m * 10.0 ** e) <= hi]
    ax.set_xticks(ticks, [f"{t:.0e}".replace("e+0", "e").replace("e+", "e") for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


def optima_vs_budget(analysis: dict, path: Path) -> Path | None:
    """Each cell's eta*, B_opt and metric at the optimum against its budget D, one colour per
    model size N, with the fitted laws; None without two cells that have an optimum."""
    fb = analysis.get("fixed_budget") or {}
    cells = [c for c in fb.get("cells") or [] if positive(_budget(c))]
    if len(cells) < 2:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    laws = fb.get("laws") or {}
    for ax, (name, key, label) in zip(axes, PANELS):
        _panel(ax, cells, laws.get(name), key, label)
        ax.set_xlabel(f"budget D ({cells[0].get('budget_unit')})")
    axes[1].set_ylabel(f"{PANELS[1][2]} ({fb.get('batch_unit')})")
    axes[2].set_ylabel(f"final {fb.get('metric')} at the optimum")
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle("Fixed-budget optima against the budget, one colour per model size")
    fig.tight_layout()
    return save(fig, path)


def _sizes(cells: list[dict]) -> list[float | None]:
    return sorted({c.get("params") for c in cells}, key=lambda v: v or 0)


def _b_crit_points(ax: Any, points: list[dict], law: dict | None, sizes: list) -> None:
    """Each (N, target)'s B_crit (95% interval) against its E_min, a colour per N; those the
    law leaves out (extrapolated past the batch sizes tried) as crosses at a capped height."""
    for i, n in enumerate(sizes):
        mine = sorted((p for p in points if p.get("params") == n), key=_budget)
        out = [p for p in mine if extrapolated(p["b_crit"], p["largest_batch"])]
        if out:
            ax.plot([_budget(p) for p in out], [min(p["b_crit"]["value"], EXTRAPOLATION *
                                                    p["largest_batch"]) for p in out],
                    "x", color=colour(i), ms=7)
        mine = [p for p in mine if p not in out]
        if not mine:
            continue
        y = [p["b_crit"]["value"] for p in mine]
        ci = [p["b_crit"].get("ci") or [v, v] for p, v in zip(mine, y)]
        ax.errorbar([_budget(p) for p in mine], y, fmt="o", color=colour(i), capsize=3, ms=5,
                    yerr=[[max(v - lo, 0) for v, (lo, _) in zip(y, ci)],
                          [max(hi - v, 0) for v, (_, hi) in zip(y, ci)]],
                    label=f"B_crit, N = {sci(n)}" if n else "B_crit (95% CI)")
        if law:
            _law_line(ax, law, n, [_budget(p) for p in points], colour(i))


def _b_opt_points(ax: Any, cells: list[dict], law: dict | None, sizes: list) -> None:
    """Each cell's B_opt against its budget D (open diamonds), its law dashed."""
    for i, n in enumerate(sizes):
        mine = sorted((c for c in cells if c.get("params") == n and
                       positive((c.get("optimum") or {}).get("batch_size"))), key=_budget)
        if not mine:
            continue
        ax.plot([_budget(c) for c in mine], [c["optimum"]["batch_size"] for c in mine], "D",
                mfc="none", mec=colour(i), ms=7, label=f"B_opt, N = {sci(n)}" if n else "B_opt")
        if law:
            _law_line(ax, law, n, [_budget(c) for c in cells], colour(i), "--")


def b_crit_vs_data(analysis: dict, path: Path) -> Path | None:
    """B_crit of every (cell, target) against the data its target needs (E_min), and each
    cell's B_opt against its budget D, one colour per N, with their laws (B_crit solid, B_opt
    dashed); None without two B_crit points."""
    fb = analysis.get("fixed_budget") or {}
    cells, laws = fb.get("cells") or [], fb.get("laws") or {}
    points = [p for p in target_points(cells) if positive(_budget(p))]
    if len(points) < 2:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.4, 5.0))
    sizes = _sizes(cells)
    _b_crit_points(ax, points, laws.get("b_crit_data"), sizes)
    _b_opt_points(ax, [c for c in cells if positive(_budget(c))], laws.get("batch_size"), sizes)
    ax.plot([], [], "x", color="0.3",
            label=f"B_crit left out (beyond {EXTRAPOLATION:g}x the largest batch tried)")
    ax.set(xscale="log", yscale="log", ylabel=f"batch size ({fb.get('batch_unit')})",
           xlabel=f"data D ({cells[0].get('budget_unit')}): E_min of the target for B_crit, "
                  "the budget for B_opt",
           title="Critical and loss-optimal batch size against the data")
    _budget_ticks(ax, [_budget(p) for p in points] + [_budget(c) for c in cells
                                                        if positive(_budget(c))])
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return save(fig, path)
