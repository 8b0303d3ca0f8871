"""The analysis views' seam: one registry names them (scaling.config.names.VIEW_TABLE: name ->
the module holding its View, the one holding its report, whether it reads every run at its
budget), which the config, the parser, the analysis and the report all read; no other module
lists the views. A view registered there alone, by one line naming this file, which holds its
View and its report, flows through the analysis, the contract, the terminal digest, report.md
and the figures."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scaling import store
from scaling.analysis import contract, steps_view, views
from scaling.analysis.analyze import analyze
from scaling.analysis.view import Added, Folder, View, ViewReport
from scaling.cli.parser import build_parser
from scaling.config import ConfigError, names
from scaling.config.names import VIEW_TABLE, ViewEntry
from scaling.report import markdown, views as report_views

PACKAGE = Path(__file__).resolve().parents[1] / "scaling"


def test_the_config_and_the_parser_accept_the_registry_names():
    assert names.budget_views() == ("fixed_budget", "both")
    (analyze_parser,) = [a for a in build_parser()._subparsers._group_actions[0].choices.values()
                         if any(o.dest == "view" for o in a._actions)]
    (view,) = [o for o in analyze_parser._actions if o.dest == "view"]
    assert list(view.choices) == list(VIEW_TABLE) == ["steps", "fixed_budget", "both"]


def test_each_line_names_its_view_and_its_report():
    for name, entry in VIEW_TABLE.items():
        view = views.get(name)
        assert VIEW_TABLE[view.name].module == entry.module
        assert view.at_budget == entry.at_budget
        assert isinstance(report_views.report(name), ViewReport)
    assert views.get("both") is views.get("fixed_budget")
    assert [v.name for v in views.get("fixed_budget").chain()] == ["steps", "fixed_budget"]


def _lists_views(node: ast.AST) -> bool:
    """A literal tuple, list, set or dict holding two or more view names."""
    items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", [])
    found = {i.value for i in items if isinstance(i, ast.Constant)} & set(VIEW_TABLE)
    return isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and len(found) > 1


def test_the_registry_is_the_only_place_that_lists_the_views():
    """A new view is its module, its registry line and its docs: no module but the registry
    lists the views' names or names their modules by path."""
    modules = {path for e in VIEW_TABLE.values() for path in (e.module, e.report_module)}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "config" / "names.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if _lists_views(node) or (isinstance(node, ast.Constant) and node.value in modules):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not found, "views listed outside scaling.config.names.VIEW_TABLE: " + ", ".join(found)


def test_the_listing_check_sees_a_tuple_of_view_names():
    assert _lists_views(ast.parse('VIEWS = ("steps", "fixed_budget")').body[0].value)
    assert not _lists_views(ast.parse('SCHEDULES = ("steps", "doubling")').body[0].value)


def test_an_unknown_view_is_refused_with_the_names(tmp_path):
    with pytest.raises(ConfigError, match="one of steps, fixed_budget, both"):
        views.get("nope")


def _run(out: Path, size: int, lr: float, losses: list[float]) -> None:
    run_id = f"bs{size}-lr{lr:g}"
    store.start_run(out, run_id, {"run_id": run_id, "batch_size": size, "learning_rate": lr,
                                  "seed": 0, "targets": ["eval_loss<=1.0"]})
    store.append_metrics(out, run_id, [{"step": 10 * i, "examples": 10 * i * size,
                                        "eval_loss": loss} for i, loss in enumerate(losses)])
    store.finish_run(out, run_id, {"run_id": run_id, "status": "completed", "task": "fake",
                                   "optimizer": "sgd", "batch_size": size})


def _fake_analyse(folder: Folder, steps: dict) -> Added:
    """A view that counts the runs, on the steps view's targets (it builds on them)."""
    return Added({"fake": {"runs": float(len(folder.records)),
                           "targets": float(len(steps["targets"]))}}, draws=[1, 2])


def _fake_figure(analysis: dict, records: list[dict], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a png")
    return path


VIEW = View("fake", _fake_analyse, {"fake": dict[str, float]},
            lambda a: [f"fake: {a['fake']['runs']:g} runs"], builds_on=(steps_view.VIEW,))
REPORT = ViewReport(lambda a: ["## Fake", "", f"{a['fake']['runs']:g} runs", ""],
                    lambda a: ["The fake view read every run."], {"fake.png": _fake_figure},
                    {"fake": "What the fake view draws."})


@pytest.fixture
def fake_view(monkeypatch) -> View:
    """This file's view, registered by its one line (its View and report are this module's)."""
    monkeypatch.setitem(VIEW_TABLE, "fake", ViewEntry(__name__, at_budget=True))
    return VIEW


def test_a_registered_view_flows_through_analysis_and_report(tmp_path, fake_view):
    for size, lr in ((8, 0.1), (8, 0.3), (16, 0.3)):
        _run(tmp_path, size, lr, [3.0, 2.0, 0.5])
    draws: dict = {}
    assert "fake" in names.budget_views()  # the config reads its line too
    a = analyze(tmp_path, bootstrap=0, view="fake", draws=draws)
    assert a["fake"] == {"runs": 3.0, "targets": 1.0} and draws == {"fake": [1, 2]}
    assert list(a)[-1] == "fake" and a["targets"][0]["name"] == "eval_loss<=1.0"
    contract.check(a)  # the view's section is in the contract because it is registered
    assert "fake: 3 runs" in views.summary_table(a)
    drawn = report_views.write_figures(a, store.load(tmp_path), tmp_path / "figures")
    assert "fake.png" in {p.name for p in drawn}
    text = markdown.write(tmp_path, a, drawn).read_text()
    assert "## Fake" in text and "- The fake view read every run." in text
    assert "What the fake view draws." in text
    assert text.index("## Fake") < text.index("## How steps to target are read")


def test_an_unregistered_section_is_not_in_the_contract(tmp_path):
    for size, lr in ((8, 0.1), (16, 0.3)):
        _run(tmp_path, size, lr, [3.0, 2.0, 0.5])
    a = analyze(tmp_path, bootstrap=0)
    with pytest.raises(ValueError, match="fake"):
        contract.check({**a, "fake": {}})
