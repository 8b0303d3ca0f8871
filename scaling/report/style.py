"""Shared look of the figures: Okabe-Ito palette, headless matplotlib, 200 dpi PNGs, log axes
with plain numbers and batch-size ticks. matplotlib is imported inside the functions so the
rest of the package never pays for it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scaling.formatting import number

DPI = 200
# Okabe & Ito (2008): distinguishable under the common colour-vision deficiencies.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
             "#000000")
RULE_COLOURS = {"linear": "#D55E00", "sqrt": "#009E73", "noise_scale": "#CC79A7",
                "constant": "#56B4E9", "surge": "#0072B2"}


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path) -> Path:
    tidy_log_axes(fig)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    pyplot().close(fig)
    return path


def colour(i: int) -> str:
    return OKABE_ITO[i % len(OKABE_ITO)]


def geom(lo: float, hi: float, n: int = 200) -> list[float]:
    return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]


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
    """Log x axis with a tick at each batch size of the sweep, and nothing else."""
    from matplotlib.ticker import NullLocator

    ax.set_xscale("log")
    ax.set_xticks(sorted(set(sizes)), [str(b) for b in sorted(set(sizes))])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(label)


def batch_colours(sizes: list[int]) -> dict[int, Any]:
    sizes = sorted(set(sizes))
    if len(sizes) <= len(OKABE_ITO):
        return {b: OKABE_ITO[i] for i, b in enumerate(sizes)}
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    return {b: cmap(i / (len(sizes) - 1)) for i, b in enumerate(sizes)}
