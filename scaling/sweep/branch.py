"""`scaling branch`: train a base run, save its state at points along training, and from each
point train branches at larger batch sizes for a window of examples (Merrill et al. 2025).

The folder it writes:

    OUT/branch.yaml               the resolved config
    OUT/plan.json                 what the base's saved states depend on (scaling.sweep.branch_plan)
    OUT/base/                     a sweep folder of the base runs at B0, one per seed, trained to
                                  the end; their states at the points under OUT/base/checkpoints/
    OUT/branches/runs/<id>/       each branch's config.json, metrics.jsonl and summary.json

The analysis (scaling.analysis.branching) reads it into OUT/analysis.json. Every branch of one
(point, factor) trains as one vmapped group started from the base's saved state
(GroupProgram.start_from); a killed command started again resumes the base from its newest
checkpoint and skips finished branches.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import jax

from scaling import config as config_mod, store
from scaling.config import Config, ConfigError
from scaling.config import arithmetic
from scaling.config.optimizer_rules import rule_values
from scaling.store import layout
from scaling.store.records import run_config, run_summary
from scaling.sweep import batches, group as group_mod, progress
from scaling.sweep.branch_plan import Branch, BranchPlan, branch_plan
from scaling.sweep.claiming import GroupClaims, claim_name
from scaling.sweep.prepare import Prepared, prepare as prepare_sweep
from scaling.sweep.segments import budget_in_examples
from scaling.sweep.session import Session
from scaling.train import start as start_mod
from scaling.train.checkpoint import GroupCheckpoints
from scaling.train.mesh import is_leader
from scaling.train.program import GroupProgram
from scaling.train.spec import GroupSpec, RunSpec, group_spec
from scaling.train.step import RunState

log = logging.getLogger(__name__)


def base_config(cfg: Config, bplan: BranchPlan) -> Config:
    """The config of the base runs: one batch size, one learning rate, trained to the end."""
    data = config_mod.to_dict(cfg)
    data["batch"]["sizes"], data["batch"]["schedules"] = [bplan.base_batch], []
    data["learning_rate"] = {"mode": "grid", "values": [bplan.base_lr]}
    data["train"]["stop_at_targets"] = False
    return config_mod.from_dict(data)


def from_run(cfg: Config, run_dir: Path) -> Config:
    """`cfg` with its base taken from a finished sweep's run: the batch size, learning rate,
    seed and optimizer scalars of RUN_DIR/config.json. The base then trains again, which
    reproduces the run (training is deterministic; `check_base` compares the two), with its
    state saved at the points. The run's task, model, optimizer, schedule and budget must be
    the config's: give the sweep's own sweep.yaml as the config."""
    path = Path(run_dir) / layout.RUN_CONFIG
    if not path.is_file():
        raise ConfigError(f"--base-run: {run_dir} holds no config.json; expected a run folder of "
                          "a sweep, e.g. OUT/runs/bs32-lr0.05-seed0")
    run = json.loads(path.read_text())
    if run.get("batch_schedule"):
        raise ConfigError(f"--base-run: {run_dir} is a batch-size schedule's run; expected a run "
                          "at one batch size")
    data = config_mod.to_dict(cfg)
    for key in ("task", "model", "schedule", "budget"):
        if run.get(key) != data[key]:
            raise ConfigError(f"--base-run: the run's {key} differs from the config's "
                              f"({run.get(key)!r} there, {data[key]!r} here); give the sweep's "
                              "own sweep.yaml as the config")
    if run["optimizer"]["name"] != cfg.optimizer.name:
        raise ConfigError(f"--base-run: the run trained with optimizer {run['optimizer']['name']!r}, "
                          f"the config names {cfg.optimizer.name!r}")
    data["branch"].update(batch_size=run["batch_size"], learning_rate=run["learning_rate"])
    data["seeds"] = [run["seed"]]
    data["optimizer"].update({k: run["optimizer"][k] for k in config_mod.AXES
                              if k not in cfg.optimizer.ruled})  # a rule sets those again
    return config_mod.from_dict(data)


def check_base(p: "PreparedBranch", run_dir: Path) -> str:
    """How closely the retrained base reproduces the run it was taken from: the largest relative
    difference of eval_loss at the evaluation steps both recorded (a vmapped group of another
    width rounds differently, so about 1e-6 is expected; much more means the run was trained
    by other code or on other devices)."""
    (base,) = p.base.planned
    theirs = {r["step"]: r.get("eval_loss")
              for r in store.read_metrics(Path(run_dir) / layout.METRICS)}
    mine = {r["step"]: r.get("eval_loss")
            for r in store.read_metrics(store.run_dir(p.base.out, base.run_id) / layout.METRICS)}
    common = [s for s in sorted(theirs) if s in mine and theirs[s] and mine[s]]
    if not common:
        return f"the base shares no evaluation step with {run_dir}"
    worst = max(abs(mine[s] - theirs[s]) / abs(theirs[s]) for s in common)
    verdict = "reproduces" if worst < 1e-4 else "does NOT reproduce"
    return (f"the base {verdict} {run_dir}: eval_loss at {len(common)} common evaluation steps "
            f"differs by at most {worst:.2g} (relative)")


def branch_spec(cfg: Config, bplan: BranchPlan, factor: int, examples: int,
                data_shards: int) -> GroupSpec:
    """The program of the branches at factor x B0: the base's budget in examples (so the
    schedule stands where the base's does), evaluated only at the windows' points, no targets
    (a branch trains its whole window), chunks that divide the window evenly."""
    spec, _ = group_spec(budget_in_examples(cfg, examples), factor * bplan.base_batch,
                                data_shards)
    window = bplan.window_steps(factor)
    chunk = math.ceil(window / math.ceil(window / cfg.train.chunk_steps))
    return spec.replace(stopping={"targets": (), "stop_at_targets": False}, chunk_steps=chunk,
                        evaluation={"every": None, "points_per_decade": 0,
                                    "at": tuple(bplan.branch_eval_steps(factor))})


@dataclass
class PreparedBranch:
    """A validated branched measurement, before any compute."""

    cfg: Config
    out: Path
    plan: BranchPlan
    base: Prepared
    specs: dict[int, GroupSpec]  # per factor, the branches' program


def _check_plan(out: Path, bplan: BranchPlan, force: bool) -> None:
    """Refuse a folder whose base was saved at other points or with another window."""
    path = out / layout.BRANCH_PLAN
    if force or not path.is_file():
        return
    there = json.loads(path.read_text())
    here = bplan.base_record()
    differ = [k for k in here if there.get(k) != here[k]]
    if differ:
        raise ConfigError(
            f"{out}: its base run was saved with other settings of {', '.join(differ)} ({differ[0]}: "
            f"{there.get(differ[0])!r} there, {here[differ[0]]!r} here); use a new --out folder "
            "or --force to train the base again. Factors, the learning-rate grid and rule may "
            "change freely.")


def prepare(cfg: Config, out: str | Path, force: bool = False) -> PreparedBranch:
    """Every check before compute: the plan, the base's sweep folder, each factor's program."""
    out = Path(out)
    runs_axis, data_shards = config_mod.validate_devices(cfg, jax.device_count())
    bplan = branch_plan(cfg, data_shards)
    _check_plan(out, bplan, force)
    base = prepare_sweep(base_config(cfg, bplan), layout.base_dir(out), force=force)
    spec, arith = base.specs[bplan.base_batch]
    base.specs[bplan.base_batch] = (
        spec.replace(evaluation={"at": tuple(bplan.base_eval_steps())}), arith)
    base.checkpoint_at = {bplan.base_batch: tuple(bplan.points)}
    specs = {k: branch_spec(cfg, bplan, k, arith.examples, data_shards)
             for k in bplan.trained_factors}
    return PreparedBranch(cfg, out, bplan, base, specs)


def run(cfg: Config, out: str | Path, force: bool = False, quiet: bool = False,
        shown: str = "auto", wait: bool = False) -> PreparedBranch:
    """Train the base runs (unless finished) and every unfinished branch, each group while
    this process holds its claim (scaling.sweep.claiming); `wait`: wait for the groups other
    processes hold. Branches need the base's saved states: while another process trains the
    base (and not `wait`), this one trains no branch."""
    p = prepare(cfg, out, force)
    if is_leader():
        p.out.mkdir(parents=True, exist_ok=True)
        store.atomic_write(p.out / layout.BRANCH_YAML, config_mod.to_yaml(cfg))
        store.write_json(p.out / layout.BRANCH_PLAN, p.plan.base_record())
        p.base.out.mkdir(exist_ok=True)
        store.atomic_write(p.base.out / layout.SWEEP_YAML, config_mod.to_yaml(p.base.cfg))
    session = Session(p.base, quiet, None, shown)
    try:
        _train_base(p, session, wait)
        if session.claims.left:
            session.claims.report()
            return p
        trainer = _Branches(p, session)
        trainer.train_all()
        while wait and trainer.claims.left:
            trainer.claims.wait()
            trainer.train_all()
        trainer.claims.report()
    finally:
        session.close()
    return p


def _train_base(p: PreparedBranch, session: Session, wait: bool) -> None:
    """The base runs not yet finished; with `wait`, also those another process held."""
    while True:
        todo = [r for r in p.base.planned if not store.is_done(p.base.out, r.run_id)]
        if todo:
            session.say(f"base: {len(todo)} run(s) at batch {p.plan.base_batch}, saved at steps "
                        + ", ".join(map(str, p.plan.points)))
            batches.train(session, todo)
        if not (wait and session.claims.left):
            return
        session.claims.wait()


class _Branches:
    """Trains the branch groups from the base's saved states."""

    def __init__(self, p: PreparedBranch, session: Session) -> None:
        self.p, self.session = p, session
        self.base_program = session.program(p.plan.base_batch)  # builds the devices and data
        self.ctx = session.context
        self.programs: dict[int, GroupProgram] = {}
        self.states: dict[int, tuple[RunState, dict[str, int]]] = {}
        self.base_runs = {r.spec.seed: r for r in p.base.planned}
        self.folder = layout.branches_dir(p.out)
        self.claims = GroupClaims(self.folder)
        self.tokens_per_example = self.ctx.task.tokens_per_example(p.cfg.task.options)
        self.outlet = group_mod.Outlet(self.folder, session.trackers, session.hooks, self.claims,
                                       self.tokens_per_example)

    def program(self, factor: int) -> GroupProgram:
        if factor not in self.programs:
            self.programs[factor] = GroupProgram(self.ctx.task, self.p.specs[factor], self.ctx.mesh)
        return self.programs[factor]

    def base_state(self, point: int) -> tuple[RunState, dict[str, int]]:
        """Every base run's state after `point` steps, side by side, and each running run's
        slot in it (runs stopped before the point have none)."""
        if point not in self.states:
            restored = []
            for listing in layout.group_run_lists(self.p.base.out):
                ck = GroupCheckpoints(listing.parent, 0, True, (point,))
                start = ck.restore(self.base_program, [], self.ctx.data, self.ctx.eval_data,
                                   step=point)
                ck.finish()
                if start is None:
                    raise ConfigError(
                        f"{listing.parent}: the base state at step {point} is missing or "
                        f"damaged; remove {self.p.base.out} to train the base again")
                restored.append((json.loads(listing.read_text()), start))
            if not restored:
                raise ConfigError(f"{self.p.base.out}: holds no saved base states; remove it "
                                  "to train the base again")
            # one point's states held at a time
            self.states = {point: start_mod.side_by_side(self.base_program, restored)}
        return self.states[point]

    def train_all(self) -> None:
        """Every (point, factor) group not finished and not held by another process."""
        for point, factor, branches in self.p.plan.groups():
            self.train(point, factor, branches)

    def train(self, point: int, factor: int, branches: list[Branch]) -> None:
        """One (point, factor) group, while this process holds its claim; unless every branch
        of it is done, the whole group trains again, so its rows are bit-identical to an
        uninterrupted one's (a vmapped group of another width may round differently)."""
        ids = [b.run_id for b in branches]
        if all(store.is_done(self.folder, i) for i in ids):
            return
        with self.claims.group(claim_name(f"step{point}-x{factor}", ids),
                               f"step {point}, batch {branches[0].batch_size}: "
                               f"{len(ids)} branches", ids) as todo:
            if todo:  # None: another process holds it; []: finished meanwhile
                self._train_claimed(point, factor, branches)

    def _train_claimed(self, point: int, factor: int, branches: list[Branch]) -> None:
        state, slots = self.base_state(point)
        ready = [b for b in branches if self.base_runs[b.seed].run_id in slots]
        for b in branches:
            if b not in ready and is_leader():
                log.warning("branch %s: its base run stopped before step %d; skipped",
                            b.run_id, point)
                store.start_run(self.folder, b.run_id, self.run_config(b))
                store.finish_run(self.folder, b.run_id, {
                    **self.summary(b, "skipped", 0, [], 0.0, 0.0),
                    "reason": "the base run stopped before the point"})
        if ready:
            self._train_group(factor, ready, state, slots)

    def _train_group(self, factor: int, group: list[Branch], state: RunState,
                     slots: dict[str, int]) -> None:
        program, first = self.program(factor), group[0].start
        runs = [self.spec(b) for b in group]
        take = [slots[self.base_runs[b.seed].run_id] for b in group]
        stream = 0 if factor == 1 else group[0].batch_size
        start = start_mod.from_slots(program, state, take, runs, first, self.p.base.runs_axis,
                                     stream=stream)
        desc = f"step {group[0].point}, batch {group[0].batch_size}: {len(group)} branches"
        bar = progress.GroupProgress(self.session.shown_here(), desc, first + group[0].steps,
                                     group[0].batch_size, len(group), first)
        folders = group_mod.GroupFolders(self.outlet, [b.run_id for b in group],
                                         [self.run_config(b) for b in group],
                                         self.outlet.count(self._examples(group[0])), bar)
        end = folders.train(program, start, self.ctx.data, self.ctx.eval_data,
                            until=first + group[0].steps)
        folders.finish([
            self.summary(b, "diverged" if res.status == "diverged" else "completed",
                         res.steps - b.start, folders.rows[i], folders.wall_s, end.compile_s)
            for i, (b, res) in enumerate(zip(group, end.results))])

    def _examples(self, b: Branch) -> Callable[[int], int]:
        """A branch's examples at a step of its program: point x B0 + (step - start) x batch."""
        return lambda step: b.point * self.p.plan.base_batch + (step - b.start) * b.batch_size

    def spec(self, b: Branch) -> RunSpec:
        """A branch's scalars: its base run's at the branch's learning rate, with beta2 and the
        weight decay the optimizer's rules give at its batch size (D: the base's budget)."""
        budget = self.p.base.specs[self.p.plan.base_batch][1].examples
        return dataclasses.replace(self.base_runs[b.seed].spec, learning_rate=b.learning_rate,
                                   **rule_values(self.p.cfg, b.batch_size, b.learning_rate, budget))

    def run_config(self, b: Branch) -> dict[str, Any]:
        program, cfg = self.program(b.factor), self.p.cfg
        return run_config(
            cfg, b.run_id, b.batch_size, self.spec(b), total_steps=program.spec.total_steps,
            warmup_steps=program.spec.schedule.warmup_steps,
            precision=program.precision, data=self.ctx.task.describe(),
            **self.ctx.task.param_counts(),
            base_run=self.base_runs[b.seed].run_id, point=b.point,
            point_examples=b.point * self.p.plan.base_batch, factor=b.factor,
            lr_factor=b.lr_factor, lr_rule=self.p.plan.lr_rule, start_step=b.start,
            window_steps=b.steps, window=self.p.plan.window)

    def summary(self, b: Branch, status: str, steps: int, rows: list[dict], wall_s: float,
                compile_s: float) -> dict[str, Any]:
        examples = steps * b.batch_size
        return run_summary(
            b.run_id, status, rows, batch_size=b.batch_size, spec=self.spec(b), steps=steps,
            examples=examples,
            tokens=None if self.tokens_per_example is None else examples * self.tokens_per_example,
            targets=(), reach=self.p.cfg.reached.reach, point=b.point, factor=b.factor,
            lr_factor=b.lr_factor, wall_s=round(wall_s, 3), compile_s=round(compile_s, 3))


def describe(p: PreparedBranch) -> str:
    """The --dry-run report: the plan and what is done; nothing written."""
    base_done = sum(store.is_done(p.base.out, r.run_id) for r in p.base.planned)
    groups = p.plan.groups()
    done = sum(all(store.is_done(layout.branches_dir(p.out), b.run_id) for b in runs)
               for _, _, runs in groups)
    arith = arithmetic.format_table([p.base.specs[p.plan.base_batch][1]])
    return "\n".join([p.plan.describe(), *_rule_lines(p), "", arith, "",
                      f"base runs: {base_done} of {len(p.base.planned)} done; branch groups: "
                      f"{done} of {len(groups)} done ({sum(len(r) for *_, r in groups)} branches)"])


def _rule_lines(p: PreparedBranch) -> list[str]:
    """What the optimizer's rules set at each factor and learning rate (none without rules)."""
    if not p.cfg.optimizer.ruled:
        return []
    budget, plan = p.base.specs[p.plan.base_batch][1].examples, p.plan
    out = [f"optimizer rules at the branches (D = {budget:,} examples, the base's budget):"]
    for k in plan.trained_factors:
        size = k * plan.base_batch
        cells = [f"lr {lr:.4g}: " + ", ".join(f"{name} {v:.6g}" for name, v in
                                             rule_values(p.cfg, size, lr, budget).items())
                 for lr in (plan.learning_rate(k, f) for f in plan.lr_grid)]
        out.append(f"  k={k} (batch {size}): " + "; ".join(cells))
    return out
