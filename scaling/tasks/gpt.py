"""A GPT-style decoder (model.name: gpt) for the language-model tasks, as today's small-LM
recipes build one: pre-norm blocks of causal self-attention and a 4x GELU MLP, no biases,
a final norm, input and output embeddings tied, rotary positions (Su et al. 2021) or learned
ones, and blocks rematerialised (model.remat: none, full, or dots, which keeps the matmuls'
outputs) where activations would not fit.

Presets by name (gpt_shapes.PRESETS) give the sizes the batch-size papers train (Pythia's
and GPT-2's shapes); model.d_model, model.num_layers and model.num_heads given beside a preset
override it (scaling.config.load resolves them, so config.json records the sizes trained).
Parameters: gpt_shapes.param_counts, with and without the embeddings.
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

INIT = nn.initializers.normal(0.02)


def rotary(x: jax.Array) -> jax.Array:
    """Rotary position embedding of (B, T, H, D) queries or keys: each pair of channels turned
    by the position times its frequency, 10000^(-2i/D)."""
    length, dim = x.shape[1], x.shape[-1]
    freq = 10000.0 ** (-jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)
    angle = jnp.arange(length, dtype=jnp.float32)[:, None] * freq[None, :]
    cos, sin = jnp.cos(angle)[None, :, None, :], jnp.sin(angle)[None, :, None, :]
    even, odd = x[..., 0::2].astype(jnp.float32), x[..., 1::2].astype(jnp.float32)
    turned = jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
    return turned.reshape(x.shape).astype(x.dtype)


class Attention(nn.Module):
    """Causal multi-head self-attention without biases; softmax in float32."""

    d_model: int
    num_heads: int
    rotary: bool

    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        b, t, _ = h.shape
        qkv = nn.Dense(3 * self.d_model, use_bias=False, kernel_init=INIT, name="qkv")(h)
        q, k, v = jnp.split(qkv.reshape(b, t, 3, self.num_heads, -1), 3, axis=2)
        q, k, v = q[:, :, 0], k[:, :, 0], v[:, :, 0]
        if self.rotary:
            q, k = rotary(q), rotary(k)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
        causal = jnp.tril(jnp.ones((t, t), bool))
        weights = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1).astype(v.dtype)
        out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t, self.d_model)
        return nn.Dense(self.d_model, use_bias=False, kernel_init=INIT, name="out")(out)


class GPTBlock(nn.Module):
    """Pre-norm: h + attention(norm(h)), then h + MLP(norm(h)), a 4x GELU MLP."""

    d_model: int
    num_heads: int
    rotary: bool

    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        h = h + Attention(self.d_model, self.num_heads, self.rotary)(nn.LayerNorm(use_bias=False)(h))
        m = nn.Dense(4 * self.d_model, use_bias=False, kernel_init=INIT)(nn.LayerNorm(use_bias=False)(h))
        return h + nn.Dense(self.d_model, use_bias=False, kernel_init=INIT)(nn.gelu(m))


class GPT(nn.Module):
    """(B, T) token ids -> (B, T, vocab) logits through the tied embedding."""

    vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    max_len: int
    positions: str = "rotary"
    remat: str = "none"

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        embed = nn.Embed(self.vocab_size, self.d_model, embedding_init=INIT, name="embed")
        h = embed(tokens)
        if self.positions == "learned":
            h = h + nn.Embed(self.max_len, self.d_model, embedding_init=INIT,
                             name="positions")(jnp.arange(tokens.shape[-1]))
        block = _block_class(self.remat)
        for i in range(self.num_layers):
            h = block(self.d_model, self.num_heads, self.positions == "rotary", name=f"block{i}")(h)
        return embed.attend(nn.LayerNorm(use_bias=False, name="final_norm")(h))


def _block_class(remat: str) -> Any:
    """The block, rematerialised by `remat`'s policy."""
    if remat == "none":
        return GPTBlock
    policy = None if remat == "full" else jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return nn.remat(GPTBlock, policy=policy)

