"""scaling.formatting: numbers as prose and reports quote them (values worked by hand)."""

from __future__ import annotations

from scaling import formatting


def test_span_reads_a_range_once_and_a_single_value_once():
    assert formatting.span([3.0, 1.2345, 2.0]) == "1.23-3"
    assert formatting.span([0.91, 1.0], lambda v: f"{v:.0%}") == "91%-100%"
    assert formatting.span([1.001, 1.004], lambda v: f"{v:.2f}") == "1.00"  # the ends read the same
    assert formatting.span([]) == "-"


def test_a_value_at_the_edge_of_those_tried_prints_as_its_bound():
    assert formatting.edge_bound(1.0, [0.067, 14.9], "low") == "<= 1"
    assert formatting.edge_bound(16.0, [9.0, 40.0], "high") == ">= 16"
    assert formatting.edge_bound(4.5, [3.0, 6.0], None) == "4.5 [3, 6]"
