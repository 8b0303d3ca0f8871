"""A token corpus larger than the memory it trains in: the host stream's peak resident memory.

    python experiments/stream_tokens.py [--gb 4] [--dir /tmp]

Writes a random uint16 token file of --gb gigabytes (a block at a time, never all in memory)
and a small eval file under --dir, trains a short sweep on it (model gpt, d_model 64, two
layers, four heads, context 64, data.placement host), prints the process's peak resident
memory (getrusage ru_maxrss) against the 2 GB goal, and deletes the files.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
from pathlib import Path

import numpy as np

from scaling import config as config_mod
from scaling.sweep import runner

GOAL_GB = 2.0
BLOCK = 1 << 25  # tokens written at a time (64 MB)


def write_tokens(path: Path, count: int, seed: int) -> None:
    """`count` random byte-valued uint16 tokens, one block of them repeated."""
    block = np.random.default_rng(seed).integers(0, 256, BLOCK).astype("<u2")
    with open(path, "wb") as handle:
        for first in range(0, count, BLOCK):
            handle.write(block[:min(BLOCK, count - first)].tobytes())


def sweep(folder: Path) -> config_mod.Config:
    """A short host-streamed sweep over the files in `folder`."""
    return config_mod.from_dict({
        "name": "stream_tokens",
        "task": {"name": "tokens", "train": str(folder / "train.bin"),
                 "eval": str(folder / "eval.bin"), "dtype": "uint16", "vocab": 256, "context": 64},
        "model": {"name": "gpt", "d_model": 64, "num_layers": 2, "num_heads": 4},
        "optimizer": {"name": "adam"}, "batch": {"sizes": [16]},
        "learning_rate": {"values": [0.001, 0.003], "search": False}, "seeds": [0],
        "budget": {"max_steps": 40}, "eval": {"every": 10, "points_per_decade": 0},
        "train": {"chunk_steps": 10}, "targets": [], "data": {"placement": "host"}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=4.0, help="size of the training file")
    parser.add_argument("--dir", default="/tmp", help="where the files are written (and removed)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="stream_tokens_", dir=args.dir))
    try:
        write_tokens(folder / "train.bin", int(args.gb * 1e9) // 2, seed=0)
        write_tokens(folder / "eval.bin", 64 * 65, seed=1)
        size = (folder / "train.bin").stat().st_size
        summaries = runner.run(sweep(folder), folder / "out", quiet=True)
        losses = [round(s["final"]["train_loss"], 4) if "final" in s else s.get("status")
                  for s in summaries]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # Linux: KiB
        print(f"token file: {size / 1e9:.2f} GB; runs: {len(summaries)} ({losses})")
        print(f"peak resident memory: {peak:.2f} GB; goal under {GOAL_GB} GB: "
              f"{peak / GOAL_GB:.2f}x of it ({'met' if peak < GOAL_GB else 'NOT met'})")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
