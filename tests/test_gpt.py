"""The GPT family (model.name: gpt): its parameter count against the formula (the 124M
preset's, counted from shapes alone), rotary positions that see only relative position,
causal attention, rematerialised blocks that change no number, a preset resolved with its
overrides, a short charlm sweep that learns, and every bad value refused in one line."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling import store
from scaling.config import ConfigError
from scaling.sweep import runner
from scaling.tasks.gpt import GPT, rotary
from scaling.tasks.gpt_shapes import param_counts
from tests.helpers import config

CHARLM = {"task": {"name": "charlm", "corpus_chars": 20000, "seq_len": 16},
          "model": {"name": "gpt", "preset": "14m", "num_layers": 2},
          "optimizer": {"name": "adam"}, "batch": {"sizes": [8]},
          "learning_rate": {"values": [0.003], "search": False}, "budget": {"max_steps": 60},
          "eval": {"every": 20, "points_per_decade": 0}, "seeds": [0],
          "train": {"chunk_steps": 20, "stop_dominated": False}}


def count_params(tree) -> int:
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(tree))


def _shapes(model: GPT, length: int):
    return jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, length), jnp.int32))


@pytest.mark.parametrize("positions", ["rotary", "learned"])
def test_the_parameters_are_the_formulas(positions):
    """124M preset, GPT-2's vocabulary and context: 50,257 x 768 tied embeddings (+ 1,024 x
    768 learned positions), 12 x (12 x 768^2 + 2 x 768) in the blocks, 768 in the final norm:
    124,337,664 with learned positions (GPT-2 small's 124,439,808 less its biases)."""
    model = GPT(50257, 768, 12, 12, max_len=1024, positions=positions)
    counts = param_counts(50257, 768, 12, 1024, positions)
    assert count_params(_shapes(model, 1024)["params"]) == counts["params"]
    assert counts["params_non_embedding"] == 12 * (12 * 768 ** 2 + 2 * 768) + 768
    if positions == "learned":
        assert counts["params"] == 124_337_664


def test_rotary_scores_depend_only_on_the_distance():
    """The same query and key at every position: after rotation q_i . k_j is a function of
    i - j alone, constant along each diagonal."""
    rng = np.random.default_rng(0)
    q = jnp.tile(jnp.asarray(rng.standard_normal((1, 1, 2, 8)), jnp.float32), (1, 10, 1, 1))
    k = jnp.tile(jnp.asarray(rng.standard_normal((1, 1, 2, 8)), jnp.float32), (1, 10, 1, 1))
    scores = np.asarray(jnp.einsum("bqhd,bkhd->bhqk", rotary(q), rotary(k)))[0, 0]
    for offset in range(-9, 10):
        diagonal = np.diagonal(scores, offset)
        assert np.allclose(diagonal, diagonal[0], atol=1e-5)
    assert not np.allclose(np.diagonal(scores, 0)[0], np.diagonal(scores, 3)[0])


def test_a_position_sees_no_later_token():
    model = GPT(32, 32, 2, 4, max_len=12)
    tokens = jnp.arange(12)[None] % 32
    params = model.init(jax.random.key(1), tokens)
    changed = tokens.at[0, 7:].set(5)
    a, b = model.apply(params, tokens), model.apply(params, changed)
    assert np.allclose(a[0, :7], b[0, :7], atol=1e-6) and not np.allclose(a[0, 7:], b[0, 7:])


@pytest.mark.parametrize("remat", ["full", "dots"])
def test_rematerialised_blocks_give_the_same_loss_and_gradients(remat):
    tokens = jnp.arange(24).reshape(2, 12) % 32
    plain, redone = GPT(32, 32, 2, 4, max_len=12), GPT(32, 32, 2, 4, max_len=12, remat=remat)
    params = plain.init(jax.random.key(2), tokens)
    loss = lambda m: lambda p: jnp.mean(m.apply(p, tokens) ** 2)
    (a, ga), (b, gb) = (jax.value_and_grad(loss(m))(params) for m in (plain, redone))
    assert np.allclose(a, b, rtol=1e-6)
    assert all(np.allclose(x, y, rtol=1e-5, atol=1e-7)
               for x, y in zip(jax.tree.leaves(ga), jax.tree.leaves(gb)))


def test_a_preset_gives_its_sizes_and_the_keys_beside_it_override_them():
    m = config(CHARLM).model
    assert (m.d_model, m.num_layers, m.num_heads) == (128, 2, 4)
    m = config({**CHARLM, "model": {"name": "gpt", "preset": "124m"}}).model
    assert (m.d_model, m.num_layers, m.num_heads) == (768, 12, 12)


@pytest.mark.parametrize("override, key", [
    ("model.preset=7b", "model.preset"),
    ("model.remat=everything", "model.remat"),
    ("model.positions=alibi", "model.positions"),
    ("model.name=transformer", "model.preset"),
    ("model.num_heads=128", "model.d_model"),  # heads of width 1: odd for rotary
])
def test_bad_gpt_settings_are_refused_in_one_line(override, key):
    with pytest.raises(ConfigError) as err:
        config(CHARLM, override)
    assert str(err.value).startswith(f"{key}:") and "\n" not in str(err.value)


def test_a_short_gpt_sweep_on_charlm_learns(tmp_path):
    runner.run(config(CHARLM), tmp_path, quiet=True)
    (record,) = store.load(tmp_path)
    losses = [r["eval_loss"] for r in record["metrics"] if r.get("eval_loss") is not None]
    assert record["summary"]["status"] == "completed"
    assert losses[-1] < losses[0] - 0.5  # from about log(256) = 5.5 nats
