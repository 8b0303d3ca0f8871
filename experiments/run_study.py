"""Run one study end to end and record how long it took: sweep, analysis, figures, report.

A study is a config in configs/ (configs/<name>.yaml) whose results land in results/<name>/:
analysis.json, report.md, figures/ (committed) and runs/ (the raw run files, not committed;
with --pack they are packed into runs.tar.xz, which is). A config with a `branch:` section is
a branched measurement: `scaling branch` runs it instead of `scaling sweep`, into the sweep
folders base/ and branches/. A config with a `scale:` section, or a budget with cooldowns,
trains one sweep folder per cell under results/<name>/cells/ and is analysed as a multi-cell
folder.
The sweep resumes, so a study killed half way is finished by running the same command again;
wall_s then counts only the last invocation, and study.json says so (resumed: true);
runs_wall_s is the training time recorded in the run files, whatever the invocations; cpu_s the
process's CPU seconds (user and system) in the last invocation.

    python experiments/run_study.py mnist1d_mlp
    python experiments/run_study.py nqm --out /tmp/nqm       # elsewhere, e.g. to try a change
    python experiments/run_study.py nqm --pack   # then seal it for committing: runs.tar.xz only

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


def run(name: str, out: Path, overrides: list[str], quiet: bool = False, pack: bool = False
        ) -> dict:
    """Sweep (with its analysis) into `out`; return the study record. With `pack`, each sweep
    folder is then sealed for reading (`seal`)."""
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
              + "".join(f" {shlex.quote(o)}" for o in overrides) + where
              + (" --pack" if pack else ""),
              "wall_s": round(time.perf_counter() - started, 1), "resumed": bool(resumed),
              "cpu_s": round(time.process_time() - cpu, 1),
              "runs_wall_s": store.training_seconds(_records(out, command)),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "git_commit": git_commit(), "jax": jax.__version__,
              "device": f"{jax.devices()[0].device_kind} x{jax.device_count()}",
              "host": f"{platform.machine()}, {_cpu_count()} CPU cores"}
    store.write_json(out / "study.json", record)
    if pack:
        for path in seal(out, command):
            print(f"packed {_shown(path)}")
    return record


def _shown(out: Path) -> str:
    """A results folder as the command line names it: relative to the repository if inside."""
    out = out.resolve()
    return str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else str(out)


def sweep_folders(out: Path, command: str) -> list[Path]:
    """The sweep folders of a study: itself, each cell of a scale sweep, or a branched
    measurement's base and branches."""
    from scaling.store import layout
    from scaling.store.cells import is_cells_folder, read_cells

    if command == "branch":
        return [layout.base_dir(out), layout.branches_dir(out)]
    if is_cells_folder(out):
        return [out / c["folder"] for c in read_cells(out)["cells"]]
    return [out]


def _records(out: Path, command: str) -> list[dict]:
    """Every run record of the study."""
    from scaling import store

    return [r for folder in sweep_folders(out, command) for r in store.load(folder)]


def seal(out: Path, command: str) -> list[Path]:
    """Each sweep folder's runs packed into its runs.tar.xz and its resumable state removed
    (scaling.store.archive.seal): what is committed for `scaling analyze` to redo the study."""
    from scaling.store.archive import seal as seal_folder

    return [seal_folder(folder) for folder in sweep_folders(out, command)]


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", help="study name: configs/<name>.yaml")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides")
    parser.add_argument("--out", type=Path, help="results folder (default results/<name>)")
    parser.add_argument("--quiet", action="store_true", help="no live progress (logs)")
    parser.add_argument("--pack", action="store_true",
                        help="then pack each sweep folder's runs into its runs.tar.xz and remove "
                             "runs/ and the state a sweep resumes from (to commit the study)")
    args = parser.parse_args(argv)
    record = run(args.name, args.out or ROOT / "results" / args.name, args.overrides, args.quiet,
                 args.pack)
    print(f"{args.name}: {record['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
