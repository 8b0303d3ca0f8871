"""`scaling plan CONFIG --device-memory GB`: the memory plan of scaling.sweep.memory_plan as a
table (GB per device) or JSON; a batch size that fits at no setting is refused in one line and
the command exits 1. Nothing runs: each chunk is compiled ahead and analysed."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from scaling.config import Config
from scaling.formatting import text_table
from scaling.sweep import memory_plan
from scaling.train.memory import GB, SAFETY

PARTS = memory_plan.PARTS
HEADER = ["batch", "accum", "fsdp", "width", "params", "opt state", "grads", "activations",
          "data", "other", "total GB", "fits"]


def _row(p: memory_plan.SizePlan) -> list[Any]:
    f = p.footprint
    s = f.setting
    return [p.batch_size, s.accumulation, s.fsdp, s.width,
            *(getattr(f, part) / GB for part in PARTS), f.total / GB, "yes" if p.fits else "no"]


def _json(p: memory_plan.SizePlan) -> dict[str, Any]:
    f = p.footprint
    return {"batch_size": p.batch_size, "fits": p.fits, "compiles": p.compiles,
            **dataclasses.asdict(f.setting), "bytes": {part: getattr(f, part) for part in PARTS},
            "total_bytes": f.total}


def run(cfg: Config, args: argparse.Namespace) -> int:
    """Print the plan; the refusals (one line each) go to stderr; exit 1 if there are any."""
    plans = memory_plan.plan(cfg, args.device_memory)
    if args.json:
        print(json.dumps([_json(p) for p in plans], indent=2))
    else:
        print(f"{memory_plan.model_label(cfg)} on {memory_plan.device_count(cfg)} device(s) of "
              f"{args.device_memory:g} GB ({SAFETY:.0%} planned for); GB per device, from XLA's "
              "memory analysis of each compiled chunk")
        print(text_table(HEADER, [_row(p) for p in plans], digits=3))
    refused = [p for p in plans if not p.fits]
    for p in refused:
        print(f"refused: {memory_plan.refusal(cfg, p, args.device_memory)}", file=sys.stderr)
    return 1 if refused else 0
