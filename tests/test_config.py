"""The config layer (scaling.config: load, validate, learning_rates): loading, overrides,
serialisation and validation; every bad value fails with one ConfigError naming the full key,
the value and what is accepted. No data set is built."""

import copy
import json
import math
import re
from pathlib import Path

import pytest
import yaml

from scaling.config import (Config, ConfigError, apply_overrides, from_dict, learning_rates, load,
                            parse_target, to_dict, to_json, to_yaml, validate_devices)
from scaling.config.load import load_folder
from scaling.train.spec import group_spec

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"

BASE = {
    "task": {"name": "nqm", "dim": 10},
    "model": {"name": "default"},
    "budget": {"max_steps": 100},
    "learning_rate": {"values": [0.1]},
    "batch": {"sizes": [8]},
}


def nqm(**sections) -> dict:
    """BASE with whole sections replaced (`seeds=[...]`) or single keys set (`batch__sizes=[...]`)."""
    data = copy.deepcopy(BASE)
    for name, value in sections.items():
        section, _, key = name.partition("__")
        if key:
            data.setdefault(section, {})[key] = value
        else:
            data[section] = value
    return data


def fails(data: dict, *fragments: str) -> str:
    """from_dict(data) raises ConfigError whose message holds every fragment (literally)."""
    with pytest.raises(ConfigError) as info:
        from_dict(data)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


# ---------------------------------------------------------------- loading and serialisation


def test_quickstart_loads():
    cfg = load(QUICKSTART)
    assert isinstance(cfg, Config)
    assert cfg.name == "quickstart"
    assert cfg.task.name == "mnist1d"
    assert cfg.task.options.num_samples == 30000
    assert cfg.model.name == "mlp"
    assert cfg.optimizer.name == "momentum"
    assert cfg.batch.sizes == [2 ** k for k in range(4, 13)]
    assert cfg.budget.max_examples == 480000
    assert cfg.targets == ["eval_loss<=1.2", "eval_accuracy>=0.7", "eval_loss<=0.7"]


@pytest.mark.parametrize("source", ["quickstart", "nqm"])
def test_yaml_round_trip_and_json(source):
    cfg = load(QUICKSTART) if source == "quickstart" else from_dict(nqm(targets=["eval_loss<=0.5"]))
    again = from_dict(yaml.safe_load(to_yaml(cfg)))
    assert again == cfg
    assert to_dict(again) == to_dict(cfg)
    parsed = json.loads(to_json(cfg))
    assert parsed == to_dict(cfg)
    assert from_dict(parsed) == cfg
    assert parsed["task"]["name"] == cfg.task.name  # task options flat next to the name


def test_round_trip_keeps_task_options_flat():
    cfg = from_dict(nqm(task={"name": "nqm", "dim": 10, "h_power": 2}))
    out = to_dict(cfg)
    assert out["task"]["dim"] == 10 and out["task"]["h_power"] == 2.0
    assert "options" not in out["task"]
    assert from_dict(out) == cfg


def test_load_file_with_overrides(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(nqm()) + "optimizer:\n  eps: 1e-8\neval:\n")
    cfg = load(path, ["batch.sizes=[8,16]", "eval.every=5"])
    assert cfg.optimizer.eps == 1e-8  # PyYAML alone reads 1e-8 as a string
    assert cfg.batch.sizes == [8, 16]
    assert cfg.eval.every == 5  # an empty (null) section accepts overrides
    assert cfg.task.options.dim == 10


# ---------------------------------------------------------------- overrides


def test_overrides_values_and_types():
    data = apply_overrides(nqm(), [
        "batch.sizes=[8,16]", "optimizer.name=adam", "learning_rate.values=[0.1]", "task.dim=10",
        "optimizer.eps=1e-3", "batch.drop_last=true", "seeds=[0, 1]", "name=my study"])
    cfg = from_dict(data)
    assert cfg.batch.sizes == [8, 16]
    assert cfg.optimizer.name == "adam"
    assert cfg.learning_rate.values == [0.1]
    assert cfg.task.options.dim == 10
    assert cfg.optimizer.eps == 1e-3 and isinstance(cfg.optimizer.eps, float)
    assert cfg.batch.drop_last is True
    assert cfg.seeds == [0, 1]
    assert cfg.name == "my study"


def test_override_value_types():
    data = apply_overrides({}, ["a.f=1e-3", "a.g=-2.5E+2", "a.b=true", "a.i=7", "a.s=adam",
                                "a.l=[8, 16]", "a.n=null"])
    assert data["a"] == {"f": 0.001, "g": -250.0, "b": True, "i": 7, "s": "adam", "l": [8, 16],
                         "n": None}
    assert isinstance(data["a"]["f"], float) and isinstance(data["a"]["i"], int)


def test_overrides_do_not_mutate_input():
    data = nqm()
    apply_overrides(data, ["batch.sizes=[32]", "optimizer.name=adam"])
    assert data == BASE


def test_override_task_dim_on_quickstart_style_nqm(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(nqm()))
    assert load(path, ["task.dim=3"]).task.options.dim == 3
    with pytest.raises(ConfigError, match=r"task\.dim: got 0"):
        load(path, ["task.dim=0"])


def test_malformed_override():
    with pytest.raises(ConfigError, match=r"override 'batch\.sizes': expected section\.key=value"):
        apply_overrides(nqm(), ["batch.sizes"])


def test_override_with_unparsable_value():
    with pytest.raises(ConfigError, match=r"override 'batch\.sizes=\[8,'.*\[8, 16\]"):
        apply_overrides(nqm(), ["batch.sizes=[8,"])


def test_override_into_a_non_section():
    with pytest.raises(ConfigError, match=r"override 'seeds\.x=1': seeds is not a section"):
        apply_overrides(nqm(seeds=[0]), ["seeds.x=1"])


def test_override_unknown_key_is_caught_by_validation():
    with pytest.raises(ConfigError, match=r"optimizer\.momentun: unknown key"):
        from_dict(apply_overrides(nqm(), ["optimizer.momentun=0.5"]))


def test_missing_config_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=re.escape(f"config file {str(missing)!r} does not exist")):
        load(missing)


def test_config_file_with_invalid_yaml(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("batch:\n  sizes: [8, 16\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*not valid YAML"):
        load(path)


def test_config_file_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="config: got .*expected a mapping"):
        load(path)
    with pytest.raises(ConfigError, match="config: got .*expected a mapping"):
        load(path, ["batch.sizes=[8]"])


# ---------------------------------------------------------------- unknown keys and types


def test_unknown_top_level_key():
    fails(nqm(optimiser={"name": "adam"}), "optimiser: unknown key", "accepted keys:", "optimizer",
          "learning_rate")


def test_unknown_nested_key():
    fails(nqm(optimizer__momentun=0.9), "optimizer.momentun: unknown key",
          "accepted keys: name, momentum, weight_decay, b1, b2, eps")


def test_unknown_task_option():
    fails(nqm(task__dimm=3), "task.dimm: unknown key", "accepted keys:", "dim", "h_power")


def test_task_option_of_another_task():
    fails(nqm(task__num_samples=100), "task.num_samples: unknown key", "dim")


def test_unknown_task_name():
    fails(nqm(task={"name": "cifar"}), "task.name: got 'cifar'", "charlm", "digits", "linreg",
          "mnist1d", "nqm")


def test_task_section_not_a_mapping():
    fails(nqm(task=["nqm"]), "task: got ['nqm']", "expected a mapping")


@pytest.mark.parametrize("section, value, fragments", [
    ("batch__sizes", "abc", ["batch.sizes: got 'abc'", "expected a list of integers"]),
    ("seeds", [1.5], ["seeds[0]: got 1.5", "expected an integer"]),
    ("batch__accumulation", True, ["batch.accumulation: got True", "expected an integer"]),
    ("budget__max_steps", True, ["budget.max_steps: got True", "expected an integer or null"]),
    ("task__dim", True, ["task.dim: got True", "expected an integer"]),
    ("task__dim", 10.0, ["task.dim: got 10.0", "expected an integer"]),
    ("optimizer__momentum", "0.9", ["optimizer.momentum: got '0.9'", "expected a number"]),
    ("batch__drop_last", 1, ["batch.drop_last: got 1", "expected true/false"]),
    ("learning_rate__values", "0.1", ["learning_rate.values: got '0.1'",
                                      "expected a list of numbers or null"]),
    ("targets", "eval_loss<=0.5", ["targets: got 'eval_loss<=0.5'", "expected a list of strings"]),
    ("batch", [8], ["batch: got [8]", "expected a mapping of keys"]),
])
def test_wrong_types(section, value, fragments):
    fails(nqm(**{section: value}), *fragments)


def test_ints_accepted_where_floats_are():
    cfg = from_dict(nqm(learning_rate__values=[1], optimizer={"momentum": 0}))
    assert cfg.learning_rate.values == [1.0] and isinstance(cfg.learning_rate.values[0], float)
    assert cfg.optimizer.momentum == 0.0 and isinstance(cfg.optimizer.momentum, float)


def test_config_not_a_mapping():
    with pytest.raises(ConfigError, match="config: got .*expected a mapping of sections"):
        from_dict([BASE])


# ---------------------------------------------------------------- values


@pytest.mark.parametrize("sizes, bad", [([0], 0), ([8, -8], -8), ([-1], -1)])
def test_non_positive_batch_size(sizes, bad):
    fails(nqm(batch__sizes=sizes), f"batch.sizes: got {bad}", "positive integers")


def test_duplicate_batch_sizes():
    fails(nqm(batch__sizes=[8, 8]), "batch.sizes: got [8, 8]", "distinct")


def test_empty_batch_sizes():
    fails(nqm(batch__sizes=[]), "batch.sizes: got []", "non-empty")


def test_accumulation_must_divide_batch_sizes():
    fails(nqm(batch={"sizes": [8, 12], "accumulation": 8}), "batch.sizes: got 12",
          "a multiple of batch.accumulation=8")
    fails(nqm(batch={"sizes": [8], "accumulation": 0}), "batch.accumulation: got 0", ">= 1")


def test_duplicate_seeds():
    fails(nqm(seeds=[0, 1, 0]), "seeds: got [0, 1, 0]", "distinct seeds")


def test_empty_seeds():
    fails(nqm(seeds=[]), "seeds: got []", "non-empty list of integers")


@pytest.mark.parametrize("fraction", [1.0, 1.5, -0.1])
def test_warmup_fraction_out_of_range(fraction):
    fails(nqm(schedule={"warmup_fraction": fraction}), f"schedule.warmup_fraction: got {fraction}",
          "0 <= fraction < 1")


def test_warmup_fraction_just_below_one_is_fine():
    assert from_dict(nqm(schedule={"warmup_fraction": 0.99})).schedule.warmup_fraction == 0.99


def test_unknown_optimizer():
    fails(nqm(optimizer={"name": "adagrad"}), "optimizer.name: got 'adagrad'",
          "one of sgd, momentum, nesterov, adam, adamw")


def test_unknown_schedule():
    fails(nqm(schedule={"name": "step"}), "schedule.name: got 'step'", "one of constant, linear, cosine, wsd")


@pytest.mark.parametrize("schedule, message", [
    ({"name": "cosine", "decay_fraction": 0.2}, "schedule.decay_fraction: got 0.2, expected unset"),
    ({"name": "linear", "decay_shape": "sqrt"}, "schedule.decay_shape: got 'sqrt', expected unset"),
    ({"name": "wsd", "decay_fraction": 0.0}, "schedule.decay_fraction: got 0.0, expected 0 <"),
    ({"name": "wsd", "decay_fraction": 1.2}, "schedule.decay_fraction: got 1.2, expected 0 <"),
    ({"name": "wsd", "decay_shape": "step"}, "schedule.decay_shape: got 'step', expected one of "
                                            "linear, cosine, sqrt"),
])
def test_a_wsd_decay_is_checked_and_only_wsd_has_one(schedule, message):
    fails(nqm(schedule=schedule), message)


def test_a_wsd_schedule_reaches_the_compiled_program():
    cfg = from_dict(nqm(schedule={"name": "wsd", "decay_shape": "sqrt"}))
    spec, arith = group_spec(cfg, 8, 1)
    assert (spec.schedule.name, spec.schedule.decay_shape) == ("wsd", "sqrt")
    assert spec.schedule.decay_steps == arith.decay_steps == round(0.2 * arith.total_steps) > 0


def test_unknown_lr_mode():
    fails(nqm(learning_rate={"mode": "search", "values": [0.1]}), "learning_rate.mode: got 'search'",
          "one of grid, rule")


def test_unknown_lr_rule():
    fails(nqm(learning_rate={"mode": "rule", "rule": "cubic", "lr_ref": 0.1}),
          "learning_rate.rule: got 'cubic'", "one of linear, sqrt, constant, noise_scale")


def test_rule_needs_lr_ref():
    fails(nqm(learning_rate={"mode": "rule", "rule": "linear"}), "learning_rate.lr_ref: got None",
          "positive number")


def test_noise_scale_rule_needs_its_parameters():
    fails(nqm(learning_rate={"mode": "rule", "rule": "noise_scale", "b_noise": 10.0}),
          "learning_rate.eps_max: got None", "noise_scale")


def test_surge_rule_needs_its_parameters_and_sets_each_batch_size_by_them():
    fails(nqm(learning_rate={"mode": "rule", "rule": "surge", "eta_max": 0.01}),
          "learning_rate.b_peak: got None", "surge")
    fails(nqm(learning_rate={"mode": "rule", "rule": "surge", "eta_max": -1.0, "b_peak": 64}),
          "learning_rate.eta_max: got -1.0", "surge")
    cfg = from_dict(nqm(learning_rate={"mode": "rule", "rule": "surge", "eta_max": 0.01,
                                       "b_peak": 64}, batch__sizes=[16, 64, 256]))
    expected = {16: 0.008, 64: 0.01, 256: 0.008}  # 2 eta_max / (2 + 1/2) either side
    for size, lr in expected.items():
        assert learning_rates(cfg.learning_rate, size) == [pytest.approx(lr, rel=1e-12)]


def test_grid_needs_values_or_range():
    fails(nqm(learning_rate={}), "learning_rate:", "values", "min, max and num")
    fails(nqm(learning_rate={"values": []}), "learning_rate.values: got []", "non-empty")
    fails(nqm(learning_rate={"values": [0.1, -0.1]}), "learning_rate.values: got [0.1, -0.1]",
          "positive numbers")
    fails(nqm(learning_rate={"min": 0.3, "max": 0.1, "num": 3}), "learning_rate.min: got 0.3",
          "0 < min <= max")


def test_wrong_model_for_task():
    fails(nqm(model={"name": "mlp"}), "model.name: got 'mlp'", "default", "nqm")


def test_nqm_option_values():
    fails(nqm(task={"name": "nqm", "dim": 0}), "task.dim: got 0", "positive")


# ---------------------------------------------------------------- budget


def test_budget_without_any_limit():
    message = fails(nqm(budget={}), "budget:", "no limit",
                    "max_steps, max_examples, max_epochs, max_tokens")
    data = nqm()
    del data["budget"]
    assert fails(data) == message


def test_max_epochs_on_sampled_task():
    fails(nqm(budget={"max_epochs": 2}), "budget.max_epochs: got 2.0", "null", "nqm",
          "samples fresh data")


def test_max_tokens_on_task_without_tokens():
    fails(nqm(budget={"max_steps": 10, "max_tokens": 1000}), "budget.max_tokens: got 1000", "null",
          "nqm has no tokens")


def test_max_examples_smaller_than_one_batch():
    fails(nqm(batch__sizes=[8, 64], budget={"max_examples": 32}), "budget.max_examples: got 32",
          "at least one batch", "64")
    assert from_dict(nqm(batch__sizes=[8, 64], budget={"max_examples": 64})).budget.max_examples == 64


@pytest.mark.parametrize("key", ["max_steps", "max_examples"])
def test_non_positive_limit(key):
    fails(nqm(budget={key: 0}), f"budget.{key}: got 0", "positive")


def test_epochs_allowed_on_finite_task():
    cfg = load(QUICKSTART, ["budget.max_examples=null", "budget.max_epochs=2"])
    assert cfg.budget.max_epochs == 2.0 and cfg.budget.max_examples is None


# ---------------------------------------------------------------- targets


def test_parse_target():
    assert parse_target("eval_loss<=0.5") == ("eval_loss", "<=", 0.5)
    assert parse_target(" eval_accuracy >= 0.9 ") == ("eval_accuracy", ">=", 0.9)
    assert parse_target("train_loss<=1e-3") == ("train_loss", "<=", 1e-3)


def test_target_unknown_metric():
    fails(nqm(targets=["eval_los<=0.5"]), "targets: got 'eval_los<=0.5'",
          "train_loss, eval_loss, eval_accuracy")


@pytest.mark.parametrize("text", ["eval_loss < 0.5", "eval_loss=0.5", "eval_loss<=", "<=0.5",
                                  "eval_loss<=abc"])
def test_target_bad_syntax(text):
    fails(nqm(targets=[text]), f"targets: got {text!r}", "METRIC<=VALUE or METRIC>=VALUE")


def test_target_metric_task_does_not_report():
    fails(nqm(targets=["eval_accuracy>=0.9"]), "targets: got 'eval_accuracy>=0.9'",
          "task nqm reports: train_loss, eval_loss")


# ---------------------------------------------------------------- devices


def test_validate_devices_default_mesh():
    assert validate_devices(from_dict(nqm(batch__sizes=[8, 16])), 8) == (1, 8)


def test_validate_devices_runs():
    assert validate_devices(from_dict(nqm(batch__sizes=[8], parallel={"runs": 2})), 8) == (2, 4)
    assert validate_devices(from_dict(nqm(batch__sizes=[8], parallel={"runs": 8})), 8) == (8, 1)


def test_validate_devices_runs_not_a_divisor():
    with pytest.raises(ConfigError, match=r"parallel\.runs: got 3, expected a divisor of the 8 devices"):
        validate_devices(from_dict(nqm(batch__sizes=[24], parallel={"runs": 3})), 8)


def test_validate_devices_data_times_runs():
    with pytest.raises(ConfigError, match=r"parallel\.data: got 3, .*runs x data = 8 devices"):
        validate_devices(from_dict(nqm(batch__sizes=[24], parallel={"data": 3})), 8)
    assert validate_devices(from_dict(nqm(batch__sizes=[8], parallel={"runs": 2, "data": 4})), 8) \
        == (2, 4)


def test_validate_devices_batch_not_divisible():
    with pytest.raises(ConfigError, match=r"batch\.sizes: got 12, expected a multiple of data shards "
                                          r"x accumulation = 8 x 1 = 8"):
        validate_devices(from_dict(nqm(batch__sizes=[8, 12])), 8)
    with pytest.raises(ConfigError, match=r"batch\.sizes: got 16, .*= 8 x 4 = 32"):
        validate_devices(from_dict(nqm(batch={"sizes": [16], "accumulation": 4})), 8)
    cfg = from_dict(nqm(batch={"sizes": [12], "accumulation": 3}, parallel={"runs": 2}))
    assert validate_devices(cfg, 8) == (2, 4)  # 12 = 4 shards x 3 micro-batches


@pytest.mark.parametrize("section, value, key", [
    ("parallel", {"runs": 0}, "parallel.runs"),
    ("parallel", {"data": 0}, "parallel.data"),
    ("gns", {"groups": 1}, "gns.groups"),
    ("train", {"divergence_factor": 1.0}, "train.divergence_factor"),
    ("eval", {"every": 0}, "eval.every"),
    ("optimizer", {"momentum": 1.0}, "optimizer.momentum"),
])
def test_other_ranges(section, value, key):
    fails(nqm(**{section: value}), f"{key}: got {next(iter(value.values()))!r}", "expected")


# ---------------------------------------------------------------- learning rates


def test_learning_rates_explicit_values():
    cfg = from_dict(nqm(batch__sizes=[8, 16], learning_rate={"values": [0.3, 0.1, 1]}))
    assert learning_rates(cfg.learning_rate, 8) == [0.3, 0.1, 1.0]
    assert learning_rates(cfg.learning_rate, 16) == [0.3, 0.1, 1.0]


def test_learning_rates_log_spaced():
    cfg = from_dict(nqm(learning_rate={"min": 0.003, "max": 0.3, "num": 5}))
    lrs = learning_rates(cfg.learning_rate, 8)
    assert len(lrs) == 5 and all(isinstance(v, float) for v in lrs)
    for k, lr in enumerate(lrs):
        assert lr == pytest.approx(0.003 * 10 ** (k / 2), rel=1e-12)
    assert lrs[0] == pytest.approx(0.003, rel=1e-15) and lrs[-1] == pytest.approx(0.3, rel=1e-15)
    ratios = [b / a for a, b in zip(lrs, lrs[1:])]
    assert ratios == pytest.approx([math.sqrt(10)] * 4, rel=1e-12)


def test_learning_rates_single_point_grid():
    cfg = from_dict(nqm(learning_rate={"min": 0.1, "max": 0.1, "num": 1}))
    assert learning_rates(cfg.learning_rate, 8) == pytest.approx([0.1], rel=1e-15)


@pytest.mark.parametrize("rule, expected", [
    ("linear", {8: 0.1, 32: 0.4, 128: 1.6}),
    ("sqrt", {8: 0.1, 32: 0.2, 128: 0.4}),
    ("constant", {8: 0.1, 32: 0.1, 128: 0.1}),
])
def test_learning_rates_rule(rule, expected):
    cfg = from_dict(nqm(batch__sizes=[8, 32, 128],
                        learning_rate={"mode": "rule", "rule": rule, "batch_ref": 8, "lr_ref": 0.1}))
    for size, lr in expected.items():
        (got,) = learning_rates(cfg.learning_rate, size)
        assert got == pytest.approx(lr, rel=1e-12)


def test_rule_batch_ref_defaults_to_smallest_batch():
    cfg = from_dict(nqm(batch__sizes=[64, 16, 32],
                        learning_rate={"mode": "rule", "rule": "linear", "lr_ref": 0.05}))
    assert cfg.learning_rate.batch_ref == 16
    assert learning_rates(cfg.learning_rate, 16) == pytest.approx([0.05], rel=1e-12)
    assert learning_rates(cfg.learning_rate, 64) == pytest.approx([0.2], rel=1e-12)
    assert from_dict(yaml.safe_load(to_yaml(cfg))) == cfg


def test_rule_batch_ref_not_in_sizes():
    cfg = from_dict(nqm(batch__sizes=[32],
                        learning_rate={"mode": "rule", "rule": "sqrt", "batch_ref": 128, "lr_ref": 0.4}))
    assert learning_rates(cfg.learning_rate, 32) == pytest.approx([0.2], rel=1e-12)


def test_lr_grid_and_range_together_are_refused():
    data = {"task": {"name": "nqm", "dim": 10}, "budget": {"max_steps": 100},
            "learning_rate": {"values": [0.1], "min": 0.01, "max": 1.0, "num": 3}}
    with pytest.raises(ConfigError, match=r"learning_rate\.values.*not both"):
        from_dict(data)
    data["learning_rate"] = {"mode": "rule", "rule": "linear", "lr_ref": 0.1, "values": [0.1]}
    with pytest.raises(ConfigError, match=r"learning_rate\.values.*mode: rule"):
        from_dict(data)


CENTERED = {"mode": "centered", "rule": "sqrt", "batch_ref": 8, "lr_ref": 0.1, "span": 4.0, "num": 5}


def test_centered_grid_is_log_spaced_around_the_rule():
    cfg = from_dict(nqm(batch__sizes=[8, 32], targets=["eval_loss<=0.5"], learning_rate=CENTERED))
    assert learning_rates(cfg.learning_rate, 8) == pytest.approx([0.025, 0.05, 0.1, 0.2, 0.4])
    assert learning_rates(cfg.learning_rate, 32) == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8])
    assert from_dict(yaml.safe_load(to_yaml(cfg))) == cfg


@pytest.mark.parametrize("change, fragments", [
    ({"span": None}, ("learning_rate.span: got None", "> 1")),
    ({"span": 1.0}, ("learning_rate.span: got 1.0", "> 1")),
    ({"num": 1}, ("learning_rate.num: got 1", ">= 2")),
    ({"values": [0.1]}, ("learning_rate.values: got [0.1]", "mode: centered")),
    ({"max_extensions": 2}, ("max_extensions",)),  # the search replaced the extensions
    ({"lr_ref": None}, ("learning_rate.lr_ref: got None",)),
])
def test_centered_mode_checks(change, fragments):
    fails(nqm(targets=["eval_loss<=0.5"], learning_rate={**CENTERED, **change}), *fragments)


def test_centered_mode_needs_no_target():
    """Without targets a centred grid is trained as it is: there is no optimum to search."""
    cfg = from_dict(nqm(learning_rate=CENTERED))
    assert cfg.targets == [] and cfg.learning_rate.mode == "centered"


def test_span_only_with_centered_mode():
    fails(nqm(learning_rate={"values": [0.1], "span": 2.0}), "learning_rate.span: got 2.0",
          "mode: centered")


# ---------------------------------------------------------------- optimizer scalars as grid axes


def test_optimizer_scalars_accept_lists_of_numbers():
    cfg = from_dict(nqm(optimizer={"name": "adamw", "weight_decay": [0, 1e-4], "b2": [0.99]}))
    assert cfg.optimizer.weight_decay == [0.0, 1e-4] and cfg.optimizer.b2 == [0.99]
    assert all(isinstance(v, float) for v in cfg.optimizer.weight_decay)
    assert from_dict(yaml.safe_load(to_yaml(cfg))).optimizer == cfg.optimizer


@pytest.mark.parametrize("optimizer, fragments", [
    ({"name": "momentum", "momentum": []}, ["optimizer.momentum: got []", "non-empty list"]),
    ({"name": "momentum", "momentum": [0.9, "a"]},
     ["optimizer.momentum: got [0.9, 'a']", "expected a number or a list of numbers"]),
    ({"name": "momentum", "momentum": [0.5, 1.0]},
     ["optimizer.momentum[1]: got 1.0", "0 <= momentum < 1"]),
    ({"name": "sgd", "weight_decay": [0.0, -1e-4]}, ["optimizer.weight_decay[1]: got -0.0001", ">= 0"]),
    ({"name": "adam", "b2": [0.9, 1.0]}, ["optimizer.b2[1]: got 1.0", "0 <= b2 < 1"]),
    ({"name": "momentum", "momentum": [0.9, 0.9]}, ["optimizer.momentum: got [0.9, 0.9]", "distinct"]),
    ({"name": "sgd", "momentum": [0.0, 0.9]},
     ["optimizer.momentum: got [0.0, 0.9]", "optimizer sgd does not use momentum",
      "used by momentum, nesterov"]),
    ({"name": "adam", "momentum": [0.0, 0.9]}, ["optimizer adam does not use momentum"]),
    ({"name": "momentum", "b2": [0.99, 0.999]},
     ["optimizer.b2: got [0.99, 0.999]", "optimizer momentum does not use b2", "adam, adamw"]),
])
def test_bad_optimizer_axes(optimizer, fragments):
    fails(nqm(optimizer=optimizer), *fragments)


def test_unused_scalar_is_still_fine_and_still_range_checked():
    from_dict(nqm(optimizer={"name": "adam", "momentum": 0.5}))
    fails(nqm(optimizer={"name": "adam", "momentum": 1.5}), "optimizer.momentum: got 1.5")


def test_optimizer_axes_are_refused_with_a_centred_grid():
    fails(nqm(targets=["eval_loss<=0.5"], learning_rate=CENTERED,
              optimizer={"name": "momentum", "momentum": [0.0, 0.9]}),
          "optimizer.momentum: got [0.0, 0.9]", "learning_rate.mode: centered")


# ---------------------------------------------------------------- learning-rate search, stopping


@pytest.mark.parametrize("key, value, fragment", [
    ("learning_rate__resolution", 1.0, "learning_rate.resolution: got 1.0, expected a number > 1"),
    ("learning_rate__resolution", 0.8, "learning_rate.resolution: got 0.8"),
    ("learning_rate__max_rounds", 0, "learning_rate.max_rounds: got 0, expected an integer >= 1"),
    ("learning_rate__floor", 0.0, "learning_rate.floor: got 0.0, expected a positive"),
    ("train__dominated_margin", -0.1, "train.dominated_margin: got -0.1, expected a number >= 0"),
    ("train__min_chunks", 0, "train.min_chunks: got 0, expected a positive integer"),
    ("train__repack", "sometimes", "train.repack: got 'sometimes', expected auto, true or false"),
    ("budget__reading_extension", 0.5, "budget.reading_extension: got 0.5, expected a factor >= 1"),
    ("budget__reading_extension", True, "budget.reading_extension: got True"),
    ("learning_rate__search", "maybe", "learning_rate.search: got 'maybe', expected true/false"),
])
def test_bad_search_and_stopping_settings_name_the_key(key, value, fragment):
    message = fails(nqm(**{key: value}), fragment)
    assert "\n" not in message


def test_short_runs_train_in_at_least_min_chunks_chunks():
    """chunk_steps 100, min_chunks 16: quickstart's B = 4,096 (120 steps) in chunks of
    ceil(120 / 16) = 8, B = 1,024 (480) of 30, B = 256 (1,880) of 100; min_chunks 1 keeps
    chunk_steps, cut to the run."""
    train = from_dict(nqm()).train
    assert (train.chunk_steps, train.min_chunks) == (100, 16)
    assert [train.chunk_for(n) for n in (120, 480, 1_880, 5)] == [8, 30, 100, 1]
    whole = from_dict(nqm(train__min_chunks=1)).train
    assert [whole.chunk_for(n) for n in (120, 480, 1_880)] == [100, 100, 100]


def test_search_defaults_and_switches_read_from_yaml(tmp_path):
    cfg = from_dict(nqm())
    lr, train, budget = cfg.learning_rate, cfg.train, cfg.budget
    assert (lr.search, lr.resolution, lr.max_rounds, lr.floor, lr.searched) == (
        True, 1.25, 5, None, True)
    assert (train.stop_dominated, train.dominated_margin) == (True, 0.1)
    assert budget.extension_factor == 1.5
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(BASE) + "")
    off = load(path, ["learning_rate.search=off", "learning_rate.max_rounds=0",
                      "budget.reading_extension=off", "train.stop_dominated=off"])
    assert not off.learning_rate.searched and off.budget.extension_factor == 1.0
    assert not off.train.stop_dominated
    rule = from_dict(nqm(learning_rate={"mode": "rule", "lr_ref": 0.1}))
    assert rule.learning_rate.search and not rule.learning_rate.searched  # one rate: no search
    assert from_dict(nqm(budget__reading_extension=1)).budget.extension_factor == 1.0
    assert from_dict(to_dict(from_dict(nqm(budget__reading_extension=False)))).budget \
        .reading_extension is False


# ---------------------------------------------------------------- the analysis view


def test_the_fixed_budget_view_trains_every_run_to_its_budget():
    cfg = from_dict(nqm(analysis={"view": "fixed_budget", "metric": "eval_loss"}))
    assert cfg.targets == [] and cfg.train.stop_at_targets is False
    both = from_dict(nqm(analysis__view="both", targets=["eval_loss<=0.1"]))
    assert both.train.stop_at_targets is False
    assert from_dict(nqm(targets=["eval_loss<=0.1"])).train.stop_at_targets is True
    assert group_spec(cfg, 8, 1)[0].stopping.stop_at_targets is False  # the engine's reading of it


def test_the_view_and_its_metric_are_checked():
    fails(nqm(analysis__view="final"), "analysis.view: got 'final'",
          "steps, fixed_budget, both")
    fails(nqm(analysis__view="fixed_budget", analysis__metric="eval_accuracy"),
          "analysis.metric: got 'eval_accuracy'", "task nqm reports")


def test_a_folder_written_before_a_key_was_retired_still_reads(tmp_path):
    """A sweep.yaml from before the search replaced the centred grid's extensions holds
    learning_rate.max_extensions: the folder reads (the key dropped), a config is refused."""
    data = {"task": {"name": "nqm"}, "budget": {"max_steps": 5},
            "learning_rate": {"mode": "centered", "rule": "linear", "lr_ref": 0.1,
                              "batch_ref": 8, "num": 3, "span": 2.0, "max_extensions": 1}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    assert load_folder(path).learning_rate.num == 3
    with pytest.raises(ConfigError, match="max_extensions"):
        load(path)
