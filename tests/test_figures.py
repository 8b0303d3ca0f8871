"""Figures a paper can use: every figure of a small sweep, of the fixed-budget view, of
`scaling compare`, of a branch folder and of a multi-cell folder renders with no text drawn
over other text and none off the canvas (scaling.report.text_check). The checker itself is
shown to see each fault, and to flag the noise figure as it was drawn before: eight B_crit
labels at nearly equal heights, "eval_loss<=0.8: 953" printed over "eval_accuracy>=0.7: 948"
(results/mnist1d_mlp)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaling import store
from scaling.analysis import analyze as A
from scaling.analysis import contract
from scaling.formatting import number
from scaling.report import branch_report, cells_report, compare, figures, style, text_check, views
from scaling.report.noise_figure import noise_scale_vs_loss
from scaling.sweep import runner
from tests.helpers import DIGITS, NQM, config

ROOT = Path(__file__).resolve().parents[1]
# results/mnist1d_mlp's eight targets and their B_crit: the old figure's labels collided.
CLOSE = {"eval_loss<=1.0": 600.0, "eval_loss<=1.5": 205.0, "eval_loss<=1.2": 394.0,
         "eval_loss<=0.8": 953.0, "eval_loss<=0.7": 1434.0, "eval_accuracy>=0.6": 552.0,
         "eval_accuracy>=0.7": 948.0, "eval_accuracy>=0.8": 2231.0}


@pytest.fixture
def checked(monkeypatch) -> dict[str, list[str]]:
    """Every figure saved while the test runs, by file name: text_check's problems with it,
    taken as style.save renders it and filed under the name it then writes."""
    from matplotlib.figure import Figure

    found: dict[str, list[str]] = {}
    rendered: list[list[str]] = []
    savefig, write = Figure.savefig, style.atomic_write

    def check_then_render(fig, *args, **kwargs):
        rendered.append(text_check.problems(fig))
        return savefig(fig, *args, **kwargs)

    def write_checked(path, data) -> None:
        found[Path(path).name] = rendered.pop()
        write(path, data)

    monkeypatch.setattr(Figure, "savefig", check_then_render)
    monkeypatch.setattr(style, "atomic_write", write_checked)
    return found


def noise_records() -> list[dict]:
    """One run per batch size whose eval loss falls from 2.3 to 0.5 while B_simple grows."""
    out = []
    for b in (16, 64, 256, 1024):
        rows = [{"step": s, "eval_loss": 2.3 - 1.8 * s / 400, "b_simple": 150 + b / 4 + 4 * s}
                for s in range(10, 410, 10)]
        out.append({"run_id": f"bs{b}", "config": {"batch_size": b}, "metrics": rows})
    return out


def close_targets() -> list[contract.Target]:
    targets = []
    for name, b_crit in CLOSE.items():
        metric, value = name.replace(">=", "<=").split("<=")
        fit = {"b_crit": b_crit, "b_crit_ci": [0.9 * b_crit, 1.1 * b_crit],
               "identification": {"identified": True}}
        targets.append(contract.filled({"name": name, "metric": metric, "value": float(value),
                                        "op": ">=" if ">=" in name else "<=", "fit": fit},
                                       contract.Target))
    return targets


def old_b_crit_lines(ax, b_crit: dict[str, float]) -> None:
    """The noise figure's B_crit as drawn before: a dashed line per target across every loss,
    named at its left end."""
    for name, value in b_crit.items():
        ax.axhline(value, color="black", lw=1.0, ls="--")
        ax.text(0.01, value, f" {name}: {number(value)}", transform=ax.get_yaxis_transform(),
                fontsize=6.5, va="bottom", ha="left")


def test_the_checker_flags_the_old_b_crit_labels_and_passes_the_new_points(tmp_path, checked):
    fig, ax = style.figure(7.4, 4.6)
    for r in noise_records():
        ax.plot([m["eval_loss"] for m in r["metrics"]], [m["b_simple"] for m in r["metrics"]])
    ax.set(xscale="log", yscale="log", ylim=(5, 3000))
    old_b_crit_lines(ax, CLOSE)
    found = text_check.problems(fig)
    style.pyplot().close(fig)
    pair = {"eval_loss<=0.8: 953'", "eval_accuracy>=0.7: 948'"}
    assert any(all(name in p for name in pair) and "overlaps" in p for p in found), found
    noise_scale_vs_loss(noise_records(), tmp_path / "noise.png", close_targets())
    assert checked == {"noise.png": []}


def test_the_checker_sees_text_off_the_canvas_and_text_cut_by_its_clip_box():
    plt = style.pyplot()
    fig, ax = plt.subplots(figsize=(3, 2))
    fig.text(1.05, 0.5, "beyond the right edge")
    ax.text(0.9, 0.5, "clipped by the axes", transform=ax.transAxes, clip_on=True)
    found = text_check.problems(fig)
    plt.close(fig)
    assert "'beyond the right edge' leaves the canvas" in found
    assert "'clipped by the axes' is cut by its clip box" in found


def test_labels_that_find_no_free_place_are_left_out():
    fig, ax = style.figure(3, 2)
    ax.set(xlim=(0, 1), ylim=(0, 1))
    placed = text_check.place_labels(ax, [(0.5, 0.5, "4,096", "black")] * 10, fontsize=7)
    assert 1 <= placed < 10 and text_check.problems(fig) == []
    style.pyplot().close(fig)


def test_a_figure_is_swapped_in_whole_not_rewritten_in_place(tmp_path):
    """Sweeps that finish together on one folder each draw its figures while another reads
    them (figures.pdf): a figure rewritten in place was read half written. Swapped in, the
    file is a new one (another inode) and the old one stays whole until then."""
    path = tmp_path / "figures" / "f.png"
    for value in (1, 2):
        fig, ax = style.figure(3, 2)
        ax.plot([0, 1], [0, value])
        old = path.stat().st_ino if path.exists() else None
        style.save(fig, path)
        assert path.stat().st_ino != old and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in path.parent.iterdir()] == ["f.png"]  # no temporary file left


# ---------------------------------------------------------------- whole sweeps


# Like the quickstart: one seed, two metrics, a search round and dominated runs stopped; every
# run trained to its budget too (the fixed-budget view beside the steps view).
QUICK = config(DIGITS, "name=quick", "batch.sizes=[16, 32, 64]", "model.hidden=[16]",
               "learning_rate={values: [0.03, 0.3], search: true, max_rounds: 1}",
               "budget={max_examples: 3200}", "targets=['eval_loss<=0.6', 'eval_accuracy>=0.8']",
               "seeds=[0]", "train={stop_dominated: true, chunk_steps: 20}", "gns.enabled=true",
               "analysis.view=both")
# Four loss targets of close B_crit over two seeds: bands, bounds, edges, an unreached point.
MULTI = config(NQM, "name=multi", "task.dim=10", "batch.sizes=[2, 4, 8, 16]",
               "learning_rate.values=[0.2, 0.5, 1.2]", "budget={max_steps: 80}",
               "targets=['eval_loss<=0.3', 'eval_loss<=0.25', 'eval_loss<=0.2', "
               "'eval_loss<=0.15']", "seeds=[0, 1]", "eval={every: 4, points_per_decade: 0}",
               "gns.enabled=true", "parallel.runs=8", "train.chunk_steps=40")


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sweeps")
    for cfg in (QUICK, MULTI):
        runner.run(cfg, root / cfg.name, quiet=True)
    return {cfg.name: root / cfg.name for cfg in (QUICK, MULTI)}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["quick", "multi"])
def test_every_figure_of_a_sweep_is_legible(sweeps, name, tmp_path, checked):
    out = sweeps[name]
    analysis = A.analyze(out, bootstrap=20)
    drawn = views.write_figures(analysis, store.load(out), tmp_path)
    assert {p.name for p in drawn} >= set(figures.FIGURES)
    assert checked == {p.name: [] for p in drawn}


@pytest.mark.slow
def test_the_fixed_budget_figures_are_legible(sweeps, tmp_path, checked):
    out = sweeps["quick"]
    analysis = A.analyze(out, bootstrap=20, view="fixed_budget", metric="eval_loss")
    analysis.update(targets=[], primary_target=None, lr_rules=None)  # the final metric alone
    drawn = views.write_figures(analysis, store.load(out), tmp_path)
    assert {p.name for p in drawn} == {"heatmap.png", "landscape.png", "noise_vs_loss.png"}
    assert checked == {p.name: [] for p in drawn}


@pytest.mark.slow
def test_the_compare_figures_are_legible(sweeps, tmp_path, checked):
    out = sweeps["multi"]
    pair = [compare.Sweep(label, out, A.analyze(out, bootstrap=20), store.load(out))
            for label in ("first", "second")]
    drawn = compare.write(pair, ["eval_loss<=0.2"], tmp_path)
    assert len([p for p in drawn if p.suffix == ".png"]) == 4
    assert checked and all(found == [] for found in checked.values()), checked


COMMITTED = ["branch_mnist1d", "branch_charlm", "steplaw", "scale_charlm"]


@pytest.mark.slow
@pytest.mark.parametrize("study", COMMITTED)
def test_the_branch_and_cells_figures_of_the_committed_studies_are_legible(study, tmp_path,
                                                                          checked):
    path = ROOT / "results" / study / "analysis.json"
    if not path.is_file():
        pytest.skip(f"{path} is not in this checkout")
    analysis = json.loads(path.read_text())
    report = branch_report if "branching" in analysis else cells_report
    drawn = report.write_figures(analysis, tmp_path)
    assert drawn and checked == {p.name: [] for p in drawn}
