"""The built-in data tasks (scaling.tasks: digits, mnist1d, charlm and their models): data,
models, losses and validation on small options, and the on-disk cache of generated data."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from scaling.config import Config, ConfigError, ModelConfig, TaskConfig
from scaling.tasks import charlm, digits, mnist1d, storage
from scaling.tasks.charlm import CharLM, CharLMOptions
from scaling.tasks.digits import Digits, DigitsOptions
from scaling.tasks.mnist1d import Mnist1D, Mnist1DOptions
from scaling.tasks.models import Transformer

SMALL = {
    "digits": (Digits, DigitsOptions(), ModelConfig(hidden=[32])),
    # the CNN here; digits covers the MLP, mnist1d's default model
    "mnist1d": (Mnist1D, Mnist1DOptions(num_samples=200, seed=3),
                ModelConfig(name="cnn", channels=[4, 8])),
    "charlm": (CharLM, CharLMOptions(corpus_chars=20_000, seq_len=16),
               ModelConfig(d_model=32, num_layers=1, num_heads=2)),
}
NUM_OUTPUTS = {"digits": 10, "mnist1d": 10, "charlm": charlm.VOCAB_SIZE}
LOADERS = (digits.load, mnist1d.load, charlm.load, charlm.read_corpus)


def build(name: str, fresh: bool = False):
    """The small task; fresh=True drops the in-process caches so the data is really rebuilt
    (the callers also point SCALING_DATA at an empty folder, so no disk cache serves it)."""
    if fresh:
        for loader in LOADERS:
            loader.cache_clear()
    cls, options, model = SMALL[name]
    return cls(options, model)


@pytest.fixture(scope="module", params=list(SMALL))
def built(request, tmp_path_factory):
    """(task, rebuilt task, their params for keys [k0, k0, k1]), initialised in ONE compile.

    XLA takes about a second per program on these CPUs, so each test compiles once per task.
    """
    task = build(request.param)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCALING_DATA", str(tmp_path_factory.mktemp("fresh")))
        rebuilt = build(request.param, fresh=True)
    keys = jnp.stack([jax.random.key(0), jax.random.key(0), jax.random.key(1)])
    init_both = jax.jit(lambda k: (jax.vmap(task.init)(k), jax.vmap(rebuilt.init)(k)))
    return task, rebuilt, *init_both(keys)


def pick(params, i):
    return jax.tree.map(lambda p: np.asarray(p[i]), params)


def same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_shapes_dtypes_and_train_size(built):
    task = built[0]
    train, evals = task.train_arrays(), task.eval_arrays()
    for arrays in (train, evals):
        assert set(arrays) == {"x", "y"}
        assert len(arrays["x"]) == len(arrays["y"]) > 0
        assert arrays["y"].dtype == np.int32
        assert not arrays["x"].flags.writeable  # cached arrays are shared between runs
    if task.name == "charlm":
        assert train["x"].dtype == np.int32 and train["x"].shape[1:] == (16,)
        assert train["y"].shape == train["x"].shape
        assert task.tokens_per_example(task.options) == 16
    else:
        assert train["x"].dtype == np.float32 and train["y"].ndim == 1
        assert train["x"].shape[1:] == {"digits": (64,), "mnist1d": (40,)}[task.name]
    assert type(task).num_train_examples(task.options) == len(train["y"])


def test_build_is_deterministic(built):
    task, rebuilt, params, rebuilt_params = built
    assert rebuilt.train_arrays()["x"] is not task.train_arrays()["x"]  # really rebuilt
    for mine, theirs in ((task.train_arrays(), rebuilt.train_arrays()),
                         (task.eval_arrays(), rebuilt.eval_arrays())):
        for key in mine:
            np.testing.assert_array_equal(mine[key], theirs[key])
    assert same(params, rebuilt_params)
    assert same(pick(params, 0), pick(params, 1))
    assert not same(pick(params, 0), pick(params, 2))


def test_losses_evaluate_and_vmap_over_params(built):
    task, _, params, _ = built
    batch = {k: jnp.asarray(v[:64]) for k, v in task.train_arrays().items()}
    evals = {k: jnp.asarray(v) for k, v in task.eval_arrays().items()}
    both = jax.jit(lambda p: (jax.vmap(task.per_example_loss, in_axes=(0, None))(p, batch),
                              jax.vmap(task.evaluate, in_axes=(0, None))(p, evals)))
    losses, out = both(params)
    assert losses.shape == (3, 64)
    expected = math.log(NUM_OUTPUTS[task.name])
    assert abs(float(losses[0].mean()) - expected) < 0.35, (float(losses[0].mean()), expected)
    assert set(out) == {"eval_loss", "eval_accuracy"} == set(task.metrics) - {"train_loss"}
    for value in out.values():
        assert value.shape == (3,) and bool(jnp.all(jnp.isfinite(value)))
    assert abs(float(out["eval_loss"][0]) - expected) < 0.35


def test_sgd_lowers_digits_eval_loss():
    task = build("digits")
    train = {k: jnp.asarray(v) for k, v in task.train_arrays().items()}
    evals = {k: jnp.asarray(v) for k, v in task.eval_arrays().items()}
    opt = optax.sgd(0.1)

    def step(carry, key):
        params, state = carry
        idx = jax.random.randint(key, (64,), 0, len(train["y"]))
        batch = {k: v[idx] for k, v in train.items()}
        grads = jax.grad(lambda p: task.per_example_loss(p, batch).mean())(params)
        updates, state = opt.update(grads, state)
        return (optax.apply_updates(params, updates), state), None

    def before_and_after(key):
        params = task.init(key)
        trained = jax.lax.scan(step, (params, opt.init(params)), jax.random.split(key, 300))[0][0]
        return task.evaluate(params, evals), task.evaluate(trained, evals)

    before, after = jax.jit(before_and_after)(jax.random.key(0))
    assert float(after["eval_loss"]) < 0.5 * float(before["eval_loss"])
    assert float(after["eval_accuracy"]) > 0.8


def test_digits_image_count_matches_sklearn():
    from sklearn.datasets import load_digits

    assert len(load_digits().target) == digits.NUM_IMAGES


@pytest.mark.parametrize("num_samples", [10, 15, 123, 205])
def test_mnist1d_split_arithmetic_matches_make_dataset(num_samples):
    options = Mnist1DOptions(num_samples=num_samples, seed=1)
    state = np.random.get_state()
    task = Mnist1D(options, ModelConfig())
    assert np.array_equal(np.random.get_state()[1], state[1])  # global RNG left alone
    assert Mnist1D.num_train_examples(options) == len(task.train_arrays()["y"])
    assert len(task.train_arrays()["y"]) + len(task.eval_arrays()["y"]) == num_samples // 10 * 10


def test_mnist1d_splits_at_its_own_default():
    """Planning reads the split from TRAIN_SPLIT; generating asks for it explicitly. Both must be
    mnist1d's default, or data kept on disk from before would be another split."""
    from mnist1d.data import get_dataset_args

    assert mnist1d.TRAIN_SPLIT == get_dataset_args().train_split


def test_charlm_targets_are_inputs_shifted_by_one():
    train = build("charlm").train_arrays()
    np.testing.assert_array_equal(train["y"][:, :-1], train["x"][:, 1:])
    assert int(train["x"].max()) < charlm.VOCAB_SIZE


def test_charlm_describe_records_a_stable_hash():
    first = build("charlm").describe()
    second = build("charlm", fresh=True).describe()
    assert first == second
    assert len(first["corpus_sha256"]) == 64 and first["corpus_chars"] == 20_000
    assert first["files"] == ["argparse.py"]  # 20 kB is a prefix of the first file
    assert first["num_train_sequences"] + first["num_eval_sequences"] == 20_000 // 17


def test_charlm_missing_file_is_named(monkeypatch):
    monkeypatch.setattr(charlm, "CORPUS_FILES", (*charlm.CORPUS_FILES, "no_such_module.py"))
    with pytest.raises(FileNotFoundError, match="no_such_module.py"):
        charlm.corpus_paths()


def test_transformer_is_causal():
    net = Transformer(vocab_size=11, d_model=16, num_layers=1, num_heads=2, max_len=8)
    tokens = jnp.stack([jnp.arange(8), jnp.arange(8).at[5:].set(3)])  # differ from position 5
    logits = jax.jit(lambda k: net.apply(net.init(k, tokens), tokens))(jax.random.key(0))
    np.testing.assert_allclose(logits[0, :5], logits[1, :5], atol=1e-6)
    assert not np.allclose(logits[0, 5:], logits[1, 5:])


def config(task: str, options, **model) -> Config:
    return Config(task=TaskConfig(name=task, options=options), model=ModelConfig(**model))


@pytest.mark.parametrize("cfg,key", [
    (config("digits", DigitsOptions(test_fraction=1.5)), "task.test_fraction"),
    (config("digits", DigitsOptions(test_fraction=0.0001)), "task.test_fraction"),
    (config("digits", DigitsOptions(), name="cnn"), "model.name"),
    (config("digits", DigitsOptions(), hidden=[0]), "model.hidden"),
    (config("mnist1d", Mnist1DOptions(num_samples=-5)), "task.num_samples"),
    (config("mnist1d", Mnist1DOptions(seed=-1)), "task.seed"),
    (config("mnist1d", Mnist1DOptions(), name="cnn", channels=[]), "model.channels"),
    (config("charlm", CharLMOptions(seq_len=0)), "task.seq_len"),
    (config("charlm", CharLMOptions(eval_fraction=1.0)), "task.eval_fraction"),
    (config("charlm", CharLMOptions(corpus_chars=10**9)), "task.corpus_chars"),
    (config("charlm", CharLMOptions(corpus_chars=100)), "task.corpus_chars"),
    (config("charlm", CharLMOptions(), d_model=30, num_heads=4), "model.d_model"),
    (config("charlm", CharLMOptions(), name="mlp"), "model.name"),
])
def test_bad_options_name_the_key(cfg, key):
    cls = {"digits": Digits, "mnist1d": Mnist1D, "charlm": CharLM}[cfg.task.name]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        cls.validate(cfg)


@pytest.mark.parametrize("cfg", [config("digits", DigitsOptions()),
                                 config("mnist1d", Mnist1DOptions(), name="cnn"),
                                 config("charlm", CharLMOptions(), name="transformer")])
def test_default_options_validate(cfg):
    {"digits": Digits, "mnist1d": Mnist1D, "charlm": CharLM}[cfg.task.name].validate(cfg)


# ---------------------------------------------------------------- the on-disk cache


def test_generated_data_are_kept_on_disk_and_checked(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SCALING_DATA", str(tmp_path))
    built = []

    def make():
        built.append(1)
        return {"a": np.arange(5, dtype=np.float32), "b": np.eye(2, dtype=np.int32)}

    first = storage.cached("thing", "k1", make)
    again = storage.cached("thing", "k1", make)
    assert len(built) == 1 and all(np.array_equal(first[k], again[k]) for k in first)
    path = tmp_path / "generated" / "thing-k1.npz"
    data = bytearray(path.read_bytes())
    data[-30] ^= 0xFF  # a flipped byte: the digest no longer matches
    path.write_bytes(bytes(data))
    with caplog.at_level("WARNING"):
        third = storage.cached("thing", "k1", make)
    assert len(built) == 2 and "does not match its sha256" in caplog.text
    assert np.array_equal(third["a"], first["a"])
    assert storage.cached("thing", "k2", make) and len(built) == 3  # another key: built anew
    assert not list((tmp_path / "generated").glob("*.tmp"))


def test_a_cache_that_cannot_be_written_still_returns_the_data(tmp_path, monkeypatch, caplog):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("SCALING_DATA", str(tmp_path / "file"))
    with caplog.at_level("WARNING"):
        out = storage.cached("thing", "k", lambda: {"a": np.ones(3)})
    assert np.array_equal(out["a"], np.ones(3)) and "cannot keep" in caplog.text


def test_mnist1d_reads_its_disk_copy_without_generating(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALING_DATA", str(tmp_path))
    mnist1d.load.cache_clear()
    first = mnist1d.load(200, 5)
    mnist1d.load.cache_clear()
    monkeypatch.setattr(mnist1d, "generate", lambda *a: pytest.fail("generated again"))
    second = mnist1d.load(200, 5)
    for a, b in zip(first, second):
        assert all(np.array_equal(a[k], b[k]) for k in ("x", "y"))
    mnist1d.load.cache_clear()
