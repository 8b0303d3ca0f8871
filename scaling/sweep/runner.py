"""From a config to finished run folders: the grid, the groups that share a program, the writing.

The grid is batch sizes x learning rates x seeds. Runs at one batch size share a compiled
program and train as vmapped groups (at most train.max_group_size runs each). Finished runs
(summary.json present) are skipped, so running the same command again resumes a killed sweep.
`shard=(i, n)` trains only this host's share of the groups (scaling.sweep.grid.partition).
With the learning-rate search on, a batch size that finishes its first grid trains further
rounds of learning rates until each target's optimum is bracketed (rounds.json), the batch
sizes taking turns.
"""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path
from typing import Any

from scaling import config as config_mod, store
from scaling.config import Config
from scaling.config import optimizer_rules
from scaling.config.arithmetic import for_config, format_table
from scaling.store import layout
from scaling.store.cost import cost, cost_line
from scaling.sweep import batches, memory_plan, neighbours, progress, search, segments
from scaling.sweep.grid import PlannedRun, Unit, expand
from scaling.sweep.prepare import Prepared, prepare
from scaling.sweep.session import Session
from scaling.train import memory
from scaling.train.mesh import is_leader
from scaling.train.sinks import Sink

log = logging.getLogger(__name__)


def describe(p: Prepared) -> str:
    """The --dry-run report: the plan arithmetic, this shard's groups and runs; nothing written."""
    arith = [p.specs[size][1] for size in sorted(p.specs)]
    schedules = [segments.describe(p.cfg, s, p.data_shards) for s in p.cfg.batch.schedules
                 if p.batch_sizes is None]
    lines = [format_table(arith), *schedules, *optimizer_rules.describe(p.cfg), "",
             f"groups ({len(p.units)}) and runs in {p.out}:"]
    todo: list[PlannedRun] = []
    for unit in p.units:
        runs = p.runs_of(unit)
        done = [store.is_done(p.out, r.run_id) for r in runs]
        lines.append(f"{unit.label} group {unit.index}: {len(runs)} runs, "
                     f"{sum(done)} done, {len(runs) - sum(done)} to train")
        lines += [f"  {'done ' if d else 'to do'}  {r.run_id}{ruled_text(p.cfg, r)}"
                  for r, d in zip(runs, done)]
        todo += [r for r, d in zip(runs, done) if not d]
    lines += [f"search: batch {r['batch_size']} round {r['round']}, learning rates "
              + ", ".join(f"{lr:.4g}" for lr in r["learning_rates"]) for r in p.rounds]
    lines += budget_lines(p, todo)
    device = memory.device_limit(p.cfg.train.memory_limit_gb)
    if device is not None:
        lines.append(f"memory: {device / memory.GB:.3g} GB per device; the sweep compiles each "
                     "batch size's chunk first and cuts its groups further if they do not fit")
    return "\n".join(lines)


def budget_lines(p: Prepared, todo: list[PlannedRun]) -> list[str]:
    """What the runs left to train may cost, so a cluster allocation can be sized before any
    compute: their examples to the budget (fixed batch sizes), and what may add to it or cut it."""
    fixed = [r for r in todo if r.schedule is None]
    if not fixed:
        return []
    cfg = p.cfg
    examples = sum(p.specs[r.batch_size][1].examples for r in fixed)
    out = [f"to train: {len(fixed)} runs at fixed batch sizes, {examples:,} examples if each "
           "trains to its budget"]
    if cfg.reading_extension > 1:
        out.append(f"  a batch size's best rates may go on to {cfg.reading_extension:g}x their "
                   "budget to confirm a reading (budget.reading_extension)")
    if cfg.train.stop_dominated and cfg.targets:
        out.append("  runs that can no longer be their batch size's best stop early "
                   "(train.stop_dominated)")
    if p.searched:
        out.append(f"  then the learning-rate search: up to {cfg.learning_rate.max_rounds} rounds "
                   "per batch size in all, their rates set by the readings before them")
    waiting = [b for b in cfg.batch.sizes if not p.batch_runs(b)] if neighbours.enabled(cfg) \
        else []
    if waiting:
        out.append(f"  and batch sizes {', '.join(map(str, waiting))}, each once a neighbour's "
                   f"search ends, from {cfg.learning_rate.neighbour_rates} rates around the "
                   "optimum the searched ones predict (learning_rate.first_grid: neighbours)")
    return out


def ruled_text(cfg: Config, run: PlannedRun) -> str:
    """The scalars the optimizer's rules gave a run (scaling.config.optimizer_rules), for
    the --dry-run listing; empty without rules."""
    return "".join(f", {k} {getattr(run.spec, k):.6g}" for k in cfg.optimizer.ruled)


def final_table(p: Prepared) -> str:
    """The end table over the whole grid (every shard's runs) as it stands on disk."""
    target = p.cfg.targets[0] if p.cfg.targets else None
    planned = expand(p.cfg, p.batch_sizes, store.read_rounds(p.out) if p.searched else [])
    summaries = {r.run_id: store.read_summary(p.out, r.run_id) for r in planned}
    spent = cost_line(cost([{"summary": s, "config": {}} for s in summaries.values() if s],
                           {b: arith.examples for b, (_, arith) in p.specs.items()}))
    table = progress.format_final(progress.batch_rows(planned, summaries, target), target,
                                  str(p.out))
    return table + (f"\n{spent}" if spent else "")


def run(cfg: Config, out: str | Path, batch_sizes: list[int] | None = None, force: bool = False,
        quiet: bool = False, shard: tuple[int, int] | None = None,
        hooks: list[Sink] | None = None, shown: str = "auto", wait: bool = False,
        prepared: Prepared | None = None) -> list[dict[str, Any]]:
    """Train every unfinished run of this shard of the grid (optionally only some batch sizes)
    that no other live process is training (scaling.sweep.claiming).

    `hooks`, sinks of the caller's (scaling.train.sinks), hear each group's rows once per
    chunk, after they are written (examples and tokens filled in). `shown`: how each group's
    progress shows (scaling.sweep.progress.MODES; `quiet` shows none and no tables). `wait`:
    wait for the groups left to other processes, then train any their holders did not finish.
    `prepared`: the sweep as the caller already prepared it (else prepared here).
    """
    p = memory_plan.settle(prepared or prepare(cfg, out, batch_sizes, force, shard))
    if is_leader():
        p.out.mkdir(parents=True, exist_ok=True)
        if p.memory_plan is not None:
            store.write_json(p.out / layout.MEMORY_PLAN, p.memory_plan)
        store.atomic_write(p.out / layout.SWEEP_YAML, config_mod.to_yaml(cfg))
        store.write_json(p.out / layout.ARITHMETIC, [
            (p.specs[b][1] if b in p.specs else for_config(cfg, b, p.data_shards)).to_dict()
            for b in cfg.batch.sizes])
    session = Session(p, quiet, hooks, shown)
    try:
        summaries = _train_units(session)
        while wait and session.claims.left:
            session.claims.wait()
            _reread(session)
            summaries += _train_units(session)
        session.claims.report()
    finally:
        session.close()
    return summaries


def _train_units(session: Session) -> list[dict[str, Any]]:
    """One pass over this shard's groups: train each unfinished one no other process holds.

    With the learning-rate search on, batch sizes take turns: once a batch size's runs so far
    have trained, its next round is planned and it goes to the back of the queue, so the other
    batch sizes train while its round waits, and the round's chunk compiles on another thread
    while the group before it trains. The order changes no result: a round is planned from its
    own batch size's runs alone."""
    p, summaries = session.p, []
    todo = lambda unit: [r for r in p.runs_of(unit) if r.run_id not in session.finished]
    queue = deque(_distinct(p))
    queued = {u.batch_size for u in queue if u.schedule is None}
    while queue:
        unit = queue.popleft()
        runs = todo(unit)
        if queue:
            session.compile_ahead(todo(queue[0]), runs)
        summaries += batches.train(session, runs)
        if p.searched and unit.schedule is None:
            if _next_round(session, unit.batch_size):
                queue.append(unit)
            elif neighbours.enabled(p.cfg) and all(  # no round: done, unless others hold runs
                    r.run_id in session.finished for r in p.batch_runs(unit.batch_size)):
                released = [u for u in _release(session, unit.batch_size)
                            if u.batch_size not in queued]
                queued |= {u.batch_size for u in released}
                queue.extend(released)
    return summaries


def _release(session: Session, size: int) -> list[Unit]:
    """The first grid from neighbours: once `size`'s search is done, the batch sizes waiting on
    it get their first grid (scaling.sweep.neighbours), recorded as their round 0 unless one
    is already (a resumed sweep trains the grid it planned), and a unit each to train it."""
    p, out = session.p, []
    for nxt in neighbours.waiting_on(p.cfg.batch.sizes, size):
        if not search.first_grid_of(p.rounds, nxt):
            plan = p.neighbour_grid(nxt, session.finished)
            record = search.round_record(nxt, 0, plan)
            p.rounds.append(store.add_round(p.out, record) if is_leader() else record)
            session.say(f"batch {nxt}: first grid, " + plan.reasons["first grid"] + ": "
                        + ", ".join(f"{lr:.4g}" for lr in plan.learning_rates))
        runs = p.batch_runs(nxt)
        out.append(Unit(nxt, 0, tuple(runs), sum(p.cost(r) for r in runs)))
        if all(u.batch_size != nxt or u.schedule is not None for u in p.units):
            p.units.append(out[-1])  # the tally and the tables show it from now on
            session.tally.pending.update({r.run_id: r for r in runs
                                          if r.run_id not in session.finished})
    return out


def _distinct(p: Prepared) -> list[Unit]:
    """This shard's units, one per searched batch size: such a unit trains all of its batch
    size's runs (Prepared.runs_of), split into groups as the session does."""
    seen: set[int] = set()
    out = []
    for unit in p.units:
        if p.searched and unit.schedule is None:
            if unit.batch_size in seen:
                continue
            seen.add(unit.batch_size)
        out.append(unit)
    return out


def _reread(session: Session) -> None:
    """The runs other processes finished meanwhile, from disk (before another pass)."""
    p = session.p
    if p.searched:
        p.rounds[:] = store.read_rounds(p.out)
    for r in {r.run_id: r for u in p.units for r in p.runs_of(u)}.values():
        summary = session.finished.get(r.run_id) or store.read_summary(p.out, r.run_id)
        if summary is not None:
            session.finished[r.run_id] = summary
            session.tally.pending.pop(r.run_id, None)


def _next_round(session: Session, size: int) -> bool:
    """The learning-rate search of one batch size whose runs so far have trained: plan its next
    round (scaling.sweep.search) and record it in rounds.json; whether there is one to train
    (not when each target's optimum is bracketed at the resolution, the round limit is
    reached, or other processes hold some of its runs: they extend it). A round's runs train
    as one vmapped group, with the same seeds, so the same data order and noise as every
    earlier round."""
    p = session.p
    if any(r.run_id not in session.finished for r in p.batch_runs(size)):
        return False
    plan = p.next_round(size, session.finished)
    if plan.done:
        session.say(f"batch {size}: search done: " + "; ".join(
            f"{t}: {why}" for t, why in plan.reasons.items()))
        return False
    number = len(search.rounds_of(p.rounds, size)) + 1
    record = search.round_record(size, number, plan)
    p.rounds.append(store.add_round(p.out, record) if is_leader() else record)
    session.say(f"batch {size}: search round {number}: learning rates "
                + ", ".join(f"{lr:.4g}" for lr in plan.learning_rates))
    return True
