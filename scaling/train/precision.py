"""Mixed precision (train.precision): matmuls and activations in bfloat16, everything that
accumulates in float32.

Parameters, optimizer state, gradients, the noise-scale sums and every loss reduction stay
float32: the loss and the evaluation see bfloat16 copies of the parameters and of the float
inputs, and their outputs are cast back to float32 before anything is summed. Integer inputs
(labels, token ids) are left alone. The gradient flows through the cast to the float32 parameters.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

def resolve(name: str, platform: str) -> str:
    """float32 or bfloat16: `auto` is bfloat16 on GPU and TPU, float32 on CPU (where bfloat16
    arithmetic is emulated and slower)."""
    if name != "auto":
        return name
    return "bfloat16" if platform in ("gpu", "cuda", "rocm", "tpu") else "float32"


def here(name: str) -> str:
    """`name` resolved for the platform jax runs on."""
    return resolve(name, jax.default_backend())


def cast_floats(tree: Any, dtype: Any) -> Any:
    """Every float32 leaf of `tree` as `dtype`; other leaves unchanged."""
    return jax.tree.map(lambda x: x.astype(dtype) if x.dtype == jnp.float32 else x, tree)


def in_compute_dtype(loss: Callable, evaluate: Callable, precision: str
                     ) -> tuple[Callable, Callable]:
    """(per_example_loss, evaluate) computing in `precision`, returning float32."""
    if precision == "float32":
        return loss, evaluate
    dtype = jnp.dtype(precision)

    def low_loss(params: Any, batch: Any) -> jax.Array:
        return loss(cast_floats(params, dtype), cast_floats(batch, dtype)).astype(jnp.float32)

    def low_evaluate(params: Any, eval_data: Any) -> dict[str, jax.Array]:
        metrics = evaluate(cast_floats(params, dtype), cast_floats(eval_data, dtype))
        return {k: v.astype(jnp.float32) for k, v in metrics.items()}

    return low_loss, low_evaluate
