"""Networks the tasks share (flax.linen, float32) and the classification plumbing around them.

Kept small and plain on purpose: the experiments study batch-size scaling, not architectures,
so every model here is the textbook version with flax's default initialisers.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from scaling.errors import ConfigError, need
from scaling.tasks import convnets, gpt, import_object, is_import_path
from scaling.tasks.gpt_shapes import POSITIONS as GPT_POSITIONS, REMAT as GPT_REMAT
from scaling.tasks.base import Batch, Params, Task
from scaling.tasks.storage import arrays_sha256


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
    """Softmax cross entropy in nats for integer labels; the label axis is dropped. Computed in
    float32 whatever the logits' dtype (bfloat16 under train.precision)."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]


def accuracy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Fraction of positions whose arg-max logit is the label."""
    return jnp.mean(jnp.argmax(logits, axis=-1) == labels)


def classification_metrics(logits: jax.Array, labels: jax.Array) -> dict[str, jax.Array]:
    """eval_loss (mean cross entropy) and eval_accuracy over every labelled position."""
    return {"eval_loss": jnp.mean(cross_entropy(logits, labels)),
            "eval_accuracy": accuracy(logits, labels)}


def norm_of(model: Any, default: str) -> str:
    return default if model.norm == "default" else model.norm


def check_model_sizes(m: Any, name: str) -> None:
    """Reject network shapes that cannot be built, naming the model key (ConfigError)."""
    if name == "mlp":
        need(all(w > 0 for w in m.hidden), "model.hidden", m.hidden,
             "a list of positive layer widths (empty for a linear model)")
    if name == "cnn":
        need(len(m.channels) > 0 and all(c > 0 for c in m.channels), "model.channels",
             m.channels, "a non-empty list of positive channel counts")
        need(all(w > 0 for w in m.dense), "model.dense", m.dense, "a list of positive widths")
    if name == "resnet":
        need(m.depth >= 8 and (m.depth - 2) % 6 == 0, "model.depth", m.depth,
             "6n + 2 for n >= 1 (8, 14, 20, 32, 44, 56, 110: He et al.'s CIFAR ResNets)")
    if name in ("cnn", "resnet"):
        need(m.norm == "default" or m.norm in convnets.NORMS, "model.norm", m.norm,
             f"default or one of {', '.join(convnets.NORMS)}")
        need(m.ghost_size >= 1, "model.ghost_size", m.ghost_size, "a positive integer")
    if name == "gpt":
        need(m.positions in GPT_POSITIONS, "model.positions", m.positions,
             f"one of {', '.join(GPT_POSITIONS)}")
        need(m.remat in GPT_REMAT, "model.remat", m.remat, f"one of {', '.join(GPT_REMAT)}")
        need(m.positions != "rotary" or (m.d_model // max(m.num_heads, 1)) % 2 == 0,
             "model.d_model", m.d_model, "heads of an even width for rotary positions "
             "(d_model / num_heads even)")
    if name in ("transformer", "gpt"):
        need(m.d_model > 0, "model.d_model", m.d_model, "a positive integer")
        need(m.num_layers > 0, "model.num_layers", m.num_layers, "a positive integer")
        need(m.num_heads > 0, "model.num_heads", m.num_heads, "a positive integer")
        need(m.d_model % m.num_heads == 0, "model.d_model", m.d_model,
             f"a multiple of model.num_heads={m.num_heads}")


def outside_module_class(model: Any) -> tuple[type[nn.Module], list[str]]:
    """The flax module class model.name imports and its constructor's fields, checked against
    the contract (ConfigError): a flax.linen Module with a `num_outputs` field, which the task
    sets."""
    cls = import_object(model.name, "model.name")
    need(isinstance(cls, type) and issubclass(cls, nn.Module), "model.name", model.name,
         "the import path of a flax.linen Module subclass")
    fields = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in ("parent", "name")]
    need("num_outputs" in fields, "model.name", model.name,
         "a flax module with a field num_outputs (the task sets it: classes, targets or vocabulary)")
    return cls, fields


def check_model(model: Any, kind: str) -> None:
    """A built-in network's sizes, or an outside module's arguments (ConfigError)."""
    if is_import_path(kind):
        check_outside_module(model)
    else:
        check_model_sizes(model, kind)


def check_outside_module(model: Any) -> None:
    """The module's keyword arguments name its fields, leave num_outputs to the task, and
    construct it (no parameters are initialised here)."""
    cls, fields = outside_module_class(model)
    for key in model.kwargs:
        need(key in fields and key != "num_outputs", f"model.{key}", model.kwargs[key],
             f"no such key: {model.name} accepts "
             + ", ".join(f for f in fields if f != "num_outputs") + " (num_outputs is set by the task)")
    try:
        cls(num_outputs=1, **model.kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"model: {model.name}(**{model.kwargs}) cannot be built: {err}") from None


def outside_module(model: Any, num_outputs: int) -> nn.Module:
    return outside_module_class(model)[0](num_outputs=num_outputs, **model.kwargs)


class ClassifierTask(Task):
    """A finite classification data set {"x", "y"}; subclasses supply the data.

    The network: an MLP, a CNN (1-D on (L,) signals, the simple 2-D CNN on (H, W, C) images),
    a CIFAR-style ResNet, or an outside flax module by import path. Options named
    crop_padding and flip, where a task has them, augment (H, W, C) images on the device.
    """

    metrics: ClassVar[tuple[str, ...]] = ("train_loss", "eval_loss", "eval_accuracy")
    num_classes: ClassVar[int] = 10
    default_model: ClassVar[str] = "mlp"
    outside_models: ClassVar[bool] = True

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
        check_model(cfg.model, cls.model_kind(cfg.model))

    @classmethod
    def check_augmentation(cls, cfg: Any, input_shape: tuple[int, ...]) -> None:
        """Augmentation options need (H, W, C) images (ConfigError otherwise)."""
        o = cfg.task.options
        need(o.crop_padding >= 0, "task.crop_padding", o.crop_padding, "an integer >= 0")
        need((o.crop_padding == 0 and not o.flip) or len(input_shape) == 3, "task.crop_padding"
             if o.crop_padding else "task.flip", o.crop_padding or o.flip,
             f"0 / false: augmentation needs (H, W, C) images, the inputs are {input_shape}")

    def load(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(train, eval) dicts of x float32 and y int32; cached, deterministic in the options."""
        raise NotImplementedError

    def network(self) -> nn.Module:
        m, kind = self.model_config, self.model_kind(self.model_config)
        images = self.train["x"].ndim == 4
        if is_import_path(kind):
            return outside_module(m, self.num_outputs)
        if kind == "resnet":
            return convnets.resnet(m.depth, self.num_outputs, norm_of(m, "group"), m.ghost_size)
        if kind == "cnn" and images:
            return convnets.SimpleCNN(num_outputs=self.num_outputs, channels=tuple(m.channels),
                                      dense=tuple(m.dense), norm=norm_of(m, "none"),
                                      ghost_size=m.ghost_size)
        if kind == "cnn":
            return CNN1D(tuple(m.channels), self.num_outputs)
        return MLP(tuple(m.hidden), self.num_outputs)

    @property
    def num_outputs(self) -> int:
        return self.num_classes

    def augment(self, key: jax.Array, batch: Batch) -> Batch:
        padding, flip = getattr(self.options, "crop_padding", 0), getattr(self.options, "flip", False)
        if not padding and not flip:
            return batch
        return {**batch, "x": convnets.augment(key, batch["x"], padding, flip)}

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
        return classification_metrics(self.net.apply({"params": params}, eval_data["x"]),
                                      eval_data["y"])

    def describe(self) -> dict[str, Any]:
        evals = {f"eval_{k}": v for k, v in self.eval.items()}
        return {"task": self.name, "num_train": len(self.train["y"]),
                "num_eval": len(self.eval["y"]), "input_shape": list(self.train["x"].shape[1:]),
                "num_classes": self.num_classes,
                "data_sha256": arrays_sha256({**self.train, **evals})}


class LanguageModelTask(Task):
    """Next-token prediction on (B, T) windows {"x", "y"} with the Transformer or an outside
    module that maps token ids to (B, T, vocab) logits; subclasses set vocab_size and seq_len."""

    metrics: ClassVar[tuple[str, ...]] = ("train_loss", "eval_loss", "eval_accuracy")
    models: ClassVar[tuple[str, ...]] = ("default", "transformer", "gpt")
    outside_models: ClassVar[bool] = True

    @classmethod
    def validate(cls, cfg: Any) -> None:
        super().validate(cfg)
        name = cfg.model.name
        check_model(cfg.model, name if is_import_path(name) or name == "gpt" else "transformer")
        need(cfg.model.preset is None or name == "gpt", "model.preset", cfg.model.preset,
             "unset unless model.name is gpt")

    def network(self, vocab_size: int, seq_len: int) -> nn.Module:
        m = self.model_config
        self.vocab_size = vocab_size
        if is_import_path(m.name):
            return outside_module(m, vocab_size)
        if m.name == "gpt":
            return gpt.GPT(vocab_size, m.d_model, m.num_layers, m.num_heads, max_len=seq_len,
                           positions=m.positions, remat=m.remat)
        return Transformer(vocab_size, m.d_model, m.num_layers, m.num_heads, max_len=seq_len)

    def init(self, key: jax.Array) -> Params:
        return self.net.init(key, jnp.zeros((1, self.seq_len), jnp.int32))["params"]

    def flops_per_example(self) -> float | None:
        """One sequence's T tokens at 6 N_matmul + 12 L T d FLOPs each (Kaplan et al. 2020;
        PaLM's appendix B): N_matmul the parameters that multiply activations (the non-embedding
        ones, plus the output projection where it is the tied input embedding), and attention's
        scores and weighted sums over every query-key pair, forward and backward, as PaLM counts
        them (a causal mask skips none of it here). None for an outside model."""
        m = self.model_config
        if is_import_path(m.name):
            return None
        n = self.param_counts()["params_non_embedding"]
        if m.name == "gpt":
            n += self.vocab_size * m.d_model
        return float(self.seq_len * (6 * n + 12 * m.num_layers * self.seq_len * m.d_model))

    def per_example_loss(self, params: Params, batch: Batch) -> jax.Array:
        """Mean per-token cross entropy (nats) of each sequence, shape (B,)."""
        logits = self.net.apply({"params": params}, batch["x"])
        return jnp.mean(cross_entropy(logits, batch["y"]), axis=-1)

    def evaluate(self, params: Params, eval_data: Batch) -> dict[str, jax.Array]:
        return classification_metrics(self.net.apply({"params": params}, eval_data["x"]),
                                      eval_data["y"])
