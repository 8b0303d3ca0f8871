"""Workloads a researcher brings, end to end (a subject across scaling.tasks and the sweep):
outside tasks and flax modules by import path, the arrays and tokens tasks on files written
here, prepare-text, the image tasks on format-exact files, and augmentation keyed so that runs
differing only in learning rate see identical batches."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from scaling import config as config_mod, store
from scaling.cli.main import main
from scaling.cli import prepare as prepare_cli
from scaling.config import ConfigError
from scaling.train.spec import group_spec
from scaling.tasks import arrays, build_task, image_files, tokens
from scaling.tasks.tokens import byte_tokens
from scaling.train.mesh import make_mesh, put_replicated
from scaling.train.program import GroupProgram
from scaling.train.spec import RunSpec
from tests.helpers import DIGITS, config, train
from tests.test_image_files import write_fixtures

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
write_digits = runpy.run_path(str(ROOT / "experiments" / "write_digits_arrays.py"))["write"]


@pytest.fixture(autouse=True)
def fresh_caches():
    for loader in (arrays.load, tokens.load, image_files.read_folder):
        loader.cache_clear()
    yield


@pytest.fixture
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    sys.modules.pop("spirals", None)


def sweep(config: Path, out: Path, *overrides: str) -> list[dict]:
    """`scaling sweep` without the analysis; the finished runs' summaries."""
    assert main(["sweep", str(config), *overrides, "--out", str(out), "--quiet",
                 "--no-analyze"]) == 0
    return [r["summary"] for r in store.load(out)]


def workload(task: dict, model: dict | None = None, **sections) -> dict:
    """The data of a small sweep on `task`: batch 16, two learning rates (no search), 30 steps."""
    return {"name": "w", "task": task, "model": model or {"name": "mlp", "hidden": [16]},
            "optimizer": {"name": "momentum"}, "batch": {"sizes": [16]},
            "learning_rate": {"values": [0.05, 0.2], "search": False}, "budget": {"max_steps": 30},
            "eval": {"every": 10, "points_per_decade": 0}, **sections}


def write_config(folder: Path, data: dict) -> Path:
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def fails(data: dict, *fragments: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_mod.from_dict(data)
    for fragment in fragments:
        assert fragment in str(err.value), str(err.value)


# ---------------------------------------------------------------- outside code by import path


@pytest.mark.slow
def test_the_worked_example_runs_through_scaling_sweep(tmp_path, examples_on_path):
    """docs/tasks.md's example: a user task and a user flax module, from its own config."""
    done = sweep(EXAMPLES / "spirals.yaml", tmp_path, "batch.sizes=[32]", "seeds=[0]",
                 "budget.max_examples=6400", "learning_rate.values=[0.003]",
                 "learning_rate.search=false")
    (summary,) = done
    assert summary["status"] == "completed"
    run_config = json.loads((tmp_path / "runs" / summary["run_id"] / "config.json").read_text())
    assert run_config["task"]["name"] == "spirals:Spirals"
    assert run_config["model"] == {"name": "spirals:ResMLP", "width": 64, "depth": 2}
    # the two-spiral problem is learnt: far better than chance from the last evaluation
    assert summary["final"]["eval_accuracy"] > 0.8


def test_an_outside_module_replaces_the_network_of_a_built_in_task(examples_on_path):
    cfg = config_mod.from_dict(workload({"name": "digits"}, {"name": "spirals:ResMLP", "width": 8,
                                                            "depth": 1}))
    task = build_task(cfg)
    params = task.init(jax.random.key(0))
    assert type(task.net).__name__ == "ResMLP" and task.net.num_outputs == 10
    assert params["Dense_0"]["kernel"].shape == (64, 8)  # the 8x8 images, flattened
    assert config_mod.to_dict(cfg)["model"] == {"name": "spirals:ResMLP", "width": 8, "depth": 1}


@pytest.mark.parametrize("name, fragment", [
    ("no_such_pkg.mod:Task", "module 'no_such_pkg.mod' cannot be imported"),
    ("spirals:Nope", "has no attribute 'Nope'"),
    ("spirals:spirals", "expected a subclass of scaling.tasks.base.Task"),
    ("spirals", "expected one of"),
    ("spirals:Spirals:x", "expected an import path package.module:Name"),
])
def test_a_task_import_path_that_does_not_resolve_is_named(name, fragment, examples_on_path):
    fails(workload({"name": name}), "task.name", fragment)


def test_outside_task_options_are_typed_like_built_in_ones(examples_on_path):
    fails(workload({"name": "spirals:Spirals", "nois": 0.1}, {"name": "default"}),
          "task.nois: unknown key", "num_train, num_eval, noise, seed")
    fails(workload({"name": "spirals:Spirals", "noise": "high"}, {"name": "default"}),
          "task.noise: got 'high', expected a number")
    fails(workload({"name": "spirals:Spirals", "noise": -1.0}, {"name": "default"}), "task.noise")


@pytest.mark.parametrize("model, fragment", [
    ({"name": "spirals:SpiralsOptions"}, "a flax.linen Module subclass"),
    ({"name": "spirals:ResMLP", "widht": 3}, "model.widht"),
    ({"name": "spirals:ResMLP", "num_outputs": 3}, "num_outputs is set by the task"),
    ({"name": "flax.linen:Dense", "features": 3}, "a field num_outputs"),
    ({"name": "mlp", "kwargs": {"a": 1}}, "model.kwargs: unknown key"),
])
def test_an_outside_module_is_checked_before_compute(model, fragment, examples_on_path):
    fails(workload({"name": "digits"}, model), fragment)


def test_tasks_without_outside_models_say_so():
    fails(workload({"name": "nqm"}, {"name": "pkg:Net"}), "model.name", "default for task nqm")


# ---------------------------------------------------------------- the arrays task


def digits_files(folder: Path, kind: str = "npz") -> tuple[Path, Path]:
    """sklearn's digits, written as the user would: .npz files or folders of .npy files."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x, y = (data.data / 16.0).astype(np.float32).reshape(-1, 8, 8, 1), data.target.astype(np.int64)
    paths = []
    folder.mkdir(parents=True, exist_ok=True)
    for part, sl in (("train", slice(0, 1400)), ("eval", slice(1400, None))):
        if kind == "npz":
            path = folder / f"{part}.npz"
            np.savez(path, x=x[sl], y=y[sl])
        else:
            path = folder / part
            path.mkdir()
            np.save(path / "x.npy", x[sl])
            np.save(path / "y.npy", y[sl])
        paths.append(path)
    return tuple(paths)


def test_arrays_trains_exactly_as_the_built_in_task_on_the_same_files(tmp_path):
    """experiments/write_digits_arrays.py writes digits' own split: same examples, same order,
    so the arrays path must give the built-in task's metrics (images flattened by the MLP)."""
    train_path, eval_path = write_digits(tmp_path)
    runs = [RunSpec(0.05, seed=0), RunSpec(0.2, seed=1)]
    built_in = train(config(DIGITS), runs)[1]
    own = train(config(DIGITS, f"task={{name: arrays, train: {train_path}, eval: {eval_path}}}"),
                runs)[1]
    assert len(own[0]) > 3
    for a, b in zip(built_in, own):
        for row_a, row_b in zip(a, b):
            assert row_a.keys() == row_b.keys()
            for key in row_a:
                assert row_b[key] == pytest.approx(row_a[key], rel=1e-6, abs=1e-7, nan_ok=True), key


def test_npz_files_and_npy_folders_load_the_same_arrays(tmp_path):
    npz = digits_files(tmp_path / "a", "npz")
    npy = digits_files(tmp_path / "b", "npy")
    loaded = [arrays.load(str(t), str(e), None) for t, e in (npz, npy)]
    for a, b in zip(loaded[0][:2], loaded[1][:2]):
        assert all(np.array_equal(a[k], b[k]) for k in ("x", "y"))
    train, evals, classes = loaded[0]
    assert classes == 10 and train["x"].shape == (1400, 8, 8, 1) and train["y"].dtype == np.int32
    assert len(evals["y"]) == 1797 - 1400
    mapped = arrays.read(str(npy[0]))
    assert isinstance(mapped["x"], np.memmap)  # folders of .npy are memory-mapped


def test_arrays_runs_a_sweep_with_a_cnn_and_augmentation(tmp_path):
    train, evals = digits_files(tmp_path)
    data = workload({"name": "arrays", "train": str(train), "eval": str(evals), "crop_padding": 1,
                     "flip": True}, {"name": "cnn", "channels": [4], "dense": [16]},
                    targets=["eval_accuracy>=0.3"])
    done = sweep(write_config(tmp_path, data), tmp_path / "out")
    assert len(done) == 2
    record = json.loads(next((tmp_path / "out" / "runs").glob("*/config.json")).read_text())["data"]
    assert record["files_sha256"]["train"] == __import__("hashlib").sha256(
        train.read_bytes()).hexdigest()
    assert record["num_train"] == 1400 and record["input_shape"] == [8, 8, 1]


def test_float_targets_make_a_regression_task_with_its_own_metrics(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5)).astype(np.float32)
    w = rng.normal(size=(5, 2)).astype(np.float32)
    for part in ("train", "eval"):
        np.savez(tmp_path / f"{part}.npz", x=x, y=x @ w)
    data = workload({"name": "arrays", "train": str(tmp_path / "train.npz"),
                     "eval": str(tmp_path / "eval.npz")}, {"name": "mlp", "hidden": []})
    task = build_task(config_mod.from_dict(data))
    assert task.metrics == ("train_loss", "eval_loss") and task.num_outputs == 2
    params = {"Dense_0": {"kernel": jnp.asarray(w), "bias": jnp.zeros(2)}}  # the exact solution
    batch = {"x": jnp.asarray(x[:4]), "y": jnp.asarray((x @ w)[:4] + 1.0)}
    np.testing.assert_allclose(task.per_example_loss(params, batch), np.full(4, 0.5 * 2), rtol=1e-5)
    fails({**data, "targets": ["eval_accuracy>=0.5"]}, "a metric task arrays reports: "
          "train_loss, eval_loss")
    fails({**data, "task": {**data["task"], "num_classes": 3}}, "task.num_classes",
          "null for float targets")


def bad_arrays(tmp_path: Path, case: str) -> tuple[dict, str]:
    x, y = np.zeros((10, 3), np.float32), np.arange(10) % 3
    good = tmp_path / "good.npz"
    np.savez(good, x=x, y=y)
    path = tmp_path / "bad.npz"
    if case == "missing":
        return {"train": str(tmp_path / "nope.npz"), "eval": str(good)}, "task.train"
    if case == "no_y":
        np.savez(path, x=x)
        return {"train": str(path), "eval": str(good)}, "holding arrays x and y"
    if case == "count":
        np.savez(path, x=x, y=y[:9])
        return {"train": str(path), "eval": str(good)}, "as many labels as inputs"
    if case == "shape":
        np.savez(path, x=np.zeros((10, 4), np.float32), y=y)
        return {"train": str(good), "eval": str(path)}, "the training inputs' shape (3,)"
    if case == "nan":
        bad_x = x.copy()
        bad_x[2, 1] = np.nan
        np.savez(path, x=bad_x, y=y)
        return {"train": str(path), "eval": str(good)}, "1 NaN or infinite values in x"
    if case == "label":
        np.savez(path, x=x, y=y + 5)
        return {"train": str(good), "eval": str(path), "num_classes": 3}, "labels in 0 .. 2"
    np.savez(path, x=x, y=np.where(y == 0, -1, y))
    return {"train": str(path), "eval": str(good)}, "labels from -1 to 2"


@pytest.mark.parametrize("case", ["missing", "no_y", "count", "shape", "nan", "label", "negative"])
def test_bad_array_files_are_refused_before_compute(tmp_path, case):
    options, fragment = bad_arrays(tmp_path, case)
    data = workload({"name": "arrays", **options})
    with pytest.raises(ConfigError) as err:
        build_task(config_mod.from_dict(data))  # header problems fail already in from_dict
    assert fragment in str(err.value)


# ---------------------------------------------------------------- tokens and prepare-text


def prepared(tmp_path: Path, text: bytes, *flags: str) -> Path:
    source = tmp_path / "corpus.txt"
    source.write_bytes(text)
    out = tmp_path / "tok"
    assert main(["prepare-text", str(source), "--out", str(out), "--quiet", *flags]) == 0
    return out


def test_prepare_text_writes_byte_tokens_and_their_meta(tmp_path):
    text = "héllo, world\n".encode() * 50
    out = prepared(tmp_path, text, "--eval-fraction", "0.2")
    ids = np.concatenate([np.fromfile(out / "train.bin", "<u2"), np.fromfile(out / "eval.bin", "<u2")])
    assert bytes(ids.astype(np.uint8)) == text  # every byte is its own id, in order
    assert len(np.fromfile(out / "eval.bin", "<u2")) == int(len(text) * 0.2)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["vocab"] == 256 and meta["dtype"] == "uint16" and meta["tokenizer"] == "bytes"
    assert meta["sources"][0]["sha256"] == __import__("hashlib").sha256(text).hexdigest()


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
def test_prepare_text_copies_in_chunks_what_the_whole_corpus_gives(tmp_path, chunk):
    texts = [bytes(range(256)) * 3, "naïve café\n".encode() * 11, b"", b"xyz"]
    sources = [tmp_path / f"s{i}.txt" for i in range(len(texts))]
    for path, text in zip(sources, texts):
        path.write_bytes(text)
    whole = byte_tokens(b"".join(texts))
    for start, stop in [(0, len(whole)), (0, 500), (500, len(whole)), (767, 770), (5, 5)]:
        with open(tmp_path / "out.bin", "wb") as handle:
            prepare_cli.copy_tokens(sources, start, stop, handle, chunk=chunk)
        assert (tmp_path / "out.bin").read_bytes() == whole[start:stop].tobytes()


def test_prepare_text_refuses_too_little_text(tmp_path, capsys):
    source = tmp_path / "t.txt"
    source.write_bytes(b"abc")
    assert main(["prepare-text", str(source), "--out", str(tmp_path / "o")]) == 2
    assert "each side needs at least a window" in capsys.readouterr().err


def tokens_cfg(out: Path, **task) -> dict:
    return workload({"name": "tokens", "train": str(out / "train.bin"),
                     "eval": str(out / "eval.bin"), "context": 8, **task},
                    {"name": "transformer", "d_model": 16, "num_layers": 1, "num_heads": 2},
                    optimizer={"name": "adam"}, learning_rate={"values": [0.003]})


def test_token_windows_are_contiguous_slices_of_the_stream(tmp_path):
    out = prepared(tmp_path, bytes(range(256)) * 8)
    task = build_task(config_mod.from_dict(tokens_cfg(out)))
    stream = jnp.asarray(task.train_arrays()["tokens"])
    batch = jax.jit(lambda k: task.sample(k, 64, {"tokens": stream}))(jax.random.key(0))
    x, y = np.asarray(batch["x"]), np.asarray(batch["y"])
    assert x.shape == y.shape == (64, 8) and x.dtype == np.int32
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])  # y is x moved on by one token
    full = np.asarray(stream)
    for row_x, row_y in zip(x, y):
        start = int(np.flatnonzero(full == row_x[0])[0])  # ids repeat every 256 tokens
        np.testing.assert_array_equal(full[start:start + 9] % 256, np.r_[row_x, row_y[-1]] % 256)
    evals = task.eval_arrays()
    assert evals["x"].shape[1] == 8 and evals["x"][1, 0] == evals["y"][0, -1]  # non-overlapping


def test_tokens_run_a_sweep_with_budgets_in_tokens(tmp_path):
    out = prepared(tmp_path, b"the quick brown fox jumps over the lazy dog. " * 40)
    data = tokens_cfg(out)
    data["budget"] = {"max_tokens": 16 * 8 * 20}
    done = sweep(write_config(tmp_path, data), tmp_path / "runs_out")
    (summary,) = done
    assert summary["final"]["step"] == 20 and summary["final"]["tokens"] == 16 * 8 * 20
    assert np.isfinite(summary["final"]["eval_loss"])


@pytest.mark.parametrize("case, fragment", [
    ("short", "at least one window of context + 1 = 9 tokens"),
    ("odd", "a whole number of 2-byte uint16 ids"),
    ("vocab", "ids below task.vocab=100"),
    ("no_meta", "task.dtype"),
])
def test_bad_token_files_are_refused_before_compute(tmp_path, case, fragment):
    out = prepared(tmp_path, bytes(range(200)) * 2)
    data = tokens_cfg(out)
    if case == "short":
        (out / "eval.bin").write_bytes(np.arange(5, dtype="<u2").tobytes())
    elif case == "odd":
        (out / "eval.bin").write_bytes(b"\x01\x00\x02")
    elif case == "vocab":
        data["task"]["vocab"] = 100
    else:
        (out / "meta.json").unlink()
    with pytest.raises(ConfigError) as err:
        build_task(config_mod.from_dict(data))
    assert fragment in str(err.value)


# ---------------------------------------------------------------- the papers' image tasks


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist", "cifar10", "svhn"])
def test_image_tasks_read_format_exact_files(name, tmp_path):
    parts = write_fixtures(name, tmp_path / image_files.DATASETS[name].subfolder)
    model = {"name": "cnn", "channels": [4], "dense": [8]} if "mnist" in name else \
        {"name": "resnet", "depth": 8}
    cfg = config_mod.from_dict(workload({"name": name, "data_dir": str(tmp_path),
                                         "download": False}, model))
    task = build_task(cfg)
    x, y = parts["train"]
    np.testing.assert_array_equal(task.train_arrays()["x"], x.astype(np.float32) / 255)
    np.testing.assert_array_equal(task.train_arrays()["y"], y)
    logits = task.net.apply({"params": task.init(jax.random.key(0))}, task.eval_arrays()["x"])
    assert logits.shape == (len(parts["test"][1]), 10)
    assert set(task.describe()["files_sha256"]) == set(image_files.DATASETS[name].files)


def test_a_missing_data_set_says_which_files_go_where(tmp_path):
    cfg = config_mod.from_dict(workload({"name": "cifar10", "data_dir": str(tmp_path),
                                         "download": False}, {"name": "resnet", "depth": 8}))
    with pytest.raises(FileNotFoundError) as err:
        build_task(cfg)
    assert str(tmp_path / "cifar10") in str(err.value) and "data_batch_1.bin" in str(err.value)


def test_augmentation_options_need_images(tmp_path):
    x = np.zeros((10, 3), np.float32)
    np.savez(tmp_path / "a.npz", x=x, y=np.arange(10) % 2)
    path = str(tmp_path / "a.npz")
    fails(workload({"name": "arrays", "train": path, "eval": path, "flip": True}), "task.flip",
          "augmentation needs (H, W, C) images, the inputs are (3,)")
    fails(workload({"name": "arrays", "train": path, "eval": path, "crop_padding": -1}),
          "task.crop_padding: got -1, expected an integer >= 0")


def test_runs_that_differ_only_in_learning_rate_see_identical_augmented_batches(tmp_path):
    write_fixtures("mnist", tmp_path / "mnist")
    cfg = config_mod.from_dict(workload(
        {"name": "mnist", "data_dir": str(tmp_path), "download": False, "crop_padding": 2,
         "flip": True}, {"name": "mlp", "hidden": [8]}, batch={"sizes": [4]}))
    task, mesh = build_task(cfg), make_mesh(1, 1, jax.devices()[:1])
    program = GroupProgram(task, group_spec(cfg, 4, 1)[0], mesh)
    data = put_replicated(mesh, task.train_arrays())
    eval_data = put_replicated(mesh, task.eval_arrays())
    runs = [RunSpec(0.05, seed=0), RunSpec(0.2, seed=0), RunSpec(0.05, seed=1)]
    states = program.init(runs, np.zeros(3, np.int32))
    batch = jax.jit(lambda rs, step: program._batch(rs, data, step, 0)[0]["x"])
    at = lambda i, step: np.asarray(batch(jax.tree.map(lambda a: a[i], states), step))
    for step in (0, 1, 7):
        np.testing.assert_array_equal(at(0, step), at(1, step))  # same seed, other lr
        assert not np.array_equal(at(0, step), at(2, step))  # another seed
    assert not np.array_equal(at(0, 0), at(0, 1))  # fresh crops and flips every step
    plain = task.train_arrays()["x"]
    picked = at(0, 0)
    assert not any(np.array_equal(picked[0], image) for image in plain)  # augmented
