"""scaling.sweep.prepare: what a sweep will train in a folder, before any compute. A shard's
share ignores the runs already finished; a folder of another model or optimizer is refused
unless forced, while an optimizer axis given as a list may change."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaling import config as config_mod, store
from scaling.config import ConfigError
from scaling.sweep import grid, prepare as prepare_mod, runner
from tests.helpers import SWEEP, axes_config, config


def test_the_partition_ignores_finished_runs(tmp_path):
    cfg, out = config(SWEEP), tmp_path / "o"
    before = [[r.run_id for r in u.runs] for u in prepare_mod.prepare(cfg, out, shard=(1, 3)).units]
    runner.run(cfg, out, batch_sizes=[8], quiet=True, shard=(0, 3))
    assert any(store.is_done(out, r.run_id) for r in grid.expand(cfg))
    assert [[r.run_id for r in u.runs] for u in prepare_mod.prepare(cfg, out, shard=(1, 3)).units] == before


@pytest.mark.slow
def test_a_folder_of_another_model_is_refused_unless_forced(tmp_path):
    out = tmp_path / "o"
    runner.run(config(SWEEP, "batch.sizes=[8]", "learning_rate.values=[0.1]", "seeds=[0]"), out,
               quiet=True)
    other = config(SWEEP, "batch.sizes=[8]", "learning_rate.values=[0.1]", "seeds=[0]",
                   "optimizer.name=momentum")
    with pytest.raises(ConfigError, match="different optimizer.*--force"):
        runner.run(other, out, quiet=True)
    with pytest.raises(ConfigError, match="different optimizer"):
        prepare_mod.prepare(other, out)
    assert [s["run_id"] for s in runner.run(other, out, quiet=True, force=True)] == []
    other = config(SWEEP, "batch.sizes=[8]", "learning_rate.values=[0.2]", "seeds=[0]",
                   "optimizer.name=momentum")
    assert [s["run_id"] for s in runner.run(other, out, quiet=True, force=True)] == ["bs8-lr0.2-seed0"]


def _folder_with(tmp_path: Path, cfg: config_mod.Config) -> Path:
    out = tmp_path / "o"
    out.mkdir()
    (out / "sweep.yaml").write_text(config_mod.to_yaml(cfg))
    return out


@pytest.mark.parametrize("before, after", [
    ("[0.0, 0.9]", "[0.0, 0.5, 0.9]"),
    ("[0.0, 0.9]", "[0.5]"),
    ("0.9", "[0.0, 0.9]"),
    ("[0.0, 0.9]", "0.9"),
])
def test_a_list_axis_may_change_in_a_folder(tmp_path, before, after):
    out = _folder_with(tmp_path, axes_config(f"optimizer.momentum={before}"))
    prepare_mod.check_folder(axes_config(f"optimizer.momentum={after}"), out, force=False)


@pytest.mark.parametrize("before, after, fragments", [
    (["optimizer.momentum=0.9"], ["optimizer.momentum=0.95"],
     ["different optimizer.momentum (optimizer.momentum: 0.9 there, 0.95 here)", "--force",
      "given as lists"]),
    (["optimizer.momentum=[0.0, 0.9]"],
     ["optimizer.momentum=[0.0, 0.9, 0.5]", "optimizer.weight_decay=1e-4"],
     ["different optimizer.weight_decay (optimizer.weight_decay: 0.0 there, 0.0001 here)"]),
    (["optimizer.momentum=[0.0, 0.9]"], ["optimizer.momentum=[0.0]", "optimizer.name=nesterov"],
     ["different optimizer.name (optimizer.name: 'momentum' there, 'nesterov' here)"]),
])
def test_other_optimizer_changes_are_still_refused(tmp_path, before, after, fragments):
    out = _folder_with(tmp_path, axes_config(*before))
    with pytest.raises(ConfigError) as info:
        prepare_mod.check_folder(axes_config(*after), out, force=False)
    for fragment in fragments:
        assert fragment in str(info.value)
    prepare_mod.check_folder(axes_config(*after), out, force=True)
