"""`scaling import` on files the tests write: a table, curves and TensorBoard folders (written
with tensorboardX, as the project's tracker writes them), one cell or several; every kind of
bad input refused with its column and row before anything is written; 2,000 runs in
seconds; and a sweep's own runs exported to CSV and imported again analyse the same."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import time
from pathlib import Path

import pytest
import yaml

from scaling import store
from scaling.cli.main import main
from tests.helpers import SWEEP, config

LRS = [0.0125, 0.025, 0.05, 0.1, 0.2, 0.4]
SIZES = [16, 32, 64, 128, 256]


def final_loss(size: int, lr: float, params: float = 1e6, tokens: float = 1e8) -> float:
    """Exactly quadratic in log lr about 0.05 (B / 64)^0.5 and in log B about 64 (D / 1e8)."""
    eta = 0.05 * (size / 64) ** 0.5
    return 3.0 * (params / 1e6) ** -0.1 * math.exp(
        0.1 * math.log(lr / eta) ** 2 + 0.05 * math.log(size / (64 * tokens / 1e8)) ** 2)


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def table_rows() -> list[list]:
    return [[b, lr, 0, repr(final_loss(b, lr)), f"run {i}"]
            for i, (b, lr) in enumerate((b, lr) for b in SIZES for lr in LRS)]


def run_import(*args: str) -> int:
    return main(["import", *args, "--quiet"])


# ---------------------------------------------------------------- a table


def test_a_table_becomes_a_results_folder_that_analyze_reads(tmp_path, capsys):
    source = write_csv(tmp_path / "runs.csv", ["batch size", "peak lr", "seed", "final loss",
                                               "notes"], table_rows())
    out = tmp_path / "imported"
    assert run_import(str(source), "--out", str(out), "--column", "batch_size=batch size",
                      "--column", "learning_rate=peak lr", "--column", "eval_loss=final loss") == 0
    records = store.load(out)
    assert len(records) == len(SIZES) * len(LRS)
    rec = next(r for r in records if r["run_id"] == "bs64-lr0.05-seed0")
    assert rec["metrics"][-1]["eval_loss"] == final_loss(64, 0.05)
    assert rec["config"]["source"]["values"] == {"notes": "run 14"}
    assert rec["config"]["source"]["place"].endswith("row 16")
    saved = yaml.safe_load((out / "sweep.yaml").read_text())
    assert saved["analysis"]["view"] == "fixed_budget" and saved["targets"] == []
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    assert saved["import"]["sources"][0]["sha256"] == digest
    assert saved["import"]["columns"]["eval_loss"] == "final loss"
    assert main(["analyze", str(out), "--bootstrap", "20", "--quiet"]) == 0
    cell = json.loads((out / "analysis.json").read_text())["fixed_budget"]["cells"][0]
    assert cell["optimum"]["batch_size"] == pytest.approx(64.0, rel=1e-9)
    assert cell["optimum"]["learning_rate"] == pytest.approx(0.05, rel=1e-9)
    assert (out / "figures" / "landscape.png").is_file()
    report = (out / "report.md").read_text()
    assert "imported (table)" in report and "## Fixed budget" in report
    assert "B_opt = 64" in report


def test_json_lines_give_the_same_runs_as_csv(tmp_path):
    header = ["batch_size", "learning_rate", "seed", "eval_loss", "notes"]
    rows = table_rows()
    csv_file = write_csv(tmp_path / "t.csv", header, rows)
    lines = tmp_path / "t.jsonl"
    lines.write_text("".join(json.dumps(dict(zip(header, [r[0], r[1], r[2], float(r[3]), r[4]])))
                             + "\n" for r in rows))
    for source, out in ((csv_file, "a"), (lines, "b")):
        assert run_import(str(source), "--out", str(tmp_path / out)) == 0
    strip = lambda recs: [(r["run_id"], r["metrics"]) for r in recs]  # noqa: E731
    assert strip(store.load(tmp_path / "a")) == strip(store.load(tmp_path / "b"))


def test_a_table_of_several_cells_makes_a_parent_folder(tmp_path):
    rows = [[n, d, b, lr, repr(final_loss(b, lr, n, d))] for n in (1e6, 4e6) for d in (1e8, 4e8)
            for b in SIZES + [512] for lr in LRS]
    source = write_csv(tmp_path / "grid.csv", ["N", "D", "bs", "lr", "loss"], rows)
    out = tmp_path / "cells"
    assert run_import(str(source), "--out", str(out), "--column", "params=N", "--column",
                      "tokens=D", "--column", "batch_size=bs", "--column", "learning_rate=lr",
                      "--column", "train_loss=loss", "--metric", "train_loss", "--unit",
                      "sequences", "--tokens-per-example", "100") == 0
    manifest = json.loads((out / "cells.json").read_text())
    assert [c["name"] for c in manifest["cells"]] == ["N1e6-D1e8", "N1e6-D4e8", "N4e6-D1e8",
                                                      "N4e6-D4e8"]
    first = manifest["cells"][0]
    assert (first["examples"], first["compute"]) == (1e6, 6 * 1e6 * 1e8)
    assert manifest["batch_unit"] == "sequences" and manifest["tokens_per_example"] == 100
    rows_of = store.load(out / first["folder"])[0]["metrics"]
    assert rows_of[-1]["tokens"] == 1e8 and rows_of[-1]["examples"] == 1e6


# ---------------------------------------------------------------- curves


def test_curves_give_the_steps_view(tmp_path):
    """Loss falls linearly to 0 over 40 / lr steps (examples = steps x B): under rule first
    the target 0.5 is crossed at exactly 20 / lr steps."""
    rows = [[f"b{b}-lr{lr}", b, lr, step, repr(1.0 - step * lr / 40), repr(1.0 - step * lr / 40)]
            for b in (8, 16) for lr in (0.5, 1.0, 2.0) for step in range(0, 81, 4)]
    source = write_csv(tmp_path / "curves.csv", ["name", "batch_size", "learning_rate", "step",
                                                 "eval_loss", "train_loss"], rows)
    out = tmp_path / "c"
    assert run_import(str(source), "--out", str(out), "--column", "run=name", "--targets",
                      "eval_loss<=0.5") == 0
    rec = next(r for r in store.load(out) if r["run_id"] == "b8-lr0.5")
    assert [row["examples"] for row in rec["metrics"][:3]] == [0, 32, 64]
    assert rec["summary"]["status"] == "completed" and len(rec["metrics"]) == 21
    assert main(["analyze", str(out), "--rule", "first", "--bootstrap", "0", "--quiet"]) == 0
    analysis = json.loads((out / "analysis.json").read_text())
    (target,) = analysis["targets"]
    assert {p["batch_size"]: p["steps"] for p in target["points"]} == {8: 10.0, 16: 10.0}
    assert "fixed_budget" in analysis  # view both: curves with targets
    assert main(["compare", str(out), str(out), "--labels", "a", "b", "--out",
                 str(tmp_path / "cmp")]) == 0
    assert "| a | eval_loss<=0.5 |" in (tmp_path / "cmp" / "report.md").read_text()


def test_tensorboard_folders_with_a_runs_table(tmp_path):
    from tensorboardX import SummaryWriter  # the writer scaling.sweep.trackers uses

    logs = tmp_path / "tb"
    for name, lr in (("fast", 0.2), ("slow", 0.1)):
        writer = SummaryWriter(str(logs / name))
        for step in range(0, 50, 10):
            writer.add_scalar("loss/eval", 2.0 - lr * step / 10, step)
            writer.add_scalar("train/loss", 2.1 - lr * step / 10, step)
        writer.close()
    table = write_csv(tmp_path / "runs.csv", ["run", "bs", "lr"], [["fast", 32, 0.2],
                                                                    ["slow", 32, 0.1]])
    out = tmp_path / "imported"
    assert run_import(str(logs), "--out", str(out), "--runs-table", str(table), "--column",
                      "batch_size=bs", "--column", "learning_rate=lr", "--column",
                      "eval_loss=loss/eval") == 0
    rec = {r["run_id"]: r for r in store.load(out)}["fast"]
    assert rec["config"]["batch_size"] == 32 and rec["config"]["learning_rate"] == 0.2
    assert [row["step"] for row in rec["metrics"]] == [0, 10, 20, 30, 40]
    assert rec["metrics"][-1]["eval_loss"] == pytest.approx(2.0 - 0.2 * 4)
    assert rec["metrics"][-1]["train/loss"] == pytest.approx(2.1 - 0.2 * 4)
    assert rec["metrics"][-1]["examples"] == 40 * 32
    single = tmp_path / "one"
    assert run_import(str(logs / "slow"), "--out", str(single), "--batch-size", "16",
                      "--learning-rate", "0.1", "--metric", "loss/eval") == 0
    (only,) = store.load(single)
    assert only["config"]["batch_size"] == 16 and only["metrics"][1]["examples"] == 160


# ---------------------------------------------------------------- bad input


BAD = {
    "missing column": (["bs", "learning_rate", "eval_loss"], [[8, 0.1, 1.0]],
                       ["--column", "batch_size=batch"], "missing column 'batch'"),
    "not a number": (["batch_size", "learning_rate", "eval_loss"],
                     [[8, 0.1, 1.0], [8, "fast", 1.0]], [],
                     "row 3, column 'learning_rate': got 'fast', expected a positive number"),
    "bad metric value": (["batch_size", "learning_rate", "eval_loss"],
                         [[8, 0.1, "1.0"], [16, 0.1, "n/a"]], ["--column", "eval_loss=eval_loss"],
                         "row 3, column 'eval_loss': got 'n/a', expected a number"),
    "repeated run": (["batch_size", "learning_rate", "seed", "eval_loss"],
                     [[8, 0.1, 0, 1.0], [16, 0.1, 0, 1.0], [8, 0.1, 0, 0.9]], [],
                     "row 4: repeats (params, tokens, batch size, learning rate, seed)"),
    "step going back": (["run", "batch_size", "learning_rate", "step", "eval_loss"],
                        [["a", 8, 0.1, 0, 1.0], ["a", 8, 0.1, 10, 0.9], ["a", 8, 0.1, 5, 0.8]], [],
                        "row 4, column 'step': step 5 goes back from 10 within run 'a'"),
    "mixed unit column": (["batch_size", "learning_rate", "eval_loss", "unit"],
                          [[8, 0.1, 1.0, "sequences"], [8, 0.2, 0.9, "tokens"]], [],
                          "row 3, column 'unit': mixed units"),
    "unit against --unit": (["batch_size", "learning_rate", "eval_loss", "unit"],
                            [[8, 0.1, 1.0, "tokens"]], ["--unit", "sequences"],
                            "row 2, column 'unit': mixed units"),
    "tokens against examples": (["batch_size", "learning_rate", "eval_loss", "examples", "tokens"],
                                [[8, 0.1, 1.0, 100, 6400], [8, 0.2, 0.9, 100, 12800]], [],
                                "row 3, column 'tokens': mixed units: tokens 12800 is not "
                                "examples 100 x 64"),
    "batch size not whole": (["batch_size", "learning_rate", "eval_loss"], [[8.5, 0.1, 1.0]], [],
                             "row 2, column 'batch_size': got '8.5', expected a positive integer"),
    "a changing batch size": (["run", "batch_size", "learning_rate", "step", "eval_loss"],
                              [["a", 8, 0.1, 0, 1.0], ["a", 16, 0.1, 10, 0.9]], [],
                              "row 3, column 'batch_size': batch_size changes within run 'a'"),
    "no such metric": (["batch_size", "learning_rate", "loss"], [[8, 0.1, 1.0]], [],
                       "--metric: got 'eval_loss', which no column holds; expected one of loss"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_refused_naming_column_and_row_before_anything_is_written(
        case, tmp_path, capsys):
    header, rows, flags, message = BAD[case]
    source = write_csv(tmp_path / "bad.csv", header, rows)
    out = tmp_path / "out"
    assert run_import(str(source), "--out", str(out), *flags) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_a_folder_with_results_is_replaced_only_with_force(tmp_path, capsys):
    source = write_csv(tmp_path / "t.csv", ["batch_size", "learning_rate", "eval_loss"],
                       [[8, 0.1, 1.0], [16, 0.1, 0.9]])
    out = tmp_path / "out"
    assert run_import(str(source), "--out", str(out)) == 0
    assert run_import(str(source), "--out", str(out)) == 2
    assert "holds results already (runs, sweep.yaml); give --force" in capsys.readouterr().err
    assert run_import(str(source), "--out", str(out), "--force") == 0
    assert len(store.load(out)) == 2 and not list(out.glob(".import-*"))


def test_two_thousand_runs_import_in_seconds(tmp_path):
    rows = [[n, 1e9, b, lr, s, 2.0 + 0.01 * s]
            for n in (1e7, 2e7, 4e7, 8e7) for b in (32, 64, 128, 256, 512)
            for lr in [0.001 * 1.1 ** k for k in range(25)] for s in range(4)]
    assert len(rows) == 2000
    source = write_csv(tmp_path / "big.csv", ["params", "tokens", "batch_size", "learning_rate",
                                              "seed", "eval_loss"], rows)
    start = time.perf_counter()
    assert run_import(str(source), "--out", str(tmp_path / "big")) == 0
    took = time.perf_counter() - start
    assert len(json.loads((tmp_path / "big" / "cells.json").read_text())["cells"]) == 4
    assert took < 10.0, f"2,000 runs took {took:.1f} s"


# ---------------------------------------------------------------- round trip


def export_curves(out: Path, path: Path) -> Path:
    """Every evaluation row of a sweep's runs as a CSV, the run's identity on each row."""
    records = store.load(out)
    keys = list(dict.fromkeys(k for r in records for row in r["metrics"] for k in row))
    header = ["run", "batch_size", "learning_rate", "seed", "status", *keys]
    rows = [[r["run_id"], r["config"]["batch_size"], repr(r["config"]["learning_rate"]),
             r["config"]["seed"], r["summary"]["status"],
             *["" if row.get(k) is None else repr(row[k]) for k in keys]]
            for r in records for row in r["metrics"]]
    return write_csv(path, header, rows)


IDENTITY = {"name", "task", "optimizer"}  # the sweep's config, which a CSV does not carry


def _comparable(analysis: dict) -> dict:
    out = {k: v for k, v in analysis.items() if k != "throughput"}
    out["sweep"] = {k: v for k, v in analysis["sweep"].items() if k not in IDENTITY}
    out["fixed_budget"]["cells"] = [{k: v for k, v in c.items() if k != "name"}
                                    for c in analysis["fixed_budget"]["cells"]]
    return json.loads(json.dumps(out))


@pytest.mark.slow
def test_a_sweep_exported_to_csv_and_imported_again_analyses_the_same(tmp_path):
    from scaling.analysis.analyze import analyze
    from scaling.sweep import runner

    original = tmp_path / "sweep"
    cfg = config(SWEEP, "seeds=[0, 1]", "analysis.view=both")
    runner.run(cfg, original, quiet=True)
    source = export_curves(original, tmp_path / "export.csv")
    imported = tmp_path / "imported"
    assert run_import(str(source), "--out", str(imported), "--column", "run=run", "--targets",
                      *cfg.targets) == 0
    before, after = analyze(original, bootstrap=100), analyze(imported, bootstrap=100)
    assert before["targets"][0]["points"] and before["fixed_budget"]["cells"][0]["optimum"]
    assert _comparable(after) == _comparable(before)
