"""scaling.sweep.grid: the runs a config expands to (learning rates, seeds, optimizer axes and
the ids that name them), their groups and cost, centred learning-rate grids with the search's
rounds, and shards as longest-processing-time-first partitions."""

from __future__ import annotations

import pytest

from scaling import config as config_mod
from scaling.cli.main import main
from scaling.config import ConfigError
from scaling.sweep import grid
from tests.helpers import SWEEP, axes_config, config, write_config

# ---------------------------------------------------------------- shards


@pytest.mark.parametrize("text", ["2/2", "-1/2", "1", "a/b", "0/0", "1/2/3"])
def test_bad_shard_is_refused(tmp_path, capsys, text):
    with pytest.raises(ConfigError, match="--shard"):
        grid.parse_shard(text)
    assert main(["sweep", write_config(tmp_path), "--out", str(tmp_path / "o"),
                 f"--shard={text}"]) == 2
    assert "--shard" in capsys.readouterr().err and not (tmp_path / "o").exists()


def _unit(size: int, index: int, cost: int) -> grid.Unit:
    return grid.Unit(size, index, (), cost)


def test_partition_is_longest_processing_time_first():
    units = [_unit(8, 0, 10), _unit(16, 0, 7), _unit(32, 0, 6), _unit(64, 0, 5), _unit(64, 1, 4)]
    shards = grid.partition(units, 2)
    # LPT: 10 -> s0; 7 -> s1; 6 -> s1 (13); 5 -> s0 (15); 4 -> s1 (17)
    assert [[(u.batch_size, u.cost) for u in s] for s in shards] == \
        [[(8, 10), (64, 5)], [(16, 7), (32, 6), (64, 4)]]
    assert grid.partition(list(reversed(units)), 2) == shards
    assert grid.partition(units, 7)[5:] == [[], []]


def test_units_cost_examples_and_follow_max_group_size():
    cfg = config(SWEEP, "batch.sizes=[8, 16]", "train.max_group_size=3", "seeds=[0]")
    runs = grid.expand(cfg)
    units = grid.units(cfg, runs, {8: 800, 16: 1600})
    assert [(u.batch_size, len(u.runs), u.cost) for u in units] == [(8, 2, 1600), (16, 2, 3200)]
    cfg = config(SWEEP, "learning_rate.values=[0.1, 0.2, 0.3]", "train.max_group_size=2")
    sizes = [len(u.runs) for u in grid.units(cfg, grid.expand(cfg), {8: 1, 16: 1})]
    assert sizes == [2, 2, 2, 2, 2, 2]


# ---------------------------------------------------------------- centred learning-rate grids


def test_centered_grid_spans_the_factor_either_side_of_the_rule():
    cfg = config(SWEEP, "learning_rate={mode: centered, rule: linear, batch_ref: 8, lr_ref: 0.5, "
                        "span: 4.0, num: 5}")
    assert grid.batch_learning_rates(cfg, 16, []) == pytest.approx([0.25, 0.5, 1.0, 2.0, 4.0])
    rounds = [{"batch_size": 16, "round": 1, "learning_rates": [0.125, 8.0]}]
    assert grid.batch_learning_rates(cfg, 16, rounds) == pytest.approx(
        [0.25, 0.5, 1.0, 2.0, 4.0, 0.125, 8.0])
    assert grid.batch_learning_rates(cfg, 8, rounds) == pytest.approx([0.125, 0.25, 0.5, 1.0, 2.0])


# ---------------------------------------------------------------- optimizer scalars as grid axes


def test_scalar_optimizer_settings_keep_the_old_run_ids():
    # Ids computed with the code before optimizer axes existed: existing folders must resume.
    cfg = config_mod.from_dict({
        "task": {"name": "nqm", "dim": 10}, "budget": {"max_steps": 10}, "seeds": [0, 7],
        "optimizer": {"name": "momentum", "momentum": 0.95, "weight_decay": 1e-4},
        "batch": {"sizes": [8, 64]}, "learning_rate": {"values": [0.1, 1e-3 / 3]}})
    assert [r.run_id for r in grid.expand(cfg)] == [
        "bs8-lr0.1-seed0", "bs8-lr0.1-seed7", "bs8-lr0.000333333-seed0", "bs8-lr0.000333333-seed7",
        "bs64-lr0.1-seed0", "bs64-lr0.1-seed7", "bs64-lr0.000333333-seed0",
        "bs64-lr0.000333333-seed7"]
    assert {r.spec.momentum for r in grid.expand(cfg)} == {0.95}


def test_one_list_axis_multiplies_the_grid():
    cfg = axes_config("optimizer.momentum=[0.0, 0.9]", "optimizer.weight_decay=1e-4")
    runs = grid.expand(cfg)
    assert len(runs) == 2 * 2 * 1 * 2
    assert [r.run_id for r in runs if r.batch_size == 8] == [
        "bs8-lr0.1-seed0-mom0", "bs8-lr0.1-seed0-mom0.9", "bs8-lr0.5-seed0-mom0",
        "bs8-lr0.5-seed0-mom0.9"]
    assert all(r.spec.momentum == float(r.run_id.rsplit("mom", 1)[1]) for r in runs)
    assert {r.spec.weight_decay for r in runs} == {1e-4}
    assert [len(u.runs) for u in grid.units(cfg, runs, {8: 1, 16: 1})] == [4, 4]


def test_two_list_axes_give_every_combination():
    cfg = config(SWEEP, "optimizer.name=adamw", "optimizer.weight_decay=[0.0, 1e-4, 1e-3]",
                 "optimizer.b2=[0.99, 0.999]", "seeds=[0, 1]", "learning_rate.values=[0.1]")
    runs = grid.expand(cfg)
    assert len(runs) == 2 * 1 * 2 * 3 * 2 and len({r.run_id for r in runs}) == len(runs)
    assert [r.run_id for r in runs[:7]] == [
        "bs8-lr0.1-seed0-wd0-b20.99", "bs8-lr0.1-seed0-wd0-b20.999",
        "bs8-lr0.1-seed0-wd0.0001-b20.99", "bs8-lr0.1-seed0-wd0.0001-b20.999",
        "bs8-lr0.1-seed0-wd0.001-b20.99", "bs8-lr0.1-seed0-wd0.001-b20.999",
        "bs8-lr0.1-seed1-wd0-b20.99"]
    assert {(r.spec.weight_decay, r.spec.b2) for r in runs} == {
        (wd, b2) for wd in (0.0, 1e-4, 1e-3) for b2 in (0.99, 0.999)}
