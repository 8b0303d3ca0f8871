"""Figures across the cells of a parent folder (docs/analysis.md#laws-across-cells): each
optimum against the budget D, one colour per model size N, with the fitted law, its fit in D
alone and, at the scale it was fitted on, Li et al. 2025's Step Law; and B_crit against the
data its target needs beside B_opt against the budget. Points of one D are dodged apart, an
optimum at an edge of the values tried is drawn as such (scaling.report.style), and the
largest batch size tried is a line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scaling.analysis.laws import EXTRAPOLATION, extrapolated, target_points
from scaling.analysis.sections import Law
from scaling.formatting import count, number
from scaling.report.style import (GREY, colour, entries, figure, geom, log_limits, mark, proxy,
                                  save, scaled)
from scaling.store.rows import positive

# Li et al. 2025 ("Step Law"): eta* = 1.79 N^-0.713 D^0.307 and B_opt = 0.58 D^0.571, N the
# non-embedding parameters, D and B in tokens (B in sequences is B / tokens per sequence:
# 2,048 in their runs). Drawn where the cells' budgets reach the scale of the runs it was
# fitted on: a billion tokens and more.
STEP_LAW = {"learning_rate": (1.79, -0.713, 0.307), "batch_size": (0.58, 0.0, 0.571)}
STEP_LAW_TOKENS = 1e9
DODGE = 0.025  # decades between the points of neighbouring model sizes at one budget


def _budget(cell: dict) -> float | None:
    return cell.get("tokens") if positive(cell.get("tokens")) else cell.get("examples")


def _sizes(cells: list[dict]) -> list[float | None]:
    return sorted({c.get("params") for c in cells}, key=lambda v: v or 0)


def _dodge(i: int, count: int) -> float:
    return 10 ** (DODGE * (i - (count - 1) / 2))


def _law_line(ax: Any, law: Law, params: float | None, budgets: list[float], c: Any,
              factor: float, style: str = "-") -> None:
    """A fitted law at one N over the budgets (x divided by `factor`); dashed where its
    identification says the cells' optima are bounds."""
    exps = law["exponents"]
    if law["coefficient"] is None:
        return
    xs = geom(min(budgets) / 1.3, max(budgets) * 1.3, 50)
    scale = params ** exps["params"] if exps.get("params") is not None and params else 1.0
    pinned = (law.get("identification") or {}).get("identified", True)  # `alone` has none
    ax.plot([x / factor for x in xs],
            [law["coefficient"] * scale * x ** (exps.get("tokens") or 0.0) for x in xs],
            style if pinned else ":", color=c, lw=1.2)


def _edge(cell: dict, key: str) -> str | None:
    """Where a cell's optimum of `key` sits at an edge of the values it tried: B_opt at its
    smallest or largest batch size, eta* at an edge of the rates at the nearest batch size."""
    optimum = cell.get("optimum") or {}
    if key == "batch_size":
        return optimum.get("at_edge")
    if key != "learning_rate" or not cell.get("per_batch"):
        return None
    nearest = min(cell["per_batch"],
                  key=lambda p: abs(math.log(p["batch_size"] / optimum["batch_size"])))
    return nearest.get("at_edge")


def _optima(ax: Any, mine: list[dict], key: str, c: Any, xs: list[float]) -> list[float]:
    """One model size's optima: a point with its interval, an edge or a bound where the
    optimum sits at an edge of what the cell tried; the measured arg-min beside it."""
    values = []
    for cell, x in zip(mine, xs):
        y, edge = cell["optimum"][key], _edge(cell, key)
        ci = cell["optimum"].get(f"{key}_ci") or [y, y]
        values += [y, *ci]
        if edge and key == "batch_size":
            mark(ax, "upper" if edge == "low" else "lower", [x], [y], c, zorder=4)
        elif edge:
            mark(ax, "edge", [x], [y], c, zorder=4)
        else:
            ax.errorbar([x], [y], yerr=[[max(y - ci[0], 0)], [max(ci[1] - y, 0)]], fmt="o",
                        color=c, capsize=3, ms=5, zorder=3)
    ax.plot(xs, [cell["best"][key] for cell in mine], "s", mfc="none", mec=c, ms=6, zorder=3)
    return values + [cell["best"][key] for cell in mine]


def _step_law(ax: Any, key: str, cells: list[dict], sizes: list, factor: float,
              per_sequence: float | None) -> bool:
    """Li et al. 2025's law of `key` (per N for eta*), in the batch unit; whether drawn."""
    budgets = [_budget(c) for c in cells]
    if key not in STEP_LAW or min(budgets) < STEP_LAW_TOKENS or cells[0].get(
            "budget_unit") != "tokens" or (key == "batch_size" and not per_sequence):
        return False
    a, n_exp, d_exp = STEP_LAW[key]
    xs = geom(min(budgets) / 1.3, max(budgets) * 1.3, 50)
    for i, n in enumerate(sizes if key == "learning_rate" else [None]):
        if key == "learning_rate" and not n:
            continue
        scale = (n ** n_exp if n else 1.0) / (per_sequence if key == "batch_size" else 1.0)
        ax.plot([x / factor for x in xs], [a * scale * x ** d_exp for x in xs], "-.",
                color=colour(i) if n else "black", lw=1.0)
    return True


def _panel(ax: Any, cells: list[dict], law: Law | None, key: str, factor: float,
           per_sequence: float | None) -> list[tuple[Any, str]]:
    """One quantity's panel: each N's optima (dodged at a shared D), its fitted law, the
    law in D alone and the Step Law where they apply; the legend entries it adds."""
    sizes, values = _sizes(cells), []
    for i, n in enumerate(sizes):
        mine = sorted((c for c in cells if c.get("params") == n and
                       positive((c.get("optimum") or {}).get(key))), key=_budget)
        xs = [_budget(c) / factor * _dodge(i, len(sizes)) for c in mine]
        values += _optima(ax, mine, key, colour(i), xs) if mine else []
        if law:
            _law_line(ax, law, n, [_budget(c) for c in cells], colour(i), factor)
    extra = []
    alone = law["alone"].get("tokens") if law else None
    if key == "batch_size" and alone and alone.get("coefficient") is not None:
        _law_line(ax, {"coefficient": alone["coefficient"],
                       "exponents": {"tokens": alone["exponent"]}}, None,
                  [_budget(c) for c in cells], "black", factor, "--")
        extra.append((proxy(ls="--", color="black"), f"fit in D alone (exponent "
                                                     f"{alone['exponent']:.3g})"))
    if _step_law(ax, key, cells, sizes, factor, per_sequence):
        extra.append((proxy(ls="-.", color="black"), _step_law_label(key, per_sequence)))
    if key == "batch_size":
        extra += _largest(ax, cells, values)
    ax.set(xscale="log", yscale="log", ylim=log_limits(values, 1.05 if key == "value" else 1.4))
    ax.grid(True, which="major", alpha=0.3)
    return extra


def _step_law_label(key: str, per_sequence: float | None) -> str:
    if key == "learning_rate":
        return "Li et al. 2025: $\\eta^*$ = 1.79 $N^{-0.713} D^{0.307}$"
    per = f" / {number(per_sequence)} per sequence" if per_sequence != 1.0 else ""
    return f"Li et al. 2025: $B_{{opt}}$ = 0.58 $D^{{0.571}}$ tokens{per}"


def _largest(ax: Any, cells: list[dict], values: list[float]) -> list[tuple[Any, str]]:
    """The largest batch size any cell tried, as a line (added to `values`, the panel's)."""
    top = max((p["batch_size"] for c in cells for p in c.get("per_batch") or []), default=None)
    if top is None:
        return []
    ax.axhline(top, color=GREY, lw=0.9, ls=(0, (1, 2)))
    values.append(top)
    return [(proxy(ls=(0, (1, 2))), "largest batch size tried")]


PANELS = (("learning_rate", "learning_rate", "optimal learning rate $\\eta^*$"),
          ("batch_size", "batch_size", "optimal batch size $B_{opt}$"),
          ("loss", "value", "final metric at the optimum"))


def optima_vs_budget(analysis: dict, path: Path) -> Path | None:
    """Each cell's eta*, B_opt and metric at the optimum against its budget D, one colour per
    model size N, with the fitted laws; None without two cells that have an optimum."""
    fb = analysis.get("fixed_budget") or {}
    cells = [c for c in fb["cells"] if positive(_budget(c))]
    if len(cells) < 2:
        return None
    fig, axes = figure(14, 4.8, ncols=3)
    factor, unit = scaled([_budget(c) for c in cells], cells[0].get("budget_unit") or "tokens")
    per = (analysis.get("manifest") or {}).get("tokens_per_example")
    per = per if fb["batch_unit"] != "tokens" else 1.0
    extra = []
    for ax, (name, key, label) in zip(axes, PANELS):
        extra += _panel(ax, cells, fb["laws"].get(name), key, factor, per)
        ax.set(xlabel=f"budget D ({unit})", ylabel=label)
    axes[1].set_ylabel(f"{PANELS[1][2]} ({fb['batch_unit']})")
    axes[2].set_ylabel(f"final {fb['metric']} at the optimum")
    sizes = _sizes(cells)
    keys = [(proxy(marker="o", color=colour(i), ms=5), f"N = {count(n)}" if n else "optimum")
            for i, n in enumerate(sizes)]
    keys += [(proxy(marker="s", mfc="none", mec=GREY, ms=6), "measured arg-min"),
             (proxy(ls="-"), "fitted law (dotted: its cells' optima at an edge)")] + extra
    handles, labels = entries(list(axes), keys)
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=7)
    fig.suptitle("Fixed-budget optima against the budget, one colour per model size "
                 "(points of one budget set apart)")
    return save(fig, path)


def _b_crit_points(ax: Any, points: list[dict], sizes: list, law: Law | None,
                   factor: float) -> list[float]:
    """Each (N, target)'s B_crit against its E_min: a point with its interval; hollow where
    the interval runs past EXTRAPOLATION x the largest batch tried (left out of the law);
    `unpinned` where the batch sizes fitted do not identify it; the law per N."""
    values = []
    for i, n in enumerate(sizes):
        mine = sorted((p for p in points if p.get("params") == n), key=_budget)
        for p in mine:
            b, cap = p["b_crit"], EXTRAPOLATION * (p["largest_batch"] or math.inf)
            x, y = _budget(p) / factor * _dodge(i, len(sizes)), min(p["b_crit"]["value"], cap)
            ci = [min(v, cap) for v in b.get("ci") or [y, y]]
            values += [y, *ci]
            if not b.get("identified", True):
                mark(ax, "unpinned", [x], [y], colour(i), zorder=4)
                continue
            ax.errorbar([x], [y], yerr=[[max(y - ci[0], 0)], [max(ci[1] - y, 0)]], fmt="o",
                        color=colour(i), capsize=3, ms=5, zorder=3,
                        mfc="white" if extrapolated(b, p["largest_batch"]) else colour(i))
        if law:
            _law_line(ax, law, n, [_budget(p) for p in points], colour(i), factor)
    return values


def b_crit_vs_data(analysis: dict, path: Path) -> Path | None:
    """B_crit of every (cell, target) against the data its target needs (E_min), and beside it
    each cell's B_opt against its budget D, one colour per N, with their laws; None without
    two B_crit points."""
    fb = analysis.get("fixed_budget") or {}
    cells, laws = fb["cells"], fb["laws"]
    points = [p for p in target_points(cells) if positive(_budget(p))]
    if len(points) < 2:
        return None
    fig, (left, right) = figure(11.5, 4.8, ncols=2, sharey=True)
    sizes, unit = _sizes(cells), cells[0].get("budget_unit") or "tokens"
    factor, label = scaled([_budget(p) for p in points], unit)
    values = _b_crit_points(left, points, sizes, laws.get("b_crit_data"), factor)
    left.set(xlabel=f"data the target needs, E_min ({label})", title="$B_{crit}$ per target")
    budgeted = [c for c in cells if positive(_budget(c))]
    factor, label = scaled([_budget(c) for c in budgeted], unit)
    extra = _panel(right, budgeted, laws.get("batch_size"), "batch_size", factor, None)
    right.set(xlabel=f"budget D ({label})", title="$B_{opt}$ per cell (at its budget)")
    _largest(left, cells, values)
    left.set(xscale="log", yscale="log", ylabel=f"batch size ({fb['batch_unit']})",
             ylim=log_limits(values + list(right.get_ylim()), 1.4))
    left.grid(True, which="major", alpha=0.3)
    keys = [(proxy(marker="o", color=colour(i), ms=5), f"N = {count(n)}" if n else "B_crit")
            for i, n in enumerate(sizes)]
    keys += [(proxy(marker="o", mfc="white", ms=5), f"interval past {EXTRAPOLATION:g}x the "
                                                     "largest batch tried (left out of the law)"),
             (proxy(marker="s", mfc="none", mec=GREY, ms=6), "measured arg-min"),
             (proxy(ls="-"), "fitted law (dotted: its cells' optima at an edge)")] + extra
    handles, labels = entries([left, right], keys)
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=7)
    fig.suptitle("Critical and loss-optimal batch size against the data")
    return save(fig, path)
