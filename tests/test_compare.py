"""`scaling compare`: finished sweeps on one set of axes, one table; sweeps whose targets
differ are refused unless the target is named."""

from __future__ import annotations

import json

import pytest

from scaling.cli.main import main
from scaling.analysis.intervals import describe
from scaling.formatting import estimate
from scaling.sweep import runner
from tests.helpers import SWEEP, config

T = "eval_loss<=0.3"

pytestmark = pytest.mark.slow  # every test shares two trained sweeps


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory):
    """The small NQM sweep with SGD at two learning-rate grids; the second adds a target."""
    root = tmp_path_factory.mktemp("sweeps")
    runner.run(config(SWEEP, "seeds=[0]"), root / "slow", quiet=True)
    runner.run(config(SWEEP, "seeds=[0]", "learning_rate.values=[0.2, 0.8]",
                      f"targets=['{T}', 'eval_loss<=0.5']"), root / "fast", quiet=True)
    for name in ("slow", "fast"):
        assert main(["analyze", str(root / name), "--bootstrap", "20", "--quiet"]) == 0
    return root


def test_two_sweeps_share_a_table_and_figures(two_sweeps, tmp_path, capsys):
    out = tmp_path / "cmp"
    args = ["compare", str(two_sweeps / "slow"), str(two_sweeps / "fast"), "--labels", "lr-low",
            "lr-high", "--target", T, "--out", str(out)]
    assert main(args) == 0
    report = (out / "report.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| lr-")]
    for label, folder in (("lr-low", "slow"), ("lr-high", "fast")):
        analysis = json.loads((two_sweeps / folder / "analysis.json").read_text())
        t = next(t for t in analysis["targets"] if t["name"] == T)
        (row,) = [r for r in rows if r.startswith(f"| {label} | {T}")]
        shown = estimate(t["b_crit"], t["b_crit_ci"], t["fit"]["identification"])
        assert f"| {shown} | {describe(t['interval'])} |" in row  # a bound where not identified
    assert (out / "figures" / "steps_vs_batch.png").is_file()
    assert (out / "figures" / "lr_vs_batch.png").is_file()
    assert f"wrote {out / 'report.md'}" in capsys.readouterr().out


def test_sweeps_with_different_targets_need_one_named(two_sweeps, tmp_path, capsys):
    dirs = [str(two_sweeps / "slow"), str(two_sweeps / "fast")]
    assert main(["compare", *dirs, "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "different targets" in err and "eval_loss<=0.5" in err and "--target" in err
    assert f"they share {T}" in err
    assert main(["compare", *dirs, "--target", "eval_loss<=0.5", "--out", str(tmp_path / "c")]) == 2
    assert "sweep slow has no target 'eval_loss<=0.5'" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_a_folder_with_only_its_analysis_compares_without_the_noise_figure(two_sweeps, tmp_path):
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "analysis.json").write_text((two_sweeps / "slow" / "analysis.json").read_text())
    out = tmp_path / "c"
    assert main(["compare", str(kept), str(two_sweeps / "fast"), "--target", T, "--out",
                 str(out)]) == 0
    assert "| kept | eval_loss<=0.3 |" in (out / "report.md").read_text()
    assert (out / "figures" / "steps_vs_batch.png").is_file()


def test_labels_must_match_the_folders(two_sweeps, tmp_path, capsys):
    assert main(["compare", str(two_sweeps / "slow"), str(two_sweeps / "fast"), "--labels", "a",
                 "--out", str(tmp_path / "c")]) == 2
    assert "--labels: got 1, expected one per folder (2)" in capsys.readouterr().err
