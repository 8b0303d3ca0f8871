"""The report layer (scaling.report: figures, markdown, tables) and `scaling analyze`: figures
and report.md checked on analysis dicts built from closed forms.

The synthetic analysis follows the analysis.json contract (what it leaves out read as empty,
as contract.filled reads an older file): points lie on
S(B) = S_min + E_min / B, so B_crit = E_min / S_min is known and the report must show it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from scaling.analysis import contract, curves
from scaling.config import ConfigError, load, to_yaml
from scaling.config.arithmetic import for_config
from scaling.formatting import number
from scaling.report import figures, markdown, steps_report, tables, views
from scaling.report.noise_figure import noise_series
from scaling.store import ARITHMETIC, write_json

ROOT = Path(__file__).resolve().parents[1]
SIZES = [16, 32, 64, 128, 256]
RATES = [0.01, 0.03, 0.1, 0.3]
SEEDS = [0, 1]
# target -> (metric, op, value, S_min, E_min): B_crit 64 and 32
TARGETS = {"eval_loss<=1.0": ("eval_loss", "<=", 1.0, 100.0, 6400.0),
           "eval_accuracy>=0.6": ("eval_accuracy", ">=", 0.6, 50.0, 1600.0)}
PNG = b"\x89PNG\r\n\x1a\n"


def best_lr(b: int) -> float:
    return 0.03 if b <= 32 else 0.1


def run_steps(name: str, b: int, lr: float) -> float | None:
    """Steps to target of one grid cell: S(B) at the best LR, slower away from it."""
    if b == 16 and lr == 0.3:
        return None  # diverged
    if name == "eval_accuracy>=0.6" and lr == 0.01:
        return None  # never reached
    s_min, e_min = TARGETS[name][3:]
    return (s_min + e_min / b) * (1 + math.log(lr / best_lr(b)) ** 2)


def synthetic_runs() -> list[dict]:
    runs = []
    for b in SIZES:
        for lr in RATES:
            for seed in SEEDS:
                steps = {t: run_steps(t, b, lr) for t in TARGETS}
                runs.append({"run_id": f"bs{b}-lr{lr}-seed{seed}", "batch_size": b,
                             "learning_rate": lr, "seed": seed,
                             "status": "diverged" if b == 16 and lr == 0.3 else "completed",
                             "steps_to_target": steps,
                             "examples_to_target": {t: s and s * b for t, s in steps.items()}})
    return runs


def synthetic_target(name: str) -> dict:
    metric, op, value, s_min, e_min = TARGETS[name]
    b_crit = e_min / s_min
    points = [{"batch_size": b, "best_lr": best_lr(b), "refined_lr": best_lr(b) * 1.1,
               "at_edge": None, "steps": s_min + e_min / b, "steps_min": s_min + e_min / b,
               "steps_crossfit": (s_min + e_min / b) * 1.05,
               "examples": (s_min + e_min / b) * b,
               "num_lrs": 4, "num_reached": 3, "num_diverged": int(b == 16),
               "b_simple": b_crit / 2, "b_noise": b_crit / 1.5} for b in SIZES]
    fit = {"s_min": s_min, "e_min": e_min, "b_crit": b_crit, "s_min_ci": [0.9 * s_min, 1.1 * s_min],
           "e_min_ci": [0.8 * e_min, 1.2 * e_min], "b_crit_ci": [0.75 * b_crit, 1.25 * b_crit],
           "num_points": len(SIZES), "rms_log_residual": 0.01, "bootstrap": 200}
    return {"name": name, "metric": metric, "op": op, "value": value, "points": points,
            "unreached_batch_sizes": [], "fit": fit, "s_min": s_min, "e_min": e_min,
            "b_crit": b_crit, "b_crit_ci": fit["b_crit_ci"],
            "regimes": {"perfect_scaling_until": 32, "steps_plateau_from": 256,
                        "definition": "perfect while steps fall >= 1.8x per doubling"},
            "b_simple": b_crit / 2, "b_noise": b_crit / 1.5, "b_simple_over_b_crit": 0.5,
            # The first crossing reads B_crit at half the value: outside the interval.
            "first_crossing": {"b_crit": b_crit / 2, "b_crit_ci": [0.4 * b_crit, 0.6 * b_crit],
                               "steps": {str(b): 0.8 * (s_min + e_min / b) for b in SIZES},
                               "outside_interval": True}}


def synthetic_lr_rules() -> dict:
    def rows(scale):
        return [{"batch_size": b, "learning_rate": 0.03 * scale(b / 16),
                 "ratio_to_optimum": 0.03 * scale(b / 16) / best_lr(b), "steps": None,
                 "relative_cost": 1.0 if b < 128 else 1.8,
                 "note": "outside the grid" if 0.03 * scale(b / 16) > 0.3 else None}
                for b in SIZES]
    return {"target": "eval_loss<=1.0", "reference": {"batch_size": 16, "learning_rate": 0.03},
            "optima": [{"batch_size": b, "learning_rate": best_lr(b) * 1.1} for b in SIZES],
            "noise_scale_fit": {"eps_max": 0.2, "b_noise": 60.0},
            "rules": {"linear": rows(lambda r: r), "sqrt": rows(math.sqrt),
                      "noise_scale": rows(lambda r: 0.2 / 0.03 / (1 + 60 / (16 * r)))},
            "linear_breaks_at": 128, "summary": "sqrt scaling tracks the optimum best."}


def synthetic_analysis() -> dict:
    statuses = {"completed": 36, "diverged": 4}
    analysis = {"version": 2,
                "reached": {"rule": "smoothed", "window": 1.5,
                            "definition": "smoothed (mean over step/1.5 .. step*1.5 in log step)"},
                "lr_selection": "min",
                "sweep": {"name": "synthetic", "task": "mnist1d", "optimizer": "momentum",
                          "unit": "examples", "batch_sizes": SIZES, "learning_rates": RATES,
                          "seeds": SEEDS, "num_runs": 40, "statuses": statuses},
                "primary_target": "eval_loss<=1.0", "runs": synthetic_runs(),
                "targets": [synthetic_target(t) for t in TARGETS], "lr_rules": synthetic_lr_rules()}
    return contract.filled(analysis)


def synthetic_records(with_noise: bool = True) -> list[dict]:
    """One record per run: the loss falls along the run and B_simple grows as it does."""
    out = []
    for b in SIZES:
        metrics = [{"step": s, "examples": s * b, "tokens": None, "train_loss": 2.3 / (1 + s / 50),
                    "b_simple": (b * (1 + s / 50)) if with_noise and s else None,
                    "b_noise": None} for s in range(0, 500, 25)]
        out.append({"run_id": f"bs{b}", "config": {"batch_size": b},
                    "summary": {"batch_size": b, "status": "completed"}, "metrics": metrics})
    return out


def sparse_analysis() -> dict:
    """One batch size, no fit, no noise scale, one target never reached, no LR rules."""
    a = synthetic_analysis()
    a["sweep"]["batch_sizes"] = [64]
    a["runs"] = [r for r in a["runs"] if r["batch_size"] == 64]
    for r in a["runs"]:
        r["steps_to_target"]["eval_accuracy>=0.6"] = None
    reached, unreached = a["targets"]
    reached["points"] = [p for p in reached["points"] if p["batch_size"] == 64]
    for t in (reached, unreached):
        for p in t["points"]:
            p.update(b_simple=None, b_noise=None, refined_lr=None)
        t.update(fit=None, s_min=None, e_min=None, b_crit=None, b_crit_ci=None, b_simple=None,
                 b_noise=None, b_simple_over_b_crit=None,
                 regimes={"perfect_scaling_until": None, "steps_plateau_from": None,
                          "definition": "perfect while steps fall >= 1.8x per doubling"})
    unreached.update(points=[], unreached_batch_sizes=[64])
    a["lr_rules"] = None
    return a


# ---------------------------------------------------------------- figures


def test_write_all_writes_every_figure(tmp_path):
    paths = views.write_figures(synthetic_analysis(), synthetic_records(), tmp_path / "figures")
    assert sorted(p.name for p in paths) == sorted(figures.FIGURES)
    for p in paths:
        assert p.parent == tmp_path / "figures" and p.read_bytes()[:8] == PNG
        assert p.stat().st_size > 10_000


def test_a_fit_with_no_examples_term_still_draws(tmp_path):
    """E_min -> 0 (steps flat in B): the hyperbola's start would equal S_min and divide by 0."""
    a = synthetic_analysis()
    fit = a["targets"][0]["fit"]
    fit["e_min"], fit["b_crit"] = 1e-300, 1e-300 / fit["s_min"]
    path = figures.examples_vs_steps(a, synthetic_records(), tmp_path / "e.png")
    assert path.read_bytes()[:8] == PNG


def test_write_all_skips_figures_without_data(tmp_path):
    a = sparse_analysis()
    names = {p.name for p in views.write_figures(a, synthetic_records(False), tmp_path)}
    assert names == {"steps_vs_batch.png", "examples_vs_steps.png", "lr_vs_batch.png",
                     "heatmap.png"}
    for t in a["targets"]:
        t["points"] = []
    names = {p.name for p in views.write_figures(a, [], tmp_path / "none")}
    assert names == {"heatmap.png"}


def test_heatmap_cells_average_seeds_and_mark_divergence():
    a = synthetic_analysis()
    a["runs"][0]["steps_to_target"]["eval_loss<=1.0"] = 1000.0  # bs16 lr0.01 seed0
    cells = tables.cells(a, "eval_loss<=1.0")
    assert len(cells) == len(SIZES) * len(RATES)
    assert cells[(16, 0.01)]["steps"] == pytest.approx((1000 + run_steps("eval_loss<=1.0", 16,
                                                                           0.01)) / 2)
    assert cells[(16, 0.3)] == {"steps": None, "reached": False, "diverged": True,
                                "censored": None}
    acc = tables.cells(a, "eval_accuracy>=0.6")[(64, 0.01)]
    assert acc == {"steps": None, "reached": False, "diverged": False, "censored": None}
    a["runs"][1]["steps_to_target"]["eval_loss<=1.0"] = None  # one seed missed: not reached
    assert tables.cells(a, "eval_loss<=1.0")[(16, 0.01)]["steps"] is None
    a["runs"][1]["steps_censored"] = {"eval_loss<=1.0": 1200.0}  # stopped as dominated at 1,200
    cell = tables.cells(a, "eval_loss<=1.0")[(16, 0.01)]
    assert cell["steps"] is None and cell["censored"] == pytest.approx((1000 + 1200) / 2)
    assert tables.cell_text(cell) == "> 1,100"


def test_noise_scale_vs_loss_on_one_run(tmp_path):
    rec = synthetic_records()[:1]
    rec[0]["metrics"][3]["b_simple"] = float("nan")  # a non-finite value: read between its neighbours
    series = noise_series(rec, "b_simple")
    assert [len(s[2]) for s in series] == [len(rec[0]["metrics"]) - 1]  # step 0: nothing measured
    assert series[0][3][2] == pytest.approx((rec[0]["metrics"][2]["b_simple"]
                                             + rec[0]["metrics"][4]["b_simple"]) / 2)
    rising = [dict(m, train_loss=m["train_loss"] and 2.0 + abs(i - 10) / 100)
              for i, m in enumerate(rec[0]["metrics"])]  # lowest at the 11th row, then rising
    (_, _, losses, _), = noise_series([dict(rec[0], metrics=rising)], "b_simple")
    assert losses[-1] == 2.0 and len(losses) == 11 - 1  # cut at the lowest loss
    target = contract.filled({"name": "train_loss<=1.0", "metric": "train_loss", "value": 1.0,
                              "fit": {"b_crit": 64.0, "b_crit_ci": [48.0, 80.0]}}, contract.Target)
    path = figures.noise_scale_vs_loss(rec, tmp_path / "gns.png", targets=[target])
    assert path.read_bytes()[:8] == PNG
    with pytest.raises(ConfigError, match="b_simple"):
        figures.noise_scale_vs_loss(synthetic_records(False), tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()


def test_noise_series_reads_b_noise_from_the_raw_hessian_points_like_the_analysis():
    rows = [{"step": 10 * i, "train_loss": 3.0 - 0.1 * i, "b_noise": 7.0} for i in range(8)]
    rows[4].update(gns_ghg_point=2.0, gns_trace_h_sigma_point=100.0)  # step 40: B_noise 50
    (_, _, _, values), = noise_series([{"run_id": "r", "metrics": rows}], "b_noise")
    assert values[4] == pytest.approx(50.0)  # the raw point, not the moving average's 7
    assert values[1] == 7.0  # no Hessian point within 10 / 1.25 .. 10 * 1.25: the moving average
    assert values == [curves.b_noise_at(rows, r["step"]) for r in rows]


# ---------------------------------------------------------------- report


# quickstart.yaml with the values the tests check pinned, so editing the example keeps them
PINNED = ["task.num_samples=6000", "batch.sizes=[16, 32, 64, 128, 256, 512]",
          "learning_rate.min=0.003", "learning_rate.max=0.3", "learning_rate.num=5",
          "budget.max_examples=400000", f"targets={list(TARGETS)}", "seeds=[0]",
          "optimizer.name=momentum", "optimizer.momentum=0.9"]


def write_sweep_yaml(out: Path, *overrides: str) -> None:
    """sweep.yaml and arithmetic.json, as a sweep writes them when it starts."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = load(ROOT / "configs" / "quickstart.yaml", PINNED + list(overrides))
    (out / "sweep.yaml").write_text(to_yaml(cfg))
    write_json(out / ARITHMETIC, [for_config(cfg, b).to_dict() for b in cfg.batch.sizes])


def test_report_shows_the_numbers_and_links_the_figures(tmp_path):
    write_sweep_yaml(tmp_path)
    a = synthetic_analysis()
    drawn = views.write_figures(a, synthetic_records(), tmp_path / "figures")
    text = markdown.write(tmp_path, a, drawn).read_text()
    assert "**64** [48, 80]" in text and "**32** [24, 40]" in text  # B_crit [CI]
    assert "| **64** [48, 80] | 32 [25.6, 38.4] |" in text  # beside it, the first crossing
    assert "- reached: smoothed (mean over step/1.5 .. step*1.5 in log step)" in text
    assert "are +5% to +5% (median +5%) off the fewest mean steps, which are optimistic" in text
    assert "B_crit would be 32, outside this interval ([48, 80])" in text
    assert "| eval_loss<=1.0 | 5 | 100 [90, 110] | 6,400 [5,120, 7,680] |" in text
    # B=256 vs B_crit=64: a doubling buys 64 / (256 + 64) = 20% of the ideal speed-up
    assert "(at B=256, 20% of it)" in text
    assert "over-shoots the measured optimum from a batch of about 128 (2.4x" in text
    assert "batch sizes: 16, 32, 64, 128, 256, 512" in text  # from sweep.yaml
    assert "momentum (momentum 0.9)" in text and "max_examples 400,000" in text
    # run arithmetic: 4,800 examples, B=128: 38 steps/epoch (last batch 64), 83 epochs = 3,154
    # steps and 398,400 examples, then 13 more steps to reach 400,000
    assert "3,167" in text
    links = [line[line.index("(") + 1:-1] for line in text.splitlines() if line.startswith("![")]
    assert sorted(links) == sorted(f"figures/{n}" for n in figures.FIGURES)
    assert all((tmp_path / link).is_file() for link in links)


def test_report_says_when_the_fit_is_missing_poor_or_wide(tmp_path):
    write_sweep_yaml(tmp_path)
    text = markdown.write(tmp_path, sparse_analysis(), []).read_text()
    assert "eval_accuracy>=0.6 was not reached at any batch size" in text
    assert "No trade-off fit for eval_loss<=1.0" in text and "## Figures" not in text
    assert "| eval_accuracy>=0.6 | no fit |" in text and "[,]" not in text and "[-" not in text
    fits = text.split("## Trade-off fits")[1].split("\n\n")[1]
    assert fits.splitlines()[0] == "| target | B_crit, first crossing | not reached at B |"
    a = synthetic_analysis()
    a["targets"][0]["fit"]["rms_log_residual"] = 0.3
    a["targets"][0]["b_crit_ci"] = [10.0, 400.0]
    a["targets"][0]["unreached_batch_sizes"] = [512]
    a["targets"][0]["points"][-1]["at_edge"] = "high"
    text = markdown.write(tmp_path, a, []).read_text()
    assert "The fit is poor (rms residual of log steps 0.30)" in text
    assert "wide ([10, 400], a factor 40)" in text
    assert "eval_loss<=1.0 was not reached at B = 512: never crossed at any learning rate " \
        "within the budget." in text
    a["targets"][0]["unreached_batch_sizes"] = [256, 512]
    a["targets"][0]["unreached_reasons"] = {"256": "dominated", "512": "unconfirmed"}
    text = markdown.write(tmp_path, a, []).read_text()
    assert "not reached at B = 512: crossed, but the reading could not be confirmed" in text
    assert "not reached at B = 256: runs stopped as dominated before reaching it" in text
    assert "grid's edge at batch size 256 (high)" in text


def test_ideal_share_closed_form():
    s = lambda b: 100 + 6400 / b  # noqa: E731  (B_crit = 64)
    for b in (16, 64, 300):
        assert steps_report.ideal_share(b, 64) == pytest.approx((s(b) - s(2 * b)) / (s(b) / 2))
    assert steps_report.ideal_share(64, 64) == 0.5
    assert number(6400.0) == "6,400" and number(0.0094868) == "0.00949"
    assert number(None) == "-" and number(1234.6) == "1,235"


# ---------------------------------------------------------------- scaling analyze


def test_analyze_refuses_a_missing_folder(tmp_path, capsys):
    from scaling.cli.main import main

    assert main(["analyze", str(tmp_path / "nope")]) == 2
    assert "error:" in capsys.readouterr().err
    (tmp_path / "runs").mkdir()
    assert main(["analyze", str(tmp_path)]) == 2
    assert "no finished runs" in capsys.readouterr().err
    assert not (tmp_path / "report.md").exists()



def tiny_sweep(out: Path) -> None:
    """A finished sweep on disk whose steps to eval_loss<=1.0 follow S(B) = 100 + 6400/B.

    eval_loss falls linearly, 2 - step/T, so the first crossing, interpolated, is exactly T; T
    is S(B) at the best LR (0.1) and longer off it, so the fit must return B_crit = 64.
    """
    from scaling import store

    write_sweep_yaml(out, "reached.rule=first")
    for b in (16, 32, 64, 128, 256):
        for lr in (0.03, 0.1, 0.3):
            run_id = f"bs{b}-lr{lr}-seed0"
            total = (100 + 6400 / b) * (1 + math.log(lr / 0.1) ** 2)
            store.start_run(out, run_id, {"batch_size": b, "learning_rate": lr, "seed": 0,
                                          "targets": list(TARGETS)})
            rows = [{"step": s, "examples": s * b, "tokens": None, "lr": lr,
                     "train_loss": 2.3 - s / (1.2 * total) if s else None,
                     "eval_loss": 2.0 - s / total, "eval_accuracy": 0.1 + 0.5 * s / total,
                     "b_simple": 20.0 + s if s else None} for s in range(0, int(total) + 11, 10)]
            store.append_metrics(out, run_id, rows)
            store.finish_run(out, run_id, {"run_id": run_id, "status": "completed",
                                           "batch_size": b, "learning_rate": lr, "seed": 0,
                                           "steps": rows[-1]["step"]})


@pytest.mark.slow
def test_analyze_writes_analysis_report_and_figures(tmp_path, capsys):
    import json

    from scaling.cli.main import main

    tiny_sweep(tmp_path)
    assert main(["analyze", str(tmp_path), "--bootstrap", "50"]) == 0
    printed = capsys.readouterr().out
    analysis = json.loads((tmp_path / "analysis.json").read_text())
    target = analysis["targets"][0]
    assert target["name"] == "eval_loss<=1.0"
    assert target["b_crit"] == pytest.approx(64, rel=1e-3)
    assert [p["best_lr"] for p in target["points"]] == [0.1] * 5
    drawn = sorted(p.name for p in (tmp_path / "figures").iterdir())
    assert drawn == sorted(figures.FIGURES)
    text = (tmp_path / "report.md").read_text()
    assert "**64**" in text and all(f"figures/{n}" in text for n in drawn)
    assert f"wrote {tmp_path / 'report.md'}" in printed and "B_crit 64" in printed
    pdf = (tmp_path / "figures.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page\b", pdf)) == len(drawn)
    page = (tmp_path / "index.html").read_text()
    assert all(f'<img src="figures/{n}"' in page for n in drawn) and "<script" not in page
    assert page.count("<table>") == text.count("\n|---") and "<b>64</b>" in page
    assert main(["analyze", str(tmp_path), "--json", "--bootstrap", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["targets"][0]["b_crit"] == pytest.approx(64, 1e-3)


def test_a_b_crit_below_the_smallest_batch_is_not_read_as_a_number():
    """Steps that hardly fall with the batch size fit E_min near zero (adam_surge's 2.8 target:
    about 15 steps at every batch size, B_crit 3.4e-16): the conclusion says B_crit lies below
    the batches tried and draws no ratio to B_simple from it."""
    points = [{"batch_size": b} for b in (4, 16, 64)]
    flat = contract.filled({"name": "eval_loss<=2.8", "points": points,
                            "fit": {"rms_log_residual": 0.08}, "b_crit": 3.38e-16,
                            "b_crit_ci": [2e-18, 3.09], "b_simple_over_b_crit": 9e15,
                            "first_crossing": {"outside_interval": False}},
                           contract.Target)
    (line,) = steps_report._target_conclusion(flat)
    assert "B_crit lies below the smallest batch size tried (4; the fit gives" in line
    fine = dict(flat, b_crit=40.0, b_crit_ci=[30.0, 50.0], b_simple_over_b_crit=1.5)
    lines = steps_report._target_conclusion(fine)
    assert lines[0].startswith("For eval_loss<=2.8, B_crit is about 40 [30, 50]: ")
    assert lines[-1] == "B_simple at the crossing is 1.5x B_crit (within an order of magnitude)."
    beyond = contract.filled(dict(fine, b_crit=900.0, fit={"identification": {
        "identified": False, "bound": "lower", "at": 64, "why": "beyond the batch sizes fitted"}}),
        contract.Target)
    (line,) = steps_report._target_conclusion(beyond)
    assert line == ("For eval_loss<=2.8, B_crit is not identified by these runs: > 64 (beyond "
                    "the batch sizes fitted).") and "900" not in line
