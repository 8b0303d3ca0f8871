"""Run one study end to end and record how long it took: sweep, analysis, figures, report.

A study is a config in configs/ (configs/<name>.yaml) whose results land in results/<name>/:
analysis.json, report.md, figures/ (committed) and runs/ (the raw run files, not committed).
A config with a `branch:` section is a branched measurement: `scaling branch` runs it instead
of `scaling sweep` (its base/ and branches/ folders are not committed either). A config with a
`scale:` section, or a budget with cooldowns, trains one sweep per cell under
results/<name>/cells/ (their runs/ are not committed either) and is analysed as a multi-cell
folder.
The sweep resumes, so a study killed half way is finished by running the same command again;
wall_s then counts only the last invocation, and study.json says so (resumed: true);
runs_wall_s is the training time recorded in the run files, whatever the invocations; cpu_s the
process's CPU seconds (user and system) in the last invocation.

    python experiments/run_study.py mnist1d_mlp
    python experiments/run_study.py nqm --out /tmp/nqm       # elsewhere, e.g. to try a change

Writes results/<name>/study.json: the command, wall time, date, git commit, jax version and
the device it ran on, which results/README.md quotes (experiments/summarize_studies.py).
"""

from __future__ import annotations

import argparse
import datetime
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git_commit() -> str | None:
    """The commit the study ran from ('+dirty' when the tree had changes), None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def run(name: str, out: Path, overrides: list[str], quiet: bool = False) -> dict:
    """Sweep (with its analysis) into `out`; return the study record."""
    import jax

    from scaling import store
    from scaling.cli.main import main

    config = ROOT / "configs" / f"{name}.yaml"
    if not config.is_file():
        raise SystemExit(f"error: no study config {config}")
    import yaml

    data = yaml.safe_load(config.read_text()) or {}
    command = "branch" if "branch" in data else "sweep"
    cells = data.get("scale") or (data.get("budget") or {}).get("cooldowns")
    runs = out / ("base" if command == "branch" else "cells" if cells else "runs")
    resumed = runs.is_dir() and any(runs.iterdir())
    argv = [command, str(config), *overrides, "--out", str(out)] + (["--quiet"] if quiet else [])
    started, cpu = time.perf_counter(), time.process_time()
    status = main(argv)
    if status != 0:
        raise SystemExit(status)
    where = "" if out == ROOT / "results" / name else f" --out {_shown(out)}"
    record = {"study": name, "command": f"python experiments/run_study.py {name}"
              + "".join(f" {shlex.quote(o)}" for o in overrides) + where,
              "wall_s": round(time.perf_counter() - started, 1), "resumed": bool(resumed),
              "cpu_s": round(time.process_time() - cpu, 1),
              "runs_wall_s": store.training_seconds(_records(out, command)),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "git_commit": git_commit(), "jax": jax.__version__,
              "device": f"{jax.devices()[0].device_kind} x{jax.device_count()}",
              "host": f"{platform.machine()}, {_cpu_count()} CPU cores"}
    store.write_json(out / "study.json", record)
    return record


def _shown(out: Path) -> str:
    """A results folder as the command line names it: relative to the repository if inside."""
    out = out.resolve()
    return str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else str(out)


def _records(out: Path, command: str) -> list[dict]:
    """Every run record of the study: a sweep's, each cell's of a scale sweep, or a branched
    measurement's base and branches."""
    from scaling import store
    from scaling.store.cells import is_cells_folder, read_cells

    if command == "branch":
        return store.load(out / "base") + store.load(out / "branches")
    if is_cells_folder(out):
        return [r for c in read_cells(out)["cells"] for r in store.load(out / c["folder"])]
    return store.load(out)


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", help="study name: configs/<name>.yaml")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides")
    parser.add_argument("--out", type=Path, help="results folder (default results/<name>)")
    parser.add_argument("--quiet", action="store_true", help="no live progress (logs)")
    args = parser.parse_args(argv)
    record = run(args.name, args.out or ROOT / "results" / args.name, args.overrides, args.quiet)
    print(f"{args.name}: {record['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
