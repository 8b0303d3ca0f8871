"""The report's words on a target whose curves cross (scaling.analysis.crossing): the pairs
that break the trade-off's order, and the two batch sizes read in place of B_crit."""

from __future__ import annotations

from scaling.analysis.contract import Crossing
from scaling.formatting import interval, number


def crossing_lines(name: str, cross: Crossing) -> list[str]:
    """A target whose curves cross: the pairs that say so, then the two batch sizes read
    instead of a fit (scaling.analysis.crossing)."""
    pairs = ", ".join(f"{p['smaller']} to {p['larger']} ({p['breaks']})" for p in cross["pairs"])
    out = [f"For {name} the curves of different batch sizes cross: from batch size {pairs}, "
           "beyond the intervals over seeds, so no S(B) hyperbola is fitted and B_crit is not "
           "read."]
    small = cross["smallest"]
    if small:
        where = (f"between {small['interval'][0]} and {small['batch_size']}" if small["interval"]
                 else f"at most {small['batch_size']} (the smallest tried)")
        out.append(f"The smallest batch size that reaches it lies {where}.")
    opt = cross["example_optimal"]
    if opt:
        value = number(opt["batch_size"])
        text = (f"{value} or less (the smallest batch size reaching it)" if opt["bound"] == "upper"
                else f"{value} or more (the largest reaching it)" if opt["bound"] == "lower"
                else f"{value} {interval(opt['batch_size_ci'])}" if opt["batch_size_ci"]
                else f"{value} ({opt['interval']['why']})")
        out.append(f"The batch size that reaches it in the fewest examples is {text}.")
    return out
