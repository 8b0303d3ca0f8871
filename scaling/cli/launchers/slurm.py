"""`--launcher slurm`: the prepared sweep's shards that still have work, submitted as one SLURM
job array (scaling.sweep.launch); with --wait, followed until each task has ended
(scaling.sweep.watch), then the end table and the analysis."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scaling.cli.launchers import refuse_others_options
from scaling.cli.launchers.work import SplitWork
from scaling.cli.main import main
from scaling.config import ConfigError
from scaling.store import layout
from scaling.sweep import launch, watch


class Slurm:
    """Submits one job-array task per shard (--jobs N of them); each task is a local shard."""

    splits = True
    trains_here = False

    def check(self, args: argparse.Namespace) -> None:
        """Refuse --shard (the launcher makes the shards) and a missing submitit, before any
        compute."""
        refuse_others_options("slurm", args)
        if args.shard is not None:
            raise ConfigError("--shard: --launcher slurm makes the shards itself (one per task, "
                              "--jobs N); give --jobs instead")
        launch.import_submitit()

    def launch(self, work: SplitWork, args: argparse.Namespace) -> int:
        return submit(work, args)


def submit(work: SplitWork, args: argparse.Namespace) -> int:
    """Submit the shards of the (validated) grid that still have work as one job array, and
    with --wait wait for them (scaling.sweep.watch) and then the work's analysis."""
    out = Path(work.out)
    jobs = launch.task_count(args.jobs, work.groups)
    if args.jobs is not None and jobs < args.jobs:
        print(f"note: --jobs {args.jobs}: the grid has {jobs} groups; submitting {jobs} tasks")
    folder = Path(args.slurm_folder or out / layout.SLURM)
    flags = launch.task_flags(args.force, args.quiet, args.compile_cache, args.no_compile_cache,
                              args.wait or args.no_analyze)
    argvs = launch.shard_argvs(args.config, args.overrides, out, jobs, flags)
    todo = work.todo(jobs)
    if args.dry_run:
        print(work.describe(None, False))
        print(f"\n--launcher slurm: would submit {len(todo)} of {jobs} tasks (shards "
              f"{', '.join(f'{i}/{jobs}' for i in todo) or 'none'}), logs in {folder}")
        return 0
    if len(todo) < jobs:
        print(f"{_shards(sorted(set(range(jobs)) - set(todo)), jobs)} nothing left to do; "
              f"{'not submitted' if todo else 'nothing to submit'}")
    if not todo:
        return _after(work, args, [], 0)
    res = launch.Resources(args.time or launch.DEFAULT_TIME_MIN, args.nodes or 1, args.partition,
                           args.gpus_per_task, args.cpus_per_task, args.mem)
    executor = launch.make_executor(folder, f"scaling-{work.cfg.name}", res)
    submitted = launch.submit(executor, main, [argvs[i] for i in todo], res.nodes)
    print(f"submitted {_tasks(len(submitted))} (job ids {', '.join(j.job_id for j in submitted)}); "
          f"logs in {folder}")
    if not args.wait:
        print(f"once every task is done, run: scaling analyze {out}")
        return 0
    tasks = [watch.ArrayTask(i, jobs, job) for i, job in zip(todo, submitted)]
    failed = watch.wait(tasks, work.done, executor.cluster == "slurm")
    return _after(work, args, failed, len(tasks))


def _shards(indices: list[int], jobs: int) -> str:
    """'shard 1/4 has' or 'shards 0/4, 2/4 have'."""
    names = ", ".join(f"{i}/{jobs}" for i in indices)
    return f"shard {names} has" if len(indices) == 1 else f"shards {names} have"


def _tasks(n: int) -> str:
    return f"{n} task" if n == 1 else f"{n} tasks"


def _after(work: SplitWork, args: argparse.Namespace, failed: list[str], tasks: int) -> int:
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
        print(f"run: scaling analyze {Path(work.out)}")
        return 0
    print()
    return work.analyze()
