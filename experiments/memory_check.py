"""The memory plan against what a chunk really takes (issue 39 items 4 and 6): a GPT preset with
Adam trains one chunk per batch size and setting (remat, fsdp), each in a process of its own,
and prints its step time, MFU and peak memory beside the plan's estimate for that chunk.

The estimate is scaling.sweep.memory_plan's footprint of the very chunk that then runs (XLA's
memory analysis of it, compiled ahead from shapes; the run reuses the compiled chunk). The peak
is what the process held beyond what it held before the group's data and state existed:

- on a GPU or TPU, the device's peak_bytes_in_use (memory_stats) less bytes_in_use before the
  data is placed. The peak counts from the process's start, so scratch that compiling took
  (autotuning) would count if it were larger than the run's; nothing here resets it;
- on CPU, the process's peak resident set (VmHWM, reset through /proc/self/clear_refs once the
  chunk and the state's init are compiled and their memory given back) less the resident set
  then: the data, the state, the init's and the chunk's temporaries, and whatever the runtime
  allocates beside XLA's buffers; over N simulated devices (one process holds them all) that
  over N, one device's share.

Each batch size trains at a fixed micro-batch per device (--micro), so larger batches
accumulate (accumulation = batch / (micro x data shards)). fsdp splits the state over every
device; on one device it is skipped, said so. Token ids are random (--vocab, uint16) in a small
file written once.

    python experiments/memory_check.py                  # 124M, 1,024 tokens, batch 8 to 512
    python experiments/memory_check.py --preset 14m --context 128 --vocab 256 \\
        --batch-sizes 8 16 --micro 8 --steps 2          # a CPU-sized try of the same logic

--json PATH writes the rows; experiments/device_check.sh runs the 124M check on a lent GPU.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GB = 1e9
REMAT = ("none", "full")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="124m", help="model.preset of the GPT (default 124m)")
    p.add_argument("--context", type=int, default=1024, help="tokens per sequence")
    p.add_argument("--vocab", type=int, default=50257, help="vocabulary (GPT-2's by default)")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 64, 512],
                   help="sequences per step (default 8 64 512)")
    p.add_argument("--micro", type=int, default=8,
                   help="sequences per device in one micro-batch (default 8)")
    p.add_argument("--remat", nargs="+", default=list(REMAT), choices=("none", "full", "dots"))
    p.add_argument("--fsdp", choices=("both", "off", "on"), default="both",
                   help="without and with fsdp over every device (default both)")
    p.add_argument("--steps", type=int, default=2, help="steps in the timed chunk (default 2)")
    p.add_argument("--limit-s", type=float, default=300.0,
                   help="seconds one setting may take (default 300)")
    p.add_argument("--json", help="write the rows to this file")
    p.add_argument("--one", help=argparse.SUPPRESS)  # a child: one setting, as JSON
    return p.parse_args(argv)


def write_tokens(folder: Path, vocab: int, context: int) -> None:
    """Random uint16 ids below `vocab`: train.bin (64 windows' worth and more), eval.bin."""
    import numpy as np

    rng = np.random.default_rng(0)
    for name, n in (("train.bin", max(200_000, 64 * (context + 1))), ("eval.bin", 32 * (context + 1))):
        rng.integers(0, vocab, n).astype("<u2").tofile(folder / name)


def config(setting: dict[str, Any], tokens: str, devices: int) -> Any:
    """The one-batch-size config of a setting on `devices` devices."""
    from scaling import config as config_mod

    s, fsdp = setting, setting["fsdp"]
    return config_mod.from_dict({
        "name": "memory_check",
        "task": {"name": "tokens", "train": f"{tokens}/train.bin", "eval": f"{tokens}/eval.bin",
                 "dtype": "uint16", "vocab": s["vocab"], "context": s["context"]},
        "model": {"name": "gpt", "preset": s["preset"], "remat": s["remat"]},
        "optimizer": {"name": "adam"},
        "batch": {"sizes": [s["batch_size"]], "accumulation": s["accumulation"]},
        "learning_rate": {"values": [0.0006], "search": False},
        "budget": {"max_steps": 100 * s["steps"]}, "targets": [],
        "eval": {"every": 1000, "points_per_decade": 0, "examples": 8}, "seeds": [0],
        "train": {"chunk_steps": s["steps"], "min_chunks": 1, "fsdp": fsdp},
        "parallel": {"data": devices // fsdp}})


def resident_bytes(field: str) -> int:
    """VmRSS or VmHWM of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def give_back() -> None:
    """Collect garbage and hand glibc's free memory back, so the resident set is what is held."""
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def one(setting: dict[str, Any]) -> dict[str, Any]:
    """Plan, compile, run and measure one setting (in this process, alone)."""
    import jax

    from scaling.sweep import memory_plan
    from scaling.sweep.session import eval_subset
    from scaling.train import precision, start, throughput
    from scaling.train.mesh import put_replicated
    from scaling.train.spec import RunSpec

    device = jax.devices()[0]
    cpu = device.platform == "cpu"
    cfg = config(setting, setting["tokens"], jax.device_count())
    planner = memory_plan.Planner(cfg, int(1e15), jax.device_count())
    s = memory_plan.Setting(setting["accumulation"], setting["fsdp"], 1)
    began = time.perf_counter()
    program, data_shapes, eval_shapes = planner.program(setting["batch_size"], s)
    footprint = memory_plan.measure(program, s, data_shapes, eval_shapes)
    compile_s = time.perf_counter() - began
    task = planner.task
    runs = [RunSpec(0.0006, 0)]

    def place() -> tuple[Any, Any]:
        return (put_replicated(program.mesh, task.train_arrays()),
                put_replicated(program.mesh, eval_subset(task, cfg)))

    if cpu:  # the init compiled and its memory given back before the baseline
        data, eval_data = place()
        jax.block_until_ready(start.fresh(program, runs, data, eval_data, 1).state)
        del data, eval_data
        give_back()
        base = resident_bytes("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here
    else:
        base = (device.memory_stats() or {}).get("bytes_in_use", 0)
    data, eval_data = place()
    rs = start.fresh(program, runs, data, eval_data, 1).state
    rs, rows = program.chunk(rs, data, eval_data, 0)  # warm: the first chunk
    jax.block_until_ready((rs, rows))
    began = time.perf_counter()
    rs, rows = program.chunk(rs, data, eval_data, setting["steps"])
    jax.block_until_ready((rs, rows))
    step_s = (time.perf_counter() - began) / setting["steps"]
    if cpu:  # simulated devices share the process: one device's share
        peak = (resident_bytes("VmHWM") - base) / jax.device_count()
    else:
        peak = (device.memory_stats() or {}).get("peak_bytes_in_use", 0) - base
    flops = task.flops_per_example() * setting["batch_size"]
    peak_flops, _ = throughput.peak(device, precision.here(cfg.train.precision))
    mfu = None if peak_flops is None else flops / step_s / (peak_flops * jax.device_count())
    return {**{k: v for k, v in setting.items() if k != "tokens"},
            "device": device.device_kind, "devices": jax.device_count(),
            "compile_s": compile_s, "step_s": step_s,
            "tokens_per_s": setting["batch_size"] * setting["context"] / step_s, "mfu": mfu,
            "plan_bytes": footprint.total,
            "plan_parts": {p: getattr(footprint, p) for p in memory_plan.PARTS},
            "peak_bytes": peak, "peak_over_plan": peak / footprint.total}


def settings(args: argparse.Namespace, devices: int) -> list[dict[str, Any]]:
    """Every setting the check runs (fsdp over all devices: only 1 on one device)."""
    splits = {"both": [1, devices], "off": [1], "on": [devices]}[args.fsdp]
    out = []
    for size in args.batch_sizes:
        micro = min(size, args.micro * devices)
        if size % micro:
            raise SystemExit(f"--batch-sizes: {size} is not a multiple of the micro-batch {micro}")
        for remat in args.remat:
            for k in sorted(set(splits)):
                out.append({"preset": args.preset, "context": args.context, "vocab": args.vocab,
                            "batch_size": size, "accumulation": size // micro, "fsdp": k,
                            "remat": remat, "steps": args.steps})
    return out


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'batch':>6} {'accum':>5} {'fsdp':>4} {'remat':>5} {'step s':>8} {'tok/s':>9} "
            f"{'MFU':>6} {'plan GB':>8} {'peak GB':>8} {'peak/plan':>9}")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['batch_size']:>6} {r['accumulation']:>5} {r['fsdp']:>4} "
                         f"{r['remat']:>5}  {r['error']}")
            continue
        mfu = "-" if r["mfu"] is None else f"{r['mfu']:.1%}"
        lines.append(f"{r['batch_size']:>6} {r['accumulation']:>5} {r['fsdp']:>4} {r['remat']:>5} "
                     f"{r['step_s']:>8.3f} {r['tokens_per_s']:>9.0f} {mfu:>6} "
                     f"{r['plan_bytes'] / GB:>8.3f} {r['peak_bytes'] / GB:>8.3f} "
                     f"{r['peak_over_plan']:>9.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.one:
        print(json.dumps(one(json.loads(args.one))))
        return 0
    import jax  # the parent only counts the devices (each child starts its own backend)

    devices = jax.device_count()
    print(f"jax {jax.__version__}, {devices} x {jax.devices()[0].device_kind}; GPT {args.preset}, "
          f"Adam, {args.context} tokens per sequence, vocabulary {args.vocab}", flush=True)
    if devices == 1 and args.fsdp != "off":
        print("fsdp: one device, nothing to split the state over: rows at fsdp 1 only")
    rows = []
    with tempfile.TemporaryDirectory() as tokens:
        write_tokens(Path(tokens), args.vocab, args.context)
        for s in settings(args, devices):
            child = [sys.executable, __file__, "--one", json.dumps({**s, "tokens": tokens})]
            try:
                done = subprocess.run(child, capture_output=True, text=True,
                                      timeout=args.limit_s, env=os.environ)
                last = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
                rows.append(json.loads(last[0]) if last else {
                    **s, "error": (done.stderr.strip().splitlines() or ["no output"])[-1][:160]})
            except subprocess.TimeoutExpired:
                rows.append({**s, "error": f"over {args.limit_s:g} s"})
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
