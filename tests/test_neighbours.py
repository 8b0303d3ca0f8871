"""The first grid from neighbours (scaling.sweep.neighbours): the order batch sizes train in,
the prediction (values worked by hand), the grid on the middle's lattice, the whole protocol
against the NQM's closed form from a coarse grid (where the optimum bends onto the stability
limit, so the line through the trained optima over-shoots), and through the engine: the
rounds.json it records, the same optima as the whole first grid at fewer runs, a resumed sweep
that trains nothing again, and the refusals."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from scaling import store
from scaling.analysis import analyze as A
from scaling.config import ConfigError, LearningRateConfig
from scaling.sweep import grid, neighbours as N, runner, search as S
from scaling.sweep.prepare import prepare
from tests.helpers import config
from tests.test_search import HALF_DECADE, nqm_reading, nqm_steps

# ---------------------------------------------------------------- order and prediction


def test_the_middle_trains_first_and_releases_outward():
    sizes = [16, 32, 64, 128, 256]
    assert N.middle(sizes) == 64 and N.middle([8, 16, 32, 64]) == 32  # the upper middle
    assert N.waiting_on(sizes, 64) == [32, 128]
    assert N.waiting_on(sizes, 32) == [16] and N.waiting_on(sizes, 128) == [256]
    assert N.waiting_on(sizes, 16) == [] and N.waiting_on(sizes, 256) == []
    assert N.waiting_on([64], 64) == []


def test_the_prediction_is_a_line_in_log_log_with_its_slope_in_0_1():
    """Two optima on eta = 0.01 B^0.5 predict it exactly; optima rising as B^2 are cut to
    linear (slope 1 through their mean: log eta at B = 4 is the mean of the logs, 0.0004 x 4);
    falling optima to flat (the geometric mean); one optimum takes the slope given; of three,
    the line goes through the two nearest in log B (at 1,024: 64 and 256, slope
    log 1.25 / log 4, so 0.1 x 4^slope = 0.125)."""
    sqrt_rule = {16: 0.04, 64: 0.08}
    assert N.predict(sqrt_rule, 256, 0.0) == pytest.approx(0.16, rel=1e-12)
    steep = {2: 0.0004, 8: 0.0064}  # slope 2
    assert N.predict(steep, 16, 0.5) == pytest.approx(math.sqrt(0.0004 * 0.0064) / 4 * 16)
    falling = {2: 0.4, 8: 0.1}
    assert N.predict(falling, 32, 0.5) == pytest.approx(0.2, rel=1e-12)
    assert N.predict({64: 0.1}, 256, 0.5) == pytest.approx(0.2, rel=1e-12)
    assert N.predict({64: 0.1}, 16, 1.0) == pytest.approx(0.025, rel=1e-12)
    bending = {16: 0.04, 64: 0.08, 256: 0.1}  # levelling off: the nearest two set the line
    assert N.predict(bending, 1024, 0.5) == pytest.approx(0.1 * 1.25, rel=1e-12)  # 64, 256
    assert N.predict(bending, 8, 0.5) == pytest.approx(0.04 / math.sqrt(2), rel=1e-12)  # 16, 64


def test_the_default_slope_is_the_centred_rules():
    base = {"name": "t", "task": {"name": "nqm", "dim": 10}, "optimizer": {"name": "sgd"},
            "batch": {"sizes": [8, 16]}, "targets": ["eval_loss<=0.3"],
            "budget": {"max_examples": 800}}
    centred = {"mode": "centered", "lr_ref": 0.1, "num": 3, "span": 4}
    slope = lambda lr: N.default_slope(config({**base, "learning_rate": lr}))
    assert slope(centred) == 1.0 and slope({**centred, "rule": "sqrt"}) == 0.5
    assert slope({"values": [0.1, 1.0]}) == 0.5


def test_a_batch_sizes_optima_are_each_targets_best():
    read = lambda lr, a, b: S.RunReading(lr, 0, {"a": a, "b": b})
    runs = [read(0.1, 50.0, None), read(0.2, 40.0, 90.0), read(0.4, 45.0, 80.0),
            read(0.8, None, 85.0)]
    assert N.optima(runs, ["a", "b"]) == {"a": 0.2, "b": 0.4}
    assert N.optima(runs[:1], ["a", "b"]) == {"a": 0.1}
    assert N.optima([read(0.1, None, None)], ["a", "b"]) == {}


def test_the_grid_is_on_the_middles_lattice_the_grids_factor_apart():
    """The middle's grid 0.01 .. 1, half a decade apart: lattice steps of 10^(1/22) from 0.01.
    A prediction of 0.07 is lattice point 22 x log10(7) = 18.6 -> 19; three rates 11 points
    apart around it, and an even count puts the extra one above."""
    s = S.settings(LearningRateConfig(values=[0.01, 0.0316228, 0.1, 0.316228, 1.0]),
                   [0.01, 0.0316228, 0.1, 0.316228, 1.0])
    rates = N.first_grid([0.07], s, 3)
    assert rates == pytest.approx([s.on_lattice(k) for k in (8, 19, 30)], rel=1e-5)
    assert rates[2] / rates[1] == pytest.approx(HALF_DECADE, rel=1e-5)
    assert N.first_grid([0.07], s, 2) == pytest.approx([s.on_lattice(k) for k in (19, 30)],
                                                       rel=1e-5)
    assert N.first_grid([0.07], s, 1) == pytest.approx([s.on_lattice(19)], rel=1e-5)


def test_targets_predicted_apart_get_the_union_of_their_grids():
    """On the lattice of 10^(1/22) steps, one step apart: predictions 0.07 (point 19) and 0.1
    (point 22) each get points -1, 0, +1 around theirs: 18 .. 23 once each; two targets on one
    point give its three rates once."""
    s = S.settings(LearningRateConfig(values=[0.01, 0.0316228, 0.1, 0.316228, 1.0]),
                   [0.01, 0.0316228, 0.1, 0.316228, 1.0])
    assert N.first_grid([0.07, 0.1], s, 3, 1.01) == pytest.approx(
        [s.on_lattice(k) for k in (18, 19, 20, 21, 22, 23)], rel=1e-5)
    assert N.first_grid([0.07, 0.0705], s, 3, 1.01) == pytest.approx(
        [s.on_lattice(k) for k in (18, 19, 20)], rel=1e-5)


def test_a_grid_spaced_closer_is_whole_lattice_steps_apart_and_walks_out_by_its_spacing():
    """On the same lattice (steps of 10^(1/22) = 1.110x): a spacing of 1.4 is log 1.4 / log
    1.110 = 3.2 -> 3 steps (1.369x), so rates at points 16, 19, 22; a spacing below one step is
    one step. The released search walks outward by those 3 steps while the middle's walks by
    the grid's half decade, on one lattice."""
    s = S.settings(LearningRateConfig(values=[0.01, 0.0316228, 0.1, 0.316228, 1.0]),
                   [0.01, 0.0316228, 0.1, 0.316228, 1.0])
    assert N.lattice_steps(s, 1.4) == 3 and N.lattice_steps(s, 1.01) == 1
    assert N.lattice_steps(s, None) == 11
    assert N.first_grid([0.07], s, 3, 1.4) == pytest.approx(
        [s.on_lattice(k) for k in (16, 19, 22)], rel=1e-5)
    released = N.released(s, 1.4)
    assert released.step == s.step and released.walk == 3 and N.released(s, None) == s
    assert released.walked(s.on_lattice(19), up=True) == s.on_lattice(22)
    assert s.walked(0.07, up=True) == 0.07 * s.factor
    grid = N.first_grid([0.07], s, 3, 1.4)
    runs = [S.RunReading(lr, 0, {"a": steps}) for lr, steps in zip(grid, (40.0, 50.0, 60.0))]
    plan = S.next_round(runs, ["a"], released, 0)  # the best the lowest: 3 points down
    assert plan.learning_rates == (S.rounded(s.on_lattice(13)),)
    unreached = [S.RunReading(lr, 0, {"a": None}, diverged=lr == grid[-1]) for lr in grid]
    plan = S.next_round(unreached, ["a"], released, 0)  # under the diverged: maybe lower
    assert plan.learning_rates == (S.rounded(s.on_lattice(13)),)
    assert "the highest diverged and the lowest, 0.05337, did not" in plan.reasons["a"]
    assert S.next_round(unreached, ["a"], s, 0).done  # a whole grid spans what could reach


# ---------------------------------------------------------------- the protocol, closed form

SIZES = [8, 16, 32, 64, 128, 256, 512]
COARSE = [0.01, 0.0316228, 0.1, 0.316228, 1.0]  # the steps-to-target study's first grid
FRACTIONS = {"t5": 0.05, "t10": 0.1}


def _search(first: list[float], size: int, walk: float | None = None) -> list[S.RunReading]:
    """One batch size's search to the end from `first`, on the coarse grid's lattice (as
    Prepared.search_settings), walking out by `walk` (None: the grid's factor), every rate
    read from the closed form."""
    settings = replace(S.settings(LearningRateConfig(values=COARSE, max_rounds=8), COARSE),
                       walk=walk)
    read = lambda lr: nqm_reading(lr, size, FRACTIONS)
    runs = [read(lr) for lr in first]
    for done in range(settings.max_rounds + 1):
        plan = S.next_round(runs, list(FRACTIONS), settings, done)
        if plan.done:
            return runs
        runs += [read(lr) for lr in plan.learning_rates]
    raise AssertionError("the round limit ends every search")


def _neighbours_protocol(count: int, spacing: float | None = None
                         ) -> dict[int, list[S.RunReading]]:
    """The middle from the coarse grid, then outward, each from `count` rates `spacing` apart
    around the optimum that the batch sizes done so far predict (as Prepared.neighbour_grid
    does), walking out by that spacing (as Prepared.search_settings)."""
    lattice = S.settings(LearningRateConfig(values=COARSE), COARSE)
    done, queue, first = {}, [N.middle(SIZES)], {N.middle(SIZES): COARSE}
    while queue:
        size = queue.pop(0)
        walk = None if size == N.middle(SIZES) else N.released(lattice, spacing).walk
        done[size] = _search(first[size], size, walk)
        for nxt in N.waiting_on(SIZES, size):
            best = {b: N.optima(r, list(FRACTIONS)) for b, r in done.items()}
            predicted = [N.predict({b: o[t] for b, o in best.items() if t in o}, nxt,
                                   N.DEFAULT_SLOPE) for t in FRACTIONS]
            first[nxt] = N.first_grid(predicted, lattice, count, spacing)
            queue.append(nxt)
    return done


def _true_optimum(size: int, fraction: float) -> float:
    fine = np.geomspace(0.05, 1.99, 300)
    return float(fine[np.nanargmin([nqm_steps(lr, size, fraction) or np.nan for lr in fine])])


@pytest.mark.parametrize("count, spacing", [(3, None), (1, None), (3, 1.4), (3, 1.1)])
def test_from_neighbours_the_search_brackets_the_true_optimum_at_fewer_runs(count, spacing):
    """On the NQM the optimum rises with B and then sits at the stability limit (lr 2): the
    line through the trained optima over-shoots there, and the search walks back. At every
    batch size and target the best ends bracketed within the resolution around the closed
    form's optimum, as from the whole coarse grid, with fewer runs in all."""
    ours = _neighbours_protocol(count, spacing)
    whole = {b: _search(COARSE, b) for b in SIZES}
    lattice = S.settings(LearningRateConfig(values=COARSE), COARSE)
    for size in SIZES:  # every rate tried is its own lattice point: none a rounding apart
        tried = {S.rate_key(r.learning_rate): r.learning_rate for r in ours[size]}.values()
        points = [lattice.lattice_index(lr) for lr in tried]
        assert len(set(points)) == len(points), (size, sorted(tried))
        for target, fraction in FRACTIONS.items():
            curve = S.cells(ours[size], target)
            best = curve.best()
            assert best is not None and 0 < best < len(curve.lrs) - 1, (size, target)
            lo, hi = curve.lrs[best - 1], curve.lrs[best + 1]
            true = _true_optimum(size, fraction)
            assert lo <= true * 1.02 and true <= hi * 1.02, (size, target, lo, true, hi)
            assert hi / lo <= 1.25 * (1 + 1e-6)
    ours_runs, whole_runs = sum(map(len, ours.values())), sum(map(len, whole.values()))
    assert ours_runs < 0.8 * whole_runs, (ours_runs, whole_runs)


def test_a_grid_spaced_closer_trains_fewer_runs_on_the_nqm():
    """Three rates around each target's prediction one lattice step apart (1.110x, the
    default), so a best inside them is bracketed within the resolution at once: 44 runs in
    all, against 52 three steps apart (1.369x) and 71 the grid's half decade apart (counted
    once from the closed form; all bracket every optimum, the test above)."""
    count = lambda spacing: sum(map(len, _neighbours_protocol(3, spacing).values()))
    assert (count(1.1), count(1.4), count(None)) == (44, 52, 71)


# ---------------------------------------------------------------- through the engine

TARGET = "eval_loss<=0.1"
SEARCHED = {"name": "t", "task": {"name": "nqm", "dim": 10}, "optimizer": {"name": "sgd"},
            "batch": {"sizes": [8, 16, 32]},
            "learning_rate": {"min": 0.01, "max": 1.0, "num": 5, "first_grid": "neighbours"},
            "budget": {"max_examples": 3000}, "targets": [TARGET], "seeds": [0],
            "eval": {"every": 2}, "train": {"chunk_steps": 10}}


@pytest.mark.slow
def test_the_engine_records_each_released_grid_and_finds_the_same_optima(tmp_path):
    cfg = config(SEARCHED)
    done = runner.run(cfg, tmp_path / "nb", quiet=True)
    rounds = store.read_rounds(tmp_path / "nb")
    firsts = {r["batch_size"]: r for r in rounds if r["round"] == 0}
    assert sorted(firsts) == [8, 32]  # the middle, 16, starts from the config's grid
    for size, record in firsts.items():
        assert len(record["learning_rates"]) == 3
        assert "predicted from its optima at B = 16" in record["reasons"]["first grid"]
        mine = [s for s in done if s["batch_size"] == size]
        assert {s["learning_rate"] for s in mine} >= set(record["learning_rates"])
    assert grid.first_rates(cfg, 8, rounds) == firsts[8]["learning_rates"]
    assert [r["round"] for r in S.rounds_of(rounds, 8)] == list(
        range(1, len(S.rounds_of(rounds, 8)) + 1))
    whole = runner.run(config(SEARCHED, "learning_rate.first_grid=grid"), tmp_path / "grid",
                       quiet=True)
    best = lambda out: {p["batch_size"]: p["best_lr"]
                        for p in A.analyze(out, bootstrap=0)["targets"][0]["points"]}
    ours, theirs = best(tmp_path / "nb"), best(tmp_path / "grid")
    for size in cfg.batch.sizes:  # one lattice step of 10^(1/22) at most
        assert abs(math.log(ours[size] / theirs[size])) <= math.log(10) / 22 * 1.01
    assert len(done) < len(whole)
    lattice = prepare(cfg, tmp_path / "nb").search_settings(16)
    for size in cfg.batch.sizes:  # no two rates tried a rounding apart (one lattice)
        tried = {s["learning_rate"] for s in done if s["batch_size"] == size}
        assert len({lattice.lattice_index(lr) for lr in tried}) == len(tried), sorted(tried)
    assert runner.run(cfg, tmp_path / "nb", quiet=True) == []  # resumed: nothing new
    assert store.read_rounds(tmp_path / "nb") == rounds


def test_bad_values_and_what_neighbours_cannot_work_with_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="learning_rate.first_grid: got 'near'"):
        config(SEARCHED, "learning_rate.first_grid=near")
    with pytest.raises(ConfigError, match="learning_rate.neighbour_rates: got 0"):
        config(SEARCHED, "learning_rate.neighbour_rates=0")
    with pytest.raises(ConfigError, match="learning_rate.neighbour_spacing: got 1"):
        config(SEARCHED, "learning_rate.neighbour_spacing=1")
    with pytest.raises(ConfigError, match="learning_rate.neighbour_spacing: got 'wide'"):
        config(SEARCHED, "learning_rate.neighbour_spacing=wide")
    with pytest.raises(ConfigError, match="learning-rate search is on"):
        config(SEARCHED, "learning_rate.search=false")
    with pytest.raises(ConfigError, match="optimizer momentum is a list"):
        config(SEARCHED, "optimizer={name: momentum, momentum: [0.5, 0.9]}")
    cfg = config(SEARCHED)
    with pytest.raises(ConfigError, match="--batch-size or --shard"):
        prepare(cfg, tmp_path, batch_sizes=[8])
    with pytest.raises(ConfigError, match="--batch-size or --shard"):
        prepare(cfg, tmp_path, shard=(0, 2))


def test_before_release_a_batch_size_has_no_runs_and_the_middle_its_whole_grid(tmp_path):
    p = prepare(config(SEARCHED), tmp_path)
    assert {u.batch_size for u in p.units} == {16}
    assert len(p.batch_runs(16)) == 5 and p.batch_runs(8) == [] and p.batch_runs(32) == []
    assert set(p.specs) == {8, 16, 32}  # every batch size's program is known before compute
    middle, released = p.search_settings(16), p.search_settings(8)  # one lattice
    assert p.search_settings(32) == released == replace(middle, walk=1)  # the default 1.1x
    said = runner.budget_lines(p, p.batch_runs(16))
    assert said[0].startswith("to train: 5 runs") and "batch sizes 8, 32, each once" in said[-1]
