"""analysis.json's contract (scaling.analysis.contract): the docs name every key of every
section, `check` refuses a key the types do not name and a key they name that is missing,
and an analysis written by `scaling analyze` passes it."""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path
from typing import Iterator

import pytest

from scaling.analysis import contract, sections
from scaling.analysis.definitions import DEFINITIONS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "results-format.md"
REPORT = ROOT / "scaling" / "report"
CELL = {"at_edge", "b_crit", "batch_size", "batch_size_ci", "best", "best_lr", "budget_unit",
        "definition", "examples", "interval", "learning_rate", "lower_is_better", "lr_rules",
        "noise_scale_fit", "note", "num_diverged", "num_lrs", "num_runs", "optima", "optimum",
        "rules", "seeds", "value"}
# Keys each report module reads with .get from dicts the contract does not describe: a
# branch folder's analysis, a fixed-budget cell's entries (FixedBudget.cells) and what a law
# holds per name (`alone`, `left_out`), the records of run and import files, a schedule's
# comparisons (Analysis.schedules).
OUTSIDE = {"branch_report": {"ratio", "unit"},
           "budget_figures": CELL, "budget_report": CELL | {"runs", "unit"},
           "cells_report": CELL | {"alone", "exponent_ci", "points", "resamples"},
           "law_figures": CELL | {"coefficient", "identification", "identified"}, "lr_figures": CELL,
           "noise_figure": {"batch_size", "run_id", "summary"}, "schedules_report": {"interval"}}


def _analysis_doc() -> str:
    text = DOC.read_text()
    return text[text.index("## analysis.json"):]


@pytest.mark.parametrize("name", sorted(contract.SECTIONS))
def test_the_docs_name_every_key_of_every_section(name):
    named = set(re.findall(r"`([a-z_0-9]+)`", _analysis_doc()))
    missing = sorted(contract.keys(contract.SECTIONS[name]) - named)
    assert not missing, f"docs/results-format.md does not name {missing} of {name}"


@pytest.mark.parametrize("name", sorted(contract.SECTIONS))
def test_every_section_with_intervals_says_what_they_resample(name):
    keys = contract.keys(contract.SECTIONS[name])
    if any(k.endswith("_ci") for k in keys):
        assert "interval" in keys, f"{name} has intervals but no `interval` record"


def test_each_definition_of_b_crit_has_its_section_in_a_target():
    assert {d.key for d in DEFINITIONS} <= contract.keys(contract.Target)


def _minimal_target() -> dict:
    target = {k: None for k in contract.keys(contract.Target)}
    target.update(points=[], unreached_batch_sizes=[], regimes={
        "perfect_scaling_until": None, "steps_plateau_from": None, "definition": ""},
                  first_crossing={"b_crit": None, "b_crit_ci": None, "interval": None,
                                  "steps": {}, "outside_interval": False})
    return target


def test_check_names_the_path_of_a_key_outside_the_contract():
    target = _minimal_target()
    contract.check(target, contract.Target, "t")
    target["regimes"]["surprise"] = 1
    with pytest.raises(ValueError, match=r"t\.regimes: keys \['surprise'\] are not in the contract"):
        contract.check(target, contract.Target, "t")


def test_check_names_a_missing_key():
    target = _minimal_target()
    del target["b_simple"]
    with pytest.raises(ValueError, match=r"\['b_simple'\] are missing"):
        contract.check(target, contract.Target, "t")


def test_filled_reads_the_keys_an_older_file_lacks_as_empty():
    target = _minimal_target()
    for key in ("crossing", "unreached_reasons", "b_simple_precond"):
        del target[key]
    target["points"] = [{"batch_size": 16, "steps": 40.0}]
    older = {"version": 2, "targets": [target], "lr_rules": None}
    analysis = contract.filled(older)
    contract.check(analysis)
    t, point = analysis["targets"][0], analysis["targets"][0]["points"][0]
    assert analysis["runs"] == [] and analysis["cost"] is None and t["crossing"] is None
    assert t["unreached_reasons"] == {} and point["num_censored"] == 0
    assert point["censored_below_best"] is False and point["optimum"] is None
    assert "crossing" not in older["targets"][0], "the caller's analysis is left as it was"


def _guaranteed_keys() -> set[str]:
    """Keys some section of analysis.json always holds, less any another section may lack
    (NotRequired, or the contract's optional keys): a .get of those may be right."""
    typed = [v for m in (contract, sections) for v in vars(m).values()
             if typing.is_typeddict(v) and v.__module__ == m.__name__]
    optional = set().union(*(t.__optional_keys__ for t in typed),
                           *(contract.optional_keys(t) for t in typed))
    return set().union(*(t.__required_keys__ for t in typed)) - optional


def _gets(path: Path) -> Iterator[tuple[int, str]]:
    """(line, key) of every .get("key") in a module."""
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.lineno, node.args[0].value


def test_the_report_subscripts_the_keys_the_contract_guarantees():
    """The report reads analysis.json through contract.filled, so a key the types name is
    there: a .get of it would hide a key the contract lost."""
    guaranteed = _guaranteed_keys()
    found = [f"scaling/report/{path.name}:{line}: .get({key!r})"
             for path in sorted(REPORT.glob("*.py")) for line, key in _gets(path)
             if key in guaranteed - OUTSIDE.get(path.stem, set())]
    assert not found, "subscript what the contract guarantees:\n" + "\n".join(found)
