"""`scaling bench`: the engine against a tutorial-style loop on one group (scaling.sweep.bench)."""

from __future__ import annotations

import argparse

import jax

from scaling import config as config_mod
from scaling.config import ConfigError, load
from scaling.sweep import bench
from scaling.train import compile_cache


def run(args: argparse.Namespace) -> int:
    cfg = load(args.config, args.overrides)
    sizes = args.batch_size or cfg.batch.sizes
    for size in sizes:
        if size not in cfg.batch.sizes:
            raise ConfigError(f"--batch-size: got {size}, expected one of the config's "
                              f"batch.sizes {cfg.batch.sizes}")
    for k in args.fsdp or []:  # every split checked before any compute
        config_mod.validate_devices(bench.with_fsdp(cfg, k), jax.device_count())
    compile_cache.enable(args.compile_cache, args.no_compile_cache)
    device = jax.devices()[0]
    print(f"jax {jax.__version__}, {jax.device_count()} device(s): {device.platform} "
          f"({device.device_kind}); {cfg.task.name}, {cfg.optimizer.name}", flush=True)
    for size in sizes:
        print()
        result = bench.bench(cfg, size, args.steps, args.runs, args.repeats)
        print(bench.format_result(result), flush=True)
        if args.fsdp:
            splits = bench.bench_fsdp(cfg, size, args.steps, args.fsdp, args.runs, args.repeats)
            print(bench.format_splits(result, splits), flush=True)
    return 0
