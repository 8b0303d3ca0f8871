"""Figures a reader can read: no text drawn over other text, none off the canvas, none cut by
the box it is clipped to. `problems` renders a figure through matplotlib's renderer and names
each clash; the tests hold every figure to it, and `place_labels` uses the same boxes to put
point labels where they collide with nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

TOLERANCE = 0.5  # pixels two boxes may share, or a box may pass the canvas by (antialiasing)
GAP = 2.0  # pixels a placed label keeps from other text: the layout may still shift a little


def _drawn_tick_labels(axis: Any) -> list[Any]:
    """The tick labels an axis draws: those of its ticks inside the view, visible, not empty."""
    scale = axis.get_transform()  # compared on the axis's own scale: log10 for a log axis
    lo, hi = sorted(float(v) for v in scale.transform(list(axis.get_view_interval())))
    slack = 1e-9 * (hi - lo or 1.0)
    out = []
    for locs, ticks in ((axis.get_majorticklocs(), axis.get_major_ticks),
                        (axis.get_minorticklocs(), axis.get_minor_ticks)):
        for tick in ticks(len(locs)):
            at = float(scale.transform([tick.get_loc()])[0])
            if lo - slack <= at <= hi + slack and tick.get_visible():
                out += [t for t in (tick.label1, tick.label2) if t.get_visible()]
    return out


def texts(artist: Any) -> Iterator[Any]:
    """Every Text a figure draws (titles, axis labels, tick labels, legend entries and titles,
    annotations), not empty and visible."""
    from matplotlib.axis import Axis
    from matplotlib.text import Text

    if not artist.get_visible():
        return
    if isinstance(artist, Axis):
        found = [artist.label, artist.get_offset_text(), *_drawn_tick_labels(artist)]
    else:
        found = [artist] if isinstance(artist, Text) else []
        for child in artist.get_children():
            yield from texts(child)
    yield from (t for t in found if t.get_visible() and t.get_text().strip())


def _overlap(a: Any, b: Any) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > TOLERANCE
            and min(a.y1, b.y1) - max(a.y0, b.y0) > TOLERANCE)


def _inside(box: Any, frame: Any) -> bool:
    return (box.x0 >= frame.x0 - TOLERANCE and box.x1 <= frame.x1 + TOLERANCE
            and box.y0 >= frame.y0 - TOLERANCE and box.y1 <= frame.y1 + TOLERANCE)


def boxes(fig: Any) -> list[tuple[Any, Any]]:
    """(text, its box on the canvas) for every text the figure draws, laid out as drawn."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t, t.get_window_extent(renderer)) for t in texts(fig)]


def problems(fig: Any) -> list[str]:
    """Each pair of texts whose boxes overlap, and each text off the canvas or cut by its
    clip box, as a sentence naming the texts; empty for a legible figure."""
    found = boxes(fig)
    out = []
    for i, (a, box_a) in enumerate(found):
        for b, box_b in found[i + 1:]:
            if _overlap(box_a, box_b):
                out.append(f"{a.get_text()!r} overlaps {b.get_text()!r}")
        if not _inside(box_a, fig.bbox):
            out.append(f"{a.get_text()!r} leaves the canvas")
        clip = a.get_clip_box() if a.get_clip_on() else None
        if clip is not None and not _inside(box_a, clip):
            out.append(f"{a.get_text()!r} is cut by its clip box")
    return out


OFFSETS = ((5, 4, "left", "bottom"), (5, -4, "left", "top"), (-5, 4, "right", "bottom"),
           (-5, -4, "right", "top"), (0, 7, "center", "bottom"), (0, -7, "center", "top"))


def place_labels(ax: Any, labels: list[tuple[float, float, str, Any]], **kw: Any) -> int:
    """Label points (x, y, text, colour) in order, each at the first offset around its point
    where it overlaps no text drawn and stays inside the axes; a label with no such place is
    left out. Returns how many were placed. Call it last: the figure's layout as drawn now is
    the one the labels are placed in."""
    fig = ax.figure
    taken = [box for _, box in boxes(fig)]
    renderer, frame, placed = fig.canvas.get_renderer(), ax.get_window_extent(), 0
    for x, y, text, colour in labels:
        for dx, dy, ha, va in OFFSETS:
            label = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points",
                                ha=ha, va=va, color=colour, **kw)
            box = label.get_window_extent(renderer).padded(GAP)
            if _inside(box, frame) and not any(_overlap(box, other) for other in taken):
                taken.append(box)
                placed += 1
                break
            label.remove()
    return placed
