"""A sweep started cold against the same sweep repeated, side by side in one run.

Cold: an empty compilation cache and an empty data folder (mnist1d is generated, every
program compiled). Repeated: the same command into a new results folder, with the caches the
cold run filled (jax's persistent compilation cache, the on-disk mnist1d). Each is a whole
`scaling sweep` process, as a user runs it; prints wall seconds, the compile seconds the run
files record (per group, summed) and their share, and the ratio.

    python experiments/bench_startup.py                        # the quickstart, a few minutes each
    python experiments/bench_startup.py --config configs/smoke.yaml
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sweep(config: str, out: Path, caches: Path, overrides: list[str]) -> float:
    """Wall seconds of one `scaling sweep` process (analysis off) with its caches in `caches`."""
    env = dict(os.environ, SCALING_DATA=str(caches / "data"))
    command = [sys.executable, "-m", "scaling.cli", "sweep", config, *overrides, "--out", str(out),
               "--quiet", "--no-analyze", "--compile-cache", str(caches / "jax")]
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def compile_seconds(out: Path) -> float:
    """Compile seconds over the sweep's groups (each run records its group's, shared by its
    group_size runs)."""
    summaries = [json.loads(p.read_text()) for p in out.glob("runs/*/summary.json")]
    return sum(s["compile_s"] / s["group_size"] for s in summaries)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/quickstart.yaml")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows = []
        for name in ("cold", "repeated"):
            wall = sweep(args.config, tmp / name, tmp / "caches", args.overrides)
            rows.append((name, wall, compile_seconds(tmp / name)))
    print(f"{args.config}: whole `scaling sweep` processes (analysis off)")
    print(f"{'':>9} {'wall s':>8} {'compile s':>10} {'compile share':>14}")
    for name, wall, compiled in rows:
        print(f"{name:>9} {wall:>8.1f} {compiled:>10.1f} {compiled / wall:>13.0%}")
    print(f"repeated is {rows[0][1] / rows[1][1]:.2f}x faster than cold")


if __name__ == "__main__":
    main()
