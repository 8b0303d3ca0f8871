"""The learning-rate search of one batch size: which rates the next round trains, when the
search is done and why (which running runs can stop, since they can no longer be the best, is
scaling.sweep.stopping's, from the same readings).

Pure functions of the runs' readings so far (numbers, no devices), so the sweep loop calls them
between rounds, and tests drive them with closed forms.

- Bracket first: while a target's best learning rate is the lowest or highest tried, step
  outward by the grid's factor, or a released grid's spacing (scaling.sweep.neighbours):
  upward until a rate diverges or stops reaching the target, downward no lower than the floor.
  Where no rate reached a target, a released grid steps past the edge whose runs ended
  nearer it (their final metric); a whole grid steps up until a rate diverges.
- Then resolve: once the best has a neighbour on each side, fit the parabola in (log rate,
  log steps) through the three (scaling.parabola) and train the lattice rate nearest its
  minimum with its two lattice neighbours, until the best is bracketed (`closed`: the
  curve's bracket, scaling.lr_curve, the one the analysis reports) by two neighbours within a
  factor `resolution` of each other. The lattice divides the grid's factor evenly into steps
  of at most sqrt(resolution), so a best with both lattice neighbours tried is done: on a
  smooth valley one round ends the search, where halving the spacing took four. Where a
  neighbour only bounds the parabola (stopped as dominated) or gives none (never reached), the
  minimum may lie far off: the points each side go a third of the way to the neighbour, so
  the bracket shrinks by a third whatever. Those three points are what the analysis fits its
  parabola through (scaling.analysis.optimum).
- Every target counts: a round trains what the targets ask for, deduplicated as run ids print
  learning rates (6 significant digits), never a rate already tried, and without a rate one
  lattice step from another target's (`_thinned`).
- A round limit ends the search whatever is left; the reasons say what.

A run's steps to a target are a number (reached), `Censored(s)` (not reached by step s: stopped,
or still running) or None (never: diverged, or ended unreached); `cells` makes them the batch
size's learning-rate curve (scaling.lr_curve: a cell's mean where every seed reached, its lower
bound with censored seeds at their s, the best, the bracket). The rounds of a results folder
are recorded in rounds.json (scaling.store.add_round) as `round_record` writes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scaling.config import Config, LearningRateConfig
from scaling.config.targets import Censored, parse_target
from scaling.lr_curve import Curve
from scaling.parabola import log_vertex

Steps = float | Censored | None
DEFAULT_FACTOR = math.sqrt(10.0)  # the outward step of a one-rate grid: half a decade
FLOOR_BELOW_GRID = 100.0  # the default floor: the first grid's lowest rate / this


@dataclass(frozen=True)
class RunReading:
    """One run of the batch size as the search reads it: per target, its steps (`Steps`);
    `running` while it still trains (its censored steps may still fall); `shortfall`, per
    target, how far its final metric ended from the target (negative: past it), where known."""

    learning_rate: float
    seed: int
    steps: dict[str, Steps]
    diverged: bool = False
    running: bool = False
    shortfall: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """factor: the first grid's spacing, which the lattice divides, and the outward step;
    resolution: the neighbours' ratio that ends a target's search; max_rounds: rounds after the
    first grid; floor: the lowest rate a downward walk tries; anchor: a rate of the first
    grid, which puts the refining rates on the grid's lattice; walk: an outward step of this
    many lattice steps instead of the factor (a first grid from neighbours spaced closer:
    scaling.sweep.neighbours)."""

    factor: float = DEFAULT_FACTOR
    resolution: float = 1.25
    max_rounds: int = 5
    floor: float = 0.0
    anchor: float = 1.0
    walk: int | None = None

    def walked(self, lr: float, up: bool) -> float:
        """`lr` one outward step up or down: by the factor, or `walk` lattice steps from the
        lattice point nearest `lr` (the rate it gives is the lattice's own, not a product a
        rounding away from it)."""
        if self.walk is None:
            return lr * self.factor if up else lr / self.factor
        return self.on_lattice(self.lattice_index(lr) + (self.walk if up else -self.walk))

    @property
    def step(self) -> float:
        """The lattice's spacing: the factor split into the fewest equal steps of at most
        sqrt(resolution), so that the lattice holds the grid (through `anchor`, a rate of
        the first grid) and a best's two lattice neighbours span at most the resolution."""
        pieces = math.ceil(math.log(self.factor) / math.log(math.sqrt(self.resolution)) - 1e-9)
        return self.factor ** (1.0 / max(pieces, 1))

    def on_lattice(self, index: int) -> float:
        """The lattice's rate `index` steps from the anchor."""
        return self.anchor * self.step ** index

    def lattice_index(self, lr: float) -> int:
        """The lattice point nearest `lr` (in log rate)."""
        return round(math.log(lr / self.anchor) / math.log(self.step))


@dataclass(frozen=True)
class Plan:
    """The next round: its new learning rates (ascending; none: the search is done) and, per
    target, why (what it asks for, or why it asks for nothing)."""

    learning_rates: tuple[float, ...]
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return not self.learning_rates


def rate_key(lr: float) -> str:
    """A learning rate as run ids print it: two rates with one key are one rate."""
    return f"{lr:.6g}"


def rounded(lr: float) -> float:
    """A proposed rate to the digits its run id shows, so the id and the value agree."""
    return float(rate_key(lr))


# ---------------------------------------------------------------- cells


def _seed(steps: Steps) -> tuple[float, float]:
    """(the seed's exact steps, NaN unless reached; its lower bound, infinite where never)."""
    if steps is None:
        return math.nan, math.inf
    if isinstance(steps, Censored):
        return math.nan, float(steps.steps)
    return float(steps), float(steps)


def cells(runs: list[RunReading], target: str) -> Curve:
    """The learning rates tried, ascending, each read over its seeds at `target`."""
    by_rate: dict[str, list[RunReading]] = {}
    for run in runs:
        by_rate.setdefault(rate_key(run.learning_rate), []).append(run)
    groups = sorted(by_rate.values(), key=lambda g: g[0].learning_rate)
    seeds = [np.array([_seed(r.steps.get(target)) for r in g], float).reshape(-1, 2)
             for g in groups]
    return Curve.of_cells([g[0].learning_rate for g in groups], [v[:, 0] for v in seeds],
                          [v[:, 1] for v in seeds], [any(r.diverged for r in g) for g in groups])


# ---------------------------------------------------------------- one target's next rates


def _outward(curve: Curve, best: int, s: Settings) -> tuple[list[float], str] | None:
    """The outward step while the best is at an edge; None once it has both neighbours."""
    lr = curve.lrs[best]
    asks, why = [], []
    if best == 0:
        down = s.walked(lr, up=False)
        if down >= s.floor * (1 - 1e-9):
            asks.append(down)
            why.append(f"best {lr:.4g} is the lowest tried: one step down to {down:.4g}")
        else:
            why.append(f"best {lr:.4g} is the lowest tried, and a step down would pass the "
                       f"floor {s.floor:.4g}")
    if best == len(curve.lrs) - 1:
        up = s.walked(lr, up=True)
        asks.append(up)
        why.append(f"best {lr:.4g} is the highest tried: one step up to {up:.4g}")
    if not why:
        return None
    return asks, "; ".join(why) if asks else "done: " + "; ".join(why)


def _span(curve: Curve, best: int, s: Settings) -> tuple[float, bool]:
    """The ratio of the best's two neighbours' rates, and whether it is within the resolution."""
    ratio = float(curve.lrs[best + 1] / curve.lrs[best - 1])
    return ratio, ratio <= s.resolution * (1 + 1e-9)


def closed(curve: Curve, best: int, s: Settings) -> str | None:
    """The search's test that a target is done: its best bracketed (`Curve.no_bracket`, the
    very test behind the analysis's `bracketed`) by neighbours within the resolution of each
    other; why, or None while it is open."""
    if curve.no_bracket(best) is not None:
        return None
    ratio, within = _span(curve, best, s)
    lr, lo, hi = (curve.lrs[i] for i in (best, best - 1, best + 1))
    return (f"done: best {lr:.4g} bracketed by {lo:.4g} and {hi:.4g}, within {ratio:.3g}x <= "
            f"resolution {s.resolution:g}") if within else None


def _refine(curve: Curve, best: int, s: Settings) -> tuple[list[float], str]:
    """The lattice point nearest the minimum of the parabola through the best and its two
    neighbours, first, then a point each side: the next lattice point where all three reached,
    else a third of the way to the neighbour (at least one step), since a neighbour stopped as
    dominated enters at the steps it is known to exceed and one never reached gives no parabola
    (centred on the best), so the minimum may be far off and the bracket still shrinks by a
    third; those strictly between the neighbours and not tried yet. While the neighbours span
    more than the resolution (at least two lattice steps), one of them is; within it nothing
    is left to try, bracketed or not."""
    lr, lo, hi = (curve.lrs[i] for i in (best, best - 1, best + 1))
    ratio, within = _span(curve, best, s)
    if within:
        return [], (f"done: best {lr:.4g} between {lo:.4g} and {hi:.4g}, within {ratio:.3g}x "
                    f"<= resolution {s.resolution:g}, not bracketed: {curve.no_bracket(best)}")
    steps = curve.bounds[best - 1:best + 2]  # a stopped one: its bound
    at = float(log_vertex(np.array([lo, lr, hi]), steps, 1)[0])
    centre = s.lattice_index(at if math.isfinite(at) else lr)
    exact = math.isfinite(at) and bool(np.all(np.isfinite(curve.means[best - 1:best + 2])))
    reach = [1 if exact else max(1, round(abs(centre - s.lattice_index(n)) / 3))
             for n in (lo, hi)]
    points = (s.on_lattice(k) for k in (centre, centre - reach[0], centre + reach[1]))
    asks = [a for a in points if lo * (1 + 1e-9) < a < hi * (1 - 1e-9)
            and rate_key(a) != rate_key(lr)]
    where = f"its parabola's minimum {at:.4g}" if math.isfinite(at) else "no parabola (a " \
        "neighbour not reached)"
    return asks, (f"best {lr:.4g} between {lo:.4g} and {hi:.4g} ({ratio:.3g}x > resolution "
                  f"{s.resolution:g}), {where}: " + ", ".join(f"{a:.4g}" for a in asks))


def shortfalls(runs: list[RunReading], target: str) -> dict[str, float] | None:
    """Per rate (`rate_key`) whose runs did not all diverge, their mean `shortfall` at `target`
    over seeds; None unless every such run knows its shortfall."""
    by_rate: dict[str, list[float]] = {}
    for r in runs:
        if not r.diverged:
            if target not in r.shortfall:
                return None
            by_rate.setdefault(rate_key(r.learning_rate), []).append(r.shortfall[target])
    return {k: float(np.mean(v)) for k, v in by_rate.items()} or None


def _toward(curve: Curve, s: Settings, gaps: dict[str, float]) -> tuple[list[float], str]:
    """No rate of a released grid reached the target: one step outward past the edge whose runs
    ended nearer it (up only where the highest did not diverge), no lower than the floor.
    Never done on this alone: a final metric just under divergence can be erratic."""
    lo, hi = curve.lrs[0], curve.lrs[-1]
    up = not curve.diverged[-1] and gaps[rate_key(hi)] < gaps.get(rate_key(lo), math.inf)
    edge = hi if up else lo
    lr = s.walked(edge, up=up)
    if not up and lr < s.floor * (1 - 1e-9):
        return [], f"done: no rate reached it, down to the floor {s.floor:.4g}"
    return [lr], (f"no rate reached it and the {'highest' if up else 'lowest'}, {edge:.4g}, "
                  f"ended nearer it: one step {'up' if up else 'down'} to {lr:.4g}")


def _unreached(curve: Curve, s: Settings, gaps: dict[str, float] | None = None
               ) -> tuple[list[float], str]:
    """No rate reached the target. A released grid (`walk`) whose runs ended knowing how far
    from it they were steps toward the edge that ended nearer (`_toward`). Else: step up past
    the highest if it did not diverge, down past the lowest if every rate diverged, or if the
    grid is a released one (a few lattice steps wide, so a rate below it may reach what the
    rates just under divergence do not); else done (a whole first grid spans the rates that
    could)."""
    if s.walk is not None and gaps is not None and len(curve.lrs) > 1:
        return _toward(curve, s, gaps)
    top, bottom = curve.lrs[-1], curve.lrs[0]
    if not curve.diverged[-1]:
        up = s.walked(top, up=True)
        return [up], (f"no rate reached it and the highest, {top:.4g}, did not diverge: one "
                      f"step up to {up:.4g}")
    if not (curve.diverged.all() or s.walk is not None):
        return [], "done: no rate reached it below the rates that diverge"
    down = s.walked(bottom, up=False)
    why = "every rate diverged" if curve.diverged.all() else \
        f"no rate reached it, the highest diverged and the lowest, {bottom:.4g}, did not"
    if down >= s.floor * (1 - 1e-9):
        return [down], f"{why}: one step down to {down:.4g}"
    return [], f"done: {why}, down to the floor {s.floor:.4g}"


def target_rates(curve: Curve, s: Settings, gaps: dict[str, float] | None = None
                 ) -> tuple[list[float], str]:
    """What one target asks the next round for, given its cells (and how far each rate's runs
    ended from it, `shortfalls`), and why."""
    if not len(curve.lrs):
        return [], "done: nothing tried"
    best = curve.best()
    if best is None:
        return _unreached(curve, s, gaps)
    done = closed(curve, best, s)
    if done is not None:
        return [], done
    outward = _outward(curve, best, s)
    return outward if outward is not None else _refine(curve, best, s)


# ---------------------------------------------------------------- the round


def next_round(runs: list[RunReading], targets: list[str], settings: Settings,
               rounds_done: int) -> Plan:
    """The next round of one batch size (one combination of any optimizer axes) from every
    run it has finished or stopped so far, at every target; `rounds_done`: rounds after the
    first grid already recorded. Done when no target asks for a rate or at the round limit."""
    tried = {rate_key(r.learning_rate) for r in runs}
    reasons, wanted = {}, []
    for target in targets:
        rates, why = target_rates(cells(runs, target), settings, shortfalls(runs, target))
        reasons[target] = why
        wanted.append([lr for lr in rates if rate_key(lr) not in tried])
    asked = _thinned(wanted, settings)
    if asked and rounds_done >= settings.max_rounds:
        return Plan((), {t: f"round limit {settings.max_rounds} reached; it asked: {why}"
                         if not why.startswith("done") else why for t, why in reasons.items()})
    return Plan(tuple(sorted(rounded(lr) for lr in asked)), reasons)


def _thinned(wanted: list[list[float]], s: Settings) -> list[float]:
    """The targets' asks as one round: each target's first ask (the point nearest its
    parabola's minimum) before any target's second, an ask within one lattice step of another
    target's ask already taken left out. The targets of one batch size mostly want neighbouring
    rates; a rate one step from another tells the parabolas nearly as much, costs a whole run,
    and a target that still needs it asks again next round."""
    taken: dict[str, tuple[int, int, float]] = {}  # rate key: (target, lattice index, rate)
    for k in range(max(map(len, wanted), default=0)):
        for i, asks in enumerate(wanted):
            if k < len(asks) and rate_key(asks[k]) not in taken:
                at = s.lattice_index(asks[k])
                if all(j == i or abs(at - a) > 1 for j, a, _ in taken.values()):
                    taken[rate_key(asks[k])] = (i, at, asks[k])
    return [lr for _, _, lr in taken.values()]


def round_record(batch_size: int, number: int, plan: Plan) -> dict[str, Any]:
    """The rounds.json entry of a round (1: the first after the grid; 0: a first grid)."""
    return {"batch_size": batch_size, "round": number,
            "learning_rates": list(plan.learning_rates), "reasons": dict(plan.reasons)}


def rounds_of(records: list[dict[str, Any]], batch_size: int) -> list[dict[str, Any]]:
    """A batch size's recorded search rounds in order (round 0, a first grid, is not one)."""
    return sorted((r for r in records if r["batch_size"] == batch_size and r["round"] >= 1),
                  key=lambda r: r["round"])


def first_grid_of(records: list[dict[str, Any]], batch_size: int) -> list[float]:
    """A batch size's first grid where it was recorded (its round 0), else none."""
    return [lr for r in records if r["batch_size"] == batch_size and r["round"] == 0
            for lr in r["learning_rates"]]


def searched_rates(first: list[float], records: list[dict[str, Any]],
                   batch_size: int) -> list[float]:
    """Every learning rate a batch size trains: its first grid, then each recorded round's."""
    return list(first) + [lr for r in rounds_of(records, batch_size) for lr in r["learning_rates"]]


# ---------------------------------------------------------------- settings and readings


def grid_factor(rates: list[float]) -> float:
    """The outward step: the grid's mean spacing, (max / min)^(1 / (n - 1)); half a decade for
    a single rate."""
    lo, hi = min(rates), max(rates)
    return (hi / lo) ** (1.0 / (len(rates) - 1)) if len(rates) > 1 and hi > lo else DEFAULT_FACTOR


def settings(lr: LearningRateConfig, first: list[float]) -> Settings:
    """The search settings of a batch size whose first grid is `first`."""
    floor = lr.floor if lr.floor is not None else min(first) / FLOOR_BELOW_GRID
    return Settings(grid_factor(first), lr.resolution, lr.max_rounds, floor, min(first))


def reading(summary: dict[str, Any], targets: list[str]) -> RunReading:
    """A finished run's summary.json as the search reads it: steps_to_target, with
    steps_censored (a run stopped as dominated) as Censored."""
    censored, final = summary.get("steps_censored") or {}, summary.get("final") or {}
    steps: dict[str, Steps] = {}
    shortfall: dict[str, float] = {}
    for t in targets:
        value = (summary.get("steps_to_target") or {}).get(t)
        steps[t] = Censored(censored[t]) if value is None and t in censored else value
        metric, op, level = parse_target(t) if final else (None, None, None)
        if isinstance(final.get(metric), (int, float)) and math.isfinite(final[metric]):
            shortfall[t] = (final[metric] - level) * (1 if op == "<=" else -1)
    return RunReading(summary["learning_rate"], summary["seed"], steps,
                      diverged=summary.get("status") == "diverged", shortfall=shortfall)


def searched(cfg: Config) -> bool:
    """Whether the sweep searches learning rates in rounds (learning_rate.search, with targets)."""
    return cfg.learning_rate.searched and bool(cfg.targets)
