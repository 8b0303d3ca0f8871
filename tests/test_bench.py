"""`scaling bench`: the tutorial-style loop trains the very runs the engine trains (same
initialisation, batches, optimizer and schedule), so their final losses agree; the ratios and
the compute-bound verdict are arithmetic on the measured seconds."""

from __future__ import annotations

import pytest

from scaling.cli.main import main
from scaling.sweep import bench
from tests.helpers import DIGITS, NQM, config, write_config


def _check_same_runs(result: bench.Result, tolerance: float) -> None:
    assert len(result.engine.final_losses) == len(result.tutorial.final_losses) == result.runs
    for e, t in zip(result.engine.final_losses, result.tutorial.final_losses):
        assert t == pytest.approx(e, rel=tolerance, abs=tolerance)


@pytest.mark.slow
def test_the_tutorial_loop_trains_the_engines_runs_on_finite_data():
    """Digits with a cosine schedule: the epoch permutations and the schedule must match, or
    the final losses of 40 steps differ by far more than float32 rounding."""
    cfg = config(DIGITS, "schedule.name=cosine", "seeds=[0,1]")
    result = bench.bench(cfg, 64, steps=40)
    assert result.runs == 4 and result.steps == 40
    _check_same_runs(result, 1e-4)
    assert result.speedup == pytest.approx(result.tutorial.train_s / result.engine.train_s)


def test_the_tutorial_loop_draws_the_engines_batches_on_sampled_data():
    result = bench.bench(config(NQM, "learning_rate.values=[0.1,0.3]"), 8, steps=30, num_runs=2)
    assert result.runs == 2
    _check_same_runs(result, 1e-4)


def _result(tutorial_s: float, flops: float | None) -> bench.Result:
    return bench.Result(batch_size=64, runs=4, steps=100, devices=2,
                        engine=bench.Arm("engine", 2.0, 1.0, [0.5] * 4),
                        tutorial=bench.Arm("tutorial", 1.0, tutorial_s, [0.5] * 4),
                        model_flops_per_step=flops, peak_flops_per_s=1e9, peak_source="test")


def test_ratios_and_mfu_are_arithmetic_on_the_seconds():
    r = _result(8.0, 1e6)
    assert r.speedup == 8.0 and r.speedup_with_compile == pytest.approx(9.0 / 3.0)
    assert r.mfu(r.engine, 2) == pytest.approx(1e6 * 400 / 1.0 / 2e9)
    assert r.mfu(r.tutorial, 1) == pytest.approx(1e6 * 400 / 8.0 / 1e9)
    assert not r.compute_bound and "compute-bound" not in bench.format_result(r)
    assert _result(8.0, None).mfu(r.engine, 1) is None


def test_a_compute_bound_group_is_called_so_rather_than_a_speed_up():
    r = _result(1.0, 1e6)  # the tutorial loop at 400 MFLOP / 1 s = 40% of the 1 GFLOP/s peak
    text = bench.format_result(r)
    assert r.compute_bound and "compute-bound" in text and "40%" in text


def test_the_cli_refuses_a_batch_size_the_config_lacks(tmp_path, capsys):
    path = write_config(tmp_path)
    assert main(["bench", path, "--batch-size", "12"]) == 2
    assert "--batch-size: got 12" in capsys.readouterr().err


@pytest.mark.devices(8)
def test_the_fsdp_arms_train_the_same_runs_split_over_k_devices():
    """The NQM's parameters split over 1 and 4 devices: the same runs and batches, so the
    finals agree to float32 rounding, and the table gives each K its row."""
    cfg = config(NQM, "learning_rate.values=[0.1,0.3]")
    splits = bench.bench_fsdp(cfg, 8, 30, [1, 4], num_runs=2)
    assert [s.fsdp for s in splits] == [1, 4]
    for a, b in zip(splits[0].engine.final_losses, splits[1].engine.final_losses):
        assert b == pytest.approx(a, rel=1e-5)
    text = bench.format_splits(_result(8.0, 1e6), splits)
    assert "speed vs fsdp 1" in text and "fsdp 4 against fsdp 1" in text


@pytest.mark.devices(8)
def test_the_cli_refuses_an_fsdp_the_devices_cannot_hold_before_any_compute(tmp_path, capsys):
    path = write_config(tmp_path)
    assert main(["bench", path, "--fsdp", "1", "--fsdp", "3"]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "train.fsdp: got 3" in err and out == ""
