"""`scaling gns`: one run with the noise-scale estimator, B_simple against the training loss.

The run is the config narrowed to one batch size, one learning rate and its first seed, trained
by sweep.run so the usual run files are written (and a finished run is not trained twice).
The table prints as the run trains, one line per evaluation point when its chunk is read.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from scaling import config as config_mod, store
from scaling.config import Config, ConfigError, load
from scaling.formatting import number
from scaling.report.figures import noise_scale_vs_loss
from scaling.sweep import runner
from scaling.sweep.grid import expand
from scaling.train import compile_cache
from scaling.train.sinks import Records, Sink

COLUMNS = (("step", "step"), ("examples", "examples"), ("train_loss", "train loss"),
           ("b_simple", "B_simple"), ("b_noise", "B_noise"), ("b_simple_precond", "B_simple (Adam)"))


def narrow(cfg: Config, batch_size: int | None, lr: float | None) -> Config:
    """The config with one batch size (default: its first), one learning rate, one seed."""
    if not cfg.gns.enabled:
        raise ConfigError("gns.enabled: got false, expected true (scaling gns measures the noise scale)")
    size = batch_size or cfg.batch.sizes[0]
    rate = lr if lr is not None else config_mod.learning_rates(cfg.learning_rate, size)[0]
    data = config_mod.to_dict(cfg)
    data["batch"]["sizes"], data["batch"]["schedules"] = [size], []
    data["learning_rate"] = {"mode": "grid", "values": [rate]}
    data["seeds"] = data["seeds"][:1]
    return config_mod.from_dict(data)


def format_rows(rows: list[dict[str, Any]], keys: list[tuple[str, str]] | None = None,
                header: bool = True) -> list[str]:
    """A header and one line per evaluation point; columns the run did not record are left out."""
    keys = keys or columns(rows)
    width = max(len(name) for _, name in keys) + 2

    lines = ["".join(number(r.get(k), 4).rjust(width) for k, _ in keys) for r in rows]
    return ["".join(name.rjust(width) for _, name in keys)] + lines if header else lines


def columns(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(k, name) for k, name in COLUMNS if any(k in r for r in rows)]


class Table(Sink):
    """Prints the table while the run trains: the header with the first rows, each step once."""

    def __init__(self) -> None:
        self.keys: list[tuple[str, str]] | None = None
        self.printed: set[int] = set()

    def rows(self, records: Records, wall_s: float = 0.0, running: int = 0) -> None:
        self.show([row for rows in records for row in rows])

    def show(self, rows: list[dict[str, Any]]) -> None:
        rows = [r for r in rows if r["step"] not in self.printed]
        if not rows:
            return
        first = self.keys is None
        self.keys = self.keys or columns(rows)
        print("\n".join(format_rows(rows, self.keys, header=first)), flush=True)
        self.printed.update(r["step"] for r in rows)


def run(cfg: Config, out: str | Path, force: bool = False, quiet: bool = False) -> dict[str, Any]:
    """Train the narrowed run into `out` printing its table, draw OUT/noise_vs_loss.png.

    Returns the run's store record. A run finished earlier is not trained; its table prints whole.
    """
    table = Table()
    runner.run(cfg, out, None, force, quiet, hooks=[table])
    (planned,) = expand(cfg)
    (record,) = [r for r in store.load(out) if r["run_id"] == planned.run_id]
    table.show(record["metrics"])
    noise_scale_vs_loss([record], Path(out) / "noise_vs_loss.png")
    return record


def run_command(args: argparse.Namespace) -> int:
    cfg = narrow(load(args.config, args.overrides), args.batch_size, args.lr)
    compile_cache.enable(args.compile_cache, args.no_compile_cache)
    out = args.out or f"runs/{cfg.name}-gns"
    record = run(cfg, out, args.force, args.quiet)  # prints the table as it trains
    print(f"{record['run_id']}: {record['summary']['status']}; run files in {out}/runs, "
          f"figure {out}/noise_vs_loss.png")
    return 0
