"""`scaling gns`: one run with the noise-scale estimator, B_simple against the training loss.

The run is the config narrowed to one batch size, one learning rate and its first seed, trained
by sweep.run so the usual run files are written (and a finished run is not trained twice).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scaling import config as config_mod, store
from scaling.config import Config, ConfigError

COLUMNS = (("step", "step"), ("examples", "examples"), ("train_loss", "train loss"),
           ("b_simple", "B_simple"), ("b_noise", "B_noise"), ("b_simple_precond", "B_simple (Adam)"))


def narrow(cfg: Config, batch_size: int | None, lr: float | None) -> Config:
    """The config with one batch size (default: its first), one learning rate, one seed."""
    if not cfg.gns.enabled:
        raise ConfigError("gns.enabled: got false, expected true (scaling gns measures the noise scale)")
    size = batch_size or cfg.batch.sizes[0]
    rate = lr if lr is not None else config_mod.learning_rates(cfg.learning_rate, size)[0]
    data = config_mod.to_dict(cfg)
    data["batch"]["sizes"] = [size]
    data["learning_rate"] = {"mode": "grid", "values": [rate]}
    data["seeds"] = data["seeds"][:1]
    return config_mod.from_dict(data)


def format_rows(rows: list[dict[str, Any]]) -> list[str]:
    """A header and one line per evaluation point; columns the run did not record are left out."""
    keys = [(k, name) for k, name in COLUMNS if any(k in r for r in rows)]
    width = max(len(name) for _, name in keys) + 2

    def cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-".rjust(width)
        return (f"{value:,}" if isinstance(value, int) else f"{value:.4g}").rjust(width)

    return ["".join(name.rjust(width) for _, name in keys)] + [
        "".join(cell(r.get(k)) for k, _ in keys) for r in rows]


def run(cfg: Config, out: str | Path, force: bool = False, quiet: bool = False) -> dict[str, Any]:
    """Train the narrowed run into `out`, draw OUT/noise_vs_loss.png; returns its store record."""
    from scaling import sweep
    from scaling.grid import expand
    from scaling.plots import noise_scale_vs_loss

    sweep.run(cfg, out, None, force, quiet)
    (planned,) = expand(cfg)
    (record,) = [r for r in store.load(out) if r["run_id"] == planned.run_id]
    noise_scale_vs_loss([record], Path(out) / "noise_vs_loss.png", b_crit=None)
    return record
