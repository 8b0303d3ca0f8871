"""`scaling repair DIR`: make each run's metrics.jsonl one clean pass again after two writers.

Two processes training one run write the same rows (training is deterministic) into one file:
a second writer's start empties the file, then both append their chunks, interleaved. Every
row of the run is then on disk at least once (before the second start only if the first
writer's rows after it cover them) and the copies of a step agree apart from timing. So a
run is repaired by keeping one row per step, in step order, when that is provably the run:

- every copy of a step equals the others apart from TIMING fields, else two different
  trainings wrote it and no choice is right (refused: train the run again);
- no evaluation point of the run's schedule (config.json's total_steps and eval) is missing
  up to the last step kept, else a writer's rows were lost (refused);
- a finished run's summary.json `final` row is the last row kept (timing aside).

A batch-size schedule's rows are in the run's own steps across phases, which config.json
does not lay out, so such a run is refused rather than guessed at. A torn last line is
dropped. Nothing is written for a refused run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaling.errors import ConfigError
from scaling.store.claims import in_use
from scaling.store.files import atomic_write, dumps
from scaling.store.layout import METRICS, RUN_CONFIG, SUMMARY, runs_dir
from scaling.train.spec import eval_steps

TIMING = ("wall_s",)  # row fields that differ between two writers of the same run


@dataclass
class Repair:
    """What repairing one run did (or would do): rows kept and dropped, or why it cannot."""

    path: Path
    kept: int = 0
    dropped: list[int] = field(default_factory=list)  # steps of the rows left out
    torn: bool = False  # a torn last line was dropped
    refused: str | None = None

    @property
    def changed(self) -> bool:
        return self.refused is None and (bool(self.dropped) or self.torn)

    def describe(self) -> str:
        if self.refused is not None:
            return f"{self.path}: not repaired: {self.refused}"
        if not self.changed:
            return f"{self.path}: clean ({self.kept} rows)"
        steps = ", ".join(str(s) for s in self.dropped[:5]) + (", ..." if len(self.dropped) > 5 else "")
        torn = "; dropped a torn last line" if self.torn else ""
        return (f"{self.path}: kept {self.kept} rows, one per step; dropped {len(self.dropped)} "
                f"repeated rows{f' (steps {steps})' if steps else ''}{torn}")


def _parse(path: Path) -> tuple[list[dict[str, Any]] | None, bool, str | None]:
    """(rows, torn last line?, why unreadable)."""
    lines = path.read_text().splitlines()
    rows = []
    for number, line in enumerate(lines, 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                return rows, True, None
            return None, False, f"line {number} is not a JSON row; train the run again"
    return rows, False, None


def _bare(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in TIMING}


def _one_per_step(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int], str | None]:
    """(one row per step in step order, the steps of the copies left out, a disagreement)."""
    first: dict[int, dict[str, Any]] = {}
    dropped = []
    for row in rows:
        kept = first.setdefault(row["step"], row)
        if kept is row:
            continue
        if _bare(kept) != _bare(row):
            key = next(k for k in _bare(row) if kept.get(k) != row.get(k))
            return [], [], (f"step {row['step']} holds two different rows ({key}: "
                            f"{kept.get(key)!r} and {row.get(key)!r}): two different trainings "
                            "wrote this run; train it again")
        dropped.append(row["step"])
    return [first[s] for s in sorted(first)], dropped, None


def _missing(config: dict[str, Any], steps: list[int]) -> list[int]:
    """Evaluation points of the run's schedule up to its last step that have no row."""
    every = config["eval"].get("every")
    points = eval_steps(config["total_steps"], every, config["eval"].get("points_per_decade") or 0)
    have = set(steps)
    return [int(p) for p in points if p <= steps[-1] and int(p) not in have]


def _check(folder: Path, rows: list[dict[str, Any]]) -> str | None:
    """Why the merged rows cannot be the run (see the module's rules), or None."""
    config = json.loads((folder / RUN_CONFIG).read_text())
    if "batch_schedule" in config or "total_steps" not in config or "eval" not in config:
        return ("config.json does not lay out this run's evaluation steps (a batch-size "
                "schedule or a branch), so lost rows cannot be ruled out; train the run again "
                "(remove its folder)")
    missing = _missing(config, [r["step"] for r in rows])
    if missing:
        return (f"no row at evaluation step{'s' if len(missing) > 1 else ''} "
                f"{', '.join(map(str, missing[:5]))}: a writer's rows were lost; train the run "
                "again (remove its folder)")
    summary = folder / SUMMARY
    if summary.is_file() and _bare(json.loads(summary.read_text()).get("final") or {}) != _bare(rows[-1]):
        return "summary.json's final row is not the last row; train the run again (remove its folder)"
    return None


def repair_run(folder: Path, write: bool = True) -> Repair:
    """Repair one run folder's metrics.jsonl (or, `write=False`, only say what it would do)."""
    path = folder / METRICS
    rows, torn, unreadable = _parse(path)
    if rows is None:
        return Repair(path, refused=unreadable)
    ordered = all(b["step"] > a["step"] for a, b in zip(rows, rows[1:]))
    if ordered:
        result = Repair(path, kept=len(rows), torn=torn)
    else:
        merged, dropped, differ = _one_per_step(rows)
        result = Repair(path, kept=len(merged), dropped=dropped, torn=torn,
                        refused=differ or _check(folder, merged))
        rows = merged
    if write and result.changed:
        atomic_write(path, "".join(dumps(r) + "\n" for r in rows))
    return result


def repair_folder(out: str | Path, write: bool = True) -> list[Repair]:
    """repair_run on every run of results folder `out` that has a metrics.jsonl; refused
    (ConfigError) while live processes hold claims on its groups (scaling.store.claims)."""
    busy = in_use(out)
    if busy:
        raise ConfigError(f"{busy}; repair it once they have finished")
    if not runs_dir(out).is_dir():
        raise ConfigError(f"{out}: holds no runs/ folder; expected the --out folder of a sweep")
    return [repair_run(folder, write) for folder in sorted(runs_dir(out).glob("*"))
            if (folder / METRICS).is_file()]
