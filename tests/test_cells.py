"""A multi-cell folder through `scaling analyze`: each cell analysed and reported as a results
folder, the laws across the cells in the parent's analysis.json, figure and report, with the
keys docs/results-format.md documents."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from scaling.cli.main import main
from scaling.config import ConfigError
from scaling.store.cells import cell_entry, cell_name, read_cells, write_cells

FIXED_BUDGET_KEYS = {"metric", "lower_is_better", "batch_unit", "budget_unit", "cells", "laws"}
CELL_KEYS = {"name", "params", "params_non_embedding", "tokens", "examples", "budget_unit",
             "b_crit", "b_crit_targets", "metric", "lower_is_better", "num_runs", "seeds", "interval", "per_batch", "best",
             "optimum", "lr_rules"}
PARENT_CELL_KEYS = CELL_KEYS | {"folder", "compute"}
OPTIMUM_KEYS = {"batch_size", "batch_size_ci", "learning_rate", "learning_rate_ci", "value",
                "value_ci", "interpolated", "at_edge"}
PER_BATCH_KEYS = {"batch_size", "hyperparameters", "best_lr", "best_value", "learning_rate",
                  "learning_rate_ci", "value", "value_ci", "interpolated", "at_edge", "num_lrs",
                  "num_complete", "num_diverged"}
GRID_KEYS = {"batch_size", "learning_rate", "hyperparameters", "mean", "std", "seeds", "diverged"}
LAW_KEYS = {"quantity", "formula", "coefficient", "coefficient_ci", "exponents", "exponents_ci",
            "left_out", "num_cells", "bootstrap", "interval", "identification",
            "rms_log_residual", "alone", "argmin", "non_embedding"}


def optimum(n: float, d: float) -> tuple[float, float, float]:
    """eta* = 2 N^-0.5 D^0.25, B_opt = 0.01 D^0.5, loss 10 N^-0.1."""
    return 2.0 * n ** -0.5 * d ** 0.25, 0.01 * d ** 0.5, 10.0 * n ** -0.1


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    root = tmp_path_factory.mktemp("cells")
    rng = np.random.default_rng(4)
    rows = []
    for n in (1e6, 4e6, 1.6e7):
        for d in (1e8, 4e8, 1.6e9):
            eta, b_star, best = optimum(n, d)
            for b in 2.0 ** np.arange(round(math.log2(b_star)) - 3, round(math.log2(b_star)) + 4):
                for lr in eta * 2.0 ** (np.arange(-5, 6) / 2 + rng.uniform(-0.25, 0.25)):
                    for seed in (0, 1):
                        loss = best * math.exp(0.06 * math.log(lr / eta) ** 2 + 0.03 * math.log(
                            b / b_star) ** 2 + rng.normal(0, 0.002))
                        rows.append([n, d, int(b), repr(float(lr)), seed, repr(loss)])
    with open(root / "grid.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([["params", "tokens", "batch_size", "learning_rate", "seed",
                                       "eval_loss"]] + rows)
    out = root / "study"
    assert main(["import", str(root / "grid.csv"), "--out", str(out), "--quiet"]) == 0
    assert main(["analyze", str(out), "--bootstrap", "200", "--quiet"]) == 0
    return out


@pytest.mark.slow  # nine cells analysed, drawn and reported (about 7 s)
def test_the_parent_analysis_has_the_documented_keys(parent):
    analysis = json.loads((parent / "analysis.json").read_text())
    assert set(analysis) == {"version", "kind", "sweep", "manifest", "fixed_budget", "cooldowns"}
    assert analysis["cooldowns"] is None  # an import, not a cooldown sweep
    assert analysis["kind"] == "cells" and analysis["sweep"]["cells"] == 9
    fb = analysis["fixed_budget"]
    assert set(fb) == FIXED_BUDGET_KEYS and len(fb["cells"]) == 9
    for cell in fb["cells"]:
        assert set(cell) == PARENT_CELL_KEYS
        assert set(cell["optimum"]) == OPTIMUM_KEYS
        assert set(cell["best"]) == {"batch_size", "learning_rate", "value"}
        assert all(set(p) == PER_BATCH_KEYS for p in cell["per_batch"])
    assert set(fb["laws"]) == {"learning_rate", "batch_size", "loss", "b_crit", "b_crit_data"}
    for name in ("learning_rate", "batch_size", "loss"):
        law = fb["laws"][name]
        assert set(law) == LAW_KEYS and set(law["exponents"]) == {"params", "tokens"}
        assert all(law["exponents_ci"][k] for k in ("params", "tokens"))
    assert fb["laws"]["b_crit"] is None and fb["laws"]["b_crit_data"] is None


@pytest.mark.slow  # nine cells analysed, drawn and reported (about 7 s)
def test_each_cell_is_an_ordinary_analysed_folder(parent):
    manifest = json.loads((parent / "cells.json").read_text())
    for cell in manifest["cells"]:
        folder = parent / cell["folder"]
        own = json.loads((folder / "analysis.json").read_text())
        (entry,) = own["fixed_budget"]["cells"]
        assert set(entry) == CELL_KEYS | {"grid"}
        assert all(set(g) == GRID_KEYS for g in entry["grid"])
        assert (entry["params"], entry["tokens"]) == (cell["params"], cell["tokens"])
        assert (folder / "figures" / "landscape.png").is_file()
        assert "## Fixed budget" in (folder / "report.md").read_text()


@pytest.mark.slow  # nine cells analysed, drawn and reported (about 7 s)
def test_the_laws_come_back_and_are_reported(parent):
    laws = json.loads((parent / "analysis.json").read_text())["fixed_budget"]["laws"]
    for name, truth in (("learning_rate", {"params": -0.5, "tokens": 0.25}),
                        ("batch_size", {"params": 0.0, "tokens": 0.5}),
                        ("loss", {"params": -0.1, "tokens": 0.0})):
        for variable, value in truth.items():
            lo, hi = laws[name]["exponents_ci"][variable]
            assert lo <= value <= hi and hi - lo < 0.3, (name, variable, lo, hi)
    assert (parent / "figures" / "optima_vs_budget.png").is_file()
    report = (parent / "report.md").read_text()
    assert "## Laws across the cells" in report
    assert "](cells/N1e6-D1e8/report.md)" in report
    row = next(line for line in report.splitlines() if line.startswith("| optimal batch size"))
    assert f"{laws['batch_size']['exponents']['tokens']:.3f}" in row


def test_cell_names_and_compute():
    assert cell_name(214663680, 1e11) == "N2.147e8-D1e11"
    assert cell_name(None, 800) == "D800" and cell_name(None, None) == "cell"
    entry = cell_entry(1e8, 2e9, None)
    assert (entry["folder"], entry["compute"]) == ("cells/N1e8-D2e9", 6 * 1e8 * 2e9)
    assert entry["compute_source"].startswith("6 N D")
    assert cell_entry(1e8, None, 5e4)["compute"] is None  # no tokens: C unknown
    assert cell_entry(1e8, None, 5e4, measured=(1e15, "XLA"))["compute"] == 1e15


def test_a_manifest_must_name_folders_that_hold_runs(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        read_cells(tmp_path)
    write_cells(tmp_path, [cell_entry(1e6, 1e8, None)], "examples", None, "import")
    with pytest.raises(ConfigError, match="cell 'N1e6-D1e8' has no runs/"):
        read_cells(tmp_path)
    (tmp_path / "cells" / "N1e6-D1e8" / "runs").mkdir(parents=True)
    assert read_cells(tmp_path)["cells"][0]["params"] == 1e6


def test_exponents_read_from_optima_at_an_edge_print_as_bounds_and_a_law_says_why():
    """A law whose cells' optima sit at the edge of the batch sizes tried: every exponent of it
    marked '(bound)' and the reason under the table; a law on too few cells: no interval, and
    why; an identified law: neither."""
    from scaling.report import cells_report

    def law(why_bound, why_none, ci):
        return {"coefficient": 2.0, "coefficient_ci": ci and [1.0, 4.0],
                "exponents": {"params": 0.2, "tokens": -0.35},
                "exponents_ci": {"params": ci, "tokens": ci}, "alone": {}, "argmin": None,
                "non_embedding": None, "rms_log_residual": None, "num_cells": 4,
                "identification": {"identified": why_bound is None, "why": why_bound},
                "interval": {"why": why_none}, "left_out": {}}

    edge = "3 of 4 cells' optima at the edge of the values tried: the exponents are bounds"
    analysis = {"fixed_budget": {"laws": {
        "batch_size": law(edge, None, [-1.5, 1.6]),
        "b_crit_data": law(None, "a law on fewer than 4 cells: too few to resample", None),
        "loss": law(None, None, [-0.2, -0.1])}}}
    rows = {r.split(" | ")[0]: r for r in cells_report.laws_table(analysis) if r.startswith("| ")}
    assert rows["| optimal batch size B_opt"].count("(bound)") == 2
    assert "(bound)" not in rows["| final metric at the optimum"]
    notes = "\n".join(cells_report._law_notes(analysis))
    assert f"- optimal batch size B_opt: {edge}." in notes
    assert "no interval, a law on fewer than 4 cells" in notes and "final metric" not in notes
