"""scaling.store.claims: one holder per group across processes, a dead or expired holder taken
over, release, and the list of live claims. POSIX locks belong to processes, so every rival
here is a real process (a subprocess running HOLDER)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scaling.store import claims

ROOT = Path(__file__).resolve().parents[1]
# argv: out group lease_s host race. Prints "ready", (race: waits for OUT/go), tries the claim,
# prints "won <pid>" or "lost"; a winner then waits for a line on stdin, renews and prints
# "renewed" or "claim lost: ...", and releases.
HOLDER = """
import sys, time
from pathlib import Path
from scaling.store import claims
out, group, lease_s, host, race = sys.argv[1:]
claims.HOST = host
print("ready", flush=True)
while race == "race" and not Path(out, "go").exists():
    time.sleep(0.001)
claim = claims.try_claim(out, group, float(lease_s))
print(f"won {claim.holder.pid}" if claim else "lost", flush=True)
if claim:
    sys.stdin.readline()
    try:
        claim.renew()
        print("renewed", flush=True)
    except claims.ClaimLost as exc:
        print(f"claim lost: {exc}", flush=True)
    claim.release()
"""


def _holder(out: Path, group: str = "g", lease_s: float = 60.0, host: str = claims.HOST,
            race: bool = False) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), group, str(lease_s), host,
                             "race" if race else "now"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.readline() == "ready\n"
    return proc


def _finish(proc: subprocess.Popen) -> str:
    """Tell a holder to renew and release; what it printed after its claim."""
    out, _ = proc.communicate("\n", timeout=60)
    return out


def test_of_processes_racing_for_one_claim_exactly_one_wins(tmp_path):
    for attempt in range(3):
        out = tmp_path / str(attempt)
        out.mkdir()
        rivals = [_holder(out, race=True) for _ in range(3)]
        (out / "go").touch()
        said = [p.stdout.readline().split()[0] for p in rivals]
        assert sorted(said) == ["lost", "lost", "won"], said
        winner = rivals[said.index("won")]
        assert set(claims.live_claims(out)) == {"g"}
        assert claims.try_claim(out, "g") is None
        assert [_finish(p) for p in rivals] == ["renewed\n" if p is winner else "" for p in rivals]
        assert claims.live_claims(out) == {}


def test_a_holder_killed_with_kill_9_is_taken_over_with_a_warning(tmp_path, caplog):
    proc = _holder(tmp_path)
    pid = int(proc.stdout.readline().split()[1])
    assert claims.try_claim(tmp_path, "g") is None
    holder = claims.live_claims(tmp_path)["g"]
    assert holder.pid == pid and holder.host == claims.HOST
    os.kill(pid, signal.SIGKILL)
    proc.wait()
    assert claims.live_claims(tmp_path) == {}  # the file is there, its holder is not
    with caplog.at_level(logging.WARNING, logger="scaling.store.claims"):
        claim = claims.try_claim(tmp_path, "g")
    assert claim is not None and claim.holder.pid == os.getpid()
    assert caplog.messages == [f"claim on group g: taking over from {holder.describe()}: "
                               "that process is gone"]
    claim.release()


def test_an_expired_lease_on_another_host_is_broken_and_its_holder_learns_it(tmp_path, caplog):
    proc = _holder(tmp_path, lease_s=1.0, host="elsewhere")
    pid = int(proc.stdout.readline().split()[1])
    assert claims.try_claim(tmp_path, "g") is None  # its lease runs: it may be alive there
    assert claims.live_claims(tmp_path)["g"].host == "elsewhere"
    time.sleep(1.2)
    assert claims.live_claims(tmp_path) == {}  # held, but expired on another host
    with caplog.at_level(logging.WARNING, logger="scaling.store.claims"):
        claim = claims.try_claim(tmp_path, "g")
    assert claim is not None
    assert caplog.messages[0].startswith(f"claim on group g: broke the claim of pid {pid} on "
                                         "elsewhere")
    said = _finish(proc)
    assert said.startswith("claim lost: claim on group g: broken by another process after our "
                           f"lease ran out; {claim.path} now names pid {os.getpid()} on ")
    assert claims.live_claims(tmp_path)["g"].pid == os.getpid()  # the old holder left it alone
    claim.release()
    assert not claim.path.exists()


def test_a_live_holder_on_this_host_keeps_its_claim_past_its_lease(tmp_path):
    """On one host the OS lock says whether the holder lives; a slow renewer is not broken."""
    proc = _holder(tmp_path, lease_s=0.2)
    proc.stdout.readline()
    time.sleep(0.4)
    assert claims.try_claim(tmp_path, "g") is None
    assert set(claims.live_claims(tmp_path)) == {"g"}
    assert _finish(proc) == "renewed\n"


def test_release_and_the_context_manager(tmp_path):
    claim = claims.try_claim(tmp_path, "g", lease_s=30)
    assert claim is not None and claim.path == (tmp_path / "claims" / "g.lock").resolve()
    assert claims.try_claim(tmp_path, "g") is None  # a process holds a claim once
    assert claims.live_claims(tmp_path) == {"g": claim.holder}
    first = claim.holder.expires
    claim.renew()
    assert claim.holder.expires > first and claim.holder.started < first
    # Listing from the holder itself leaves its lock alone: a rival process still loses.
    rival = _holder(tmp_path)
    assert rival.stdout.readline() == "lost\n"
    rival.wait()
    claim.release()
    claim.release()  # idempotent
    assert not claim.path.exists() and claims.live_claims(tmp_path) == {}
    with pytest.raises(claims.ClaimLost, match="already released"):
        claim.renew()
    with claims.claimed(tmp_path, "g") as again:
        assert again is not None and set(claims.live_claims(tmp_path)) == {"g"}
        with claims.claimed(tmp_path, "g") as nested:
            assert nested is None
    assert claims.live_claims(tmp_path) == {}
    with claims.try_claim(tmp_path, "h") as held:
        assert set(claims.live_claims(tmp_path)) == {"h"}
    assert held.fd == -1 and claims.live_claims(tmp_path) == {}


def _plant(out: Path, group: str, host: str, pid: int, expires: float) -> None:
    """A lock file nobody holds, as a holder on a file system without working locks leaves."""
    path = out / "claims" / f"{group}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": host, "pid": pid, "started": time.time() - 10,
                                "expires": expires}))


def test_an_unlocked_record_counts_until_its_holder_is_gone_or_its_lease_ends(tmp_path):
    now = time.time()
    _plant(tmp_path, "there", "elsewhere", 1, now + 60)  # another host, lease running
    _plant(tmp_path, "here", claims.HOST, os.getppid(), now + 60)  # a live process here
    _plant(tmp_path, "expired", "elsewhere", 1, now - 1)
    assert set(claims.live_claims(tmp_path)) == {"there", "here"}
    assert claims.try_claim(tmp_path, "there") is None
    assert claims.try_claim(tmp_path, "here") is None
    claim = claims.try_claim(tmp_path, "expired")
    assert claim is not None and claim.holder.host == claims.HOST
    claim.release()


# argv: lock file, record (JSON or ""). Writes the record, takes the lock as live_claims's probe
# does, prints "locked", holds it for 0.2 s and lets go.
PROBE = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
os.write(fd, sys.argv[2].encode())
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(0.2)
"""


@pytest.mark.parametrize("record", ["", "dead"])
def test_a_lock_held_for_a_moment_without_a_live_holder_is_waited_out(tmp_path, record, caplog):
    """A probe (or a holder between its lock and its record) holds the lock of a file whose
    record names no live process here: try_claim looks again and gets the claim."""
    path = claims.lock_path(tmp_path, "g")
    path.parent.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    text = "" if not record else json.dumps({"host": claims.HOST, "pid": int(dead),
                                             "started": 1.0, "expires": time.time() + 60})
    probe = subprocess.Popen([sys.executable, "-c", PROBE, str(path), text],
                             stdout=subprocess.PIPE, text=True)
    assert probe.stdout.readline() == "locked\n"
    with caplog.at_level(logging.WARNING, logger="scaling.store.claims"):
        claim = claims.try_claim(tmp_path, "g")
    probe.wait()
    assert claim is not None and claim.holder.pid == os.getpid()
    assert len(caplog.messages) == (1 if record else 0)
    claim.release()


def test_a_group_name_is_a_plain_file_name(tmp_path):
    with pytest.raises(ValueError, match="got group '../x'"):
        claims.try_claim(tmp_path, "../x")
