"""A task and a network of your own, trained by `scaling sweep` (docs/tasks.md walks through it).

    PYTHONPATH=examples scaling sweep examples/spirals.yaml --out runs/spirals

`Spirals` is a whole task: its own data (two noisy spirals from a seed; yours would read
files), a per-example loss and an evaluation. `ResMLP` is a network of your own, which the
built-in tasks take too (model: {name: "spirals:ResMLP", width: 64}).
"""

from __future__ import annotations

from dataclasses import dataclass

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from scaling.errors import need
from scaling.tasks.base import Task
from scaling.tasks.models import classification_metrics, cross_entropy, outside_module


class ResMLP(nn.Module):
    """Residual MLP: a projection to `width`, `depth` pre-LayerNorm blocks, a linear head."""

    num_outputs: int  # set by the task: classes here
    width: int = 64
    depth: int = 2

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h = nn.Dense(self.width)(x.reshape((x.shape[0], -1)))
        for _ in range(self.depth):
            h = h + nn.Dense(self.width)(nn.relu(nn.LayerNorm()(h)))
        return nn.Dense(self.num_outputs)(nn.LayerNorm()(h))


@dataclass
class SpiralsOptions:
    """num_train, num_eval: points per split; noise: std of the jitter; seed: the data seed."""
    num_train: int = 4000
    num_eval: int = 1000
    noise: float = 0.3
    seed: int = 0


def spirals(n: int, noise: float, rng: np.random.RandomState) -> dict[str, np.ndarray]:
    """n points on two arms (labels 0 and 1), each turned by pi from the other."""
    label = rng.randint(0, 2, n)
    t = np.sqrt(rng.uniform(0, 1, n)) * 3 * np.pi
    arm = np.stack([t * np.cos(t + np.pi * label), t * np.sin(t + np.pi * label)], axis=1)
    x = arm / (3 * np.pi) + noise / (3 * np.pi) * rng.randn(n, 2)
    return {"x": x.astype(np.float32), "y": label.astype(np.int32)}


class Spirals(Task):
    """Two-spiral classification with the model the config names (ResMLP by default)."""

    name = "spirals"
    Options = SpiralsOptions
    metrics = ("train_loss", "eval_loss", "eval_accuracy")
    outside_models = True  # model.name may be any flax module's import path

    def __init__(self, options: SpiralsOptions, model) -> None:
        super().__init__(options, model)
        rng = np.random.RandomState(options.seed)
        self.train = spirals(options.num_train, options.noise, rng)
        self.eval = spirals(options.num_eval, options.noise, rng)
        self.net = ResMLP(2) if model.name == "default" else outside_module(model, 2)

    @classmethod
    def validate(cls, cfg) -> None:
        super().validate(cfg)
        o = cfg.task.options
        need(o.num_train >= 1 and o.num_eval >= 1, "task.num_train", o.num_train,
             "at least one point in each split")
        need(o.noise >= 0, "task.noise", o.noise, "a number >= 0")

    @classmethod
    def num_train_examples(cls, options: SpiralsOptions) -> int:
        return options.num_train

    def train_arrays(self) -> dict[str, np.ndarray]:
        return self.train

    def eval_arrays(self) -> dict[str, np.ndarray]:
        return self.eval

    def init(self, key: jax.Array):
        return self.net.init(key, jnp.zeros((1, 2), jnp.float32))["params"]

    def per_example_loss(self, params, batch) -> jax.Array:
        return cross_entropy(self.net.apply({"params": params}, batch["x"]), batch["y"])

    def evaluate(self, params, eval_data) -> dict[str, jax.Array]:
        logits = self.net.apply({"params": params}, eval_data["x"])
        return classification_metrics(logits, eval_data["y"])  # eval_loss, eval_accuracy
