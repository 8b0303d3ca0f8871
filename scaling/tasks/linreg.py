"""Teacher-student linear regression with fresh Gaussian samples every step.

x ~ N(0, I), y = x . w_teacher + noise_std * eps. The population loss of a student w is exactly
1/2 |w - w_teacher|^2 + 1/2 noise_std^2, so evaluation needs no held-out set.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from scaling.errors import need
from scaling.tasks.base import Batch, Task


@dataclass
class LinRegOptions:
    dim: int = 32
    noise_std: float = 0.5
    teacher_norm: float = 1.0
    teacher_seed: int = 0


class LinReg(Task):
    name = "linreg"
    Options = LinRegOptions
    finite_data = False

    def __init__(self, options: LinRegOptions, model) -> None:
        super().__init__(options, model)
        w = np.random.RandomState(options.teacher_seed).randn(options.dim)
        self.teacher = jnp.asarray(w / np.linalg.norm(w) * options.teacher_norm, jnp.float32)

    @classmethod
    def validate(cls, cfg) -> None:
        super().validate(cfg)
        o = cfg.task.options
        need(o.dim > 0, "task.dim", o.dim, "a positive integer")
        need(o.noise_std >= 0, "task.noise_std", o.noise_std, "a number >= 0")

    def sample(self, key: jax.Array, batch_size: int, data: Batch) -> Batch:
        kx, ke = jax.random.split(key)
        x = jax.random.normal(kx, (batch_size, self.options.dim), jnp.float32)
        noise = self.options.noise_std * jax.random.normal(ke, (batch_size,), jnp.float32)
        return {"x": x, "y": x @ self.teacher + noise}

    def init(self, key: jax.Array) -> jax.Array:
        return jnp.zeros((self.options.dim,), jnp.float32)

    def per_example_loss(self, params: jax.Array, batch: Batch) -> jax.Array:
        return 0.5 * (batch["x"] @ params - batch["y"]) ** 2

    def evaluate(self, params: jax.Array, eval_data: Batch) -> dict[str, jax.Array]:
        gap = jnp.sum((params - self.teacher) ** 2)
        return {"eval_loss": 0.5 * gap + 0.5 * self.options.noise_std**2}
