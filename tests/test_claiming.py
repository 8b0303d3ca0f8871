"""scaling.sweep.claiming: a process trains a group only while it holds the group's claim.
A group another process holds is left to it (and waited for with --wait), the claim is renewed
at every chunk and released at the end and on errors, a folder in use is analysed only with
--partial, and two or three sweeps started at once on one folder equal one sweep. POSIX locks
belong to processes, so every rival here is a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from scaling import store
from scaling.analysis import contract
from scaling.cli.main import main
from scaling.config import load
from scaling.store import claims
from scaling.sweep import branch, claiming, runner
from scaling.sweep.prepare import prepare
from scaling.train.sinks import Sink
from tests.helpers import (NQM, SWEEP, assert_same, assert_throughput, config, on_disk,
                           write_config)

ROOT = Path(__file__).resolve().parents[1]
# argv: out group. Takes the claim, prints "held" (or "lost"), and keeps it until a line on stdin.
HOLD = """
import sys
from scaling.store import claims
claim = claims.try_claim(sys.argv[1], sys.argv[2])
print("held" if claim else "lost", flush=True)
sys.stdin.readline()
"""


def _hold(out: Path, group: str) -> subprocess.Popen:
    """A process holding the claim on `group` of `out` until _let_go."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(out), group], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.readline() == "held\n"
    return proc


def _let_go(proc: subprocess.Popen) -> None:
    proc.communicate("\n", timeout=60)


def _names(cfg, out: Path) -> dict[int, str]:
    """Each batch size's claim name (one group per batch size in these configs)."""
    return {u.batch_size: claiming.sweep_group(list(u.runs))[0] for u in prepare(cfg, out).units}


def _rows(out: Path) -> dict[str, list[dict]]:
    """Every run's metric rows, wall-clock seconds left out (the only field allowed to differ)."""
    return {p.parent.name: [{k: v for k, v in json.loads(line).items() if k != "wall_s"}
                            for line in p.read_text().splitlines()]
            for p in sorted(out.glob("runs/*/metrics.jsonl"))}


def test_claim_names_follow_the_runs_of_the_group(tmp_path):
    names = _names(config(SWEEP, "seeds=[0]"), tmp_path)
    assert names[8].startswith("batch8-") and names[16].startswith("batch16-")
    assert names[8] != claiming.claim_name("batch8", ["bs8-lr0.5-seed0", "bs8-lr0.1-seed0"])
    assert names[8] == claiming.claim_name("batch8", ["bs8-lr0.1-seed0", "bs8-lr0.5-seed0"])
    assert len(names[8]) == len("batch8-") + 16 and claims.NAME.match(names[8])


SCHEDULED = {
    "name": "sc", "task": {"name": "nqm", "dim": 10, "draw": "means"}, "optimizer": {"name": "sgd"},
    "batch": {"sizes": [8], "schedules": [{"kind": "doubling", "start": 8, "at": [0.5], "max": 16}]},
    "learning_rate": {"values": [0.1]}, "budget": {"max_examples": 1600}, "seeds": [0, 1],
    "train": {"chunk_steps": 50, "checkpoint_minutes": 0},
}


@pytest.mark.slow
def test_a_scheduled_group_another_process_holds_is_left_to_it(tmp_path):
    cfg = config(SCHEDULED)
    sched = [u for u in prepare(cfg, tmp_path).units if u.runs[0].schedule]
    name, desc = claiming.sweep_group(list(sched[0].runs))
    assert name.startswith("sched-doubling8-") and desc == "schedule doubling8: 2 runs"
    assert claiming.claim_name("sched-a b/c", ["x"]).startswith("sched-a_b_c-")
    rival = _hold(tmp_path, name)
    done = runner.run(cfg, tmp_path, quiet=True)
    assert sorted(s["run_id"] for s in done) == ["bs8-lr0.1-seed0", "bs8-lr0.1-seed1"]
    _let_go(rival)
    later = runner.run(cfg, tmp_path, quiet=True)
    assert sorted(s["run_id"] for s in later) == [r.run_id for r in sched[0].runs]


@pytest.mark.slow
def test_a_group_another_process_holds_is_left_to_it_and_trained_once_free(tmp_path, scaling_log):
    cfg, out = config(SWEEP, "seeds=[0]"), tmp_path / "o"
    name = _names(cfg, out)[16]
    rival = _hold(out, name)
    holder = claims.live_claims(out)[name]
    done = runner.run(cfg, out, quiet=True)
    assert sorted(s["run_id"] for s in done) == ["bs8-lr0.1-seed0", "bs8-lr0.5-seed0"]
    said = scaling_log.messages
    assert f"batch 16: 2 runs: left to the process that holds its claim, {holder.describe()}" in said
    assert (f"left 1 group(s) to the other processes that hold them, in {out}: batch 16: 2 runs "
            f"({holder.describe()}); they write those runs (--wait waits for them)") in said
    assert set(claims.live_claims(out)) == {name}  # ours released, theirs held
    _let_go(rival)
    later = runner.run(cfg, out, quiet=True)
    assert sorted(s["run_id"] for s in later) == ["bs16-lr0.1-seed0", "bs16-lr0.5-seed0"]
    runner.run(cfg, tmp_path / "clean", quiet=True)
    assert_same(on_disk(tmp_path / "clean"), on_disk(out))
    assert _rows(tmp_path / "clean") == _rows(out)
    assert claims.live_claims(out) == {} and not list((out / "claims").iterdir())


class _Watch(Sink):
    """Reads the folder's claims at every chunk; raises at chunk `fail` (counted from 1)."""

    def __init__(self, out: Path, fail: int | None = None) -> None:
        self.out, self.fail, self.seen = out, fail, []

    def rows(self, records, wall_s, running) -> None:
        self.seen.append(claims.live_claims(self.out))
        if len(self.seen) == self.fail:
            raise RuntimeError("a hook failed")


def test_a_renewal_is_due_renew_s_after_the_last(tmp_path, monkeypatch):
    claim = claims.try_claim(tmp_path, "g")
    renewal, taken = claiming.Renewal(claim), claim.holder.expires
    monkeypatch.setattr(claiming, "RENEW_S", 1e9)
    renewal.rows([], 0.0, 1)
    assert claim.holder.expires == taken
    monkeypatch.setattr(claiming, "RENEW_S", 0.0)
    renewal.rows([], 0.0, 1)
    assert claim.holder.expires > taken and claims.live_claims(tmp_path)["g"] == claim.holder
    claim.release()


def test_the_claim_is_renewed_at_the_chunks_and_released_at_the_end_and_on_error(
        tmp_path, monkeypatch):
    cfg = config(NQM, "train.min_chunks=1")  # 100 steps in 4 chunks of 25, step 0 in the first
    monkeypatch.setattr(claiming, "RENEW_S", 0.0)  # due at every chunk
    watch = _Watch(tmp_path / "a")
    runner.run(cfg, tmp_path / "a", quiet=True, hooks=[watch])
    assert len(watch.seen) == 4 and all(len(held) == 1 for held in watch.seen)
    holders = [next(iter(held.values())) for held in watch.seen]
    assert {(h.pid, h.started) for h in holders} == {(os.getpid(), holders[0].started)}
    expiries = [h.expires for h in holders]  # the hook hears each chunk before the renewal
    assert expiries[0] == holders[0].started + claims.LEASE_S
    assert expiries == sorted(expiries) and len(set(expiries)) == 4  # pushed out at each chunk
    assert claims.live_claims(tmp_path / "a") == {}
    failing = _Watch(tmp_path / "b", fail=2)
    with pytest.raises(RuntimeError, match="a hook failed"):
        runner.run(cfg, tmp_path / "b", quiet=True, hooks=[failing])
    assert len(failing.seen[0]) == 1 and claims.live_claims(tmp_path / "b") == {}
    assert not list((tmp_path / "b" / "claims").glob("*.lock"))


def test_runs_another_process_finished_meanwhile_are_not_trained_again(tmp_path):
    """Once the claim is held, the group's runs are looked up again: one finished since this
    process looked is read, not trained; a group all finished trains nothing."""
    cfg, out = config(SWEEP, "seeds=[0]"), tmp_path
    (unit, _) = prepare(cfg, out).units
    group = list(unit.runs)
    store.start_run(out, group[0].run_id, {})
    store.finish_run(out, group[0].run_id, {"run_id": group[0].run_id})
    asked = []
    group_claims = claiming.GroupClaims(out)
    trained = group_claims.train(group, lambda runs: asked.append(runs) or
                                 [{"run_id": r.run_id} for r in runs])
    assert asked == [group[1:]] and trained == (group[1:], [{"run_id": group[1].run_id}])
    store.finish_run(out, group[1].run_id, {"run_id": group[1].run_id})
    assert group_claims.train(group, lambda runs: pytest.fail("trained again")) == ([], [])
    assert claims.live_claims(out) == {} and not group_claims.left


def test_wait_waits_for_the_groups_left_and_trains_what_their_holder_left_unfinished(
        tmp_path, scaling_log, monkeypatch):
    monkeypatch.setattr(claiming, "POLL_S", 0.05)
    path, out = write_config(tmp_path, "seeds=[0]"), tmp_path / "o"
    name = _names(load(path), out)[8]
    rival = _hold(out, name)
    status = []
    sweep = threading.Thread(target=lambda: status.append(main(
        ["sweep", path, "--out", str(out), "--wait", "--no-analyze", "--progress", "none"])))
    sweep.start()
    deadline = time.monotonic() + 300
    while not any(m.startswith("waiting for 1 group(s)") for m in scaling_log.messages):
        assert sweep.is_alive() and time.monotonic() < deadline, scaling_log.messages
        time.sleep(0.05)
    assert not any(out.glob("runs/bs8-*/summary.json"))
    _let_go(rival)  # it trained nothing: the waiting sweep trains the group itself
    sweep.join(timeout=300)
    assert status == [0] and len(list(out.glob("runs/*/summary.json"))) == 4
    assert not any(m.startswith("left ") for m in scaling_log.messages)


@pytest.mark.slow
def test_a_folder_in_use_is_analysed_only_with_partial(tmp_path, capsys):
    cfg, out = config(SWEEP, "seeds=[0]"), tmp_path / "o"
    name = _names(cfg, out)[16]
    rival = _hold(out, name)
    holder = claims.live_claims(out)[name].describe()
    runner.run(cfg, out, quiet=True)
    capsys.readouterr()
    assert main(["analyze", str(out)]) == 2
    refused = (f"error: {out}: in use: group {name} is claimed by {holder}; analyse it once "
               "they have finished, or pass --partial to analyse what is there now\n")
    assert capsys.readouterr().err == refused and not (out / "analysis.json").exists()
    assert main(["analyze", str(out), "--partial", "--quiet"]) == 0
    analysis = contract.read(out)
    assert analysis["partial"] == [{"group": name, "holder": holder}]
    contract.check(analysis)
    assert analysis["sweep"]["num_runs"] == 2
    report = (out / "report.md").read_text().splitlines()
    assert report[2] == (f"**Partial analysis** (--partial): read while 1 group(s) were still "
                         f"training ({name}, {holder}); analyse again once they have finished.")
    compared = ["compare", str(out), str(out), "--labels", "a", "b", "--out", str(tmp_path / "c")]
    capsys.readouterr()
    assert main(compared) == 2 and capsys.readouterr().err == refused
    assert main([*compared, "--partial"]) == 0
    assert "**Partial analysis** of a (--partial)" in (tmp_path / "c" / "report.md").read_text()
    _let_go(rival)
    assert main(["analyze", str(out), "--quiet"]) == 0
    assert "partial" not in contract.read(out)


# ---------------------------------------------------------------- concurrent sweeps

CONCURRENT = ("batch.sizes=[8, 16]", "learning_rate.values=[0.05, 0.1, 0.5]",
              "train.max_group_size=2", "train.chunk_steps=10", "targets=['eval_loss<=0.05']")


def _sweep(config: str, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "scaling.cli", "sweep", config, "--out",
                             str(out), "--progress", "lines"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _without_timing(analysis: dict) -> dict:
    return {k: v for k, v in analysis.items() if k != "throughput"}


@pytest.mark.slow
@pytest.mark.parametrize("processes", [2, 3])
def test_sweeps_started_together_on_one_folder_equal_one_sweep(tmp_path, processes):
    """Every group trains exactly once (each process's progress lines say which it started),
    every run's rows and summary equal a single process's, and the analysis is the same."""
    path, out, alone = write_config(tmp_path, *CONCURRENT), tmp_path / "o", tmp_path / "one"
    procs = [_sweep(path, out) for _ in range(processes)]
    said = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * processes, [err for _, err in said]
    started = [sum(": started, " in line and " steps" in line
                   for line in err.splitlines()) for _, err in said]
    groups = len(prepare(config(SWEEP, *CONCURRENT), out).units)
    assert groups == 6 and sum(started) == groups, started
    assert sum(n > 0 for n in started) >= 2, f"no concurrency to speak of: {started}"
    analysed = ["wrote " in text for text, _ in said]
    assert any(analysed) and all(a or "not analysed: " in err for a, (_, err) in zip(analysed, said))
    runner.run(config(SWEEP, *CONCURRENT), alone, quiet=True)
    assert main(["analyze", str(alone), "--quiet"]) == 0
    assert _rows(out) == _rows(alone) and len(_rows(out)) == 12
    assert_same(on_disk(alone), on_disk(out))
    assert _without_timing(contract.read(out)) == _without_timing(contract.read(alone))
    assert assert_throughput(out) == groups
    assert claims.live_claims(out) == {}


# ---------------------------------------------------------------- scaling branch

BRANCH = {
    "name": "br", "task": {"name": "nqm", "dim": 10, "draw": "means"}, "optimizer": {"name": "sgd"},
    "batch": {"sizes": [8]}, "learning_rate": {"values": [0.1]}, "budget": {"max_steps": 400},
    "seeds": [0], "train": {"chunk_steps": 50, "checkpoint_minutes": 0},
    "branch": {"factors": [2, 4], "window": 512, "points": [800], "evals": 4},
}


def test_branch_leaves_the_groups_another_process_holds(tmp_path, scaling_log):
    cfg = config(BRANCH)
    p = branch.prepare(cfg, tmp_path)
    base = claiming.sweep_group(list(p.base.units[0].runs))[0]
    rival = _hold(tmp_path / "base", base)
    branch.run(cfg, tmp_path, quiet=True)  # the branches need the base: nothing trains
    assert not list(tmp_path.glob("*/runs/*/summary.json"))
    assert any(m.startswith("left 1 group(s)") for m in scaling_log.messages)
    _let_go(rival)
    (point, factor, held), *others = p.plan.groups()
    name = claiming.claim_name(f"step{point}-x{factor}", [b.run_id for b in held])
    rival = _hold(tmp_path / "branches", name)
    branch.run(cfg, tmp_path, quiet=True)
    done = {s.parent.name for s in (tmp_path / "branches").glob("runs/*/summary.json")}
    assert done == {b.run_id for *_, runs in others for b in runs} and done
    assert main(["analyze", str(tmp_path), "--quiet"]) == 2
    _let_go(rival)
    branch.run(cfg, tmp_path, quiet=True)
    done = {s.parent.name for s in (tmp_path / "branches").glob("runs/*/summary.json")}
    assert done == {b.run_id for *_, runs in p.plan.groups() for b in runs}
    assert claims.live_claims(tmp_path / "base") == claims.live_claims(tmp_path / "branches") == {}
