"""Every file and folder name of a results folder, defined once (docs/results-format.md).

Others read these folders (notebooks, plots, other tools), so the names are a contract: every
module that joins a path inside a results folder takes the name from here (tests/test_layout.py
fails on one spelled out in a path elsewhere). Three kinds of folder share them: a sweep
folder (runs/ and the sweep's own files), a multi-cell folder (cells.json and one sweep folder
per cell under cells/) and a branch folder (branch.yaml, plan.json, the base's sweep folder in
base/ and the branches' runs under branches/). Imports nothing heavy, so the jax-free commands
read it too.
"""

from __future__ import annotations

from pathlib import Path

# ---------------------------------------------------------------- a sweep folder

SWEEP_YAML = "sweep.yaml"  # the resolved config, every default filled in: what analysis reads
RUNS = "runs"  # one folder per run, named by its run id
RUN_CONFIG = "config.json"  # a run's resolved settings, written when it starts
METRICS = "metrics.jsonl"  # a run's rows, appended one chunk at a time
SUMMARY = "summary.json"  # written last: a run without it is not done
RUN_FILES = (RUN_CONFIG, SUMMARY, METRICS)  # a run's files, in the order the archive packs them
ARITHMETIC = "arithmetic.json"  # each batch size's run arithmetic, as the sweep planned it
ROUNDS = "rounds.json"  # the learning-rate search's rounds, per batch size
MEMORY_PLAN = "memory_plan.json"  # the settings a sweep given train.memory_limit_gb chose
CHECKPOINTS = "checkpoints"  # a folder per group still training, holding its saved states
GROUP_RUNS = "runs.json"  # in a group's checkpoint folder: its run ids in slot order
CLAIMS = "claims"  # a lock file per group a process trains: one writer per group
TENSORBOARD = "tensorboard"  # event files per run (log.tensorboard)
SLURM = "slurm"  # a job array's logs and pickles, unless --slurm-folder says elsewhere
ARCHIVE = "runs.tar.xz"  # the finished runs' files packed, read in place of runs/

# ---------------------------------------------------------------- what `scaling analyze` writes

ANALYSIS = "analysis.json"  # the numbers: what the report, the figures and compare read
REPORT = "report.md"  # the numbers in words and tables
FIGURES_DIR = "figures"  # the report's PNGs
FIGURES_PDF = "figures.pdf"  # every figure in one file
INDEX_HTML = "index.html"  # report.md as a web page

# ---------------------------------------------------------------- a multi-cell folder

CELLS = "cells"  # one sweep folder per cell (a model size N and a budget D)
CELLS_MANIFEST = "cells.json"  # names the cells with their N, D and C: marks the folder

# ---------------------------------------------------------------- a branch folder

BRANCH_YAML = "branch.yaml"  # the resolved config of `scaling branch`: marks the folder
BRANCH_PLAN = "plan.json"  # the base's batch size, rate and points, as the analysis reads them
BASE = "base"  # the base's own sweep folder, its checkpoints at the points kept
BRANCHES = "branches"  # the branches' run folders, under its own runs/


def runs_dir(out: str | Path) -> Path:
    return Path(out) / RUNS


def record_lock(out: str | Path, name: str) -> Path:
    """The lock beside the record file `name` (rounds.json) that its writers take in turn."""
    return Path(out) / f".{name}.lock"


def run_dir(out: str | Path, run_id: str) -> Path:
    return runs_dir(out) / run_id


def checkpoint_dir(out: str | Path, group: str) -> Path:
    """Where a group's mid-run checkpoints live while it trains (scaling.train.checkpoint)."""
    return Path(out) / CHECKPOINTS / group


def group_run_lists(out: str | Path) -> list[Path]:
    """The run list of every group whose checkpoints are kept, sorted: how a branch or a
    cooldown finds the saved state of given runs."""
    return sorted((Path(out) / CHECKPOINTS).glob(f"*/{GROUP_RUNS}"))


def cell_folder(name: str) -> str:
    """A cell's folder relative to its parent, as the manifest records it."""
    return f"{CELLS}/{name}"


def base_dir(out: str | Path) -> Path:
    return Path(out) / BASE


def branches_dir(out: str | Path) -> Path:
    return Path(out) / BRANCHES
