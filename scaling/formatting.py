"""Numbers and tables as people read them, the same in the terminal, report.md and figures.

A leaf module: every layer may use it, it imports nothing from the package.
"""

from __future__ import annotations

import math
from typing import Any


def number(value: Any, digits: int = 3) -> str:
    """`digits` significant figures; whole numbers and anything from 1,000 up written out with
    thousands separators (21,000 not 2.1e+04); '-' for None, NaN or infinity."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, (bool, str)):
        return str(value)
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{round(value):,}"
    return f"{value:.{digits}g}"


def percent(fraction: Any, digits: int = 2) -> str:
    """A fraction as a percentage as people write one, to `digits` significant figures and
    never in exponent form: 1.0 -> '100%', 0.0314 -> '3.1%', 1.2e-7 -> '0.000012%'; '-' for
    None, NaN or infinity."""
    if fraction is None or not math.isfinite(fraction):
        return "-"
    value = float(f"{100 * fraction:.{digits}g}")  # rounded first: 0.0999 -> 10, not 10.0
    if value == 0 or abs(value) >= 1000:
        return f"{number(value)}%"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}%"


def short_number(value: float, digits: int = 4) -> str:
    """1e+11 -> 1e11, 214663680 -> 2.147e8: `digits` significant figures without + or trailing
    zeros, for folder names."""
    mantissa, _, exponent = f"{value:.{digits}g}".partition("e")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    return mantissa + (f"e{int(exponent)}" if exponent else "")


def count(value: Any) -> str:
    """A large count as people say it, one style for the whole report: 2,150 below a million,
    then 2.15M, 3.58B, 1.2T, and from 1e15 on (FLOPs) 4.02e19 ('-' for None)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or abs(value) < 1e6:
        return number(value)
    if abs(value) >= 1e15:
        return short_number(value, 3)
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return number(value)


def more_than(value: Any, digits: int = 3) -> str:
    """A censored value, '> 1,234': the steps of a run stopped before it got there."""
    return f"> {number(value, digits)}"


def span(values: Any, fmt: Any = number) -> str:
    """'a-b' over `values` with each end written by `fmt`, 'a' when the ends read the same,
    '-' for none: a range of results quoted in prose."""
    values = list(values)
    if not values:
        return "-"
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def interval(ci: Any, digits: int = 3) -> str:
    """'[lo, hi]', or '-' without an interval."""
    return f"[{number(ci[0], digits)}, {number(ci[1], digits)}]" if ci and len(ci) == 2 else "-"


def bound(status: Any, digits: int = 3) -> str | None:
    """A value the data do not pin, as what they do say: '< 16', '> 4,096' or 'not
    identified'; None for an identified value (`status`: analysis.json's identification)."""
    if not status or status.get("identified", True):
        return None
    at = status.get("at")
    if status.get("bound") == "upper" and at is not None:
        return f"< {number(at, digits)}"
    if status.get("bound") == "lower" and at is not None:
        return f"> {number(at, digits)}"
    return "not identified"


WIDE = 1000  # an interval whose ends are further apart than this factor pins nothing


def unpinned(value: Any, ci: Any) -> str | None:
    """'0.129 [interval over 1,000x wide]' where a positive interval spans more than WIDE
    (a fitted parameter the data do not pin, whose ends mean nothing), else None."""
    if ci and len(ci) == 2 and ci[0] and ci[0] > 0 and ci[1] / ci[0] > WIDE:
        return f"{number(value)} [interval over {WIDE:,}x wide]"
    return None


def estimate(value: Any, ci: Any = None, status: Any = None, digits: int = 3,
             factor: float = 10.0) -> str:
    """A number with its interval as reports print it: '469 [443, 499]'; a bound in place of a
    value the data do not pin ('> 4,096'); an interval end past `factor` x the range the data
    span as that limit ('[443, > 40,960]'); a zero-width interval as 'degenerate'."""
    shown = bound(status, digits)
    if shown is not None:
        return shown
    text = number(value, digits)
    if not ci or len(ci) != 2:
        return text
    if (status and status.get("ci_zero_width")) or ci[0] == ci[1]:
        return f"{text} (interval degenerate)"
    low, high = (status or {}).get("range") or (None, None)
    opened = (status or {}).get("ci_open") or (False, False)
    while digits < 6 and ci[0] != ci[1] and number(ci[0], digits) == number(ci[1], digits):
        digits += 1  # an interval narrower than the printed digits: print enough to show it
    text = number(value, digits)
    lo = f"< {number(low / factor, digits)}" if opened[0] and low else number(ci[0], digits)
    hi = f"> {number(high * factor, digits)}" if opened[1] and high else number(ci[1], digits)
    return f"{text} [{lo}, {hi}]"


def edge_bound(value: Any, ci: Any, edge: str | None, digits: int = 3) -> str:
    """A value read at the edge of the values tried as the bound it is ('<= 1' at the low
    edge, '>= 16' at the high one, without the interval); else `estimate`."""
    if edge == "low":
        return f"<= {number(value, digits)}"
    if edge == "high":
        return f">= {number(value, digits)}"
    return estimate(value, ci, digits=digits)


def duration(seconds: float | None) -> str:
    """'1h05m' or '3m07s'; 'unknown' for None."""
    if seconds is None:
        return "unknown"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _cells(rows: list[list[Any]], digits: int) -> list[list[str]]:
    return [[c if isinstance(c, str) else number(c, digits) for c in row] for row in rows]


def _filled(header: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """The columns with something in them: one that is '-' in every row is left out."""
    keep = [i for i in range(len(header)) if not rows or any(row[i] != "-" for row in rows)]
    return [header[i] for i in keep], [[row[i] for i in keep] for row in rows]


def text_table(header: list[str], rows: list[list[Any]], digits: int = 4) -> str:
    """Right-aligned plain-text columns, two spaces apart (terminals and logs); a column that
    is '-' throughout is left out."""
    header, body = _filled(header, _cells(rows, digits))
    cells = [header] + body
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in cells)


def markdown_table(header: list[str], rows: list[list[Any]], digits: int = 3) -> list[str]:
    """A GitHub-flavoured markdown table, one string per line; a column that is '-' throughout
    is left out."""
    header, body = _filled(header, _cells(rows, digits))
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(row) + " |" for row in body])
