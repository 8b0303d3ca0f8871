"""scaling.formatting: numbers as prose and reports quote them (values worked by hand)."""

from __future__ import annotations

from scaling import formatting


def test_span_reads_a_range_once_and_a_single_value_once():
    assert formatting.span([3.0, 1.2345, 2.0]) == "1.23-3"
    assert formatting.span([0.91, 1.0], lambda v: f"{v:.0%}") == "91%-100%"
    assert formatting.span([1.001, 1.004], lambda v: f"{v:.2f}") == "1.00"  # the ends read the same
    assert formatting.span([]) == "-"
