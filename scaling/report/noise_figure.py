"""Gradient noise scale vs training loss, for a whole sweep or a single run (`scaling gns`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from scaling.analysis.curves import windowed_b_noise, windowed_b_simple
from scaling.config import ConfigError
from scaling.formatting import number
from scaling.analysis.contract import Target
from scaling.report.figure_data import b_crit_bar, b_crit_reading
from scaling.report.style import batch_colours, figure, legend, log_limits, mark, save
from scaling.store.rows import positive

SMOOTH = 9  # running median over this many evaluation points: one-batch losses are noisy


def _smooth(values: list[float]) -> list[float]:
    half = SMOOTH // 2
    return [float(np.median(values[max(0, i - half):i + half + 1])) for i in range(len(values))]


def loss_key(records: list[dict]) -> str:
    """eval_loss where runs recorded it (a fixed subset: smooth and comparable across batch
    sizes), else train_loss (one batch's loss: noisy at small batches)."""
    rows = (m for r in records for m in (r.get("metrics") or []))
    return "eval_loss" if any(positive(m.get("eval_loss")) for m in rows) else "train_loss"


def noise_series(records: list[dict], key: str,
                 loss: str = "train_loss") -> list[tuple[str, int, list[float], list[float]]]:
    """(run id, batch size, losses, noise scales) per run, rows where both are positive, up to
    the run's lowest loss: past it the loss stalls or rises while the estimate keeps moving,
    which would draw the same loss over and over. Both noise scales are the windowed estimates
    the analysis reads at a target (scaling.analysis.curves: no moving-average lag; the recorded moving
    average only where the window holds no measurement)."""
    windowed = {"b_simple": windowed_b_simple, "b_noise": windowed_b_noise}[key]
    out = []
    for r in records:
        rows = r.get("metrics") or []
        if rows:
            values = windowed(rows, [m["step"] for m in rows])
            rows = [dict(m, **{key: float(v)}) for m, v in zip(rows, values)]
        rows = [m for m in rows if positive(m.get(loss)) and positive(m.get(key))]
        if rows:
            rows = rows[:min(range(len(rows)), key=lambda i: rows[i][loss]) + 1]
            b = (r.get("config") or {}).get("batch_size") or (r.get("summary") or {}).get(
                "batch_size") or 0
            out.append((r.get("run_id", ""), b, [m[loss] for m in rows], [m[key] for m in rows]))
    return out


def noise_scale_vs_loss(records: list[dict], path: Path, targets: list[Target] | None = None,
                        highlight: set[str] | None = None) -> Path:
    """B_simple (solid) and B_noise (dashed, thinner) vs loss (`loss_key`), one line per run,
    and each target on that loss's B_crit at (target loss, B_crit): its interval as a bar, a
    bound as a triangle (`targets`: analysis.json's).

    Usable on a single run (`scaling gns`). Runs whose id is in `highlight` are drawn bold and
    the rest faint, their B_noise left out (None: every run bold). Both coordinates are a
    running median over SMOOTH evaluation points; the axes hold every bold line whole. Raises
    ConfigError when no metrics row has both a training loss and a noise scale (noise-scale
    measurement off, or no step taken).
    """
    loss = loss_key(records)
    simple, noise = noise_series(records, "b_simple", loss), noise_series(records, "b_noise", loss)
    if not simple and not noise:
        raise ConfigError(f"b_simple: no metrics row has both {loss} and b_simple or b_noise; "
                          "expected runs trained with gns.enabled: true")
    fig, ax = figure(7.8, 4.6)
    bold = {run for run, _, _, _ in simple + noise} if highlight is None else set(highlight)
    losses, scales = _draw_runs(ax, simple, noise, bold)
    shown = _draw_b_crit(ax, [t for t in targets or [] if t["metric"] == loss], loss)
    key = "solid: $B_{simple}$" + (", dashed: $B_{noise}$" if noise else "")
    key += "\nbold: best LR per batch size\nfaint: other learning rates" if highlight else ""
    ax.set(yscale="log", xscale="log",
           xlabel=f"{loss.replace('_', ' ')}, running median of {SMOOTH} evaluations "
                  "(training proceeds →)",
           ylabel=f"noise scale ({'sequences' if _tokens(records) else 'examples'})",
           title=f"Gradient noise scale vs {loss.replace('_', ' ')}")
    ax.set_ylim(*log_limits(scales + [y for _, y in shown], 1.3))
    edges = losses + [x for x, _ in shown]
    ax.set_xlim(max(edges) * 1.15, min(edges) / 1.15)  # inverted: training runs left to right
    ax.grid(True, which="major", alpha=0.3)
    legend(ax, title=key, title_fontsize=7, alignment="left")
    return save(fig, path)


def _draw_runs(ax: Any, simple: list, noise: list, bold: set[str]) -> tuple[list, list]:
    """One smoothed line per run (B_noise only for bold runs); returns the bold lines' losses
    and scales (all lines' if none is bold)."""
    colours = batch_colours([b for _, b, _, _ in simple + noise])
    strong_xy: tuple[list, list] = ([], [])
    faint_xy: tuple[list, list] = ([], [])
    labelled: set[int] = set()
    for series, style in ((simple, "-"), (noise, "--")):
        for run, b, loss, scale in sorted(series, key=lambda s: s[1]):
            strong = run in bold
            if style == "--" and not strong:
                continue
            label = f"B={number(b)}" if strong and b not in labelled else None
            if strong:
                labelled.add(b)
            loss, scale = _smooth(loss), _smooth(scale)
            xy = strong_xy if strong else faint_xy
            xy[0].extend(loss)
            xy[1].extend(scale)
            ax.plot(loss, scale, style, color=colours[b], label=label,
                    lw=(1.3 if style == "-" else 0.8) if strong else 0.6,
                    alpha=(0.9 if style == "-" else 0.6) if strong else 0.15,
                    zorder=3 if strong else 2)
    return strong_xy if strong_xy[0] else faint_xy


def _draw_b_crit(ax: Any, targets: list[Target], loss: str) -> list[tuple[float, float]]:
    """Each `loss` target's B_crit at its loss: a point with its interval, or a bound; the
    coordinates drawn (one legend entry for the points)."""
    shown: list[tuple[float, float]] = []
    label = f"$B_{{crit}}$ at each {loss.replace('_', ' ')} target (bar: its interval)"
    for t in targets:
        kind, at = b_crit_reading(t["fit"]) if t["fit"] else (None, None)
        ends: list[float] = []
        if kind == "point":
            bar = b_crit_bar(t["fit"], at)
            ax.errorbar([t["value"]], [at], fmt="D", color="black", mfc="white", ms=6,
                        capsize=3, zorder=6, label=label, **bar)
            label = None
            ends = [at - bar["yerr"][0][0], at + bar["yerr"][1][0]] if bar["yerr"] else []
        elif kind:
            mark(ax, kind, [t["value"]], [at], "black", zorder=6)
        shown += [(t["value"], v) for v in [at, *ends] if kind]
    return shown


def _tokens(records: list[dict]) -> bool:
    return any(m.get("tokens") is not None for r in records for m in (r.get("metrics") or [])[:2])
