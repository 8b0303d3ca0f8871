"""The analysis's reading of the view registry (scaling.config.names.VIEW_TABLE): each name
analysis.view and `scaling analyze --view` accept -> the `VIEW` of the module its line names
(scaling.analysis.view), imported when first read. A new view is its module and its line
there; the contract's optional sections and the terminal digest follow from it.
"""

from __future__ import annotations

import importlib

from scaling.analysis.view import View
from scaling.config.names import VIEW_TABLE
from scaling.errors import need


def get(name: str) -> View:
    """The view of that name; a ConfigError naming the accepted ones otherwise."""
    need(name in VIEW_TABLE, "analysis.view", name, f"one of {', '.join(VIEW_TABLE)}")
    return importlib.import_module(VIEW_TABLE[name].module).VIEW


def distinct() -> list[View]:
    """Every registered view once (a view may go by two names), in the registry's order."""
    return list(dict.fromkeys(get(name) for name in VIEW_TABLE))


def present(analysis: dict) -> list[View]:
    """The views whose sections an analysis.json holds, in the registry's order."""
    return [v for v in distinct() if v.present(analysis)]


def optional_sections() -> dict[str, type]:
    """Every view's own top-level sections with their types (the contract's optional keys)."""
    return {k: t for v in distinct() for k, t in v.sections.items()}


def summary_table(analysis: dict) -> str:
    """Plain-text digest for the terminal: each view's lines whose sections it holds."""
    return "\n".join(line for v in present(analysis) for line in v.summary(analysis))
