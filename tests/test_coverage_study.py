"""experiments/coverage.py: the harness that measures how often the B_crit intervals hold the
noisy quadratic model's closed form, on a tiny sweep (slow), and its width arithmetic by hand."""

from __future__ import annotations

import dataclasses

import importlib.util
import math
from pathlib import Path

import pytest

from scaling.analysis import intervals

PATH = Path(__file__).resolve().parents[1] / "experiments" / "coverage.py"


@pytest.fixture
def coverage(monkeypatch, tmp_path):
    """The experiment as a module, writing under tmp_path."""
    spec = importlib.util.spec_from_file_location("coverage_study", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "OUT", tmp_path)
    return module


def _around(half_widths: list[float]) -> list[list[float]]:
    """Intervals [e^-h, e^h]: half-width h on the log scale."""
    return [[math.exp(-h), math.exp(h)] for h in half_widths]


def test_width_dof_is_two_over_the_squared_half_widths_cv_squared(coverage):
    # squared half-widths 1, 2, 3: mean 2, variance 2/3, so 2 x 2^2 / (2/3) = 12
    assert coverage.width_dof(_around([1.0, math.sqrt(2), math.sqrt(3)])) == pytest.approx(12)
    assert coverage.width_dof(_around([0.5, 0.5, 0.5])) is None  # no spread: not measured
    assert coverage.width_dof(_around([0.5, 1.0])) is None  # too few groups


def test_wilson_interval_of_a_coverage_share_by_hand(coverage):
    # 30 of 32: centre (p + z^2/2n) / (1 + z^2/n) = 0.8906, half-width 0.0921
    lo, hi = coverage.wilson([True] * 30 + [False] * 2)
    assert lo == pytest.approx(0.7985, abs=1e-4) and hi == pytest.approx(0.9827, abs=1e-4)
    assert coverage.wilson([True] * 32)[1] == 1.0


def test_width_over_the_sd_spread_by_hand(coverage):
    # log B_crit -1, 0, 1 (sd 1); every interval 2 x 1.96 x 2 wide in log: twice the spread
    rows = [{"b_crit": math.exp(x), "ci": [math.exp(x - 3.92), math.exp(x + 3.92)]}
            for x in (-1.0, 0.0, 1.0)]
    rows.append({"b_crit": 5.0, "ci": None})  # fitted without an interval: counts in neither
    out = coverage.width_over_sd(rows, draws=200)
    assert out["width_over_sd"] == pytest.approx(2.0)
    low, high = out["width_over_sd_ci"]  # the groups resampled: their sd moves, widths do not
    assert low < 2.0 < high and high <= 7.84 / (2 * 1.96 * math.sqrt(1 / 3)) + 1e-9
    assert coverage.width_over_sd(rows[:2])["width_over_sd"] is None  # too few groups


def test_the_percentiles_of_few_groups_read_a_normal_spread_low(coverage):
    assert coverage.percentile_spread_bias(32) == pytest.approx(0.889, abs=0.01)
    assert coverage.percentile_spread_bias(2000, draws=200) == pytest.approx(1.0, abs=0.01)


def test_subset_cells_by_hand(coverage):
    """Four subsets at one target, log B_crit / 10 at -1, 0, 1, 0 (sd sqrt(2/3)) with intervals
    2 x 1.96 x sqrt(2/3) wide in log (width / sd spread 1, half-width 1.60): of the truth at
    1.7 only the subset at 1 holds it; the disjoint groups' sd beside it."""
    half = 1.96 * math.sqrt(2 / 3)
    subsets = [{"subset": i, "seeds": [0, 1, 2], "target": 0, "b_crit": 10 * math.exp(x),
                "ci": [10 * math.exp(x - half), 10 * math.exp(x + half)]}
               for i, x in enumerate((-1.0, 0.0, 1.0, 0.0))]
    groups = [{"target": 0, "group_size": 3, "selection": coverage.DEFAULT_SELECTION,
               "method": intervals.DEFAULT_METHOD, "b_crit": 10 * math.exp(x)}
              for x in (-0.5, 0.5)]
    result = {"targets": ["eval_loss<=1"], "truth": [10 * math.exp(1.7)], "subsets": subsets,
              "rows": groups, "seeds": 16}
    (cell,) = coverage.subset_cells(result)
    assert cell["subsets"] == 4 and cell["coverage"] == 0.25
    assert cell["width_over_sd"] == pytest.approx(1.0)
    assert cell["sd_log"] == pytest.approx(math.sqrt(2 / 3))
    assert cell["sd_log_groups"] == pytest.approx(math.sqrt(0.5))
    assert cell["median_ratio"] == pytest.approx(math.exp(-1.7))
    assert cell["width_over_sd_ci"] is None  # leaving out seeds 0-1 leaves no subset
    assert coverage.subset_cells({**result, "subsets": []}) == []


def test_seed_blocks_interval_is_the_grouped_jackknife_by_hand(coverage):
    # one row per seed 0..7 with value i, blocks of one seed: the jackknife of a mean is s / sqrt(n)
    rows = [{"seeds": [i], "x": float(i)} for i in range(8)]
    mean = lambda rs: float(sum(r["x"] for r in rs) / len(rs)) if rs else None
    lo, hi = coverage.seed_blocks_interval(rows, mean, seeds=8, blocks=8)
    half = intervals.t975(7) * math.sqrt(6 / 8)  # sample variance of 0..7 is 6
    assert lo == pytest.approx(3.5 - half) and hi == pytest.approx(3.5 + half)


def test_own_search_gives_each_group_of_three_seeds_a_sweep_of_its_own(coverage, tmp_path):
    shared = coverage.plans("noise", 9, tmp_path, "neighbours", own=False)
    assert [(folder, cfg.seeds) for folder, cfg in shared] == [(tmp_path, list(range(9)))]
    own = coverage.plans("noise", 9, tmp_path, "neighbours", own=True)
    assert [(folder.name, cfg.seeds) for folder, cfg in own] == [
        ("group-0", [0, 1, 2]), ("group-1", [3, 4, 5]), ("group-2", [6, 7, 8])]
    assert {cfg.learning_rate.first_grid for _, cfg in own} == {"neighbours"}
    assert {cfg.name for _, cfg in own + shared} == {"coverage-noise"}


@pytest.mark.slow
@pytest.mark.optimised
def test_the_harness_on_a_tiny_nqm(coverage, monkeypatch):
    """One spectrum, 4 batch sizes, 6 seeds: two 3-seed groups per method and six 1-seed groups,
    each with B_crit near the closed form; the 3-seed intervals (loose: at least one of the two
    jackknife intervals per target holds the truth) and the 1-seed groups' missing ones."""
    monkeypatch.setattr(coverage, "SIZES", [4, 16, 64, 256])
    monkeypatch.setattr(coverage, "BOOTSTRAP", 50)
    monkeypatch.setattr(coverage, "SUBSETS", 4)
    # train.repack: auto, as the NQM B_crit tests: the chunks compile for far longer than they
    # train, and SGD on a quadratic does not grow the rounding a group's width changes.
    study_config = coverage.sweep_config

    def auto(name: str, seeds: int, first_grid: str = "grid"):
        cfg = study_config(name, seeds, first_grid)
        return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, repack="auto"))

    monkeypatch.setattr(coverage, "sweep_config", auto)
    result = coverage.study("spread", 6)
    assert result["seeds"] == 6 and result["runs"] > 0
    rows, truth = result["rows"], result["truth"]
    for ti, exact in enumerate(truth):
        jack = [r for r in rows if r["target"] == ti and r["group_size"] == 3
                and r["method"] == intervals.DEFAULT_METHOD and r["selection"] == "crossfit"]
        assert len(jack) == 2 and all(r["ci"] for r in jack)
        assert any(lo <= exact <= hi for lo, hi in (r["ci"] for r in jack)), (jack, exact)
        singles = [r for r in rows if r["target"] == ti and r["group_size"] == 1]
        assert len(singles) == 6 and all(r["ci"] is None for r in singles)
        assert all(r["why"] == intervals.ONE_SEED for r in singles)
        assert all(0.7 <= r["b_crit"] / exact <= 1.4 for r in jack + singles), (ti, exact)
    subsets = result["subsets"]
    assert len(subsets) == 4 * len(truth) and all(len(set(r["seeds"])) == 3 for r in subsets)
    assert all(0.7 <= r["b_crit"] / truth[r["target"]] <= 1.4 for r in subsets)
    result["cells"], result["subset_cells"] = coverage.cells(result), coverage.subset_cells(result)
    result["percentile_spread_bias"] = coverage.percentile_spread_bias(2)
    text = coverage.markdown([result])
    assert "random 3-seed subsets of the 6 seeds" in text
    assert "## spread:" in text and "width dof" in text and "t(2) = 4.30" in text
