"""Scale axes: a config's `scale` section lists values of config keys, and the sweep becomes one
cell per combination, each an ordinary sweep of its own (docs/sweeps.md, "Scale sweeps").

    scale:
      model.d_model: [32, 64, 128]
      budget.max_tokens: [200000, 400000, 800000]

Everything here is plain data and the config's own checks (no jax): the section is checked
before any compute, one line naming the key, and each cell's config is built through
`from_dict`, so a value that the config would refuse is refused here, under its scale key.
A cell's config has no `scale` and records its values in its `cell` section.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass
from typing import Any

from scaling.config.load import from_dict, to_dict
from scaling.config.names import budget_views
from scaling.config.schema import Config
from scaling.errors import ConfigError, need
from scaling.formatting import short_number

# Keys a scale axis may not set: the grid inside each cell, and the sweep's own identity.
GRID = ("name", "seeds", "targets", "batch.sizes", "batch.schedules", "learning_rate.values",
        "scale", "cell")
LIST_SECTIONS = ("model",)  # list-valued settings allowed as scale keys (widths, channels)
NAME_DIGITS = 6


@dataclass(frozen=True)
class Cell:
    """One combination of the scale axes' values: its folder name and its config."""

    name: str
    values: dict[str, Any]
    cfg: Config


def _setting(tree: dict, key: str) -> Any:
    """The value `key` (section.key) holds in the plain config, or a ConfigError saying why
    it names no single setting."""
    node, parts = tree, key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            where = ".".join(parts[:i]) or "the config"
            known = ", ".join(k for k, v in node.items() if not isinstance(v, dict)) \
                if isinstance(node, dict) else ""
            raise ConfigError(f"scale.{key}: unknown key; expected section.key naming a "
                              f"setting" + (f" (settings of {where}: {known})" if known else ""))
        node = node[part]
    if isinstance(node, dict):
        raise ConfigError(f"scale.{key}: a section, not a setting; expected section.key naming "
                          "one setting, e.g. model.d_model or budget.max_tokens")
    return node


def _check_key(tree: dict, key: Any, values: Any) -> None:
    """The key names one setting a cell may vary, and its values are a non-empty list of
    distinct values of that setting's shape."""
    need(isinstance(key, str) and key not in GRID and key.split(".")[0] not in ("scale", "cell"),
         "scale", key, f"a config key other than {', '.join(GRID)} (the grid inside each cell)")
    current = _setting(tree, key)
    need(isinstance(values, list) and len(values) > 0, f"scale.{key}", values,
         "a non-empty list of values, one cell each")
    listed = key.split(".")[0] in LIST_SECTIONS
    if isinstance(current, list) and not listed:
        raise ConfigError(f"scale.{key}: a list setting, not a scalar one; expected a scalar "
                          "setting such as budget.max_tokens (lists only under model, e.g. "
                          "model.hidden: [[64], [128]])")
    for i, value in enumerate(values):
        need(not isinstance(value, dict) and (not isinstance(value, list) or listed),
             f"scale.{key}[{i}]", value, "a single value of the setting")
    need(len({repr(v) for v in values}) == len(values), f"scale.{key}", values,
         "distinct values (each makes one cell)")


def _label(keys: list[str]) -> dict[str, str]:
    """Each key's part of a folder name: its last part, or the whole key where two share it."""
    last = [k.split(".")[-1] for k in keys]
    return {k: (tail if last.count(tail) == 1 else k.replace(".", "_"))
            for k, tail in zip(keys, last)}


def _value_text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, (int, float)):
        return short_number(value, NAME_DIGITS)
    if isinstance(value, list):
        return "x".join(_value_text(v) for v in value)
    return re.sub(r"[^A-Za-z0-9.+_]", "_", str(value))


def cell_name(values: dict[str, Any]) -> str:
    """d_model64-max_tokens2e5: the folder of the cell with these scale values."""
    labels = _label(list(values))
    return "-".join(f"{labels[k]}{_value_text(v)}" for k, v in values.items())


def _with(tree: dict, values: dict[str, Any], name: str) -> dict:
    """The plain config with `values` set and the cell recorded."""
    out = copy.deepcopy({k: v for k, v in tree.items() if k != "scale"})
    for key, value in values.items():
        *path, last = key.split(".")
        node = out
        for part in path:
            node = node[part]
        node[last] = copy.deepcopy(value)
    out["cell"] = {"name": name, "values": dict(values)}
    return out


def _build(tree: dict, values: dict[str, Any], where: str) -> Config:
    try:
        return from_dict(_with(tree, values, cell_name(values)))
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None


def budgets(cfg: Config) -> list[float]:
    """With budget.cooldowns, every budget read, smallest first: the cooldowns, then the
    budget itself (whose runs train the stable phase for all of them)."""
    (key, budget), = cfg.budget.limits().items()
    whole = lambda v: int(v) if isinstance(budget, int) and float(v).is_integer() else v
    return [whole(v) for v in cfg.budget.cooldowns if v != budget] + [budget]


def axes(cfg: Config) -> dict[str, list[Any]]:
    """The scale axes: the config's, or under budget.cooldowns one axis of its budgets."""
    if cfg.budget.cooldowns:
        return {f"budget.{next(iter(cfg.budget.limits()))}": budgets(cfg)}
    return cfg.scale


def cells(cfg: Config) -> list[Cell]:
    """One Cell per combination of the scale values (the first key varies slowest), each
    config validated; a ConfigError naming the scale key, before any compute. Under
    budget.cooldowns, one cell per budget, the largest last."""
    scale = axes(cfg)
    need(isinstance(scale, dict) and len(scale) > 0, "scale", scale,
         "a mapping of config keys to lists of values")
    need(cfg.analysis.view in budget_views(), "analysis.view", cfg.analysis.view,
         f"{' or '.join(budget_views())} with a scale section (the laws across cells read every "
         "run at its budget)")
    tree = to_dict(cfg)
    tree["budget"]["cooldowns"] = None  # a cell is one budget
    for key, values in scale.items():
        _check_key(tree, key, values)
        for i, value in enumerate(values):  # each value alone names its own key
            _build(tree, {key: value}, f"scale.{key}[{i}] = {value!r}")
    out = []
    for combo in itertools.product(*scale.values()):
        values = dict(zip(scale, combo))
        name = cell_name(values)
        out.append(Cell(name, values, _build(tree, values, f"scale: cell {name}")))
    names = [c.name for c in out]
    clash = next((n for n in names if names.count(n) > 1), None)
    need(clash is None, "scale", clash, f"values that give each cell its own folder name "
         f"(these agree to {NAME_DIGITS} significant figures)")
    return out
