"""One writer per group: a process trains a group of a results folder only while it holds the
group's claim (scaling.store.claims, OUT/claims/<group>.lock).

A group's claim is named by its runs: `batch<B>-<digest>` (a fixed batch size), `sched-<name>-
<digest>` (a batch-size schedule) or `step<P>-x<k>-<digest>` (a branch group), the digest the
first 16 hex digits of the sha256 of its run ids in order. So every group has its own claim,
whatever else shares its batch size (a learning-rate search's rounds, a centred grid's
extensions), and two processes that group runs alike claim the same name. The claim is taken
before the group starts, renewed at the chunks the host reads (at most every RENEW_S seconds)
by a sink in the group's sinks (`Renewal`), and released when the group ends, on an error too. A group another live process
holds is left to it and noted (`left`); once the claim is held, the group's runs are looked up
on disk again, and runs another process finished meanwhile are not trained again. A process
started later thus skips what others hold and trains the rest; `wait` waits for the groups it
left.

With several processes training one group together (jax.distributed), only the leader claims
and renews; its answer reaches every process (scaling.train.mesh.leader_decides).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from scaling import store
from scaling.store.claims import LEASE_S, Claim, Holder, live_claims, try_claim
from scaling.sweep.grid import PlannedRun
from scaling.train.mesh import is_leader, leader_decides
from scaling.train.sinks import Records, Sink

log = logging.getLogger(__name__)
POLL_S = 1.0  # how often `wait` looks at the claims of the groups left
RENEW_S = 10.0  # a claim is renewed at the first chunk this long after its last renewal


def claim_name(head: str, run_ids: list[str]) -> str:
    """`head`-<the first 16 hex digits of the sha256 of the run ids, in order>, a plain file
    name (any character of `head` but letters, digits, '.', '_' and '-' written '_')."""
    digest = hashlib.sha256(json.dumps(run_ids).encode()).hexdigest()[:16]
    return f"{re.sub(r'[^A-Za-z0-9._-]', '_', head)}-{digest}"


def sweep_group(group: list[PlannedRun]) -> tuple[str, str]:
    """A sweep group's claim name and how messages call it ('batch 8: 4 runs')."""
    first, ids = group[0], [r.run_id for r in group]
    if first.schedule is None:
        return claim_name(f"batch{first.batch_size}", ids), f"batch {first.batch_size}: {len(ids)} runs"
    return claim_name(f"sched-{first.schedule}", ids), f"schedule {first.schedule}: {len(ids)} runs"


class Renewal(Sink):
    """Renews a group's claim at the chunks the host reads, at most every RENEW_S seconds (a
    renewal writes the lock file and syncs it to disk, about 8 ms on an ordinary disk: at
    every chunk that would slow short chunks; the lease runs 15 minutes). A claim broken by
    another host (ours expired) raises ClaimLost there, which stops the group."""

    def __init__(self, claim: Claim) -> None:
        self.claim, self.last = claim, time.monotonic()

    def rows(self, records: Records, wall_s: float, running: int) -> None:
        if time.monotonic() - self.last >= RENEW_S:
            self.claim.renew()
            self.last = time.monotonic()


@dataclass(frozen=True)
class Left:
    """A group left to another process: how messages call it, and its holder when looked."""

    desc: str
    holder: Holder | None

    def describe(self) -> str:
        return f"{self.desc} ({self.holder.describe() if self.holder else 'released since'})"


class GroupClaims:
    """A process's claims on the groups of one results folder, as it trains them."""

    def __init__(self, out: str | Path, lease_s: float = LEASE_S) -> None:
        self.out, self.lease_s = Path(out), lease_s
        self.held: Claim | None = None  # the claim of the group training now (the leader's)
        self.left: dict[str, Left] = {}  # claim name -> the group left to another process

    def sinks(self) -> list[Sink]:
        """The sink that renews the claim of the group training now (none off the leader)."""
        return [Renewal(self.held)] if self.held is not None else []

    @contextlib.contextmanager
    def group(self, name: str, desc: str, run_ids: list[str]) -> Iterator[list[int] | None]:
        """`with claims.group(name, desc, ids) as todo:` the indices of the group's runs still
        to train, with its claim held for the block; None (and the group noted in `left`) when
        another live process holds it."""
        claim, flags = None, [0] * (len(run_ids) + 1)
        if is_leader():
            claim = self._claim(name)
            flags = [int(claim is None)] + [int(claim is not None and store.is_done(self.out, r))
                                            for r in run_ids]
        try:
            flags = leader_decides(flags)
            if flags[0]:
                self._leave(name, desc)
                yield None
                return
            self.held = claim
            yield [i for i, done in enumerate(flags[1:]) if not done]
        finally:
            self.held = None
            if claim is not None:
                claim.release()

    def _claim(self, name: str) -> Claim | None:
        """The claim on `name`, tried once more if its holder let go as we tried."""
        claim = try_claim(self.out, name, self.lease_s)
        if claim is None and name not in live_claims(self.out):
            claim = try_claim(self.out, name, self.lease_s)
        return claim

    def _leave(self, name: str, desc: str) -> None:
        holder = live_claims(self.out).get(name) if is_leader() else None
        self.left[name] = Left(desc, holder)
        if is_leader():
            log.info("%s: left to the process that holds its claim, %s", desc,
                     holder.describe() if holder else "which has just released it")

    def train(self, group: list[PlannedRun], fn: Callable[[list[PlannedRun]], list[dict[str, Any]]]
              ) -> tuple[list[PlannedRun], list[dict[str, Any]]] | None:
        """`fn(runs)` (their summaries) on the runs of a sweep group still to train, holding
        the group's claim: (those runs, their summaries), or None when the group is left."""
        name, desc = sweep_group(group)
        with self.group(name, desc, [r.run_id for r in group]) as todo:
            if todo is None:
                return None
            runs = [group[i] for i in todo]
            return runs, fn(runs) if runs else []

    def wait(self) -> None:
        """Until no live process holds a group this one left (finished by its holder, or its
        holder died: the next pass takes the claim over and resumes the group)."""
        if is_leader():
            log.info("waiting for %d group(s) other processes hold: %s", len(self.left),
                     self._listed())
        while set(self.left) & set(live_claims(self.out)):
            time.sleep(POLL_S)
        self.left.clear()

    def report(self) -> None:
        """Say which groups were left to other processes (at the end of a sweep)."""
        if self.left and is_leader():
            log.info("left %d group(s) to the other processes that hold them, in %s: %s; "
                     "they write those runs (--wait waits for them)", len(self.left), self.out,
                     self._listed())

    def _listed(self) -> str:
        return "; ".join(left.describe() for left in self.left.values())
