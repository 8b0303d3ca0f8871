"""Shared look of the figures: Okabe-Ito palette, headless matplotlib, 200 dpi PNGs laid out
within their canvas (constrained layout), log axes with plain numbers ("1,024" on both axes),
and the one convention for points that are not plain measurements.

Such points look the same in every figure (`mark`) and `legend` names each kind a figure
draws: the best rate at an edge of the rates tried (the optimum may lie beyond), a bound (a
triangle pointing to where the value lies), a run that diverged, a target not reached, a run
stopped as dominated (its steps are more than drawn). matplotlib is imported inside the
functions so the rest of the package never pays for it.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from scaling.formatting import number
from scaling.store import atomic_write

DPI = 200
# Okabe & Ito (2008): distinguishable under the common colour-vision deficiencies.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
             "#000000")
RULE_COLOURS = {"linear": "#D55E00", "sqrt": "#009E73", "noise_scale": "#CC79A7",
                "constant": "#56B4E9", "surge": "#0072B2"}
GREY = "0.35"
BAND_ALPHA = 0.18

SHAPES = {"edge": {"marker": "o", "mfc": "white", "mew": 1.6, "ms": 8},
          "bound": {"marker": "^", "mew": 0.0, "ms": 8},
          "dominated": {"marker": "^", "mfc": "white", "mew": 1.2, "ms": 7},
          "diverged": {"marker": "x", "mew": 1.5, "ms": 6},
          "not_reached": {"marker": "s", "mfc": "white", "mew": 1.0, "ms": 5},
          "unpinned": {"marker": "D", "mfc": "white", "mew": 1.2, "ms": 6}}
LABELS = {"edge": "best rate at an edge of the rates tried",
          "bound": "a bound: the value lies where the triangle points",
          "dominated": "stopped as dominated (its steps a lower bound)",
          "diverged": "diverged", "not_reached": "not reached",
          "unpinned": "not identified (beyond the batch sizes fitted): the fit's value, "
                      "at most 8x the largest batch tried"}
TRIANGLES = {("lower", "y"): "^", ("upper", "y"): "v", ("lower", "x"): ">",
             ("upper", "x"): "<"}


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure(width: float = 6.4, height: float = 4.6, **kw: Any) -> tuple[Any, Any]:
    """plt.subplots laid out so that everything, legends beside the axes included, fits the
    canvas."""
    return pyplot().subplots(figsize=(width, height), layout="constrained", **kw)


def save(fig: Any, path: Path) -> Path:
    """The figure written to `path` as a whole (rendered first, then swapped in), so a process
    reading it meanwhile (another sweep's analysis on the same folder, drawing figures.pdf)
    or a kill never finds it half written."""
    tidy_log_axes(fig)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=DPI, bbox_inches="tight", format=path.suffix.lstrip(".") or "png")
    pyplot().close(fig)
    atomic_write(path, buffer.getvalue())
    return path


def colour(i: int) -> str:
    return OKABE_ITO[i % len(OKABE_ITO)]


def geom(lo: float, hi: float, n: int = 200) -> list[float]:
    return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]


def log_limits(values: list[float], margin: float = 1.5) -> tuple[float, float]:
    """A log axis's limits around the positive `values`, `margin` beyond each end."""
    kept = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return min(kept) / margin, max(kept) * margin


def tidy_log_axes(fig: Any) -> None:
    """Log axes labelled 20,000 or 0.03 instead of 2x10^4, with more labelled ticks per decade
    the shorter the axis and no minor labels (they collide). Axes with ticks set by hand
    (batch sizes) are left alone."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    for ax in fig.axes:
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log" or isinstance(axis.get_major_locator(), FixedLocator):
                continue
            lo, hi = sorted(abs(v) for v in lim)
            decades = math.log10(hi) - math.log10(lo) if lo > 0 else 10
            subs = (1, 1.5, 2, 3, 5, 7) if decades < 1 else (1, 2, 5) if decades < 2.5 else (1,)
            axis.set_major_locator(LogLocator(subs=subs))
            axis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
            axis.set_minor_formatter(NullFormatter())


def batch_axis(ax: Any, sizes: list[int], label: str) -> None:
    """Log x axis with a tick at each batch size of the sweep ("1,024"), and nothing else;
    every other label left out where there are more than ten."""
    from matplotlib.ticker import NullLocator

    sizes = sorted(set(sizes))
    step = 2 if len(sizes) > 10 else 1
    ax.set_xscale("log")
    ax.set_xticks(sizes, [number(b) if i % step == 0 else "" for i, b in enumerate(sizes)],
                  fontsize=8 if len(sizes) > 6 else None)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(label)


def batch_colours(sizes: list[int]) -> dict[int, Any]:
    sizes = sorted(set(sizes))
    if len(sizes) <= len(OKABE_ITO):
        return {b: OKABE_ITO[i] for i, b in enumerate(sizes)}
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    return {b: cmap(i / (len(sizes) - 1)) for i, b in enumerate(sizes)}


def scaled(values: list[float], unit: str) -> tuple[float, str]:
    """A divisor for an axis of `values` and its unit ("billion tokens"), so that its ticks
    read as plain numbers under 10,000."""
    top = max(values)
    for factor, name in ((1.0, ""), (1e3, "thousand "), (1e6, "million "), (1e9, "billion ")):
        if top / factor < 1e4:
            return factor, f"{name}{unit}"
    return 1e12, f"trillion {unit}"


# ---------------------------------------------------------------- points that are not plain


def mark(ax: Any, kind: str, xs: list[float], ys: list[float], colour: Any = GREY,
         axis: str = "y", **kw: Any) -> Any:
    """Draw points of one kind (LABELS' keys, or "lower"/"upper": a bound, its triangle
    pointing up/right or down/left along `axis`) the one way every figure draws them, tagged
    so that `legend` names the kind."""
    if kind in ("lower", "upper"):
        style, tag = {**SHAPES["bound"], "marker": TRIANGLES[kind, axis]}, "bound"
    else:
        style, tag = dict(SHAPES[kind]), kind
    (line,) = ax.plot(xs, ys, ls="none", color=colour, mec=colour, **{**style, **kw})
    line.set_gid(f"mark:{tag}")
    return line


def band(ax: Any, xs: list[float], low: list[float], high: list[float], colour: Any,
         **kw: Any) -> Any:
    """A fit's interval, shaded around its curve."""
    return ax.fill_between(xs, low, high, color=colour, alpha=BAND_ALPHA, lw=0, **kw)


def entries(axes: list[Any], extra: list[tuple[Any, str]] = ()) -> tuple[list, list]:
    """Legend (handles, labels): the first axes' labelled artists, then `extra` (handle,
    label) pairs, then one entry per kind of point `mark` drew on any of `axes`; a label
    given twice is kept once."""
    from matplotlib.lines import Line2D

    handles, labels = axes[0].get_legend_handles_labels()
    for handle, label in extra:
        handles.append(handle)
        labels.append(label)
    tags = {line.get_gid() for a in axes for line in a.lines}
    for tag, label in LABELS.items():
        if f"mark:{tag}" in tags:
            handles.append(Line2D([], [], ls="none", color=GREY, mec=GREY, **SHAPES[tag]))
            labels.append(label)
    kept = {label: handle for handle, label in zip(handles, labels)}  # one entry per label
    return list(kept.values()), list(kept)


def legend(ax: Any, outside: bool = True, extra: list[tuple[Any, str]] = (),
           among: list[Any] | None = None, **kw: Any) -> Any:
    """The axes' legend (beside the axes where `outside`) with `entries` of it (and of the
    axes `among`)."""
    handles, labels = entries([ax, *(among or [])], extra)
    where = ({"loc": "upper left", "bbox_to_anchor": (1.02, 1), "borderaxespad": 0}
             if outside else {"loc": "best"})
    return ax.legend(handles, labels, **{"fontsize": 7, **where, **kw})


def proxy(**kw: Any) -> Any:
    """A legend handle for something drawn without a label of its own (a line: pass ls)."""
    from matplotlib.lines import Line2D

    return Line2D([], [], **{"color": GREY, "ls": "none", **kw})
