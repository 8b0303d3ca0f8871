"""One learning-rate curve per batch size (scaling.lr_curve): cell means and lower bounds worked
by hand, and the search's stopping test and the analysis's `bracketed` as one call, which the
search's readings and the analysis's run table give alike on random curves with censored,
unreached and diverged seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.analysis import optimum
from scaling.analysis.table import lr_curves
from scaling.config.targets import Censored
from scaling.lr_curve import Curve, cell_bounds, cell_means
from scaling.sweep import search as S

SEED_STEPS = {0.1: [100.0, 120.0],  # both reached: mean 110, bound 110
              0.2: [90.0, Censored(130.0)],  # censored at 130: no mean, bound (90 + 130) / 2
              0.4: [None, 80.0]}  # one never reached: no mean, bound infinite


def readings(cells: dict[float, list], diverged: frozenset = frozenset()) -> list[S.RunReading]:
    """The search's readings of per-rate seed steps (a number, Censored or None)."""
    return [S.RunReading(lr, seed, {"t": v}, diverged=(lr, seed) in diverged)
            for lr, values in cells.items() for seed, v in enumerate(values)]


def table(runs: list[S.RunReading]) -> list[dict]:
    """The same runs as the analysis's run table reads them (scaling.analysis.table)."""
    out = []
    for r in runs:
        v = r.steps["t"]
        status = "diverged" if r.diverged else "dominated" if isinstance(v, Censored) \
            else "completed"
        steps = v if isinstance(v, float) else None
        out.append({"batch_size": 8, "learning_rate": r.learning_rate, "seed": r.seed,
                    "hyperparameters": {}, "status": status,
                    "steps_to_target": {"t": steps},
                    "steps_censored": {"t": v.steps if isinstance(v, Censored) else None},
                    "examples_to_target": {"t": None if steps is None else 8 * steps},
                    "b_simple": {"t": None}, "b_noise": {"t": None},
                    "b_simple_precond": {"t": None}})
    return out


def test_cell_means_and_bounds_worked_by_hand():
    steps = np.array([[100.0, 120.0], [90.0, math.nan], [math.nan, 80.0]])
    floors = np.array([[100.0, 120.0], [90.0, 130.0], [math.inf, 80.0]])
    assert cell_means(steps)[0] == 110.0 and np.isnan(cell_means(steps)[1:]).all()
    assert list(cell_bounds(floors)) == [110.0, 110.0, math.inf]
    assert np.isnan(cell_bounds(np.array([[90.0, math.nan]])))[0]  # a seed with no run: unknown
    assert cell_means(np.zeros((2, 0))).shape == (2,)  # no seeds: nothing reached


@pytest.mark.parametrize("side", ["search", "analysis"])
def test_both_sides_read_the_same_cells(side):
    runs = readings(SEED_STEPS)
    curve = S.cells(runs, "t") if side == "search" else lr_curves(table(runs), "t")[8][0].curve()
    assert list(curve.lrs) == [0.1, 0.2, 0.4]
    assert curve.means[0] == 110.0 and np.isnan(curve.means[1:]).all()
    assert list(curve.bounds) == [110.0, 110.0, math.inf]
    assert curve.best() == 0 and curve.no_bracket(0) == "best at the lowest rate tried"


def test_a_run_the_analysis_lacks_leaves_its_cell_unknown():
    """Seeds align across a batch size's rates: a missing run is no bound, so no bracket."""
    runs = readings({0.1: [300.0, 300.0], 0.2: [100.0, 100.0], 0.4: [200.0, 200.0]})
    curve = lr_curves(table(runs[:-1]), "t")[8][0].curve()  # 0.4, seed 1: no run
    assert np.isnan(curve.bounds[2]) and curve.best() == 1
    assert curve.no_bracket(1) == "neighbour 0.4 may be better: a seed has no run there"


def test_the_bracket_worked_by_hand():
    """Best 0.2 (mean 100). 0.4's bound 110 >= 100 closes the upper side; 0.1 censored at 60
    (bound 80 < 100) may be better; at 120 (bound 110) it closes the lower side too; a tie
    closes a side; a diverged neighbour closes it."""
    lrs, diverged = [0.1, 0.2, 0.4], [False] * 3
    curve = lambda low: Curve.of_cells(lrs, [np.array([100.0, math.nan]), np.array([100.0] * 2),
                                             np.array([110.0, math.nan])],
                                       [np.array([100.0, low]), np.array([100.0] * 2),
                                        np.array([110.0, 110.0])], diverged)
    assert curve(60.0).best() == 1
    assert curve(60.0).no_bracket(1) == ("neighbour 0.1 may be better: its steps exceed 80, "
                                         "below the best's 100")
    assert curve(120.0).no_bracket(1) is None and curve(100.0).no_bracket(1) is None
    unknown = Curve.of_cells(lrs, [np.array([300.0, 300.0]), np.array([100.0, 100.0]),
                                   np.array([200.0, math.nan])],
                             [np.array([300.0, 300.0]), np.array([100.0, 100.0]),
                              np.array([200.0, math.nan])], diverged)  # a seed with no run
    assert unknown.no_bracket(1) == "neighbour 0.4 may be better: a seed has no run there"
    blown = Curve.of_cells(lrs, [np.array([300.0]), np.array([100.0]), np.array([math.nan])],
                           [np.array([300.0]), np.array([100.0]), np.array([math.inf])],
                           [False, False, True])
    assert blown.no_bracket(1) is None and blown.optimum(1) is None
    assert blown.bounded_only(2) == "neighbour 0.4 diverged"


def random_cells(rng: np.random.Generator) -> tuple[dict[float, list], frozenset]:
    """A few rates, each with the same seeds: reached, censored, never reached or diverged."""
    lrs = [round(0.01 * 2 ** k, 6) for k in range(int(rng.integers(1, 7)))]
    seeds = int(rng.integers(1, 4))
    cells, diverged = {}, set()
    for lr in lrs:
        values = []
        for seed in range(seeds):
            kind = rng.choice(4, p=[0.6, 0.2, 0.1, 0.1])
            values.append(float(rng.integers(50, 200)) if kind == 0 else
                          Censored(float(rng.integers(30, 250))) if kind == 1 else None)
            if kind == 3:
                diverged.add((lr, seed))
        cells[lr] = values
    return cells, frozenset(diverged)


def test_the_searchs_stopping_test_is_the_analysiss_bracketed():
    """On 400 random curves: the search's curve (from its readings) and the analysis's (from
    its run table) are one curve; the search stops a target (at any resolution) exactly where
    the analysis reports the optimum bracketed."""
    rng = np.random.default_rng(0)
    wide = S.Settings(2.0, resolution=1e9)  # every bracket is within the resolution
    seen = {True: 0, False: 0}
    for _ in range(400):
        runs = readings(*random_cells(rng))
        ours, theirs = S.cells(runs, "t"), lr_curves(table(runs), "t")[8][0]
        for a, b in ((ours.means, theirs.curve().means), (ours.bounds, theirs.curve().bounds)):
            assert np.array_equal(a, b, equal_nan=True)
        best = ours.best()
        if best is None:
            continue
        stops = S.closed(ours, best, wide) is not None
        reported = optimum.entry(theirs, best, float(ours.means[best]))["bracketed"]
        assert stops == reported == (ours.no_bracket(best) is None)
        seen[stops] += 1
    assert min(seen.values()) > 30  # both answers drawn often
