"""`scaling train` and `scaling sweep`: train here, or submit the shards as a SLURM job array."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple

from scaling import store
from scaling.cli.analyze import after_training, analyze_cells_folder, analyze_folder
from scaling.cli.main import main
from scaling.cli.parser import UsageError
from scaling.config import Config, ConfigError, load
from scaling.sweep import cooldown, launch, prepare as prepare_mod, runner, scale, watch
from scaling.train import compile_cache
from scaling.train.mesh import is_leader, maybe_initialize_distributed

# Options that mean something only to the slurm launcher (argparse dest -> flag).
SLURM_ONLY = {"jobs": "--jobs", "nodes": "--nodes", "partition": "--partition", "time": "--time",
              "gpus_per_task": "--gpus-per-task", "cpus_per_task": "--cpus-per-task",
              "mem": "--mem", "slurm_folder": "--slurm-folder"}


def run_train(args: argparse.Namespace) -> int:
    cfg = load(args.config, args.overrides)
    if cfg.scale or cfg.budget.cooldowns:
        raise UsageError(f"{'scale' if cfg.scale else 'budget.cooldowns'}: scaling train trains "
                         "one batch size of one sweep; a config with scale axes or cooldowns "
                         "trains with scaling sweep")
    if args.batch_size is None and len(cfg.batch.sizes) > 1:
        raise UsageError(f"--batch-size: missing; the config lists batch sizes {cfg.batch.sizes}, "
                         "train runs one of them (scaling sweep runs them all)")
    return _run(cfg, args, [args.batch_size or cfg.batch.sizes[0]])


def run_sweep(args: argparse.Namespace) -> int:
    """Train the grid (or submit it: --launcher slurm), then analyse unless --no-analyze/--shard."""
    check_launcher_options(args)
    cfg = load(args.config, args.overrides)
    if cfg.scale:
        return _scale_sweep(cfg, args)
    if cfg.budget.cooldowns:
        return _cooldown_sweep(cfg, args)
    out = _out(cfg, args)
    analyze = lambda: after_training(Path(out), args.partial, lambda: analyze_folder(
        Path(out), quiet=args.quiet, partial=args.partial))
    if args.launcher == "slurm":
        prepared = prepare_mod.prepare(cfg, out, None, args.force, None)
        return submit_work(_sweep_work(prepared), cfg, args, analyze)
    _run(cfg, args, None)
    return _finish(args, out, analyze)


def _finish(args: argparse.Namespace, out: str, analyze: Callable[[], int]) -> int:
    """After training here: the analysis, unless --no-analyze, --dry-run or --shard."""
    if args.no_analyze or args.dry_run or args.shard is not None or not is_leader():
        if args.shard is not None and not args.dry_run:
            hint = "" if args.no_analyze else \
                f"; once every shard is, run: scaling analyze {out}"
            print(f"shard done{hint}")
        return 0
    print()
    return analyze()


def _scale_sweep(cfg: Config, args: argparse.Namespace) -> int:
    """A config with scale axes: every cell checked and measured, then trained here (this
    shard's pieces) or submitted, then the laws across the cells (scaling.sweep.scale)."""
    maybe_initialize_distributed()
    compile_cache.enable(args.compile_cache, args.no_compile_cache)
    out = _out(cfg, args)
    cells = scale.prepare_cells(cfg, out, args.force)
    analyze = lambda: after_training(Path(out), args.partial, lambda: analyze_cells_folder(
        Path(out), 1000, False, args.quiet, None, None, args.partial))
    if args.launcher == "slurm":
        return submit_work(_scale_work(cells, out), cfg, args, analyze)
    if args.dry_run:
        print(scale.describe(cells, args.shard, args.force))
        return 0
    if not scale.run(cfg, out, args.force, args.quiet, args.shard, shown=args.progress,
                     cells=cells, wait=args.wait) and is_leader():
        print(f"nothing to do: every run is already finished in {out}")
    if is_leader():
        print(scale.final_table(cells))
    return _finish(args, out, analyze)


def _cooldown_sweep(cfg: Config, args: argparse.Namespace) -> int:
    """A config with budget.cooldowns: one cell per budget, the stable runs first, then each
    budget's decay from their saved states, then the laws across the budgets
    (scaling.sweep.cooldown). Trained here, in one process."""
    for given, flag in ((args.launcher == "slurm", "--launcher slurm"),
                        (args.shard is not None, "--shard")):
        if given:
            raise UsageError(f"{flag}: a sweep with budget.cooldowns trains in one process (its "
                             "cooldowns wait for the stable runs' saved states)")
    maybe_initialize_distributed()
    compile_cache.enable(args.compile_cache, args.no_compile_cache)
    out = _out(cfg, args)
    cells = cooldown.prepare_cells(cfg, out, args.force)
    if args.dry_run:
        print(cooldown.describe(cells, args.force))
        return 0
    if not cooldown.run(cfg, out, cells, args.force, args.quiet, shown=args.progress,
                        wait=args.wait) and is_leader():
        print(f"nothing to do: every run is already finished in {out}")
    if is_leader():
        print(scale.final_table(cells))
        print(cooldown.cost_line(*cooldown.planned_examples(cells)))
    analyze = lambda: after_training(Path(out), args.partial, lambda: analyze_cells_folder(
        Path(out), 1000, False, args.quiet, None, None, args.partial))
    return _finish(args, out, analyze)


def _out(cfg: Any, args: argparse.Namespace) -> str:
    return args.out or f"runs/{cfg.name}"


def _run(cfg: Any, args: argparse.Namespace, batch_sizes: list[int] | None) -> int:
    """Train (or, with --dry-run, only describe), then print the end table per batch size."""
    maybe_initialize_distributed()
    compile_cache.enable(args.compile_cache, args.no_compile_cache)
    out = _out(cfg, args)
    prepared = prepare_mod.prepare(cfg, out, batch_sizes, args.force, args.shard)
    if args.dry_run:
        print(runner.describe(prepared))
        return 0
    summaries = runner.run(cfg, out, batch_sizes, args.force, args.quiet, args.shard,
                           shown=args.progress, wait=args.wait)
    if is_leader():
        if not summaries and all(store.is_done(out, r.run_id) for r in prepared.planned):
            print(f"nothing to do: every run is already finished in {out}")
        print(runner.final_table(prepared))
    return 0


# ---------------------------------------------------------------- --launcher slurm


def check_launcher_options(args: argparse.Namespace) -> None:
    """Refuse launcher options that would be ignored, and a missing submitit, before any compute."""
    if args.launcher == "local":
        given = [flag for dest, flag in SLURM_ONLY.items() if getattr(args, dest) not in (None, False)]
        if given:
            raise ConfigError(f"{given[0]}: an option of --launcher slurm; add --launcher slurm "
                              "or leave it out")
        return
    if args.shard is not None:
        raise ConfigError("--shard: --launcher slurm makes the shards itself (one per task, "
                          "--jobs N); give --jobs instead")
    launch.import_submitit()


class Work(NamedTuple):
    """What submitting a sweep's shards needs of it (an ordinary sweep's or a scale sweep's)."""

    out: Path
    groups: int  # vmapped groups of the whole grid: at most one task each
    describe: Callable[[], str]  # --dry-run
    todo: Callable[[int], list[int]]  # the shards of N that still have work
    done: Callable[[], tuple[int, int]]  # (finished, planned) runs on disk
    table: Callable[[], str]  # the end table


def _sweep_work(prepared: runner.Prepared) -> Work:
    return Work(prepared.out, len(prepared.units), lambda: runner.describe(prepared),
                lambda jobs: launch.shards_with_work(prepared, jobs),
                lambda: _runs_done(prepared), lambda: runner.final_table(prepared))


def _scale_work(cells: list[scale.ScaleCell], out: str) -> Work:
    return Work(Path(out), sum(len(c.prepared.units) for c in cells),
                lambda: scale.describe(cells, None, False),
                lambda jobs: scale.shards_with_work(cells, jobs),
                lambda: scale.runs_done(cells), lambda: scale.final_table(cells))


def submit_work(work: Work, cfg: Config, args: argparse.Namespace,
                analyze: Callable[[], int]) -> int:
    """Submit the shards of the (validated) grid that still have work as one job array, and
    with --wait wait for them (scaling.sweep.watch) and then `analyze`."""
    out = work.out
    jobs = launch.task_count(args.jobs, work.groups)
    if args.jobs is not None and jobs < args.jobs:
        print(f"note: --jobs {args.jobs}: the grid has {jobs} groups; submitting {jobs} tasks")
    folder = Path(args.slurm_folder or Path(out) / "slurm")
    flags = launch.task_flags(args.force, args.quiet, args.compile_cache, args.no_compile_cache,
                              args.wait or args.no_analyze)
    argvs = launch.shard_argvs(args.config, args.overrides, Path(out), jobs, flags)
    todo = work.todo(jobs)
    if args.dry_run:
        print(work.describe())
        print(f"\n--launcher slurm: would submit {len(todo)} of {jobs} tasks (shards "
              f"{', '.join(f'{i}/{jobs}' for i in todo) or 'none'}), logs in {folder}")
        return 0
    if len(todo) < jobs:
        print(f"{_shards(sorted(set(range(jobs)) - set(todo)), jobs)} nothing left to do; "
              f"{'not submitted' if todo else 'nothing to submit'}")
    if not todo:
        return _after(work, args, [], 0, analyze)
    res = launch.Resources(args.time or launch.DEFAULT_TIME_MIN, args.nodes or 1, args.partition,
                           args.gpus_per_task, args.cpus_per_task, args.mem)
    executor = launch.make_executor(folder, f"scaling-{cfg.name}", res)
    submitted = launch.submit(executor, main, [argvs[i] for i in todo], res.nodes)
    print(f"submitted {_tasks(len(submitted))} (job ids {', '.join(j.job_id for j in submitted)}); "
          f"logs in {folder}")
    if not args.wait:
        print(f"once every task is done, run: scaling analyze {out}")
        return 0
    tasks = [watch.Task(i, jobs, job) for i, job in zip(todo, submitted)]
    failed = watch.wait(tasks, work.done, executor.cluster == "slurm")
    return _after(work, args, failed, len(tasks), analyze)


def _shards(indices: list[int], jobs: int) -> str:
    """'shard 1/4 has' or 'shards 0/4, 2/4 have'."""
    names = ", ".join(f"{i}/{jobs}" for i in indices)
    return f"shard {names} has" if len(indices) == 1 else f"shards {names} have"


def _tasks(n: int) -> str:
    return f"{n} task" if n == 1 else f"{n} tasks"


def _runs_done(prepared: runner.Prepared) -> tuple[int, int]:
    """(finished, planned) runs of the whole grid on disk (the search's rounds recorded when it
    was submitted included)."""
    done = sum(store.is_done(prepared.out, r.run_id) for r in prepared.planned)
    return done, len(prepared.planned)


def _after(work: Work, args: argparse.Namespace, failed: list[str],
           tasks: int, analyze: Callable[[], int]) -> int:
    """The end of a waited (or empty) submission: failures, the end table, the analysis."""
    for line in failed:
        print(line, file=sys.stderr)
    print(work.table())
    if failed:
        print(f"{len(failed)} of {_tasks(tasks)} ended without success; rerun the same command "
              "to resume", file=sys.stderr)
        return 1
    if args.no_analyze:
        return 0
    if not args.wait:
        print(f"run: scaling analyze {work.out}")
        return 0
    print()
    return analyze()
