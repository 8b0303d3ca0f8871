"""config.json and summary.json of a run, built from plain fields, the same way for the runs
of a sweep, of a batch-size schedule and of `scaling branch` (docs/results-format.md).

config.json says what the run is (its hyperparameters, and what its program was built from);
summary.json what became of it, with the steps and examples to each target read from its rows
under the sweep's rule for "reached" (scaling.config.targets).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Sequence

from scaling import config as config_mod
from scaling.config import Config
from scaling.config.targets import Reach, crossing, on_examples, step_at_examples
from scaling.store.rows import examples_at, undefined_noise_points
from scaling.train.spec import RunSpec


def run_config(cfg: Config, run_id: str, batch_size: int, spec: RunSpec, *, total_steps: int,
               warmup_steps: int, precision: str, data: dict[str, Any],
               accumulation: int | None = None, **extra: Any) -> dict[str, Any]:
    """A run's config.json: the sweep's sections that shape it, its scalars, and `extra`
    (a schedule's entry, a branch's point and factor); `accumulation`: the batch size's own
    where a memory plan chose it (default batch.accumulation)."""
    c = config_mod.to_dict(cfg)
    return {"run_id": run_id, "task": c["task"], "model": c["model"],
            "optimizer": {"name": cfg.optimizer.name, **asdict(spec),
                          **{f"{k}_rule": cfg.optimizer.rule(k) for k in cfg.optimizer.ruled}},
            "schedule": c["schedule"], "batch_size": batch_size,
            "accumulation": accumulation or cfg.batch.accumulation, "drop_last": cfg.batch.drop_last,
            "budget": c["budget"], "total_steps": total_steps, "warmup_steps": warmup_steps,
            "targets": cfg.targets, "learning_rate": spec.learning_rate, "seed": spec.seed,
            "reached": c["reached"], "eval": c["eval"], "gns": c["gns"], "precision": precision,
            "data": data, **extra}


def steps_to_targets(rows: list[dict[str, Any]], targets: Sequence[str], reach: Reach,
                     diverged: bool, clip: bool = False, along_examples: bool = False
                     ) -> dict[str, float | None]:
    """Interpolated steps to each target under `reach`; None where not reached (or diverged).
    `clip`: a reading window that runs past the last row is cut there (no reading extension).
    `along_examples`: a scheduled run, read along its examples (targets.on_examples)."""
    if diverged:
        return {t: None for t in targets}
    if along_examples:
        axis = on_examples(rows)
        return {t: step_at_examples(rows, crossing(axis, t, reach, clip)) for t in targets}
    return {t: crossing(rows, t, reach, clip) for t in targets}


def run_summary(run_id: str, status: str, rows: list[dict[str, Any]], *, batch_size: int,
                spec: RunSpec, steps: int, examples: int, tokens: int | None,
                targets: Sequence[str], reach: Reach, clip: bool = False,
                **extra: Any) -> dict[str, Any]:
    """A run's summary.json; `extra` adds the group's facts (task, optimizer, timing,
    throughput) and any a driver records (a schedule's batch path, a branch's factor).
    `reading_clip` records `clip` (Config.reading_extension <= 1: no reading extension, so a
    window the run's end cuts is read clipped), which the analysis reads back rather than
    deciding again; with it, `reading_clipped` names the targets read so."""
    along = "batch_schedule" in extra
    to_steps = steps_to_targets(rows, targets, reach, status == "diverged", clip, along)
    extra["reading_clip"] = clip
    if clip:
        whole = steps_to_targets(rows, targets, reach, status == "diverged", along_examples=along)
        extra["reading_clipped"] = [t for t in targets if to_steps[t] is not None
                                    and whole[t] is None]
    last = rows[-1] if rows else {}
    return {"run_id": run_id, "status": status, "batch_size": batch_size,
            "learning_rate": spec.learning_rate, "seed": spec.seed, "steps": steps,
            "examples": examples, "tokens": tokens, "steps_to_target": to_steps,
            "examples_to_target": {t: None if s is None else examples_at(rows, s, batch_size)
                                   for t, s in to_steps.items()},
            "final": last, "b_simple": last.get("b_simple"),
            "noise_scale_undefined": undefined_noise_points(rows), **extra}
