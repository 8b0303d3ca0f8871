"""`scaling train` / `scaling sweep` (scaling.cli.train) end to end: the run files of
docs/results-format.md, resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from scaling.cli.main import main
from scaling import store
from scaling.store import load

SUMMARY_KEYS = {"run_id", "status", "task", "batch_size", "learning_rate", "seed", "optimizer",
                "steps", "examples", "steps_to_target", "examples_to_target", "final", "b_simple",
                "wall_s", "compile_s"}


def write(tmp_path, text: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


NQM = """
name: t
task: {name: nqm, dim: 10}
optimizer: {name: sgd}
batch: {sizes: [8, 16]}
learning_rate: {values: [0.1, 0.5], search: false}
budget: {max_examples: 800}
targets: ["eval_loss<=0.3"]
seeds: [0, 1]
train: {stop_dominated: false}
"""


@pytest.mark.slow
def test_train_writes_run_files_and_resumes(tmp_path, capsys):
    config, out = write(tmp_path, NQM), tmp_path / "out"
    assert main(["train", config, "--batch-size", "16", "--out", str(out), "--quiet"]) == 0
    records = load(out)
    assert len(records) == 4 and (out / "sweep.yaml").is_file()
    for r in records:
        s = r["summary"]
        assert SUMMARY_KEYS <= s.keys() and s["batch_size"] == 16
        assert r["metrics"][0]["step"] == 0 and r["metrics"][-1]["step"] == s["steps"]
        assert r["metrics"][-1]["examples"] == 16 * s["steps"]
        reached = s["steps_to_target"]["eval_loss<=0.3"]
        if reached is not None:
            assert s["examples_to_target"]["eval_loss<=0.3"] == 16 * reached
        assert r["config"]["learning_rate"] == s["learning_rate"]
    capsys.readouterr()
    assert main(["train", config, "--batch-size", "16", "--out", str(out), "--quiet"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert not (out / "analysis.json").exists()  # train never analyses
    assert main(["sweep", config, "--out", str(out), "--quiet", "--no-analyze"]) == 0
    assert len(load(out)) == 8 and not (out / "analysis.json").exists()
    assert main(["sweep", config, "--out", str(out), "--quiet"]) == 0  # a complete sweep analyses
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["sweep"]["num_runs"] == 8 and (out / "report.md").is_file()
    assert {p.name for p in (out / "figures").iterdir()} >= {"steps_vs_batch.png", "heatmap.png"}


def test_train_needs_a_batch_size_when_the_config_has_several(tmp_path, capsys):
    assert main(["train", write(tmp_path, NQM), "--out", str(tmp_path / "o")]) == 2
    assert "--batch-size" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_folder_of_another_config_is_refused(tmp_path, capsys):
    config, out = write(tmp_path, NQM), str(tmp_path / "out")
    assert main(["train", config, "--batch-size", "8", "--out", out, "--quiet"]) == 0
    assert main(["train", config, "task.dim=12", "--batch-size", "8", "--out", out]) == 2
    assert "different task" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("task", [
    "{name: charlm, corpus_chars: 20000, seq_len: 32}\n"
    "model: {name: transformer, d_model: 32, num_layers: 1, num_heads: 2}",
    "{name: mnist1d, num_samples: 1000}\nmodel: {name: cnn, channels: [8, 8]}",
    "{name: linreg, dim: 8}",
])
def test_every_task_trains_through_the_engine(tmp_path, task):
    config = write(tmp_path, f"""
task: {task}
optimizer: {{name: adam}}
batch: {{sizes: [16], accumulation: 2}}
learning_rate: {{values: [0.003]}}
budget: {{max_steps: 30}}
""")
    assert main(["train", config, "--out", str(tmp_path / "o"), "--quiet"]) == 0
    (record,) = load(tmp_path / "o")
    first, last = record["metrics"][0], record["metrics"][-1]
    assert record["summary"]["status"] == "completed" and last["step"] == 30
    assert last["eval_loss"] < first["eval_loss"]
    if "charlm" in task:
        assert last["tokens"] == 30 * 16 * 32
        assert len(record["config"]["data"]["corpus_sha256"]) == 64


@pytest.mark.slow
def test_smoke_config_runs_end_to_end(tmp_path, capsys):
    """configs/smoke.yaml as README gives it: sweep (the 3 x 3 grid, then the search's rounds),
    then analysis, figures and report."""
    from pathlib import Path

    smoke = Path(__file__).resolve().parents[1] / "configs" / "smoke.yaml"
    out = tmp_path / "smoke"
    assert main(["sweep", str(smoke), "--out", str(out), "--quiet"]) == 0
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["version"] == 2 and analysis["reached"]["rule"] == "smoothed"
    searched = sum(len(r["learning_rates"]) for r in store.read_rounds(out))
    assert searched > 0 and analysis["sweep"]["num_runs"] == 9 + searched
    assert all(t["points"] for t in analysis["targets"])
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert len(figures) == 6 and all((out / "figures" / f).stat().st_size > 10_000 for f in figures)
    report = (out / "report.md").read_text()
    assert all(f"figures/{f}" in report for f in figures)


@pytest.mark.slow
def test_compiled_programs_are_kept_unless_told_not_to(tmp_path):
    """Each in its own process: jax reads its cache folder once per process."""
    config = write(tmp_path, NQM)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "home"))

    def sweep(out: str, *flags: str) -> None:
        subprocess.run([sys.executable, "-m", "scaling.cli", "sweep", config, "budget.max_steps=7",
                        "batch.sizes=[8]", "seeds=[0]", "--out", str(tmp_path / out), "--quiet",
                        "--no-analyze", *flags],
                       check=True, env=env, capture_output=True)

    sweep("a", "--compile-cache", str(tmp_path / "kept"))
    assert any(p.name.startswith("jit__chunk_fn") for p in (tmp_path / "kept").iterdir())
    sweep("b", "--no-compile-cache")
    assert not (tmp_path / "home").exists()
    sweep("c")  # the default folder, under the user cache
    assert any((tmp_path / "home" / "scaling" / "jax-compile").iterdir())
