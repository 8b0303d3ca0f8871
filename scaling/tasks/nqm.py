"""Noisy quadratic model (Zhang et al. 2019): a task whose expected loss is known exactly.

L(theta) = 1/2 sum_i h_i theta_i^2. One "example" is a noise vector z ~ N(0, diag(c)) with loss
L(theta) + z . theta, so a batch gradient is H theta plus noise of covariance diag(c)/B. The
moments of each coordinate evolve in closed form (scaling.analysis.nqm_reference).

precondition_power p trains in the coordinates phi = h^(p/2) theta: there the curvatures are
h^(1-p), the noise variances c h^-p and the loss values the same, and a plain step on phi is the
step on theta preconditioned by h^-p (for momentum too, and the parameters' moving average is
the image of theta's), so the optimizers need no change.
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
    batch size). precondition_power: p in [0, 1], the update preconditioned by h^-p (0: none)."""

    dim: int = 100
    h_power: float = 1.0
    c_power: float = 1.0
    h_scale: float = 1.0
    c_scale: float = 1.0
    init_scale: float = 1.0
    draw: str = "examples"
    precondition_power: float = 0.0


def spectra(options: NQMOptions) -> tuple[np.ndarray, np.ndarray]:
    """Curvatures h_i = h_scale i^-h_power and noise variances c_i = c_scale i^-c_power."""
    i = np.arange(1, options.dim + 1, dtype=np.float64)
    return options.h_scale * i ** -options.h_power, options.c_scale * i ** -options.c_power


def trained_spectra(options: NQMOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(curvatures, noise variances, start) in the coordinates the task trains: phi = h^(p/2)
    theta has curvature h^(1-p), noise variance c h^-p and starts at init_scale h^(p/2)."""
    h, c = spectra(options)
    p = options.precondition_power
    return h ** (1.0 - p), c * h**-p, options.init_scale * h ** (p / 2)


class NQM(Task):
    name = "nqm"
    Options = NQMOptions
    finite_data = False

    def __init__(self, options: NQMOptions, model) -> None:
        super().__init__(options, model)
        h, c, start = trained_spectra(options)
        self.h = jnp.asarray(h, jnp.float32)
        self.c = jnp.asarray(c, jnp.float32)
        self.start = jnp.asarray(start, jnp.float32)
        self.draws_means = options.draw == "means"

    @classmethod
    def validate(cls, cfg) -> None:
        super().validate(cfg)
        o = cfg.task.options
        for key in ("dim", "h_scale", "c_scale"):
            need(getattr(o, key) > 0, f"task.{key}", getattr(o, key), "a positive number")
        need(o.draw in DRAWS, "task.draw", o.draw, f"one of {', '.join(DRAWS)}")
        need(0.0 <= o.precondition_power <= 1.0, "task.precondition_power", o.precondition_power,
             "a number in [0, 1] (0: SGD, 1: full preconditioning by h^-1)")

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
        return self.start

    def per_example_loss(self, params: jax.Array, batch: Batch) -> jax.Array:
        return 0.5 * jnp.sum(self.h * params**2) + batch["z"] @ params

    def evaluate(self, params: jax.Array, eval_data: Batch) -> dict[str, jax.Array]:
        return {"eval_loss": 0.5 * jnp.sum(self.h * params**2)}
