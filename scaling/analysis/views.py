"""The analysis views, a registry: each accepted name of analysis.view (and `scaling analyze
--view`) -> its View (scaling.analysis.view). A new view is a module with its `analyse` and
terminal lines, a View here and its report's entry in scaling.report.views; the config's
names (scaling.config.names.VIEWS, which cannot import the analysis) are held to these keys
by tests/test_views.py.
"""

from __future__ import annotations

from scaling.analysis import budget_folder, steps_view
from scaling.analysis.sections import FixedBudget
from scaling.analysis.view import View
from scaling.errors import need

STEPS = View("steps", steps_view.analyse, {}, steps_view.summary_lines, at_budget=False)
FIXED_BUDGET = View("fixed_budget", budget_folder.analyse, {"fixed_budget": FixedBudget},
                    budget_folder.summary_lines, at_budget=True, builds_on=(STEPS,))

REGISTRY: dict[str, View] = {
    "steps": STEPS,
    "fixed_budget": FIXED_BUDGET,
    "both": FIXED_BUDGET,  # the same reading, named for a folder that has targets too
}


def get(name: str) -> View:
    """The view of that name; a ConfigError naming the accepted ones otherwise."""
    need(name in REGISTRY, "analysis.view", name, f"one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


def distinct() -> list[View]:
    """Every registered view once (a view may go by two names), in the registry's order."""
    return list(dict.fromkeys(REGISTRY.values()))


def present(analysis: dict) -> list[View]:
    """The views whose sections an analysis.json holds, in the registry's order."""
    return [v for v in distinct() if v.present(analysis)]


def optional_sections() -> dict[str, type]:
    """Every view's own top-level sections with their types (the contract's optional keys)."""
    return {k: t for v in distinct() for k, t in v.sections.items()}


def summary_table(analysis: dict) -> str:
    """Plain-text digest for the terminal: each view's lines whose sections it holds."""
    return "\n".join(line for v in present(analysis) for line in v.summary(analysis))
