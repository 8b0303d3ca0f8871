"""What a sweep paid for its answer: the examples its runs trained, those the reading
extension added past the budget, and what stopping dominated runs saved.

A run stopped as dominated (train.stop_dominated) would otherwise have trained on until it
reached every target, or to its budget; which of the two is unknowable, so the saving is
reported as an upper bound: each stopped run counted to its budget.
"""

from __future__ import annotations

from typing import Any


def budget_examples(record: dict[str, Any], arithmetic: dict[int, int]) -> int:
    """A run's budget in examples: its batch size's recorded arithmetic, else steps x batch."""
    size = record["summary"]["batch_size"]
    return arithmetic.get(size) or int(record["config"].get("total_steps", 0)) * size


def cost(records: list[dict[str, Any]], arithmetic: dict[int, int]) -> dict[str, Any]:
    """analysis.json's `cost` over the runs of a sweep folder."""
    trained = sum(int(r["summary"].get("examples") or 0) for r in records)
    stopped = [r for r in records if r["summary"].get("status") == "dominated"]
    saved = sum(max(budget_examples(r, arithmetic) - int(r["summary"].get("examples") or 0), 0)
                for r in stopped)
    extension = sum(int(r["summary"].get("extension_steps") or 0) * r["summary"]["batch_size"]
                    for r in records)
    return {"examples_trained": trained, "extension_examples": extension,
            "dominated_runs": len(stopped), "examples_saved_at_most": saved,
            "share_saved_at_most": saved / (trained + saved) if trained + saved else 0.0}


def cost_line(c: dict[str, Any] | None) -> str | None:
    """One sentence of the cost for the report and the end table (None without a cost)."""
    if not c:
        return None
    line = f"examples trained: {c['examples_trained']:,}"
    if c["extension_examples"]:
        line += f" ({c['extension_examples']:,} of them past the budget, confirming readings)"
    if c["dominated_runs"]:
        line += (f"; stopping {c['dominated_runs']} dominated runs saved at most "
                 f"{c['examples_saved_at_most']:,} examples ({c['share_saved_at_most']:.0%} of "
                 "what the runs would have trained, each stopped run counted to its budget)")
    return line
