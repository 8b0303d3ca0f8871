"""Where a cooldown cell's group starts (scaling.sweep.cooldown): the stable runs' state at
its budget's decay start, and the rows they wrote up to there.

A run of the smaller budget takes the same steps as its stable run until that step, so its
folder begins with the stable run's rows and its state is the stable run's: restored from
the stable groups' saved states (any of them holding the group's runs, so a group cut
differently after a kill still starts there) and taken slot by slot. A stable run that ended
before the step (diverged) ended the same way at this budget: its folder is copied whole.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from scaling import store
from scaling.config import ConfigError
from scaling.store import layout
from scaling.sweep import group as group_mod
from scaling.sweep.grid import PlannedRun
from scaling.sweep.prepare import Prepared
from scaling.sweep.session import Session
from scaling.train import precision, start as start_mod
from scaling.train.checkpoint import GroupCheckpoints
from scaling.train.mesh import is_leader, sync
from scaling.train.program import GroupProgram
from scaling.train.start import Start
from scaling.train.step import RunState

log = logging.getLogger(__name__)


def applies(p: Prepared, size: int) -> bool:
    """Whether the batch size's groups start from the stable runs (a cooldown cell's, where
    the decay starts after the first chunk)."""
    return p.stable is not None and size in p.stable.steps


def configs(session: Session, group: list[PlannedRun]) -> list[dict[str, Any]]:
    """Each run's config.json; a cooldown's names where it starts: the stable folder
    (relative to its own), the step and the examples of the state it continues."""
    p, ctx, size = session.p, session.context, group[0].batch_size
    arith = p.specs[size][1]
    out = group_mod.run_configs(p.cfg, ctx.task, group, arith,
                                precision.here(p.cfg.train.precision))
    if not applies(p, size):
        return out
    step = p.stable.steps[size]
    origin = {"stable": os.path.relpath(p.stable.out, p.out), "from_step": step,
              "from_examples": arith.examples_at(step)}
    return [{**c, "cooldown": origin} for c in out]


def copy_ended(session: Session, group: list[PlannedRun]) -> dict[str, dict[str, Any]]:
    """The group's runs whose stable run ended before the cooldown's step, their folders
    copied (config.json this budget's, its `cooldown` starting where the run ended, so it
    counts no examples trained here): their summaries by run id."""
    p = session.p
    step = p.stable.steps[group[0].batch_size]
    ended = {}
    for r, config in zip(group, configs(session, group)):
        summary = store.read_summary(p.stable.out, r.run_id)
        if summary is None or summary["status"] == "completed" or summary["steps"] > step:
            continue
        if is_leader():  # copied whole: it starts where it ended
            config = {**config, "cooldown": {**config["cooldown"], "from_step": summary["steps"],
                                             "from_examples": summary["examples"]}}
            store.resume_run(p.out, r.run_id, config, store.rows_until(p.stable.out, r.run_id, step))
            store.finish_run(p.out, r.run_id, summary)
        ended[r.run_id] = summary
    if ended:
        log.info("batch %d: %d runs ended before step %d in the stable runs: copied",
                 group[0].batch_size, len(ended), step)
    return ended


def from_stable(session: Session, program: GroupProgram, group: list[PlannedRun],
                         configs: list[dict[str, Any]]) -> Start:
    """The group continuing its stable runs from their state at the cooldown's step, their
    rows up to it copied into the folders here first (the writer resumes after them)."""
    p, ctx = session.p, session.context
    ids, step = [r.run_id for r in group], p.stable.steps[group[0].batch_size]
    if is_leader():
        for run_id, config in zip(ids, configs):
            store.resume_run(p.out, run_id, config, store.rows_until(p.stable.out, run_id, step))
    sync("cooldown rows copied")
    state, slots = stable_state(p.stable.out, program, ids, step, ctx.data, ctx.eval_data)
    log.info("batch %d: %d runs: cooldown from the stable runs' step %d", group[0].batch_size,
             len(group), step)
    return start_mod.from_slots(program, state, [slots[i] for i in ids], [r.spec for r in group],
                                step, p.runs_axis, same_program=True)


def stable_state(out: Path, program: GroupProgram, run_ids: list[str], step: int, data: Any,
                 eval_data: Any) -> tuple[RunState, dict[str, int]]:
    """The saved states at `step` of every stable group holding some of `run_ids`, side by
    side, and each running run's slot (a ConfigError where one is missing)."""
    wanted, restored = set(run_ids), []
    for listing in layout.group_run_lists(out):
        there = json.loads(listing.read_text())
        if not wanted & set(there):
            continue
        saved = GroupCheckpoints(listing.parent, 0, True, (step,))
        start = saved.restore(program, [], data, eval_data, step=step)
        saved.finish()
        if start is None:
            raise ConfigError(f"{listing.parent}: the stable runs' state at step {step} is "
                              f"missing or damaged; remove {out} to train the stable runs again")
        restored.append((there, start))
    state, slots = start_mod.side_by_side(program, restored) if restored else (None, {})
    missing = [i for i in run_ids if i not in slots]
    if missing:
        raise ConfigError(f"{out}: holds no saved state of stable run {missing[0]} at step "
                          f"{step}; the stable cell trains first (scaling sweep trains it before "
                          "the cooldowns), with its states saved where each cooldown starts")
    return state, slots
