"""The analysis views' seam: the registries are the one place views are named (every name the
config and the parser accept is a key of scaling.analysis.views.REGISTRY, with its reading at
the budget; every view has its report), and a view registered there alone flows through the
analysis, the contract, the terminal digest, report.md and the figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaling import store
from scaling.analysis import contract, views
from scaling.analysis.analyze import analyze
from scaling.analysis.view import Added, Folder, View
from scaling.cli.parser import build_parser
from scaling.config import ConfigError, names
from scaling.report import markdown, views as report_views
from scaling.report.views import ViewReport


def test_the_config_and_the_parser_accept_the_registry_names():
    assert set(names.VIEWS) == set(views.REGISTRY)
    assert set(names.BUDGET_VIEWS) == {n for n, v in views.REGISTRY.items() if v.at_budget}
    (analyze_parser,) = [a for a in build_parser()._subparsers._group_actions[0].choices.values()
                         if any(o.dest == "view" for o in a._actions)]
    (view,) = [o for o in analyze_parser._actions if o.dest == "view"]
    assert set(view.choices) == set(views.REGISTRY)


def test_every_view_has_its_report_and_nothing_else_does():
    assert {v.name for v in views.distinct()} == set(report_views.REPORTS)
    assert views.REGISTRY["both"] is views.REGISTRY["fixed_budget"]
    assert [v.name for v in views.FIXED_BUDGET.chain()] == ["steps", "fixed_budget"]


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


@pytest.fixture
def fake_view(monkeypatch) -> View:
    view = View("fake", _fake_analyse, {"fake": dict[str, float]},
                lambda a: [f"fake: {a['fake']['runs']:g} runs"], at_budget=True,
                builds_on=(views.STEPS,))
    monkeypatch.setitem(views.REGISTRY, "fake", view)
    monkeypatch.setitem(report_views.REPORTS, "fake", ViewReport(
        lambda a: ["## Fake", "", f"{a['fake']['runs']:g} runs", ""],
        lambda a: ["The fake view read every run."], {"fake.png": _fake_figure},
        {"fake": "What the fake view draws."}))
    return view


def test_a_registered_view_flows_through_analysis_and_report(tmp_path, fake_view):
    for size, lr in ((8, 0.1), (8, 0.3), (16, 0.3)):
        _run(tmp_path, size, lr, [3.0, 2.0, 0.5])
    draws: dict = {}
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
