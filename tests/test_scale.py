"""Scale sweeps: the scale section's expansion (scaling.config.scale: cells, names, values, the
refusals) and the sweep over its cells (scaling.sweep.scale: N counted from the model, D, C by
XLA's count or 6 N per token, the plan, the shards' deal, a 2 x 2 sweep end to end with its
laws, resume, and the SLURM submission)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from scaling.cli import train as train_cli
from scaling.cli.main import main
from scaling.cli.parser import build_parser
from scaling.config import ConfigError, from_dict, to_yaml
from scaling.config.scale import cell_name, cells
from scaling.store.cells import read_cells
from scaling.sweep import launch, scale

try:  # imported here, not under capsys: submitit's logging keeps the sys.stdout of its import
    import submitit
except ImportError:
    submitit = None

NQM = {"name": "nqm_scale", "task": {"name": "nqm", "dim": 10},
       "batch": {"sizes": [8, 64]},
       "learning_rate": {"values": [0.1, 0.3, 0.9], "search": False},
       "budget": {"max_examples": 2000}, "analysis": {"view": "both"},
       "targets": ["eval_loss<=0.3", "eval_loss<=0.1"], "eval": {"every": 10},
       "train": {"stop_dominated": False}, "gns": {"enabled": False},
       "scale": {"task.dim": [10, 40], "budget.max_examples": [1000, 4000]}}
NAMES = ["dim10-max_examples1000", "dim10-max_examples4000", "dim40-max_examples1000",
         "dim40-max_examples4000"]


def _nqm(**sections) -> dict:
    return {**copy.deepcopy(NQM), **sections}


def _write(folder: Path, data: dict) -> str:
    path = folder / "scale.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


# ---------------------------------------------------------------- the expansion


def test_one_cell_per_combination_first_key_slowest():
    found = cells(from_dict(_nqm()))
    assert [c.name for c in found] == NAMES
    assert [(c.cfg.task.options.dim, c.cfg.budget.max_examples) for c in found] == \
        [(10, 1000), (10, 4000), (40, 1000), (40, 4000)]
    for c in found:
        assert c.cfg.scale == {} and c.cfg.cell == {"name": c.name, "values": c.values}
        assert c.values == {"task.dim": c.cfg.task.options.dim,
                            "budget.max_examples": c.cfg.budget.max_examples}
        assert c.cfg.batch.sizes == [8, 64] and c.cfg.targets == NQM["targets"]


def test_three_axes_make_their_product():
    found = cells(from_dict(_nqm(scale={"task.dim": [5, 10, 20],
                                        "budget.max_examples": [500, 1000],
                                        "optimizer.momentum": [0.0, 0.5, 0.9, 0.95]})))
    assert len(found) == 3 * 2 * 4 and len({c.name for c in found}) == 24
    assert found[5].values == {"task.dim": 5, "budget.max_examples": 1000,
                               "optimizer.momentum": 0.5}
    assert found[5].cfg.optimizer.momentum == 0.5 and found[5].name == \
        "dim5-max_examples1000-momentum0.5"


def test_names_shorten_numbers_and_keep_keys_apart():
    assert cell_name({"model.d_model": 64, "budget.max_tokens": 2_000_000}) == \
        "d_model64-max_tokens2e6"
    assert cell_name({"optimizer.eps": 0.001, "optimizer.name": "adam"}) == "eps0.001-nameadam"
    assert cell_name({"model.hidden": [64, 32], "train.repack": False}) == \
        "hidden64x32-repackfalse"
    assert cell_name({"eval.every": 5, "gns.every": 2}) == "eval_every5-gns_every2"


def test_a_list_setting_of_the_model_takes_lists():
    data = {"task": {"name": "digits"}, "model": {"name": "mlp", "hidden": [8]},
            "batch": {"sizes": [16]}, "learning_rate": {"values": [0.1]},
            "budget": {"max_examples": 500}, "analysis": {"view": "fixed_budget"},
            "scale": {"model.hidden": [[8], [16, 16]]}}
    assert [c.cfg.model.hidden for c in cells(from_dict(data))] == [[8], [16, 16]]


def test_a_cell_config_round_trips_through_its_sweep_yaml():
    cell = cells(from_dict(_nqm()))[1]
    text = yaml.safe_load(to_yaml(cell.cfg))
    assert "scale" not in text and text["cell"] == {"name": NAMES[1], "values": cell.values}
    assert from_dict(text).cell == cell.cfg.cell
    plain = yaml.safe_load(to_yaml(from_dict({k: v for k, v in _nqm().items() if k != "scale"})))
    assert "scale" not in plain and "cell" not in plain  # an ordinary sweep.yaml is unchanged


@pytest.mark.parametrize("scale_section, says", [
    ({"model.width": [32, 64]}, "scale.model.width: unknown key"),
    ({"task.size": [1]}, "scale.task.size: unknown key; expected section.key naming a setting "
                         "(settings of task:"),
    ({"budget": [1, 2]}, "scale.budget: a section, not a setting"),
    ({"seeds": [[0], [1]]}, "scale: got 'seeds', expected a config key other than"),
    ({"batch.sizes": [[8], [16]]}, "scale: got 'batch.sizes'"),
    ({"branch.factors": [[2], [4]]}, "scale.branch.factors: a list setting, not a scalar one"),
    ({"task.dim": []}, "scale.task.dim: got [], expected a non-empty list"),
    ({"task.dim": 10}, "scale.task.dim: got 10, expected a non-empty list"),
    ({"task.dim": [10, 10]}, "scale.task.dim: got [10, 10], expected distinct values"),
    ({"task.dim": [10, [20]]}, "scale.task.dim[1]: got [20], expected a single value"),
    ({"task.dim": [10, "ten"]}, "scale.task.dim[1] = 'ten': task.dim: got 'ten', expected an "
                                "integer"),
    ({"optimizer.momentum": [0.9, 1.5]}, "scale.optimizer.momentum[1] = 1.5: optimizer.momentum"),
    ({"optimizer.eps": [1e-8, 1.0000001e-8]}, "scale: got 'eps1e-8', expected values that give "
                                              "each cell its own folder name"),
])
def test_bad_scale_sections_are_refused_naming_the_key(scale_section, says):
    with pytest.raises(ConfigError) as err:
        cells(from_dict(_nqm(scale=scale_section)))
    assert str(err.value).startswith(says) and "\n" not in str(err.value), str(err.value)


def test_a_scale_sweep_needs_the_fixed_budget_view():
    with pytest.raises(ConfigError, match=r"^analysis.view: got 'steps', expected fixed_budget "
                                          r"or both with a scale section"):
        cells(from_dict(_nqm(analysis={"view": "steps"})))


@pytest.mark.parametrize("command", [["sweep"], ["plan"], ["sweep", "--dry-run"]])
def test_the_cli_refuses_in_one_line_and_writes_nothing(tmp_path, capsys, command):
    config = _write(tmp_path, _nqm(scale={"task.dim": [10, 0]}))
    out = tmp_path / "out"
    assert main([command[0], config, *(["--out", str(out)] if command[0] == "sweep" else []),
                 *command[1:]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: scale.task.dim[1] = 0: task.dim") and err.count("\n") == 1
    assert not out.exists()


def test_scaling_train_refuses_a_scale_config(tmp_path, capsys):
    assert main(["train", _write(tmp_path, _nqm()), "--batch-size", "4"]) == 2
    assert "scaling sweep" in capsys.readouterr().err


# ---------------------------------------------------------------- N, D and C


def _digits(hidden: list[list[int]]) -> dict:
    return {"task": {"name": "digits"}, "model": {"name": "mlp", "hidden": hidden[0]},
            "batch": {"sizes": [16, 64]}, "learning_rate": {"values": [0.1]},
            "budget": {"max_examples": 1000}, "analysis": {"view": "fixed_budget"},
            "scale": {"model.hidden": hidden}}


def test_n_is_counted_by_hand_for_a_small_mlp_and_c_by_xla():
    one, two = [scale.measure(c) for c in cells(from_dict(_digits([[8], [16, 16]])))]
    assert one["params"] == 64 * 8 + 8 + 8 * 10 + 10  # 64 pixels -> 8 -> 10 classes
    assert two["params"] == 64 * 16 + 16 + 16 * 16 + 16 + 16 * 10 + 10
    # D: 63 steps of 16 (1,008) and 16 of 64 (1,024) reach 1,000 examples; the least of them
    assert (one["examples"], one["tokens"], one["budget_unit"]) == (1008, None, "examples")
    # the gradient's matmuls alone: forward 2(64x8 + 8x10), the weights' gradients as much, and
    # the hidden activations' 2 x 8 x 10; XLA adds the element-wise work (a few percent)
    matmuls = 2 * (2 * (64 * 8 + 8 * 10)) + 2 * 8 * 10
    assert matmuls <= one["flops_per_example"] <= 1.1 * matmuls
    assert one["compute"] == pytest.approx(one["flops_per_example"] * 1008)
    assert one["compute_source"] == scale.XLA


def test_compute_by_either_method():
    assert scale.compute(100, 10_000, 100, None) == (6 * 100 * 10_000, scale.SIX_ND)
    assert scale.compute(100, 10_000, 100, 50.0) == (50.0 * 100, scale.XLA)
    assert scale.compute(100, None, 100, None)[0] is None


def _charlm() -> dict:
    return {"task": {"name": "charlm", "corpus_chars": 20000, "seq_len": 16},
            "model": {"name": "transformer", "d_model": 16, "num_layers": 1, "num_heads": 2},
            "optimizer": {"name": "adam"}, "batch": {"sizes": [8]},
            "learning_rate": {"values": [0.003]}, "budget": {"max_tokens": 4096},
            "analysis": {"view": "fixed_budget"}, "scale": {"model.d_model": [16, 32]}}


def test_a_token_task_counts_tokens_and_falls_back_to_6_n_d(monkeypatch):
    small, large = cells(from_dict(_charlm()))
    entry = scale.measure(small)
    assert (entry["tokens"], entry["examples"], entry["budget_unit"]) == (4096, 256, "tokens")
    # XLA's count and 6 N per token, two independent counts, agree within a factor 1.5
    per_token = entry["flops_per_example"] / 16
    assert 6 * entry["params"] / 1.5 <= per_token <= 1.5 * 6 * entry["params"]
    tables = entry["params"] - entry["params_non_embedding"]  # characters and positions, x d
    assert tables > 0 and tables % 16 == 0 and tables // 16 > 16  # more than the positions
    monkeypatch.setattr(scale, "flops_per_example", lambda cfg, task: None)
    fallback = scale.measure(large)
    assert fallback["compute"] == 6 * fallback["params"] * 4096
    assert fallback["compute_source"] == scale.SIX_ND


# ---------------------------------------------------------------- the plan and the shards


def test_plan_prints_the_cells_and_their_cost(tmp_path, capsys):
    config = _write(tmp_path, _nqm())
    assert main(["plan", config, "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in entries] == NAMES
    assert [(e["params"], e["examples"]) for e in entries] == \
        [(10, 1000), (10, 4000), (40, 1000), (40, 4000)]
    for e in entries:
        examples = [a["examples"] for a in e["arithmetic"]]
        assert e["runs"] == 6 and len(examples) == 2 and e["examples"] == min(examples)
        assert e["compute"] == pytest.approx(e["flops_per_example"] * e["examples"])
        assert e["grid_flops"] == pytest.approx(e["flops_per_example"] * 3 * sum(examples))
    # 1,000 examples: 125 steps of 8, or 16 of 64 (1,024); 4,000: 500 of 8 or 63 of 64 (4,032)
    assert [e["arithmetic"][1]["examples"] for e in entries] == [1024, 4032, 1024, 4032]
    assert main(["plan", config]) == 0
    text = capsys.readouterr().out
    assert text.startswith("4 cells; C per run: XLA's cost analysis")
    assert all(f"== cell {name}" in text for name in NAMES) and "total: 24 runs" in text


@pytest.mark.parametrize("hosts", [2, 3, 5])
def test_every_piece_is_dealt_to_one_host_and_the_loads_balance(tmp_path, hosts):
    data = _nqm(train={"max_group_size": 1})  # one group per run: 6 per cell
    found = scale.prepare_cells(from_dict(data), tmp_path / "o")
    dealt = [(c.name, piece) for h in range(hosts) for c, piece in
             scale.assigned(found, (h, hosts))]
    pieces = [(c.name, (j, hosts)) for c in found for j, units in enumerate(c.pieces(hosts))
              if units]
    assert sorted(dealt) == sorted(pieces)
    loads = [sum(c.cost(c.pieces(hosts)[j]) for c, (j, _) in scale.assigned(found, (h, hosts)))
             for h in range(hosts)]
    largest = max(c.cost(units) for c in found for units in c.pieces(hosts))
    assert max(loads) - min(loads) <= largest
    assert scale.assigned(found, None) == [(c, None) for c in found]


# ---------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The 2 x 2 sweep trained as two shards, then analysed."""
    root = tmp_path_factory.mktemp("scale")
    config, out = _write(root, _nqm()), root / "out"
    for shard in ("0/2", "1/2"):
        assert main(["sweep", config, "--out", str(out), "--shard", shard, "--quiet"]) == 0
    assert main(["analyze", str(out), "--bootstrap", "100", "--quiet"]) == 0
    return config, out


@pytest.mark.slow  # four cells of six NQM runs, trained as two shards and analysed (about 40 s)
def test_the_shards_train_every_cell_and_record_its_n_d_and_c(swept):
    _, out = swept
    manifest = read_cells(out)
    assert manifest["source"] == "scale" and manifest["batch_unit"] == "examples"
    assert [c["name"] for c in manifest["cells"]] == NAMES
    for entry, (dim, budget) in zip(manifest["cells"], [(10, 1000), (10, 4000), (40, 1000),
                                                         (40, 4000)]):
        assert (entry["params"], entry["examples"]) == (dim, budget)
        assert entry["compute"] == pytest.approx(entry["flops_per_example"] * budget)
        folder = out / entry["folder"]
        assert len([p for p in (folder / "runs").glob("*/summary.json")]) == 6
        cell = yaml.safe_load((folder / "sweep.yaml").read_text())["cell"]
        assert cell["params"] == dim and cell["values"] == entry["values"]
    parent = yaml.safe_load((out / "sweep.yaml").read_text())
    assert parent["scale"] == NQM["scale"]


@pytest.mark.slow  # shares the sweep above
def test_the_parent_analysis_fits_laws_or_says_why_not(swept):
    _, out = swept
    analysis = json.loads((out / "analysis.json").read_text())
    laws = analysis["fixed_budget"]["laws"]
    for name in ("learning_rate", "batch_size", "loss"):
        law = laws[name]
        assert law["num_cells"] == 4
        for variable in ("params", "tokens"):  # N spans 4x and D 4x: both fitted
            assert law["exponents"][variable] is not None or law["left_out"][variable]
        assert law["non_embedding"] is None  # the NQM has no embedding tables
    # B_crit against E_min: one point per (N, target) that some cell of that N timed
    timed = {(c["params"], t["target"]) for c in analysis["fixed_budget"]["cells"]
             for t in c["b_crit_targets"]}
    left = laws["b_crit_data"]["left_out"].get("points")  # extrapolated past the batches tried
    dropped = int(left.split(" of ")[0]) if left else 0
    assert len(timed) >= 2 and laws["b_crit_data"]["num_cells"] + dropped == len(timed)
    kept = laws["b_crit_data"]
    # bounds (B_crit beyond the batch sizes fitted) are left out: the rest fit D, or say why
    assert kept["exponents"]["tokens"] is not None or kept["left_out"]["tokens"]
    report = (out / "report.md").read_text()
    assert "## Laws across the cells" in report and f"]({'cells/' + NAMES[0]}/report.md)" in report
    assert (out / "figures" / "optima_vs_budget.png").is_file()


@pytest.mark.slow  # shares the sweep above
def test_a_second_sweep_skips_the_finished_cells(swept, capsys):
    config, out = swept
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("cells/*/runs/*/metrics.jsonl")}
    assert main(["sweep", config, "--out", str(out), "--no-analyze"]) == 0
    printed = capsys.readouterr()
    assert "nothing to do: every run is already finished" in printed.out
    assert stamps == {p: p.stat().st_mtime_ns for p in out.glob("cells/*/runs/*/metrics.jsonl")}


def test_wait_reaches_every_cells_sweep(tmp_path, monkeypatch):
    """--wait (wait for the groups other processes hold) is passed to each cell's sweep."""
    waits = []
    monkeypatch.setattr(scale.runner, "run", lambda *a, **k: waits.append(a[8]) or [])
    assert main(["sweep", _write(tmp_path, _nqm()), "--out", str(tmp_path / "out"), "--wait",
                 "--no-analyze", "--quiet"]) == 0
    assert waits == [True] * len(NAMES)


def test_dry_run_shows_this_shards_pieces_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["sweep", _write(tmp_path, _nqm()), "--out", str(out), "--dry-run",
                 "--shard", "1/2"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("4 cells") and "piece 1/2" in text and "to do" in text
    assert not out.exists()


class _Recorder:
    cluster = "slurm"

    def __init__(self, folder: Path) -> None:
        self.folder = folder


@pytest.mark.skipif(submitit is None, reason="pip install 'scaling[slurm]'")
def test_slurm_submits_the_shards_of_every_cell(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    captured = []
    monkeypatch.setattr(launch, "make_executor", lambda folder, name, res: _Recorder(folder))
    monkeypatch.setattr(launch, "submit", lambda ex, entry, argvs, n: captured.extend(argvs) or [])
    monkeypatch.setattr(train_cli, "analyze_cells_folder", lambda *a, **k: 0)
    config = _write(tmp_path, _nqm())
    assert main(["sweep", config, "--out", "o", "--launcher", "slurm", "--jobs", "3"]) == 0
    parsed = [build_parser().parse_args(argv) for argv in captured]
    assert [a.shard for a in parsed] == [(0, 3), (1, 3), (2, 3)]
    assert all(a.config == config and a.out == str(tmp_path / "o") for a in parsed)
    assert "submitted 0 tasks" in capsys.readouterr().out
