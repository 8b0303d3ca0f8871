"""Noisy quadratic model (Zhang et al. 2019): a task whose expected loss is known exactly.

L(theta) = 1/2 sum_i h_i theta_i^2. One "example" is a noise vector z ~ N(0, diag(c)) with loss
L(theta) + z . theta, so a batch gradient is H theta plus noise of covariance diag(c)/B. For SGD
the mean and variance of each coordinate evolve in closed form (scaling.analysis.nqm_reference).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from scaling.errors import need
from scaling.tasks.base import Batch, Task


DRAWS = ("examples", "means")


@dataclass
class NQMOptions:
    """draw: examples (B noise vectors per step, then averaged by the engine) or means (each
    noise-scale group's mean drawn directly: the same distribution, O(dim) per step at any
    batch size)."""

    dim: int = 100
    h_power: float = 1.0
    c_power: float = 1.0
    h_scale: float = 1.0
    c_scale: float = 1.0
    init_scale: float = 1.0
    draw: str = "examples"


def spectra(options: NQMOptions) -> tuple[np.ndarray, np.ndarray]:
    """Curvatures h_i = h_scale i^-h_power and noise variances c_i = c_scale i^-c_power."""
    i = np.arange(1, options.dim + 1, dtype=np.float64)
    return options.h_scale * i ** -options.h_power, options.c_scale * i ** -options.c_power


class NQM(Task):
    name = "nqm"
    Options = NQMOptions
    finite_data = False

    def __init__(self, options: NQMOptions, model) -> None:
        super().__init__(options, model)
        h, c = spectra(options)
        self.h = jnp.asarray(h, jnp.float32)
        self.c = jnp.asarray(c, jnp.float32)
        self.draws_means = options.draw == "means"

    @classmethod
    def validate(cls, cfg) -> None:
        super().validate(cfg)
        o = cfg.task.options
        for key in ("dim", "h_scale", "c_scale"):
            need(getattr(o, key) > 0, f"task.{key}", getattr(o, key), "a positive number")
        need(o.draw in DRAWS, "task.draw", o.draw, f"one of {', '.join(DRAWS)}")

    def sample(self, key: jax.Array, batch_size: int, data: Batch) -> Batch:
        z = jax.random.normal(key, (batch_size, self.options.dim), jnp.float32)
        return {"z": z * jnp.sqrt(self.c)}

    def sample_means(self, key: jax.Array, num: int, size: int, data: Batch) -> Batch:
        """`num` group means of `size` noise vectors: z_bar ~ N(0, diag(c) / size). The loss is
        affine in z, so a mean example's loss is the group's mean loss."""
        z = jax.random.normal(key, (num, self.options.dim), jnp.float32)
        return {"z": z * jnp.sqrt(self.c / size)}

    def init(self, key: jax.Array) -> jax.Array:
        """Deterministic start, so only the gradient noise is random and the closed form is exact."""
        return jnp.full((self.options.dim,), self.options.init_scale, jnp.float32)

    def per_example_loss(self, params: jax.Array, batch: Batch) -> jax.Array:
        return 0.5 * jnp.sum(self.h * params**2) + batch["z"] @ params

    def evaluate(self, params: jax.Array, eval_data: Batch) -> dict[str, jax.Array]:
        return {"eval_loss": 0.5 * jnp.sum(self.h * params**2)}
