"""Run arithmetic (the worked examples of docs/arithmetic.md), warnings, and `scaling plan`."""

import json
import subprocess
import sys
import textwrap

import pytest

from scaling.cli.main import main
from scaling.config import BatchConfig, BudgetConfig, Config, ConfigError, LearningRateConfig
from scaling.config.arithmetic import calculate, format_table, sweep_warnings


def test_worked_example_800_examples():
    a = calculate(800, 8, epochs=3, warmup_fraction=0.05)
    assert (a.steps_per_epoch, a.total_steps, a.warmup_steps) == (100, 300, 15)
    assert (a.examples, a.epochs, a.times_seen, a.last_batch_size) == (2400, 3.0, 3.0, 8)
    b = calculate(800, 32, epochs=3, warmup_fraction=0.05)
    assert (b.steps_per_epoch, b.total_steps, b.examples) == (25, 75, 2400)


def test_partial_last_batch_kept_or_dropped():
    kept = calculate(810, 8, epochs=1)
    assert (kept.steps_per_epoch, kept.last_batch_size, kept.examples) == (102, 2, 810)
    dropped = calculate(810, 8, epochs=1, drop_last=True)
    assert (dropped.steps_per_epoch, dropped.last_batch_size) == (101, 8)
    assert (dropped.dropped_per_epoch, dropped.examples) == (2, 808)


def test_small_and_large_data_sets():
    a = calculate(100, 8, epochs=3)
    assert (a.steps_per_epoch, a.total_steps, a.last_batch_size, a.examples) == (13, 39, 4, 300)
    assert calculate(50_000, 8, epochs=1).total_steps == 6_250


def test_tokens_processed():
    assert calculate(800, 8, epochs=3, tokens=400_000).tokens == 1_200_000
    assert calculate(800, 32, epochs=3, tokens_per_example=500).tokens == 1_200_000
    assert calculate(800, 8, epochs=3).tokens is None


def test_first_budget_limit_reached_wins():
    a = calculate(800, 8, epochs=3, max_steps=200)
    assert (a.total_steps, a.stopped_by) == (200, "max_steps")
    b = calculate(800, 8, epochs=3, max_steps=1000, max_examples=1000)
    assert (b.total_steps, b.stopped_by, b.examples) == (125, "max_examples", 1000)
    c = calculate(800, 8, epochs=3, max_tokens=100_000, tokens_per_example=500)
    assert (c.total_steps, c.stopped_by) == (25, "max_tokens")
    d = calculate(800, 8, epochs=3, max_steps=301)
    assert (d.total_steps, d.stopped_by) == (300, "max_epochs")


def test_fractional_epochs_are_exact():
    a = calculate(100, 8, epochs=1.5)  # 13 steps (100 examples) + 7 steps (56) >= 150
    assert (a.total_steps, a.examples, a.epochs) == (20, 156, 1.56)
    assert calculate(800, 8, epochs=0.3).total_steps == 30  # 240 examples, no float drift


def test_sampled_data_and_batch_split():
    a = calculate(None, 64, max_examples=20_000, accumulation=4, data_shards=2)
    assert (a.total_steps, a.examples, a.epochs, a.steps_per_epoch, a.tokens) == (
        313, 20_032, None, None, None)
    assert (a.micro_batch, a.per_device_batch, a.effective_batch) == (16, 8, 64)


@pytest.mark.parametrize("kwargs, key", [
    (dict(examples=800, batch_size=8), "budget"),
    (dict(examples=None, batch_size=8, epochs=1), "max_epochs"),
    (dict(examples=800, batch_size=12, epochs=1, accumulation=8), "batch_size"),
    (dict(examples=800, batch_size=1000, epochs=1, drop_last=True), "batch size 1000"),
    (dict(examples=800, batch_size=8, max_tokens=10), "max_tokens"),
    (dict(examples=800, batch_size=0, epochs=1), "batch_size"),
])
def test_inputs_that_describe_no_run(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        calculate(**kwargs)


def test_fixed_warmup_eating_the_run_warns():
    (w,) = [w for w in calculate(800, 32, epochs=3, warmup_steps=50).warnings if "fixed" in w]
    assert "50 steps" in w and "67%" in w and "75-step" in w
    assert not any("fixed" in w for w in calculate(800, 8, epochs=3, warmup_steps=10).warnings)


def test_run_too_short_for_its_schedule_warns():
    (w,) = calculate(800, 32, epochs=3, schedule="cosine").warnings
    assert "75 total steps" in w and "cosine" in w
    assert calculate(800, 32, epochs=3).warnings == []  # constant, no warm-up: nothing to do
    assert calculate(800, 8, epochs=3, schedule="cosine", warmup_fraction=0.05).warnings == []


def test_warmup_fraction_rounding_to_zero_warns():
    a = calculate(None, 8, max_steps=5, warmup_fraction=0.05)
    assert a.warmup_steps == 0 and any("no warm-up" in w for w in a.warnings)


def test_many_epochs_over_small_data_warns():
    a = calculate(100, 8, epochs=30)
    assert any("seen 30 times" in w for w in a.warnings)


def test_lr_by_rule_relative_to_reference():
    a = calculate(800, 32, epochs=3, batch_ref=8, lr_ref=0.1)
    assert a.lr_by_rule == pytest.approx({"linear": 0.4, "sqrt": 0.2, "constant": 0.1})
    assert calculate(800, 32, epochs=3).lr_by_rule == {}


def test_sweep_warnings_learning_rate_not_following_batch_size():
    def cfg(lr, **budget):
        return Config(batch=BatchConfig(sizes=[8, 512]), learning_rate=lr,
                      budget=BudgetConfig(**(budget or {"max_examples": 10_000})))

    assert "same learning rate" in sweep_warnings(cfg(LearningRateConfig(values=[0.1])))[0]
    assert "spans 2x" in sweep_warnings(cfg(LearningRateConfig(values=[0.1, 0.2])))[0]
    assert sweep_warnings(cfg(LearningRateConfig(min=1e-3, max=1.0, num=7))) == []
    ruled = LearningRateConfig(mode="rule", rule="linear", batch_ref=8, lr_ref=0.1)
    assert sweep_warnings(cfg(ruled)) == []
    assert "max_examples" in sweep_warnings(cfg(ruled, max_steps=100))[0]


def test_format_table_and_json():
    rows = [calculate(800, b, epochs=3, tokens=400_000, warmup_fraction=0.05) for b in (8, 32)]
    text = format_table(rows)
    assert "steps/epoch" in text and "1,200,000" in text
    assert text.splitlines()[-1].startswith("warning: batch size 32")
    assert json.loads(json.dumps([r.to_dict() for r in rows]))[1]["total_steps"] == 75


# ---------------------------------------------------------------- the command

CALC = ["plan", "--examples", "800", "--batch-size", "8", "--batch-size", "32", "--epochs", "3",
        "--warmup-fraction", "0.05"]


def test_cli_calculator_json(capsys):
    assert main(CALC + ["--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    picked = [{k: r[k] for k in ("batch_size", "effective_batch", "steps_per_epoch",
                                 "last_batch_size", "total_steps", "warmup_steps", "examples",
                                 "epochs", "tokens")} for r in rows]
    assert picked == [
        dict(batch_size=8, effective_batch=8, steps_per_epoch=100, last_batch_size=8,
             total_steps=300, warmup_steps=15, examples=2400, epochs=3.0, tokens=None),
        dict(batch_size=32, effective_batch=32, steps_per_epoch=25, last_batch_size=32,
             total_steps=75, warmup_steps=4, examples=2400, epochs=3.0, tokens=None)]
    assert rows[0]["warnings"] == [] and len(rows[1]["warnings"]) == 1


def test_cli_table(capsys):
    assert main(CALC + ["--tokens", "400000"]) == 0
    assert "1,200,000" in capsys.readouterr().out


@pytest.mark.parametrize("argv, key", [
    (["plan", "--examples", "800", "--batch-size", "0", "--epochs", "3"], "--batch-size"),
    (["plan", "--examples", "800", "--batch-size", "8"], "budget"),
    (["plan", "--examples", "800", "--batch-size", "8", "--epochs", "3", "--lr-ref", "0.1"],
     "--lr-ref"),
    (["plan", "missing.yaml"], "missing.yaml"),
    (["plan", "missing.yaml", "--batch-size", "8"], "--batch-size"),
    (["plan"], "--batch-size"),
])
def test_cli_bad_input_is_one_line_and_exit_2(capsys, argv, key):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and key in err and err.count("\n") == 1


def test_cli_process_exit_code_and_no_jax_import():
    bad = subprocess.run([sys.executable, "-m", "scaling.cli", "plan", "--examples", "800",
                          "--batch-size", "0", "--epochs", "3"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    code = ("import sys; from scaling.cli.main import main; main(['plan', '--examples', '8', "
            "'--batch-size', '8', '--epochs', '1']); print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert out.strip().endswith("False")


@pytest.mark.parametrize("args", [["budget.max_examples=4800", "--json"],
                                  ["--json", "budget.max_examples=4800"]])
def test_cli_config_plan(tmp_path, capsys, args):
    tasks = pytest.importorskip("scaling.tasks", exc_type=ImportError)
    if "nqm" not in tasks.TASKS:
        pytest.skip("task nqm not registered yet")
    path = tmp_path / "nqm.yaml"
    path.write_text(textwrap.dedent("""
        task: {name: nqm, dim: 10}
        batch: {sizes: [8, 32]}
        learning_rate: {values: [0.05, 0.07]}
        schedule: {name: cosine, warmup_fraction: 0.05}
        budget: {max_examples: 2400}
    """))
    assert main(["plan", str(path), *args]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    assert [(r["batch_size"], r["total_steps"], r["warmup_steps"]) for r in rows] == [
        (8, 600, 30), (32, 150, 8)]
    assert rows[0]["epochs"] is None and rows[0]["steps_per_epoch"] is None
    assert rows[1]["lr_by_rule"]["linear"] == pytest.approx(4 * (0.05 * 0.07) ** 0.5)
    assert "grid spans 1.4x" in captured.err  # sweep warning on stderr, stdout stays JSON


@pytest.mark.parametrize("extra", ["--nope", "stray"])
def test_cli_refuses_what_is_neither_an_option_nor_an_override(tmp_path, capsys, extra):
    path = tmp_path / "c.yaml"
    path.write_text("task: {name: nqm, dim: 4}\nbatch: {sizes: [8]}\n")
    assert main(["plan", str(path), "--json", extra]) == 2
    assert f"unrecognized arguments: {extra}" in capsys.readouterr().err


def test_a_wsd_runs_phases_per_batch_size():
    """800 examples, 3 epochs, 5% warm-up, a 20% decay: B = 8 has 300 steps, 15 warming up, 60
    decaying (0.2 x 300), 225 stable; B = 32 has 75 steps: 4, 15 (0.2 x 75 = 15), 56."""
    a = calculate(800, 8, epochs=3, warmup_fraction=0.05, schedule="wsd", decay_fraction=0.2)
    assert (a.warmup_steps, a.stable_steps, a.decay_steps) == (15, 225, 60)
    b = calculate(800, 32, epochs=3, warmup_fraction=0.05, schedule="wsd")  # 0.2 by default
    assert (b.warmup_steps, b.stable_steps, b.decay_steps) == (4, 56, 15)
    table = format_table([a, b]).splitlines()
    assert table[0].split()[8:11] == ["warm-up", "stable", "decay"]  # "last batch" is two words
    assert table[1].split()[7:10] == ["15", "225", "60"]
    assert "stable" not in format_table([calculate(800, 8, epochs=3, schedule="cosine")])


def test_a_wsd_decay_that_overlaps_the_warmup_or_is_no_share_is_refused():
    with pytest.raises(ConfigError, match=r"at batch size 8 the warm-up \(240 steps\) and the "
                                          r"decay \(90 steps\) overlap in the 300-step run"):
        calculate(800, 8, epochs=3, warmup_fraction=0.8, schedule="wsd", decay_fraction=0.3)
    for bad in (0.0, 1.5):
        with pytest.raises(ConfigError, match="decay_fraction"):
            calculate(800, 8, epochs=3, schedule="wsd", decay_fraction=bad)
    with pytest.raises(ConfigError, match="with the wsd schedule only"):
        calculate(800, 8, epochs=3, schedule="cosine", decay_fraction=0.2)
