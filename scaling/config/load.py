"""YAML in, typed Config out: coercion with messages that name the key, `section.key=value`
overrides, and the plain-data forms written beside the results."""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from scaling.config.names import budget_views
from scaling.config.schema import Config, ModelConfig, TaskConfig
from scaling.config.validate import validate
from scaling.errors import ConfigError, need
from scaling.tasks.gpt_shapes import PRESETS as GPT_PRESETS
from scaling.tasks import is_import_path, task_class


class _YAMLLoader(yaml.SafeLoader):
    """safe_load that reads 1e-3 as a float, as YAML 1.2 does (PyYAML alone gives the string)."""


_YAMLLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def _yaml_load(text: str) -> Any:
    return yaml.load(text, Loader=_YAMLLoader)  # noqa: S506 (a SafeLoader subclass)


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is list:
        inner = typing.get_args(tp)[0]
        plural = {int: "integers", float: "numbers", str: "strings", bool: "true/false values"}
        return f"a list of {plural.get(inner) or _type_name(inner)}"
    return {int: "an integer", float: "a number", str: "a string", bool: "true/false",
            type(None): "null"}.get(tp, getattr(tp, "__name__", str(tp)))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check `value` against the type hint `tp`; ints are accepted where floats are."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            try:
                return _coerce(value, arg, key)
            except ConfigError:
                continue
    elif origin is list:
        if isinstance(value, list):
            (inner,) = typing.get_args(tp)
            return [_coerce(v, inner, f"{key}[{i}]") for i, v in enumerate(value)]
    elif dataclasses.is_dataclass(tp):
        return build(tp, value, key)
    elif tp is type(None):
        if value is None:
            return None
    elif tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    raise ConfigError(f"{key}: got {value!r}, expected {_type_name(tp)}")


def build(cls: type, data: Any, prefix: str) -> Any:
    """Build dataclass `cls` from a mapping, rejecting unknown keys and wrong types."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'config'}: got {data!r}, expected a mapping of keys")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(
            f"{prefix + '.' if prefix else ''}{unknown[0]}: unknown key; accepted keys: "
            f"{', '.join(names)}")
    kwargs = {}
    for name in names:
        if name not in data:
            continue
        key = f"{prefix}.{name}" if prefix else name
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            kwargs[name] = build(tp, data[name], key)
        else:
            kwargs[name] = _coerce(data[name], tp, key)
    return cls(**kwargs)


def _section(data: Any, key: str, what: str) -> dict:
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{key}: got {data!r}, expected a mapping of name and {what}")
    return dict(data or {})


def _name(data: dict, key: str, default: str) -> str:
    name = data.pop("name", default)
    if not isinstance(name, str):
        raise ConfigError(f"{key}.name: got {name!r}, expected a string")
    return name


def _build_task(data: Any) -> TaskConfig:
    """The task section: `name` plus that task's own options, typed by the task registry (or by
    the Options of the class an import path names)."""
    data = _section(data, "task", "the task's options")
    name = _name(data, "task", TaskConfig.name)
    return TaskConfig(name=name, options=build(task_class(name).Options, data, "task"))


def _build_model(data: Any) -> ModelConfig:
    """The model section: the built-in fields, or for a module named by import path, its
    keyword arguments (checked against the module when the task validates)."""
    data = _section(data, "model", "the model's settings")
    name = _name(data, "model", ModelConfig.name)
    if is_import_path(name):
        return ModelConfig(name=name, kwargs=data)
    if "kwargs" in data:  # filled from an outside module's own keys, never written directly
        raise ConfigError("model.kwargs: unknown key; give an outside module's arguments as "
                          "keys of the model section beside its import path")
    return build(ModelConfig, {"name": name, **_preset_sizes(data)}, "model")


def _preset_sizes(data: dict) -> dict:
    """The model section with a gpt preset's sizes filled in where not given (ConfigError for
    a preset that does not exist)."""
    preset = data.get("preset")
    if preset is None:
        return data
    need(preset in GPT_PRESETS, "model.preset", preset, f"one of {', '.join(GPT_PRESETS)}")
    sizes = dict(zip(("d_model", "num_layers", "num_heads"), GPT_PRESETS[preset]))
    return {**sizes, **data}


def from_dict(data: dict) -> Config:
    """Validated Config from a plain mapping (the parsed YAML plus overrides)."""
    if not isinstance(data, dict):
        raise ConfigError(f"config: got {data!r}, expected a mapping of sections")
    data = dict(data)
    task = _build_task(data.pop("task", None))
    model = _build_model(data.pop("model", None))
    scale = _section(data.pop("scale", None), "scale", "lists of values")
    cell = data.pop("cell", None)
    need(cell is None or isinstance(cell, dict), "cell", cell, "a mapping (a scale sweep writes "
         "it into each cell's sweep.yaml)")
    cfg = build(Config, data, "")
    cfg.task, cfg.model, cfg.scale, cfg.cell = task, model, scale, cell
    if cfg.analysis.view in budget_views():  # such a view reads every run at its budget
        cfg.train.stop_at_targets = False
    validate(cfg)
    return cfg


def to_dict(cfg: Config) -> dict:
    """Plain-data form of a config (task options flattened back into the task section)."""
    out = dataclasses.asdict(dataclasses.replace(cfg, task=TaskConfig()))
    out["task"] = {"name": cfg.task.name, **dataclasses.asdict(cfg.task.options)}
    model = out["model"]
    out["model"] = ({"name": model["name"], **model["kwargs"]} if is_import_path(model["name"])
                    else {k: v for k, v in model.items() if k != "kwargs"})
    for key in ("scale", "cell"):  # a scale sweep's sections; an ordinary sweep has neither
        if not out[key]:
            del out[key]
    return out


def to_yaml(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def to_json(cfg: Config) -> str:
    return json.dumps(to_dict(cfg), indent=2)


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply `section.key=value` strings; values are parsed as YAML (`[8, 16]`, `1e-3`, `true`)."""
    if not isinstance(data, dict):
        raise ConfigError(f"config: got {data!r}, expected a mapping of sections")
    data = json.loads(json.dumps(data))
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected section.key=value")
        path, raw = item.split("=", 1)
        try:
            value = _yaml_load(raw)
        except yaml.YAMLError as err:
            raise ConfigError(f"override {item!r}: {raw!r} is not a YAML value; expected e.g. "
                              f"0.1, 1e-3, true, adam or [8, 16] ({err.__class__.__name__})") from None
        node = data
        parts = path.strip().split(".")
        for part in parts[:-1]:
            if node.get(part) is None:  # a section left empty in the YAML reads as null
                node[part] = {}
            node = node[part]
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {part} is not a section")
        node[parts[-1]] = value
    return data


# Keys the schema no longer has, which a results folder's sweep.yaml written before may hold
# (its runs trained with them): dropped when a folder is read, refused in a config.
RETIRED = {"learning_rate": ("max_extensions",)}  # replaced by learning_rate.search


def _read(path: str | Path) -> dict:
    """A config file's data (safe_load); a missing file or bad YAML is a ConfigError."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        return _yaml_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {str(path)!r}: not valid YAML: {err}") from None


def load_folder(path: str | Path) -> Config:
    """A results folder's sweep.yaml as a Config, any RETIRED keys dropped."""
    data = _read(path)
    for section, keys in RETIRED.items():
        for key in keys:
            (data.get(section) or {}).pop(key, None)
    return from_dict(data)


def load(path: str | Path, overrides: list[str] | None = None) -> Config:
    """Read a YAML config (safe_load), apply overrides, validate."""
    return from_dict(apply_overrides(_read(path), overrides or []))
