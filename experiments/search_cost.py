"""Where a searched sweep's examples go: per batch size, the runs and examples of its first grid
and of each search round, from the run summaries and rounds.json of a results folder (its run
files must be there: the sweep's own folder, or one it is rerun into).

    python experiments/search_cost.py results/quickstart
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from scaling import store
from scaling.sweep.search import rate_key


def split(out: Path) -> dict[int, dict[int, list[int]]]:
    """{batch size: {round (0: the first grid): [runs, examples]}}."""
    round_of = {(r["batch_size"], rate_key(lr)): r["round"]
                for r in store.read_rounds(out) for lr in r["learning_rates"]}
    table: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for path in sorted((out / "runs").glob("*/summary.json")):
        s = json.loads(path.read_text())
        cell = table[s["batch_size"]][round_of.get((s["batch_size"],
                                                    rate_key(s["learning_rate"])), 0)]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="a searched sweep's results folder, with its runs")
    args = parser.parse_args()
    if not list((args.dir / "runs").glob("*/summary.json")):
        raise SystemExit(f"error: {args.dir}: no finished runs under runs/ (rerun the sweep "
                         "into it first)")
    print("\n".join(lines(split(args.dir))))


if __name__ == "__main__":
    main()
