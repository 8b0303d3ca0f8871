"""A batch size's runs, or one schedule's, trained in groups of train.max_group_size.

Each group trains while this process holds its claim (scaling.sweep.claiming), through the
driver of its kind: a fixed batch size (scaling.sweep.fixed) or a batch-size schedule
(scaling.sweep.schedule); after each, the session's tally is brought up to date and shown.
"""

from __future__ import annotations

import logging
from typing import Any

from scaling.sweep import fixed, schedule
from scaling.sweep.grid import PlannedRun
from scaling.sweep.session import Session
from scaling.train.mesh import is_leader

log = logging.getLogger(__name__)


def train(session: Session, runs: list[PlannedRun]) -> list[dict[str, Any]]:
    """Train `runs` (one batch size, or one schedule) in groups, reporting after each; the
    summaries of the groups this process trained."""
    summaries: list[dict[str, Any]] = []
    limit = session.p.cfg.train.max_group_size or max(1, len(runs))
    if runs and runs[0].schedule is None:
        limit = fixed.width(session, runs[0].batch_size, min(limit, len(runs)))
    if runs:
        session.tally.widths[(runs[0].batch_size, runs[0].schedule)] = limit
    for first in range(0, len(runs), limit):
        claimed = session.claims.train(runs[first:first + limit], lambda g: _group(session, g))
        if claimed is None or not claimed[0]:  # held, or finished, by another process
            continue
        group, done = claimed
        session.finished.update((r.run_id, s) for r, s in zip(group, done))
        session.tally.done(group)
        summaries += done
        if not session.quiet and is_leader():
            log.info("%s", session.tally.table(session.finished))
    return summaries


def _group(session: Session, group: list[PlannedRun]) -> list[dict[str, Any]]:
    if group[0].schedule is None:
        return fixed.train(session, group)
    sched = next(s for s in session.p.cfg.batch.schedules if s.label == group[0].schedule)
    session.program(sched.first_batch)  # the devices and data, as a fixed group's would be
    return schedule.train(session, sched, group, session.p.specs[sched.first_batch][1])
