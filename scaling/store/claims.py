"""Claims: at most one process trains a group of a results folder at a time.

A claim on a group is the file OUT/claims/<group>.lock, locked with an OS lock (fcntl.lockf: a
POSIX record lock, which NFS v4 also honours) and holding its holder's record: host, pid,
start time and a lease expiry. The holder renews the lease as it goes (Claim.renew, at every
chunk) and removes the file when it lets go (Claim.release).

Another process, finding the lock taken, leaves the group alone unless the holder is on
another host and its lease has expired (a host that hangs or lost its network): that claim is
broken, with a warning, by putting a fresh locked file in its place (one breaker at a time,
under <group>.lock.break); the old holder learns it at its next renew (ClaimLost). A lock
that is free while the file is there means its holder died (the OS drops a dead process's
locks; NFS v4 once its lease with the server lapses): the claim is taken over, with a warning,
unless the record still names a live process on this host, or an unexpired lease on another
host (a file system whose locks do not reach across hosts). A lock taken while the record names
no live process here is a moment's (live_claims probing the file, or a holder between its lock
and its record): try_claim looks again, a few times, before it counts the claim as held.

POSIX locks belong to a process, and closing any descriptor of a file drops all the process's
locks on it. So a process holds each claim once (try_claim answers None for a group it holds
already) and never opens a file it holds other than through its claim; live_claims answers
for the process's own claims from memory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from scaling.store.layout import CLAIMS

log = logging.getLogger(__name__)

LEASE_S = 900.0  # a claim not renewed for this long may be broken from another host
TRIES, PAUSE_S = 10, 0.01  # try_claim's attempts, and the pause before the nth is n x PAUSE_S
HOST = socket.gethostname()
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_HELD: dict[Path, "Claim"] = {}  # this process's claims, by lock file


class ClaimLost(RuntimeError):
    """The claim was broken by another host (our lease had expired): stop writing the group."""


@dataclass(frozen=True)
class Holder:
    """Who holds a claim: host, pid, when it started and until when its lease runs (epoch s)."""

    host: str
    pid: int
    started: float
    expires: float

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} (since {_clock(self.started)})"


def _clock(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def lock_path(out: str | Path, group: str) -> Path:
    """OUT/claims/<group>.lock; a group name is a plain file name (letters, digits, . _ -)."""
    if not NAME.match(group):
        raise ValueError(f"claim: got group {group!r}, expected letters, digits, '.', '_', '-'")
    return Path(out) / CLAIMS / f"{group}.lock"


def _try_lock(fd: int) -> bool:
    """Take the exclusive lock on `fd` without waiting; False if another process holds it."""
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError):  # EAGAIN or EACCES, as POSIX allows either
        return False
    return True


def _read(fd: int) -> Holder | None:
    """The record in an open lock file; None while empty or half written."""
    try:
        return Holder(**json.loads(os.pread(fd, 4096, 0)))
    except (ValueError, TypeError):
        return None


def _write(fd: int, holder: Holder) -> None:
    data = json.dumps(asdict(holder)).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


def _pid_alive(pid: int) -> bool:
    """Whether process `pid` runs on this host (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (not Linux), or it just ended
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _live(holder: Holder | None, locked: bool, now: float) -> bool:
    """Whether a claim counts as held: see the module's docstring for the rules."""
    if holder is None:
        return locked  # a holder between its lock and its record
    expired = holder.expires <= now
    if locked:
        return holder.host == HOST or not expired
    return not expired and (holder.host != HOST or _pid_alive(holder.pid))


def _is_linked(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open as `fd` (a release or a break replaces it)."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


class Claim:
    """A held claim on one group: renew() it as the group trains, release() it at the end
    (or use it as a context manager)."""

    def __init__(self, path: Path, fd: int, holder: Holder, lease_s: float) -> None:
        self.path, self.fd, self.holder, self.lease_s = path, fd, holder, lease_s
        self.group = path.name.removesuffix(".lock")

    def renew(self) -> None:
        """Push the lease out by lease_s; ClaimLost if another host broke the claim."""
        if self.fd < 0:
            raise ClaimLost(f"claim on group {self.group}: already released")
        if not _is_linked(self.fd, self.path):
            self._close()
            raise ClaimLost(f"claim on group {self.group}: broken by another process after our "
                            f"lease ran out; {self.path} now names {_describe(self.path)}")
        self.holder = Holder(self.holder.host, self.holder.pid, self.holder.started,
                             time.time() + self.lease_s)
        _write(self.fd, self.holder)

    def release(self) -> None:
        """Remove the lock file (if it is still ours) and drop the lock; idempotent."""
        if self.fd < 0:
            return
        if _is_linked(self.fd, self.path):
            self.path.unlink()
        self._close()

    def _close(self) -> None:
        _HELD.pop(self.path, None)
        os.close(self.fd)  # drops the lock
        self.fd = -1

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _record(path: Path) -> Holder | None:
    """The record of a lock file this process does not hold (opening and closing a file
    drops the process's locks on it); None if there is none."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return _read(fd)
    finally:
        os.close(fd)


def _describe(path: Path) -> str:
    """Who a lock file names, for messages."""
    holder = _record(path)
    return holder.describe() if holder else "no holder"


def try_claim(out: str | Path, group: str, lease_s: float = LEASE_S) -> Claim | None:
    """Take the claim on `group` of results folder `out`, or None while a live process holds
    it (this one included). A dead holder's claim, or an expired one from another host, is
    taken over with a warning."""
    path = lock_path(out, group)
    path.parent.mkdir(parents=True, exist_ok=True)
    path = path.resolve()
    if path in _HELD:
        return None
    for attempt in range(TRIES):  # a release, a break or a probe in our way: try again
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if _try_lock(fd):
            claim = _taken(path, fd, lease_s)
        else:
            claim = _broken(path, fd, lease_s, attempt)
        if claim is not False:
            return claim
    return None


def _taken(path: Path, fd: int, lease_s: float) -> Claim | None | bool:
    """We hold the lock on `fd`: the claim, None if the record still names a live holder, or
    False if the file was replaced meanwhile (try again)."""
    if not _is_linked(fd, path):
        os.close(fd)
        return False
    before = _read(fd)
    if _live(before, False, time.time()):
        os.close(fd)
        return None
    if before is not None:
        log.warning("claim on group %s: taking over from %s: %s", path.stem, before.describe(),
                    "its lease ran out" if before.host != HOST else "that process is gone")
    return _hold(path, fd, lease_s)


def _hold(path: Path, fd: int, lease_s: float) -> Claim:
    now = time.time()
    claim = Claim(path, fd, Holder(HOST, os.getpid(), now, now + lease_s), lease_s)
    _write(fd, claim.holder)
    _HELD[path] = claim
    return claim


def _broken(path: Path, fd: int, lease_s: float, attempt: int = 0) -> Claim | None | bool:
    """Another process holds the lock on `fd`: None while its claim is live, else break it
    (one breaker at a time) and return ours, or False to try again. A lock held while the
    record names no live process here is most likely a moment's: live_claims probing it, or a
    holder between its lock and its record; so we look again a little later (TRIES times)."""
    holder = _read(fd)
    os.close(fd)  # we hold no lock on this file, so closing drops nothing of ours
    passing = holder is None or (holder.host == HOST and not _pid_alive(holder.pid))
    if passing and attempt + 1 < TRIES:
        time.sleep(PAUSE_S * (attempt + 1))
        return False
    if _live(holder, True, time.time()):
        return None
    with open(path.with_name(path.name + ".break"), "w") as guard:
        fcntl.lockf(guard, fcntl.LOCK_EX)
        if _record(path) != holder:
            return False  # someone else broke it (or it was released): look again
        fresh = path.with_name(f".{path.name}.{os.getpid()}")
        new = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        fcntl.lockf(new, fcntl.LOCK_EX)
        claim = _hold(path, new, lease_s)
        os.replace(fresh, path)
    log.warning("claim on group %s: broke the claim of %s: its lease ran out at %s",
                path.stem, holder.describe(), _clock(holder.expires))
    return claim


@contextlib.contextmanager
def claimed(out: str | Path, group: str, lease_s: float = LEASE_S) -> Iterator[Claim | None]:
    """`with claimed(out, group) as claim:` the claim (None if a live process holds it),
    released at the end of the block."""
    claim = try_claim(out, group, lease_s)
    try:
        yield claim
    finally:
        if claim is not None:
            claim.release()


def live_claims(out: str | Path) -> dict[str, Holder]:
    """{group: holder} for the claims of `out` held by live processes (this one included),
    e.g. to refuse analysing a folder still being written."""
    folder = Path(out) / CLAIMS
    if not folder.is_dir():
        return {}
    held = {}
    for path in sorted(p.resolve() for p in folder.glob("*.lock")):
        if path in _HELD:
            held[path.stem] = _HELD[path].holder
            continue
        holder = _probe(path)
        if holder is not None:
            held[path.stem] = holder
    return held


def _probe(path: Path) -> Holder | None:
    """The holder of a lock file this process does not hold, if live (the lock is taken only
    for a moment, to see whether anyone holds it)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        locked = not _try_lock(fd)
        holder = _read(fd)
    finally:
        os.close(fd)
    return holder if holder is not None and _live(holder, locked, time.time()) else None


def in_use(out: str | Path, held: dict[str, Holder] | None = None) -> str | None:
    """'OUT: in use: group G is claimed by pid P on H (since ...) (and N more)' while live
    processes hold claims on groups of `out` (`held`: live_claims(out), if already read), else
    None: the start of the line that refuses a folder still being written."""
    held = live_claims(out) if held is None else held
    if not held:
        return None
    first, holder = next(iter(held.items()))
    more = f" (and {len(held) - 1} more)" if len(held) > 1 else ""
    return f"{out}: in use: group {first} is claimed by {holder.describe()}{more}"
