"""Networks the tasks share (flax.linen, float32) and the classification plumbing around them.

Kept small and plain on purpose: the experiments study batch-size scaling, not architectures,
so every model here is the textbook version with flax's default initialisers.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from scaling.errors import need
from scaling.tasks.base import Batch, Params, Task


class MLP(nn.Module):
    """Fully connected ReLU network on flattened inputs; no hidden layers = linear model."""

    hidden: Sequence[int]
    num_outputs: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = x.reshape((x.shape[0], -1))
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(self.num_outputs)(x)


class CNN1D(nn.Module):
    """Strided 1-D convolutions (each halves the length) then a dense head, for (B, L) signals."""

    channels: Sequence[int]
    num_outputs: int
    kernel_size: int = 5

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = x[..., None]  # (B, L) -> (B, L, 1): one input channel
        for width in self.channels:
            x = nn.relu(nn.Conv(width, (self.kernel_size,), strides=(2,), padding="SAME")(x))
        return nn.Dense(self.num_outputs)(x.reshape((x.shape[0], -1)))


class Block(nn.Module):
    """Pre-LayerNorm decoder block: causal self-attention, then a 4x-wide GELU MLP."""

    d_model: int
    num_heads: int

    @nn.compact
    def __call__(self, h: jax.Array, mask: jax.Array) -> jax.Array:
        attn = nn.MultiHeadDotProductAttention(num_heads=self.num_heads, qkv_features=self.d_model,
                                               deterministic=True)
        h = h + attn(nn.LayerNorm()(h), mask=mask)
        m = nn.gelu(nn.Dense(4 * self.d_model)(nn.LayerNorm()(h)))
        return h + nn.Dense(self.d_model)(m)


class Transformer(nn.Module):
    """Decoder-only language model with learned positions; (B, T) token ids -> (B, T, vocab)."""

    vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    max_len: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        length = tokens.shape[-1]
        h = nn.Embed(self.vocab_size, self.d_model)(tokens)
        h = h + nn.Embed(self.max_len, self.d_model, name="positions")(jnp.arange(length))
        mask = nn.make_causal_mask(tokens)
        for _ in range(self.num_layers):
            h = Block(self.d_model, self.num_heads)(h, mask)
        # A small head makes the initial loss about log(vocab_size), as for the classifiers.
        head = nn.Dense(self.vocab_size, kernel_init=nn.initializers.normal(0.02))
        return head(nn.LayerNorm()(h))


# ---------------------------------------------------------------- shared task plumbing


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Softmax cross entropy in nats for integer labels; the label axis is dropped."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]


def accuracy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Fraction of positions whose arg-max logit is the label."""
    return jnp.mean(jnp.argmax(logits, axis=-1) == labels)


def arrays_sha256(arrays: dict[str, np.ndarray]) -> str:
    """Digest of named arrays (names, dtypes, shapes and bytes) so runs record their exact data."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def read_only(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Freeze cached arrays so no caller can corrupt the copy other runs share."""
    for a in arrays.values():
        a.flags.writeable = False
    return arrays


def check_model_sizes(model: Any, name: str) -> None:
    """Reject network shapes that cannot be built, naming the model key (ConfigError)."""
    if name == "mlp":
        need(all(w > 0 for w in model.hidden), "model.hidden", model.hidden,
             "a list of positive layer widths (empty for a linear model)")
    elif name == "cnn":
        need(len(model.channels) > 0 and all(c > 0 for c in model.channels), "model.channels",
             model.channels, "a non-empty list of positive channel counts")
    elif name == "transformer":
        need(model.d_model > 0, "model.d_model", model.d_model, "a positive integer")
        need(model.num_layers > 0, "model.num_layers", model.num_layers, "a positive integer")
        need(model.num_heads > 0, "model.num_heads", model.num_heads, "a positive integer")
        need(model.d_model % model.num_heads == 0, "model.d_model", model.d_model,
             f"a multiple of model.num_heads={model.num_heads}")


class ClassifierTask(Task):
    """A finite classification data set {"x", "y"} with an MLP or CNN; subclasses supply data."""

    metrics: ClassVar[tuple[str, ...]] = ("train_loss", "eval_loss", "eval_accuracy")
    num_classes: ClassVar[int] = 10
    default_model: ClassVar[str] = "mlp"

    def __init__(self, options: Any, model: Any) -> None:
        super().__init__(options, model)
        self.train, self.eval = self.load()
        self.net = self.network()

    @classmethod
    def model_kind(cls, model: Any) -> str:
        return cls.default_model if model.name == "default" else model.name

    @classmethod
    def validate(cls, cfg: Any) -> None:
        super().validate(cfg)
        check_model_sizes(cfg.model, cls.model_kind(cfg.model))

    def load(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(train, eval) dicts of x float32 and y int32; cached, deterministic in the options."""
        raise NotImplementedError

    def network(self) -> nn.Module:
        if self.model_kind(self.model_config) == "cnn":
            return CNN1D(tuple(self.model_config.channels), self.num_classes)
        return MLP(tuple(self.model_config.hidden), self.num_classes)

    def train_arrays(self) -> dict[str, np.ndarray]:
        return self.train

    def eval_arrays(self) -> dict[str, np.ndarray]:
        return self.eval

    def init(self, key: jax.Array) -> Params:
        dummy = jnp.zeros((1, *self.train["x"].shape[1:]), jnp.float32)
        return self.net.init(key, dummy)["params"]

    def per_example_loss(self, params: Params, batch: Batch) -> jax.Array:
        return cross_entropy(self.net.apply({"params": params}, batch["x"]), batch["y"])

    def evaluate(self, params: Params, eval_data: Batch) -> dict[str, jax.Array]:
        logits = self.net.apply({"params": params}, eval_data["x"])
        return {"eval_loss": jnp.mean(cross_entropy(logits, eval_data["y"])),
                "eval_accuracy": accuracy(logits, eval_data["y"])}

    def describe(self) -> dict[str, Any]:
        evals = {f"eval_{k}": v for k, v in self.eval.items()}
        return {"task": self.name, "num_train": len(self.train["y"]),
                "num_eval": len(self.eval["y"]), "input_shape": list(self.train["x"].shape[1:]),
                "num_classes": self.num_classes,
                "data_sha256": arrays_sha256({**self.train, **evals})}
