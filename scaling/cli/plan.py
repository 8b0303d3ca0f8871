"""`scaling plan`: the run arithmetic of a config, or of numbers given as options; no compute."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Any

from scaling.cli.parser import CALCULATOR, UsageError
from scaling.config import load, named_devices, optimizer_rules
from scaling.sweep import segments
from scaling.config.arithmetic import calculate, for_config, format_table, sweep_warnings

# A config with scale axes plans each cell with its N and C, which need the model (jax); that
# module loads only then, as scaling.cli.main loads each subcommand's, so the rest stays instant.
SCALE_PLAN = "scaling.cli.scale_plan"
MEMORY_PLAN = "scaling.cli.memory_plan"  # --device-memory: compiles (jax), so likewise


def _calculator_rows(args: argparse.Namespace) -> list[Any]:
    if not args.batch_size:
        raise UsageError("--batch-size: missing; give a CONFIG or at least one --batch-size")
    if (args.lr_ref is None) != (args.batch_ref is None):
        raise UsageError("--lr-ref and --batch-ref: give both or neither")
    return [calculate(
        args.examples, size, epochs=args.epochs, max_steps=args.steps,
        max_examples=args.max_examples, max_tokens=args.max_tokens, drop_last=args.drop_last,
        warmup_fraction=args.warmup_fraction or 0.0, warmup_steps=args.warmup_steps,
        tokens=args.tokens, tokens_per_example=args.tokens_per_example,
        accumulation=args.accumulation or 1, data_shards=args.data_shards or 1,
        schedule=args.schedule or "constant", batch_ref=args.batch_ref, lr_ref=args.lr_ref,
        decay_fraction=args.decay_fraction)
        for size in args.batch_size]


def _config(args: argparse.Namespace) -> Any:
    used = [f"--{k.replace('_', '-')}" for k in CALCULATOR if getattr(args, k) not in (None, False)]
    if used:
        raise UsageError(f"{used[0]}: a calculator option; give a CONFIG (and section.key=value "
                         "overrides) or calculator options, not both")
    return load(args.config, args.overrides)


def _config_rows(cfg: Any) -> tuple[list[Any], list[str], list[str], list[dict[str, Any]]]:
    """The arithmetic per batch size, the sweep's warnings, the notes below the table (the
    schedules, the optimizer's rules) and the rules' values per batch size."""
    shards = cfg.parallel.data or 1
    notes = [segments.describe(cfg, sched, shards) for sched in cfg.batch.schedules]
    rows = [for_config(cfg, size, shards) for size in cfg.batch.sizes]
    notes += optimizer_rules.describe(cfg)
    return rows, sweep_warnings(cfg), notes, optimizer_rules.plan_rows(cfg)


def _memory_plan(cfg: Any, args: argparse.Namespace) -> int:
    """The memory plan, on as many simulated CPU devices as the config names, where jax's
    backend has not started yet (the flag only shapes the CPU backend; GPUs and TPUs are
    what they are)."""
    if cfg.scale:
        raise UsageError("--device-memory: plan one cell's config at a time (a scale section "
                         "gives each cell its own model)")
    devices = named_devices(cfg) or 0
    if devices > 1:
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_force_host_platform_device_count" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}"
    return importlib.import_module(MEMORY_PLAN).run(cfg, args)


def run(args: argparse.Namespace) -> int:
    """Print the plan; sweep-level warnings go to stderr under --json so stdout stays JSON."""
    if args.config is None:
        if args.overrides:
            raise UsageError(f"{args.overrides[0]}: overrides need a CONFIG")
        rows, sweep, notes, ruled = _calculator_rows(args), [], [], []
    else:
        cfg = _config(args)
        if args.device_memory is not None:
            return _memory_plan(cfg, args)
        if cfg.scale:
            return importlib.import_module(SCALE_PLAN).run(cfg, args)
        rows, sweep, notes, ruled = _config_rows(cfg)
    if args.json:
        rules = {r["batch_size"]: r for r in ruled}
        print(json.dumps([{**row.to_dict(), **({"optimizer_rules": rules[row.batch_size]}
                                               if row.batch_size in rules else {})}
                          for row in rows], indent=2))
    else:
        print("\n".join([format_table(rows), *notes]))
    for warning in sweep:
        print(f"warning: {warning}", file=sys.stderr if args.json else sys.stdout)
    return 0
