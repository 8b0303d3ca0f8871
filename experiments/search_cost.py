"""Where a searched sweep's examples go: per batch size, the runs and examples of its first grid
and of each search round, from the run summaries and rounds.json of a results folder (its runs/
or, for a committed study, its runs.tar.xz); and the floor that no stopping rule can go below
while runs are read with the smoothed rule.

The floor: a run is read once it has trained to `window` x its crossing (reached.window), and
a run that has not crossed by step t can still be read as low as t / window, so no run can be
ruled out at a target before some run's reading of it has closed. Every run that does not
diverge therefore trains at least to `window` x its batch size's fewest steps to the target
that takes longest there (or its budget). `floor_lines` sums that over the runs the sweep
trained, and over the fewest a search can train: the first grid's runs that did not diverge
and two more rates per batch size (each at every seed), the fewest that put two neighbours
within the resolution of a best (more where the targets' optima differ). That floor counts
the sweep's own first grid, so it moves with the first grid; the brackets' floor does not: in
hindsight, the fewest rates any search that ends with every target's best bracketed can have
trained are, per batch size, each target's best and the nearest rate tried on each side of it
(its bracket), the union over targets, at every seed. Last, per run status, how far past the
floor the runs trained (examples over the floor): where the examples above it go.

    python experiments/search_cost.py results/quickstart
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from scaling import store
from scaling.store.archive import read_member
from scaling.store.layout import ROUNDS
from scaling.analysis.analyze import sweep_reading
from scaling.config.arithmetic import Arithmetic
from scaling.sweep import search
from scaling.sweep.search import rate_key

NEW_PER_BRACKET = 2  # rates a search adds at the fewest to bracket a best at its resolution


def summaries(out: Path) -> list[dict]:
    """The run summaries of a results folder (its runs/, else its runs.tar.xz)."""
    return [r["summary"] for r in store.load(out)]


def rounds_of(out: Path) -> dict[tuple[int, str], int]:
    """{(batch size, rate_key): the search round that trained it}; first-grid rates are absent.
    A sealed folder's rounds.json is read from its archive."""
    rounds = store.read_rounds(out) or read_member(out, ROUNDS) or []
    return {(r["batch_size"], rate_key(lr)): r["round"]
            for r in rounds for lr in r["learning_rates"]}


def _round(s: dict, round_of: dict[tuple[int, str], int]) -> int:
    """The round of a run's summary (0: the first grid)."""
    return round_of.get((s["batch_size"], rate_key(s["learning_rate"])), 0)


def split(runs: list[dict], round_of: dict[tuple[int, str], int]
          ) -> dict[int, dict[int, list[int]]]:
    """{batch size: {round (0: the first grid): [runs, examples]}}."""
    table: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for s in runs:
        cell = table[s["batch_size"]][_round(s, round_of)]
        cell[0] += 1
        cell[1] += s["examples"]
    return table


def lines(table: dict[int, dict[int, list[int]]]) -> list[str]:
    """One line per batch size and a total: runs and examples of the grid and of the rounds."""
    grid = lambda b: table[b].get(0, [0, 0])
    rounds = lambda b: [sum(c[k] for r, c in table[b].items() if r > 0) for k in (0, 1)]
    out = [f"{'batch':>6} {'grid runs':>9} {'grid examples':>14} {'round runs':>10} "
           f"{'round examples':>15}"]
    for b in sorted(table):
        out.append(f"{b:>6} {grid(b)[0]:>9} {grid(b)[1]:>14,} {rounds(b)[0]:>10} "
                   f"{rounds(b)[1]:>15,}")
    total = [sum(f(b)[k] for b in table) for f in (grid, rounds) for k in (0, 1)]
    out.append(f"{'all':>6} {total[0]:>9} {total[1]:>14,} {total[2]:>10} {total[3]:>15,}")
    return out


def floor_per_run(runs: list[dict], arith: Arithmetic, window: float) -> int:
    """The fewest examples a run of this batch size that does not diverge trains: to `window` x
    the fewest steps to the target that takes longest here (its budget where a target is
    never reached)."""
    targets = {t for s in runs for t in s.get("steps_to_target") or {}}
    fewest = [min((s["steps_to_target"][t] for s in runs
                   if isinstance((s.get("steps_to_target") or {}).get(t), (int, float))),
                  default=math.inf) for t in targets]
    reading = window * max(fewest, default=math.inf)
    steps = arith.total_steps if reading >= arith.total_steps else math.floor(reading)
    return arith.examples_at(steps)


def floors(out: Path, runs: list[dict], round_of: dict[tuple[int, str], int]
           ) -> dict[int, tuple[int, int, int, int]]:
    """{batch size: (floor per run, runs that did not diverge, first-grid runs that did not,
    seeds)}.
    The window is the sweep's own under the smoothed rule; other rules read a run at its
    crossing (window 1)."""
    reach = sweep_reading(out)
    window = reach.window if reach.rule == "smoothed" else 1.0
    arith = {a["batch_size"]: Arithmetic(**a) for a in store.read_arithmetic(out) or []}
    by_size: dict[int, list[dict]] = defaultdict(list)
    for s in runs:
        by_size[s["batch_size"]].append(s)
    out_floors = {}
    for b, group in by_size.items():
        live = [s for s in group if s.get("status") != "diverged"]
        grid = [s for s in live if _round(s, round_of) == 0]
        out_floors[b] = (floor_per_run(group, arith[b], window), len(live), len(grid),
                         len({s["seed"] for s in group}))
    return out_floors


def fewest_floor(per: dict[int, tuple[int, int, int, int]]) -> int:
    """The floor of the fewest runs a search can train: each batch size's first-grid runs that
    did not diverge and NEW_PER_BRACKET more rates at every seed, each to its floor per run."""
    return sum(f * (grid + NEW_PER_BRACKET * seeds) for f, _, grid, seeds in per.values())


def bracket_rates(group: list[dict]) -> set[str]:
    """The rates (as `rate_key`) of one batch size's runs that bracket each target's best: the
    best and the nearest rate tried below and above it, the union over targets."""
    targets = sorted({t for s in group for t in s.get("steps_to_target") or {}})
    readings = [search.reading(s, targets) for s in group]
    keep: set[str] = set()
    for target in targets:
        curve = search.cells(readings, target)
        best = curve.best() if len(curve.lrs) else None
        if best is not None:
            keep |= {rate_key(curve.lrs[i]) for i in (best - 1, best, best + 1)
                     if 0 <= i < len(curve.lrs)}
    return keep


def brackets_floor(runs: list[dict], per: dict[int, tuple[int, int, int, int]]) -> int:
    """The floor no search can go below in hindsight: `bracket_rates` at every seed, each run
    that did not diverge to its floor per run (`per`, from `floors`); one rate at every seed
    where no target was reached (its budget: some run must show that)."""
    total = 0
    for b, (per_run, _, _, seeds) in per.items():
        group = [s for s in runs if s["batch_size"] == b]
        keep = bracket_rates(group)
        total += per_run * (sum(1 for s in group if rate_key(s["learning_rate"]) in keep
                                and s.get("status") != "diverged") if keep else seeds)
    return total


def against_floor(out: Path) -> tuple[int, int, int]:
    """(examples a searched sweep's folder trained, `fewest_floor` of it, `brackets_floor`)."""
    runs = summaries(out)
    per = floors(out, runs, rounds_of(out))
    return sum(s["examples"] for s in runs), fewest_floor(per), brackets_floor(runs, per)


def floor_lines(table: dict[int, dict[int, list[int]]],
                per: dict[int, tuple[int, int, int, int]]) -> list[str]:
    """The floor of the runs trained, and of the fewest runs a search can train."""
    trained = sum(c[1] for rounds in table.values() for c in rounds.values())
    these = sum(f * live for f, live, _, _ in per.values())
    fewest = fewest_floor(per)
    return [f"floor of these runs under the reading rule: {these:,} examples "
            f"({these / trained:.0%} of the {trained:,} trained)",
            f"floor of the fewest a search can train (the first grid's runs that did not diverge "
            f"and {NEW_PER_BRACKET} more rates per batch size at every seed): {fewest:,} "
            f"examples; the sweep trained {trained / fewest:.2f}x that"]


def status_lines(runs: list[dict], per: dict[int, tuple[int, int, int, int]]) -> list[str]:
    """Per run status (diverged runs aside): the runs and how far past the per-run floor they
    trained, examples over the floor as median [10th, 90th percentile]: where the examples
    above the floor go."""
    by: dict[str, list[float]] = defaultdict(list)
    for s in runs:
        if s.get("status") != "diverged":
            by[s.get("status") or "-"].append(s["examples"] / per[s["batch_size"]][0])
    return [f"{k}: {len(v)} runs trained {np.median(v):.2f}x the floor "
            f"[{np.percentile(v, 10):.2f}, {np.percentile(v, 90):.2f}]"
            for k, v in sorted(by.items())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="a searched sweep's results folder, with its runs")
    args = parser.parse_args()
    runs = summaries(args.dir)
    if not runs:
        raise SystemExit(f"error: {args.dir}: no finished runs under runs/ nor in runs.tar.xz "
                         "(rerun the sweep into it first)")
    round_of = rounds_of(args.dir)
    table = split(runs, round_of)
    per = floors(args.dir, runs, round_of)
    trained, brackets = sum(s["examples"] for s in runs), brackets_floor(runs, per)
    print("\n".join(lines(table) + floor_lines(table, per) + [
        f"floor of the brackets (each target's best and its nearest rate tried on each side, "
        f"at every seed; any search that brackets every best trains these): {brackets:,} "
        f"examples; the sweep trained {trained / brackets:.2f}x that"] + status_lines(runs, per)))


if __name__ == "__main__":
    main()
