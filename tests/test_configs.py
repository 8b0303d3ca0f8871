"""Every config in configs/ loads, plans and says in its first comment how to run it (the
subject is the configs folder: scaling.config loads them, config.arithmetic plans them)."""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import pytest
import yaml

from scaling import config as config_mod
from scaling.cli.main import main
from scaling.config import arithmetic as plan
from scaling.sweep import grid

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


def files_for(path: Path, folder: Path) -> list[str]:
    """Overrides pointing a config that reads a user's files at ones written into `folder` the
    way its header says to make them (its data are not part of the repository)."""
    task = yaml.safe_load(path.read_text())["task"]
    if task["name"] == "arrays":
        write = runpy.run_path(str(ROOT / "experiments" / "write_digits_arrays.py"))["write"]
        train, evals = write(folder)
        return [f"task.train={train}", f"task.eval={evals}"]
    if task["name"] == "tokens":
        (folder / "a.txt").write_text("some text to train on\n" * 2000)  # eval: 1,025+ tokens
        assert main(["prepare-text", str(folder / "a.txt"), "--out", str(folder), "--quiet"]) == 0
        return [f"task.train={folder / 'train.bin'}", f"task.eval={folder / 'eval.bin'}"]
    return []


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_config_loads_and_plans(path, tmp_path):
    cfg = config_mod.load(path, files_for(path, tmp_path))
    rows = [plan.for_config(cfg, size) for size in cfg.batch.sizes]
    assert all(r.total_steps > 0 for r in rows) and grid.expand(cfg)
    assert math.isfinite(sum(r.examples for r in rows))
    assert path.read_text().startswith("#"), "a config starts with a comment saying how to run it"
