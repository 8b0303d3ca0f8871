"""scaling.config.learning_rates: the learning-rate rules and the warm-up length, exact values
at known points."""

import pytest

from scaling.config import ScheduleConfig
from scaling.config.learning_rates import scaled_lr, warmup_steps


@pytest.mark.parametrize("rule, expected", [("linear", 0.4), ("sqrt", 0.2), ("constant", 0.1)])
def test_reference_rules(rule, expected):
    assert scaled_lr(rule, 32, 8, 0.1) == pytest.approx(expected, rel=1e-12)
    assert scaled_lr(rule, 8, 8, 0.1) == pytest.approx(0.1, rel=1e-12)


def test_noise_scale_rule():
    assert scaled_lr("noise_scale", 100, None, None, eps_max=1.0, b_noise=100.0) == 0.5
    assert scaled_lr("noise_scale", 300, None, None, eps_max=1.0, b_noise=100.0) == 0.75


def test_surge_rule():
    """Li et al. 2024: eta_max at B_peak, 2 eta_max / (2 + 1/2) = 0.8 eta_max at 4x either side."""
    assert scaled_lr("surge", 64, None, None, eta_max=0.01, b_peak=64.0) == pytest.approx(0.01)
    assert scaled_lr("surge", 256, None, None, eta_max=0.01, b_peak=64.0) == pytest.approx(0.008)
    assert scaled_lr("surge", 16, None, None, eta_max=0.01, b_peak=64.0) == pytest.approx(0.008)
    with pytest.raises(ValueError, match="eta_max and b_peak"):
        scaled_lr("surge", 16, 8, 0.1, eps_max=1.0, b_noise=10.0)


def test_unknown_rule_and_missing_parameters():
    with pytest.raises(ValueError, match="unknown.*linear, sqrt, constant, noise_scale"):
        scaled_lr("cubic", 8, 8, 0.1)
    with pytest.raises(ValueError, match="eps_max and b_noise"):
        scaled_lr("noise_scale", 8, 8, 0.1)
    with pytest.raises(ValueError, match="lr_ref"):
        scaled_lr("linear", 8, 8, None)


def test_warmup_is_a_fraction_of_the_run_rounded_half_up():
    assert warmup_steps(ScheduleConfig(warmup_fraction=0.05), 300) == 15
    assert warmup_steps(ScheduleConfig(warmup_fraction=0.05), 75) == 4  # 3.75
    assert warmup_steps(ScheduleConfig(warmup_fraction=0.05), 10) == 1  # 0.5 rounds up
    assert warmup_steps(ScheduleConfig(warmup_fraction=0.0), 300) == 0


def test_fixed_warmup_is_taken_as_given():
    assert warmup_steps(ScheduleConfig(warmup_fraction=0.05, warmup_steps=50), 75) == 50
