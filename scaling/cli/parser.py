"""The `scaling` command line: every subcommand's arguments, checked as they are parsed.

Only argparse and jax-free modules are imported here, so `scaling plan` and `scaling --help`
start at once; what a subcommand runs lives in its own module (scaling.cli.main dispatches).
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from scaling.cli.launchers import DEFAULT as DEFAULT_LAUNCHER, LAUNCHERS
from scaling.config.names import (INTERVAL_METHODS, LR_SELECTIONS, REACH_RULES, SCHEDULES,
                                   VIEW_TABLE)
from scaling.errors import ConfigError
from scaling.store.imports import UNITS as IMPORT_UNITS
from scaling.sweep.grid import parse_shard
from scaling.sweep.progress import MODES as PROGRESS_MODES


class UsageError(Exception):
    """Bad command-line input; main prints it as one line and exits 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so errors are one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _positive(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value <= 0:
            noun = "integer" if kind is int else "number"
            raise argparse.ArgumentTypeError(f"got {text!r}, expected a positive {noun}")
        return value
    return parse


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a number with 0 <= x < 1")
    return value


def _open_fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a number with 0 < x < 1")
    return value


def _non_negative_int(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a non-negative integer")
    return int(text)


def _window(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 1:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a number > 1")
    return value


def _shard(text: str) -> tuple[int, int]:
    try:
        return parse_shard(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--shard: ")) from None


# ---------------------------------------------------------------- the subcommands

CALCULATOR = ("examples", "batch_size", "epochs", "steps", "max_examples", "max_tokens", "tokens",
              "tokens_per_example", "drop_last", "warmup_fraction", "warmup_steps",
              "accumulation", "data_shards", "schedule", "decay_fraction", "lr_ref", "batch_ref")


def add_plan(sub: Any) -> None:
    p = sub.add_parser(
        "plan", help="steps, epochs, examples, tokens and warnings per batch size; no compute",
        description="Run arithmetic for a sweep config, or for numbers given as options "
                    "(the calculator: scaling plan --examples 800 --batch-size 8 --epochs 3).")
    p.add_argument("config", nargs="?", help="sweep config (YAML)")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides of the config")
    p.add_argument("--json", action="store_true", help="print a JSON array, one object per batch")
    p.add_argument("--device-memory", type=_positive(float), metavar="GB",
                   help="with a CONFIG: per batch size, the per-device bytes of parameters, "
                        "optimizer state, gradients and activations (XLA's analysis of the "
                        "chunk compiled ahead, not run) and the accumulation, fsdp and group "
                        "width that fit devices of GB gigabytes; exit 1 if a batch cannot fit")
    c = p.add_argument_group("calculator (instead of a config)")
    c.add_argument("--examples", type=_positive(int), help="training-set size (omit: sampled data)")
    c.add_argument("--batch-size", type=_positive(int), action="append", help="repeatable")
    c.add_argument("--epochs", type=_positive(float), help="epoch budget (may be fractional)")
    c.add_argument("--steps", type=_positive(int), help="step budget")
    c.add_argument("--max-examples", type=_positive(int), help="example budget")
    c.add_argument("--max-tokens", type=_positive(int), help="token budget")
    c.add_argument("--tokens", type=_positive(int), help="tokens in the whole training set")
    c.add_argument("--tokens-per-example", type=_positive(float))
    c.add_argument("--drop-last", action="store_true", help="drop each epoch's partial batch")
    c.add_argument("--warmup-fraction", type=_fraction, help="warm-up as a share of the run")
    c.add_argument("--warmup-steps", type=_non_negative_int, help="fixed warm-up (discouraged)")
    c.add_argument("--accumulation", type=_positive(int), help="gradient-accumulation steps")
    c.add_argument("--data-shards", type=_positive(int), help="data-parallel devices")
    c.add_argument("--schedule", choices=SCHEDULES)
    c.add_argument("--decay-fraction", type=_positive(float),
                   help="wsd: the share of the run's steps that decay (default 0.2)")
    c.add_argument("--lr-ref", type=_positive(float), help="learning rate at --batch-ref")
    c.add_argument("--batch-ref", type=_positive(int), help="reference batch size for lr rules")


def _add_compile_cache(p: argparse.ArgumentParser) -> None:
    p.add_argument("--compile-cache", metavar="DIR",
                   help="keep compiled programs here, so a resumed or repeated run does not "
                        "compile again (default: ~/.cache/scaling/jax-compile)")
    p.add_argument("--no-compile-cache", action="store_true", help="compile everything afresh")


def _add_partial(p: argparse.ArgumentParser) -> None:
    p.add_argument("--partial", action="store_true",
                   help="analyse a folder even while other processes train groups in it "
                        "(marked partial in analysis.json and report.md)")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="sweep config (YAML)")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides of the config")
    _add_compile_cache(p)
    p.add_argument("--out", help="results folder (default: runs/<config name>)")
    p.add_argument("--force", action="store_true", help="write into a folder made by another config")
    p.add_argument("--quiet", action="store_true", help="no progress and no messages but "
                   "warnings; errors and the end table still print")
    p.add_argument("--progress", choices=PROGRESS_MODES, default="auto",
                   help="each group's progress: a live bar, plain lines (at most one a minute per "
                        "group; for files and cluster logs), or none; auto: a bar on a terminal, "
                        "else lines")
    p.add_argument("--dry-run", action="store_true",
                   help="print the runs, their groups and the plan; train and write nothing")
    p.add_argument("--shard", type=_shard, metavar="I/N",
                   help="train only shard I of N (0-based), e.g. one per host or job-array task")
    p.add_argument("--wait", action="store_true",
                   help="wait for the groups other processes are training in the folder (and "
                        "train any they leave unfinished); with --launcher slurm, for every task")


def add_train(sub: Any) -> None:
    p = sub.add_parser(
        "train", help="train one batch size's runs (its learning rates x seeds) as vmapped groups",
        description="Train the runs of one batch size of a config and write the run files "
                    "(config.json, metrics.jsonl, summary.json) under OUT/runs/.")
    _add_run_options(p)
    p.add_argument("--batch-size", type=_positive(int),
                   help="which of the config's batch sizes (needed when it lists several)")


def add_sweep(sub: Any) -> None:
    p = sub.add_parser(
        "sweep", help="train the whole grid: batch sizes x learning rates x seeds",
        description="Train every unfinished run of a config's grid into OUT/runs/; running it "
                    "again skips finished runs (resume) and runs only new grid points (extend).")
    _add_run_options(p)
    p.add_argument("--no-analyze", action="store_true",
                   help="skip the analysis, figures and report.md that follow a complete sweep")
    _add_partial(p)
    s = p.add_argument_group(
        "launcher (scaling.sweep.launch; slurm needs pip install 'scaling[slurm]')")
    s.add_argument("--launcher", choices=tuple(LAUNCHERS), default=DEFAULT_LAUNCHER,
                   help="local: train here (default); slurm: submit one job array of shards")
    s.add_argument("--jobs", type=_positive(int),
                   help="job-array tasks, one shard each (default: one per group, at most 16)")
    s.add_argument("--nodes", type=_positive(int), help="nodes per task (default 1); a task's "
                   "processes, one per node, train its shard together through jax.distributed")
    s.add_argument("--partition", help="SLURM partition (default: the cluster's)")
    s.add_argument("--time", type=_positive(int), help="minutes per task (default 60); a task "
                   "that runs out resumes when the same command is submitted again")
    s.add_argument("--gpus-per-task", type=_positive(int), help="GPUs on each node of a task")
    s.add_argument("--cpus-per-task", type=_positive(int))
    s.add_argument("--mem", type=_positive(float), help="GB of memory on each node of a task")
    s.add_argument("--slurm-folder", help="submitit's logs and pickles (default: OUT/slurm)")
    p.set_defaults(batch_size=None)


def add_analyze(sub: Any) -> None:
    p = sub.add_parser(
        "analyze", help="fits, figures and report.md for a results folder",
        description="Steps to target, best learning rates, trade-off fits with bootstrap "
                    "intervals and the LR-rule comparison of a sweep's finished runs; writes "
                    "DIR/analysis.json, DIR/figures/*.png and DIR/report.md.")
    p.add_argument("dir", help="results folder (holds sweep.yaml and runs/)")
    p.add_argument("--targets", nargs="+", action="extend", metavar="T",
                   help="targets to analyse, e.g. eval_loss<=0.5 (default: the config's)")
    p.add_argument("--bootstrap", type=_non_negative_int, default=1000,
                   help="bootstrap draws for percentile intervals; 0: no intervals (default 1000)")
    p.add_argument("--rule", choices=REACH_RULES,
                   help="when a run has reached a target (default: the sweep's reached.rule)")
    p.add_argument("--window", type=_window, help="window factor of rules sustained and "
                   "smoothed (default: the sweep's reached.window)")
    p.add_argument("--lr-selection", choices=LR_SELECTIONS,
                   help="each batch size's learning rate and steps (default: the sweep's "
                        "analysis.lr_selection)")
    p.add_argument("--interval", choices=INTERVAL_METHODS,
                   help="how intervals resample the seeds: jackknife (leave one out, Student's "
                        "t) or percentile (bootstrap) (default: the sweep's analysis.interval)")
    p.add_argument("--view", choices=list(VIEW_TABLE), help="steps (to targets), fixed_budget "
                   "(final metric at the budget) or both (default: the sweep's analysis.view)")
    p.add_argument("--metric", help="the fixed-budget view's metric (default: the sweep's "
                   "analysis.metric, else eval_loss)")
    p.add_argument("--json", action="store_true", help="print analysis.json instead of the table")
    p.add_argument("--quiet", action="store_true", help="print only where the files are")
    _add_partial(p)


def add_import(sub: Any) -> None:
    p = sub.add_parser(
        "import", help="runs from any training code (CSV, JSON lines, TensorBoard) as a results "
                       "folder",
        description="Read runs written by other training code and write them in this "
                    "project's results format under --out, for scaling analyze, compare and "
                    "report: a table with one row per run (final values), curves with "
                    "several rows per run (a step column), or TensorBoard event folders (one "
                    "run per folder). Runs spanning several (params, tokens) cells make a "
                    "parent folder with one results folder per cell (docs/import.md).")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="CSV or JSON-lines files, or TensorBoard folders")
    p.add_argument("--out", required=True, help="results folder to write")
    p.add_argument("--column", action="append", default=[], metavar="FIELD=NAME",
                   help="read FIELD from column NAME (may hold spaces; quote it); FIELD is "
                        "batch_size, learning_rate, seed, step, examples, tokens, params, run, "
                        "status, unit, or a metric name such as eval_loss (repeatable)")
    p.add_argument("--unit", choices=IMPORT_UNITS,
                   help="what a batch size counts (default: examples)")
    p.add_argument("--tokens-per-example", type=_positive(float),
                   help="tokens in one example or sequence (to count tokens from examples)")
    p.add_argument("--metric", default="eval_loss",
                   help="the metric the fixed-budget view reads (default eval_loss)")
    p.add_argument("--targets", nargs="+", action="extend", metavar="T",
                   help="targets for the steps view, e.g. eval_loss<=3.5 (curves only)")
    p.add_argument("--name", help="the study's name (default: the --out folder's)")
    t = p.add_argument_group("TensorBoard folders")
    t.add_argument("--batch-size", type=_positive(int), help="every run's batch size")
    t.add_argument("--learning-rate", type=_positive(float), help="every run's learning rate")
    t.add_argument("--seed", type=int, help="every run's seed (default 0)")
    t.add_argument("--runs-table", metavar="FILE", help="CSV or JSON lines naming each run "
                   "folder (column run) with its batch_size, learning_rate, seed, params")
    p.add_argument("--force", action="store_true", help="replace an earlier import in --out")
    p.add_argument("--quiet", action="store_true", help="print only where the files are")


def add_gns(sub: Any) -> None:
    p = sub.add_parser(
        "gns", help="train one run with the noise-scale estimator; B_simple vs training loss",
        description="Train one run (the config's first batch size and learning rate unless "
                    "given), print B_simple (and B_noise, Adam's B_simple where enabled) against "
                    "the training loss at each evaluation point, write the run files under "
                    "OUT/runs/ and OUT/noise_vs_loss.png.")
    p.add_argument("config", help="config (YAML)")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides of the config")
    p.add_argument("--batch-size", type=_positive(int), help="default: the config's first")
    p.add_argument("--lr", type=_positive(float), help="default: the config's first for that batch")
    p.add_argument("--out", help="results folder (default: runs/<config name>-gns)")
    p.add_argument("--force", action="store_true", help="write into a folder made by another config")
    p.add_argument("--quiet", action="store_true", help="no progress; the table still prints")
    _add_compile_cache(p)


def add_prepare_text(sub: Any) -> None:
    p = sub.add_parser(
        "prepare-text", help="byte-level token files for task tokens from plain text files",
        description="Concatenate the text files, tokenise them one token per byte (vocabulary "
                    "256, uint16 ids) and write OUT/train.bin, OUT/eval.bin (the last "
                    "--eval-fraction of the tokens) and OUT/meta.json (dtype, vocab, sources "
                    "with sha256), the files task tokens reads.")
    p.add_argument("files", nargs="+", help="text files, concatenated in the order given")
    p.add_argument("--out", required=True, help="folder for train.bin, eval.bin and meta.json")
    p.add_argument("--eval-fraction", type=_open_fraction, default=0.1,
                   help="share of the tokens (the last ones) held out for evaluation (default 0.1)")
    p.add_argument("--quiet", action="store_true", help="print nothing")


def add_bench(sub: Any) -> None:
    p = sub.add_parser(
        "bench", help="one group trained by the engine and by a tutorial-style loop, timed",
        description="Train one group of a config's runs for a fixed number of steps with the "
                    "engine and with a tutorial-style loop (runs one after another, a jitted "
                    "step per step, the loss read every step), side by side in this process; "
                    "print compile and training seconds, examples per second, MFU and the "
                    "ratio. Nothing is written.")
    p.add_argument("config", help="config (YAML)")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides of the config")
    p.add_argument("--batch-size", type=_positive(int), action="append",
                   help="repeatable (default: each of the config's batch sizes)")
    p.add_argument("--steps", type=_positive(int), default=1000, help="steps per run (1000)")
    p.add_argument("--runs", type=_positive(int),
                   help="runs in the group, taken from the grid in order (default: one group's)")
    p.add_argument("--repeats", type=_positive(int), default=1,
                   help="timed repetitions of each arm; the fastest counts (1)")
    p.add_argument("--fsdp", type=_positive(int), action="append",
                   help="repeatable: also time the engine alone at each train.fsdp K given "
                        "(each run's parameters and optimizer state over K devices), side by "
                        "side, e.g. --fsdp 1 --fsdp 4")
    _add_compile_cache(p)


def add_compare(sub: Any) -> None:
    p = sub.add_parser(
        "compare", help="several finished sweeps overlaid: figures and one B_crit table",
        description="Overlay the steps-vs-batch, examples-vs-steps, best-LR-vs-batch and "
                    "noise-scale-vs-loss figures of finished sweeps and tabulate B_crit (with "
                    "its interval), S_min, E_min and B_simple per sweep and target, with each "
                    "sweep's learning-rate rule finding, in OUT/report.md and OUT/figures/.")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="results folders (two or more)")
    p.add_argument("--labels", nargs="+", help="one name per folder (default: folder names)")
    p.add_argument("--target", help="the target to compare on (needed when the sweeps' targets "
                                    "differ)")
    p.add_argument("--out", required=True, help="folder for report.md and figures/")
    _add_partial(p)


def add_branch(sub: Any) -> None:
    p = sub.add_parser(
        "branch", help="the local critical batch size along training, from branched runs",
        description="Train a base run at batch B0 (one per seed; branch.batch_size, "
                    "branch.learning_rate), save its state at points along training, branch "
                    "from each point at k x B0 (branch.factors, learning rate by "
                    "branch.lr_rule) for a window of examples, and report the largest batch "
                    "whose loss keeps up with the base against the base's noise scales: "
                    "OUT/base/ (the base's sweep folder), OUT/branches/runs/, "
                    "OUT/analysis.json, OUT/report.md, OUT/figures/. Running it again resumes.")
    p.add_argument("config", help="config (YAML) with a branch: section (docs/branching.md)")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides of the config")
    _add_compile_cache(p)
    p.add_argument("--out", help="results folder (default: runs/<config name>-branch)")
    p.add_argument("--force", action="store_true",
                   help="write into a folder whose base was saved at other points")
    p.add_argument("--quiet", action="store_true", help="no progress and no messages but warnings")
    p.add_argument("--progress", choices=PROGRESS_MODES, default="auto",
                   help="each group's progress: bar, lines or none (auto: a bar on a terminal)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (points, factors, windows); train and write nothing")
    p.add_argument("--no-analyze", action="store_true", help="skip analysis.json and the report")
    p.add_argument("--wait", action="store_true",
                   help="wait for the groups other processes are training in the folder")
    _add_partial(p)
    p.add_argument("--bootstrap", type=_non_negative_int, default=1000,
                   help="0: no interval for the local critical batch size; any other "
                        "value: its paired interval over seeds (default 1000)")
    p.add_argument("--base-run", metavar="RUN_DIR",
                   help="take the base from a finished sweep's run (OUT/runs/<run_id>): its "
                        "batch size, learning rate, seed and optimizer scalars; it trains again, "
                        "reproducing the run, with its state saved at the points (give the "
                        "sweep's sweep.yaml as CONFIG)")


def add_repair(sub: Any) -> None:
    p = sub.add_parser(
        "repair", help="one clean pass of rows per run, after two processes wrote a folder",
        description="Rewrite each run's metrics.jsonl whose steps repeat or go back (two "
                    "processes wrote the run) with one row per step, where the copies of each "
                    "step agree and no evaluation step is missing; refuse, naming why, where "
                    "they do not (docs/results-format.md).")
    p.add_argument("dir", help="results folder (holds runs/)")
    p.add_argument("--dry-run", action="store_true", help="say what it would do; write nothing")


SUBCOMMANDS = (add_plan, add_train, add_sweep, add_analyze, add_gns, add_prepare_text, add_bench,
               add_compare, add_branch, add_import, add_repair)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="scaling", description="Large-batch scaling experiments in JAX.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(sub)
    return parser
