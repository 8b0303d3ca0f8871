"""scaling.train.gradients: a batch's gradient in micro-batches and noise-scale groups equals
the full batch's gradient, padding examples weighted out."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling.tasks import build_task
from scaling.train.gradients import batch_gradient
from scaling.train.spec import GroupLayout
from tests.helpers import DIGITS, config


@pytest.mark.parametrize("accumulation,groups", [(1, 8), (4, 4), (2, 8), (8, 8)])
def test_micro_batched_gradient_equals_full_batch(accumulation, groups):
    cfg = config(DIGITS)
    task = build_task(cfg)
    params = task.init(jax.random.key(0))
    arrays = task.train_arrays()
    batch = {k: jnp.asarray(v[:64]) for k, v in arrays.items()}
    weights = jnp.ones(64).at[50:].set(0.0)
    full = jax.grad(lambda p: jnp.sum(task.per_example_loss(p, batch) * weights) / 50)(params)
    layout = GroupLayout.choose(64, accumulation, 1, groups)
    out = batch_gradient(task.per_example_loss, params, batch, weights, layout)
    for a, b in zip(jax.tree.leaves(out.grad), jax.tree.leaves(full)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert not bool(out.full)
