"""Stopping runs that can no longer win (scaling.sweep.stopping, train.stop_dominated): the rule
on cells worked by hand and on random valleys against the same runs left to finish; the same
sweep with stopping on and off picks the same best learning rate within the search's resolution,
at the same steps within 1%, at every batch size and target; the stopped runs are censored,
never missing, and cost less."""

from __future__ import annotations

import json
import math
from dataclasses import fields, replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling.analysis import analyze as A
from scaling.analysis.analyze import clipped_reading
from scaling.sweep import runner
from scaling.sweep.grid import PlannedRun
from scaling.config.names import OPTIMIZER_AXES, OPTIMIZER_TABLE
from scaling.config.targets import Censored, Reach
from scaling.sweep.search import RunReading, Steps, cells
from scaling.sweep.stopping import (Dominance, axes_key, censored_steps, columns, diverged,
                                     dominated, extend, from_series)
from scaling.train.spec import RunSpec
from scaling.train.step import blown
from tests.helpers import config

NQM = {"task": {"name": "nqm", "dim": 10}, "optimizer": {"name": "sgd"},
       "batch": {"sizes": [8, 32]}, "learning_rate": {"min": 0.01, "max": 1.0, "num": 3,
                                                      "max_rounds": 2},
       "budget": {"max_examples": 8000}, "targets": ["eval_loss<=0.3", "eval_loss<=0.1"],
       "seeds": [0, 1], "eval": {"every": 5}, "train": {"chunk_steps": 10}}


def _points(out) -> dict:
    a = A.analyze(out, bootstrap=0)
    return {(t["name"], p["batch_size"]): (p["best_lr"], p["steps"], p["optimum"]["steps"])
            for t in a["targets"] for p in t["points"]}


@pytest.mark.slow
def test_stopping_keeps_the_best_rate_within_the_resolution_and_its_steps(tmp_path):
    """Stopping on and off: a run trained both ways reads the same where both finished; a
    stopped run is censored below what it would have read. A stopped neighbour enters the
    search's parabola at its bound, where left to finish it would have read its steps (or
    none), so later rounds may place other rates: here at B = 8, eval_loss<=0.1, where the
    first grid's 0.01 stops before reaching either target (left to finish, it never reaches
    0.1), round 1 fits a parabola through its bound, and the best found is one lattice step
    from the one found without stopping, at steps within 1%."""
    on = runner.run(config(NQM), tmp_path / "on", quiet=True)
    off = runner.run(config(NQM, "train.stop_dominated=false"), tmp_path / "off", quiet=True)
    stopped = [s for s in on if s["status"] == "dominated"]
    assert stopped and not [s for s in off if s["status"] == "dominated"]
    trained = lambda runs: sum(s["examples"] for s in runs)
    assert trained(on) < trained(off)
    by_id = {s["run_id"]: s for s in off}
    both = [s for s in on if s["run_id"] in by_id]
    assert len(both) > len(on) // 2
    for s in both:
        if s["status"] != "dominated":
            assert s["steps_to_target"] == by_id[s["run_id"]]["steps_to_target"]
            continue
        assert s["steps"] < by_id[s["run_id"]]["steps"]
        assert s["steps_censored"], "a stopped run says which targets it had not reached"
        for target, bound in s["steps_censored"].items():
            assert s["steps_to_target"][target] is None
            truth = by_id[s["run_id"]]["steps_to_target"][target]
            assert truth is None or truth > bound, "the censored value is a true lower bound"
    points, without = _points(tmp_path / "on"), _points(tmp_path / "off")
    assert points.keys() == without.keys()
    moved = [k for k in points if points[k] != without[k]]
    for k in moved:
        (lr, steps, optimum), (lr0, steps0, optimum0) = points[k], without[k]
        assert max(lr / lr0, lr0 / lr) <= 1.25 + 1e-9, "within the search's resolution"
        assert abs(steps / steps0 - 1) < 0.01 and abs(optimum / optimum0 - 1) < 0.01


@pytest.mark.slow
def test_stopped_runs_appear_censored_in_the_analysis_and_the_report(tmp_path):
    out = tmp_path / "o"
    runner.run(config(NQM), out, quiet=True)
    assert main_analyze(out) == 0
    analysis = json.loads((out / "analysis.json").read_text())
    censored = [r for r in analysis["runs"] if r["status"] == "dominated"]
    assert censored
    for r in censored:
        bounds = {t: b for t, b in r["steps_censored"].items() if b is not None}
        assert bounds and all(r["reading"][t] == "censored" and r["steps_to_target"][t] is None
                              for t in bounds)
    report = (out / "report.md").read_text()
    assert "> " in report and "dominated" in report
    assert analysis["cost"]["dominated_runs"] == len(censored)
    assert 0 < analysis["cost"]["share_saved_at_most"] < 1


def main_analyze(out) -> int:
    from scaling.cli.main import main
    return main(["analyze", str(out), "--bootstrap", "20", "--quiet"])


def _run(lr: float, seed: int) -> PlannedRun:
    return PlannedRun(f"bs8-lr{lr}-seed{seed}", 8, RunSpec(lr, seed))


def test_a_run_far_slower_than_the_best_stops_and_the_best_with_its_neighbours_go_on(tmp_path):
    """Rows worked by hand, rule `first`: at 0.1 both seeds reach 0.3 at step 10; at 0.03, still
    above it at step 40 (a lower bound of 40 > 1.1 x 10); 0.01 and 0.03 are not the best's
    neighbours once 0.05 has been tried, so only the best's neighbours and itself go on."""
    cfg = config(NQM, "targets=['eval_loss<=0.3']", "reached.rule=first")
    group = [_run(lr, s) for lr in (0.01, 0.03) for s in (0, 1)]
    done = {lr: {"learning_rate": lr, "seed": s, "status": "completed",
                 "steps_to_target": {"eval_loss<=0.3": steps}}
            for lr, steps in ((0.05, 12.0), (0.1, 10.0), (0.3, 11.0)) for s in (0, 1)}
    others = [(_run(lr, 0), s) for lr, s in done.items()] + [(_run(lr, 1), s) for lr, s in done.items()]
    stopper = Dominance(cfg, tmp_path, group, others)
    rows = [{"step": step, "eval_loss": 1.0} for step in (0, 20, 40)]
    stopper.rows([rows] * 4, 0.0, 4)
    assert stopper.decide([True] * 4).tolist() == [True, True, True, True]
    assert stopper.censored(0) == {"eval_loss<=0.3": 40.0}


def test_a_running_run_is_censored_at_what_its_rule_can_still_read():
    """Smoothed, window 2: at step 99 the windows up to step 49 have closed, so an undecided
    crossing lies beyond the last of them, 40 (evaluated every 10 steps)."""
    rows = [{"step": s, "eval_loss": 1.0} for s in range(0, 100, 10)]
    reach = Reach("smoothed", 2.0)
    targets = ["eval_loss<=0.5"]
    read = lambda rows, reach, status: from_series(0.1, 0, columns(rows, targets, reach),
                                                     targets, reach, status)
    r = read(rows + [{"step": 99, "eval_loss": 1.0}], reach, "running")
    assert r.steps == {"eval_loss<=0.5": Censored(40.0)} and r.running
    done = read(rows, reach, "budget_exhausted")
    assert done.steps == {"eval_loss<=0.5": None}
    later = extend(columns(rows[:4], targets, reach), columns(rows[4:], targets, reach))
    assert all(np.array_equal(a, b) for a, b in zip(later["eval_loss"],
                                                    columns(rows, targets, reach)["eval_loss"]))
    first = read(rows, Reach("first"), "running")
    assert first.steps == {"eval_loss<=0.5": Censored(90.0)}


def test_divergence_is_read_from_the_rows_as_the_engine_reads_it():
    rows = [{"step": 0, "eval_loss": 1.0}, {"step": 5, "eval_loss": 11.0}]
    assert diverged(rows, 10.0) and not diverged(rows[:1], 10.0)
    assert diverged([{"step": 0, "eval_loss": 1.0}, {"step": 5, "eval_loss": None}], 10.0)


def test_the_host_and_the_device_share_one_divergence_rule():
    """Random curves: the host's reading of the rows and the jitted rule on the device agree
    at every point (inf, nan and values around the factor included)."""
    rng = np.random.default_rng(0)
    first = rng.uniform(0.5, 3.0, 200)
    last = first * rng.choice([0.5, 9.99, 10.0, 10.01, 30.0], 200)
    last[::17], last[5::23] = np.inf, np.nan
    device = np.asarray(jax.jit(lambda a, b: blown(a, b, 10.0))(jnp.asarray(last, jnp.float32),
                                                                 jnp.asarray(first, jnp.float32)))
    host = [diverged([{"step": 0, "eval_loss": float(f)}, {"step": 9, "eval_loss": float(v)}],
                     10.0) for f, v in zip(first, last)]
    close = np.isclose(last, 10.0 * first, rtol=1e-6)  # float32 against float64 at the edge
    assert np.array_equal(device[~close], np.array(host)[~close])


@pytest.mark.slow
def test_short_runs_stop_sooner_in_shorter_chunks(tmp_path):
    """250-step runs with chunk_steps 100: in whole chunks a stop decided at step 100 acts at
    200 (measured: the two runs at lr 0.01 stop there); in the default min_chunks 16, chunks of
    16 steps, the runs at 0.01 and 0.1 stop at 32 (21,376 examples trained -> 6,912). The same
    best rates and steps either way."""
    cfg = lambda *more: config(NQM, "batch.sizes=[32]", "train.chunk_steps=100", *more)
    whole = runner.run(cfg("train.min_chunks=1"), tmp_path / "whole", quiet=True)
    short = runner.run(cfg(), tmp_path / "short", quiet=True)
    assert {s["run_id"] for s in whole} == {s["run_id"] for s in short}
    assert _points(tmp_path / "whole") == _points(tmp_path / "short")
    stopped = lambda runs: {s["run_id"]: s["steps"] for s in runs if s["status"] == "dominated"}
    assert stopped(short) and all(steps % 16 == 0 for steps in stopped(short).values())
    assert stopped(whole) and all(steps >= 200 for steps in stopped(whole).values())
    assert sum(s["examples"] for s in short) < sum(s["examples"] for s in whole)


def test_runs_compared_for_dominance_share_every_optimizer_scalar_but_the_rate():
    """axes_key comes from the optimizer table: a run differing in any per-run scalar of any
    optimizer (momentum, weight decay, betas, eps) is never compared with the other, and every
    such scalar is a field of RunSpec (so a new one cannot be left out silently)."""
    scalars = {n for o in OPTIMIZER_TABLE.values() for n in o.hyperparams} - {"learning_rate"}
    assert set(OPTIMIZER_AXES) == scalars == {"momentum", "weight_decay", "b1", "b2", "eps"}
    assert scalars <= {f.name for f in fields(RunSpec)}
    base = PlannedRun("a", 8, RunSpec(0.1, 0))
    for name in OPTIMIZER_AXES:
        other = PlannedRun("b", 8, replace(base.spec, **{name: getattr(base.spec, name) + 0.5}))
        assert axes_key(other) != axes_key(base), name
    assert axes_key(PlannedRun("c", 8, RunSpec(0.3, 1))) == axes_key(base)  # rate and seed


def test_the_analysis_reads_the_clipping_the_sweep_recorded():
    """Decided once at write (Config.reading_extension) and recorded in every summary; the
    analysis reads the record, and only a folder without one falls back to its sweep.yaml."""
    stops = {"budget": {"reading_extension": 1.5}, "train": {"stop_at_targets": True}}
    recorded = [{"summary": {"reading_clip": True}}, {"summary": {"reading_clip": True}}]
    assert clipped_reading(stops, recorded) is True  # the record wins over the YAML's guess
    assert clipped_reading(stops, [{"summary": {}}]) is False
    assert clipped_reading({"budget": {"reading_extension": False}}, [{"summary": {}}]) is True


# ---------------------------------------------------------------- stopping what cannot win


def test_a_dominated_runs_censored_steps_are_its_bounds():
    r = RunReading(0.1, 2, {"a": 50.0, "b": Censored(120.0)})
    assert censored_steps(r) == {"b": 120.0}


def _runs(cells: dict[float, list], running: bool = True) -> list[RunReading]:
    return [RunReading(lr, seed, {"t": v}, running=running and isinstance(v, Censored))
            for lr, values in cells.items() for seed, v in enumerate(values)]


def test_a_clearly_slower_rate_is_dominated_and_the_best_and_neighbours_are_not():
    runs = _runs({0.01: [Censored(400.0), Censored(400.0)],  # far below: dominated
                  0.03: [Censored(400.0), Censored(400.0)],  # the best's neighbour: kept
                  0.1: [100.0, 110.0],  # the best, 105
                  0.3: [112.0, Censored(113.0)],  # bound 112.5 <= 115.5: may still win
                  1.0: [Censored(200.0), Censored(200.0)],  # neighbour of one that may win
                  3.0: [Censored(200.0), None]})  # a seed that never reaches
    stop = {(r.learning_rate, r.seed) for r, s in zip(runs, dominated(runs, ["t"], 0.1)) if s}
    assert stop == {(0.01, 0), (0.01, 1), (3.0, 0)}
    tight = dominated(runs, ["t"], 0.05)  # 112.5 > 110.25: 0.3 no longer may win ...
    assert {(r.learning_rate, r.seed) for r, s in zip(runs, tight) if s} == {
        (0.01, 0), (0.01, 1), (1.0, 0), (1.0, 1), (3.0, 0)}  # ... but stays the best's neighbour


def test_with_rounds_left_a_far_neighbour_is_not_kept():
    """Neighbours kept only within a factor 1.25 in rate (a search with rounds left puts a
    midpoint between the best and a farther one): 0.03, 3.3x below the best, stops too; 0.12,
    1.2x above it, stays."""
    runs = _runs({0.01: [Censored(400.0)], 0.03: [Censored(400.0)], 0.1: [100.0],
                  0.12: [Censored(300.0)], 0.3: [Censored(300.0)]})
    stop = lambda near: [r.learning_rate for r, s in
                         zip(runs, dominated(runs, ["t"], 0.1, near)) if s]
    assert stop(None) == [0.01, 0.3]
    assert stop(1.25) == [0.01, 0.03, 0.3]


def test_nothing_stops_before_some_rate_reached_every_target():
    runs = _runs({0.1: [100.0, Censored(90.0)], 1.0: [Censored(900.0)] * 2})
    assert not any(dominated(runs, ["t"], 0.0))
    two = [RunReading(lr, 0, {"a": a, "b": b}, running=True)
           for lr, a, b in ((0.01, Censored(500.0), Censored(500.0)), (0.03, 300.0, 90.0),
                            (0.1, 100.0, Censored(100.0)), (0.3, 300.0, Censored(200.0)),
                            (1.0, Censored(900.0), Censored(900.0)))]
    # a: best 0.1, keeps 0.03-0.3; b: best 0.03 (0.1's bound 100 > 99), keeps 0.01-0.1; 0.3
    # has decided a, so b alone decides it: it stops
    assert dominated(two, ["a", "b"], 0.1) == [False, False, False, True, True]
    assert dominated(two, ["a", "b"], 0.2) == [False, False, False, False, True]  # 100 <= 108


def test_a_run_done_at_one_target_stops_once_the_other_cannot_use_it():
    """easy: best 1.0 (30), its neighbours 0.3 and 3.0; hard: best 0.1 (100), its neighbours
    0.03 and 0.3 (whose bound 115 > 110: it may no longer win). 1.0 and 3.0 have decided easy,
    where they are the best and its neighbour, and at hard neither may win nor neighbours one
    that may: they stop (kept while any target kept them, they would run on to read hard for
    nothing). With a margin of 1, 1.0 may still win at hard (200 <= 2 x 100): nothing stops."""
    runs = [RunReading(lr, 0, {"easy": e, "hard": h}, running=isinstance(h, Censored))
            for lr, e, h in ((0.03, Censored(100.0), Censored(150.0)), (0.1, 80.0, 100.0),
                             (0.3, 45.0, Censored(115.0)), (1.0, 30.0, Censored(200.0)),
                             (3.0, 40.0, Censored(300.0)))]
    assert dominated(runs, ["easy", "hard"], 0.1) == [False, False, False, True, True]
    assert not any(dominated(runs, ["easy", "hard"], 1.0))


def _read(steps: float | None, t: int, window: float, budget: int) -> Steps:
    """A run's reading at one target at step t under a windowed rule (decided at window x
    (1 + s) - 1): its steps, None once the budget is spent unreached, else its bound."""
    if steps is not None and window * (1 + steps) - 1 <= t:
        return steps
    return None if t >= budget else Censored(max(0.0, (1 + t) / window - 1))


def _simulate(true: dict[float, list[dict[str, float | None]]], window: float, budget: int,
              chunk: int, margin: float | None) -> list[RunReading]:
    """Runs read under a windowed rule at every target, in chunks, each ending once it has
    decided every target (or spent the budget); with a margin, the dominated ones stop at
    each chunk boundary, censored at their bounds where still open."""
    targets = list(next(iter(true.values()))[0])
    state = {(lr, seed): None for lr, seeds in true.items() for seed in range(len(seeds))}
    for t in range(chunk, budget + chunk, chunk):
        now = []
        for (lr, seed), final in state.items():
            if final is None:
                steps = {k: _read(s, t, window, budget) for k, s in true[lr][seed].items()}
                running = any(isinstance(v, Censored) for v in steps.values())
                now.append(RunReading(lr, seed, steps, running=running))
                state[lr, seed] = None if running else now[-1]
            else:
                now.append(final)
        if margin is not None:
            for r, stop in zip(now, dominated(now, targets, margin)):
                if stop:
                    state[r.learning_rate, r.seed] = RunReading(r.learning_rate, r.seed, r.steps)
    return list(state.values())


@pytest.mark.parametrize("shift", [None, 0.6])
def test_stopping_keeps_each_targets_best_rate_and_its_parabola_on_random_valleys(shift):
    """Against the same runs left to finish: at every target, the same best rate and the same
    steps there and at its two neighbours, whatever the valley and the seeds' noise. With a
    second target (`shift`: its optimum that many decades higher, at 0.3x the steps, as an
    easy loss target's at a large batch), a run that has decided one target stops once the
    other can no longer use it."""
    rng = np.random.default_rng(0)
    lrs = list(np.geomspace(0.01, 10, 9))
    stopped = 0
    for _ in range(150):
        centre, width = rng.uniform(-1.5, 0.8), rng.uniform(0.3, 2.0)
        seeds = rng.normal(0, 0.05, 3)
        valleys = {"t": (centre, 1.0)} if shift is None else {"t": (centre, 1.0),
                                                              "easy": (centre + shift, 0.3)}
        true = {}
        for lr in lrs:
            true[lr] = []
            for e in seeds:
                noise = rng.normal(0, 0.02)
                base = {k: 200 * scale * math.exp((math.log10(lr) - c) ** 2 / width)
                        for k, (c, scale) in valleys.items()}
                true[lr].append({k: None if b * (1 + e) > 2000 else float(b * (1 + e + noise))
                                 for k, b in base.items()})
        full_runs = _simulate(true, 1.5, 2000, 50, None)
        cut_runs = _simulate(true, 1.5, 2000, 50, 0.1)
        stopped += sum(isinstance(v, Censored) for r in cut_runs for v in r.steps.values())
        for target in valleys:
            full, cut = cells(full_runs, target), cells(cut_runs, target)
            b = full.best()
            assert cut.best() == b
            if b is not None:
                for j in range(max(b - 1, 0), min(b + 2, len(full.lrs))):
                    assert cut.means[j] == full.means[j]
    assert stopped > 500  # stopping did happen
