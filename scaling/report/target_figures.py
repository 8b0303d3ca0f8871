"""B_crit against the target: a point with its interval where the batch sizes fitted pin it, a
bound where it lies beyond them (scaling.report.style's convention), beside B_simple and the
20%-overhead definition; one panel per metric that has two or more targets, else one panel
with the targets side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scaling.analysis.contract import Analysis, Target
from scaling.report.figure_data import b_crit_bar, b_crit_reading, unit
from scaling.report.style import (OKABE_ITO, figure, geom, legend, log_limits, mark, proxy,
                                  save)
from scaling.store.rows import positive


def _tried_sizes(analysis: Analysis) -> list[int]:
    tried = {r["batch_size"] for r in analysis["runs"]}
    return sorted(tried | set(analysis["sweep"]["batch_sizes"]))


def _b_crit(ax: Any, x: float, t: Target) -> list[float]:
    """One target's B_crit: a point (its interval as a bar) or a bound; the values drawn."""
    fitted = t["fit"] or {"b_crit": t["b_crit"], "b_crit_ci": t["b_crit_ci"],
                          "identification": None}
    kind, at = b_crit_reading(fitted)
    if kind == "point":
        bar = b_crit_bar(fitted, at)
        ax.errorbar([x], [at], fmt="o", color=OKABE_ITO[0], capsize=4, zorder=3, **bar)
        return [at] + ([at - bar["yerr"][0][0], at + bar["yerr"][1][0]] if bar["yerr"] else [])
    if kind:
        mark(ax, kind, [x], [at], OKABE_ITO[0], zorder=3)
        return [at]
    return []


def _draw(ax: Any, xs: list[float], targets: list[Target]) -> list[float]:
    """Every target's B_crit, 20%-overhead B_crit and B_simple at its x; the values drawn."""
    values = []
    for x, t in zip(xs, targets):
        values += _b_crit(ax, x, t)
        over = (t["overhead_b_crit"] or {}).get("fitted")
        if positive(over):
            ax.plot([x], [over], "D", color=OKABE_ITO[2], ms=5, zorder=3)
            values.append(over)
        if positive(t["b_simple"]):
            ax.plot([x], [t["b_simple"]], "s", color=OKABE_ITO[1], ms=5, zorder=3)
            values.append(t["b_simple"])
    return values


def _law(ax: Any, analysis: Analysis, metric: str, targets: list[Target]) -> None:
    for law in analysis["b_crit_power_law"]:
        if law["metric"] == metric and law["alpha_b"] is not None:
            xs = geom(min(t["value"] for t in targets), max(t["value"] for t in targets), 50)
            ax.plot(xs, [law["b_star"] * x ** law["exponent"] for x in xs], "-",
                    color=OKABE_ITO[0], lw=1, label=f"power law, $\\alpha_B$={law['alpha_b']:.2g}")


def _value_panel(ax: Any, metric: str, targets: list[Target], analysis: Analysis) -> list[float]:
    """One metric's targets at their values (harder to the right), with the power law."""
    values = _draw(ax, [t["value"] for t in targets], targets)
    _law(ax, analysis, metric, targets)
    ax.set_xlabel(f"{metric} target (harder to the right)")
    ax.margins(x=0.15)
    if targets[0]["op"] == "<=":
        ax.invert_xaxis()
    return values


def _named_panel(ax: Any, targets: list[Target]) -> list[float]:
    """Every target side by side, grouped by metric, easier to harder within each."""
    order = sorted(targets, key=lambda t: (t["metric"] or "", t["value"] * (
        -1 if t["op"] == "<=" else 1)))
    values = _draw(ax, list(range(len(order))), order)
    ax.set_xticks(range(len(order)), [t["name"] for t in order], fontsize=7,
                  rotation=20 if len(order) > 3 else 0, ha="right" if len(order) > 3 else "center")
    ax.set_xlim(-0.6, len(order) - 0.4)
    ax.set_xlabel("target (harder to the right within each metric)")
    return values


def _keys(axes: list[Any], sizes: list[int]) -> list[tuple[Any, str]]:
    """The legend's entries for what the panels draw."""
    found = {line.get_marker() for ax in axes for line in ax.lines}
    out = [(proxy(marker="o", color=OKABE_ITO[0]), "$B_{crit}$ (bar: its interval)")]
    if "D" in found:
        out.append((proxy(marker="D", color=OKABE_ITO[2], ms=5), "20% overhead (fitted)"))
    if "s" in found:
        out.append((proxy(marker="s", color=OKABE_ITO[1], ms=5), "$B_{simple}$ near the crossing"))
    if sizes:
        out.append((proxy(marker="s", color="0.88", ms=9), "batch sizes tried"))
    return out


def bcrit_vs_target(analysis: Analysis, records: list[dict], path: Path) -> Path | None:
    """B_crit (its interval, or a bound), B_simple and the 20%-overhead B_crit against the
    target: a panel per metric where each has two or more targets, else one panel."""
    by_metric: dict[str, list[Target]] = {}
    for t in analysis["targets"]:
        if positive(t["b_crit"]) or positive(t["b_simple"]):
            by_metric.setdefault(t["metric"] or t["name"], []).append(t)
    if not by_metric:
        return None
    split = all(len(ts) >= 2 for ts in by_metric.values())
    panels = list(by_metric.items()) if split else [("", [t for ts in by_metric.values()
                                                          for t in ts])]
    fig, axes = figure(4.0 * len(panels) + 2.4, 4.2, ncols=len(panels), squeeze=False,
                       sharey=True)
    sizes = _tried_sizes(analysis)
    values = list(sizes[:1] + sizes[-1:])
    for ax, (metric, targets) in zip(axes[0], panels):
        if sizes:
            ax.axhspan(min(sizes), max(sizes), color="0.92", zorder=0)
        values += (_value_panel(ax, metric, targets, analysis) if split
                   else _named_panel(ax, targets))
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_yscale("log")
    axes[0][0].set_ylim(*log_limits(values, 2.0))
    per = "sequences" if unit(analysis) == "tokens" else "examples"
    axes[0][0].set_ylabel(f"batch size ({per})")
    legend(axes[0][-1], extra=_keys(list(axes[0]), sizes), among=list(axes[0]))
    fig.suptitle("Critical batch size vs target")
    return save(fig, path)
