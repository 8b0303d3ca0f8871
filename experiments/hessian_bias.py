"""Does the Hessian in B_noise have to come from examples independent of the gradients?

On a finite data set (512 mnist1d examples) and a small MLP (hidden [32]) trained 300 steps,
the exact G^T H G and tr(H Sigma) follow from every per-example gradient and the full Hessian
(scaling.gns.exact_statistics).
scaling.gns.hessian_estimate's two-batch estimates, averaged over 10,000 i.i.d. batches of B
examples in 4 groups, are compared with them twice: with the Hessian of an independent batch
(what the engine does) and with the Hessian of the gradients' own batch. The second is biased
by O(1/B) because per-example curvature and gradients correlate; the ratio B_noise can hide it,
eps_max = |G|^2 / G^T H G cannot.

    python experiments/hessian_bias.py
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from scaling import config as config_mod, gns
from scaling.tasks import build_task

N, DRAWS, GROUPS = 512, 10000, 4


def trained_problem():
    """(data, params, per-example loss) after 300 momentum-SGD steps on batches of 64."""
    cfg = config_mod.from_dict({"task": {"name": "mnist1d", "num_samples": 1000},
                                "model": {"name": "mlp", "hidden": [32]},
                                "batch": {"sizes": [8]}, "learning_rate": {"values": [0.1]},
                                "budget": {"max_steps": 1}})
    task = build_task(cfg)
    data = {k: jnp.asarray(v)[:N] for k, v in task.train_arrays().items()}
    loss = lambda p, b: jnp.mean(task.per_example_loss(p, b))
    tx = optax.sgd(0.1, 0.9)

    @jax.jit
    def step(p, s, i):
        idx = jax.random.randint(jax.random.key(i), (64,), 0, N)
        u, s = tx.update(jax.grad(loss)(p, jax.tree.map(lambda a: a[idx], data)), s, p)
        return optax.apply_updates(p, u), s

    params = task.init(jax.random.key(0))
    state = tx.init(params)
    for i in range(300):
        params, state = step(params, state, i)
    return data, params, task.per_example_loss


def main() -> None:
    data, params, per_example = trained_problem()
    loss = lambda p, b: jnp.mean(per_example(p, b))
    truth = gns.exact_statistics(per_example, params, data)
    ghg, trace = truth.ghg, truth.trace_h_sigma
    print(f"exact: G^T H G {ghg:.4g}, tr(H Sigma) {trace:.4g}, B_noise {trace / ghg:.1f}")
    print(f"{'B':>5}  {'Hessian from':<22}{'G^T H G / exact':>22}{'tr(H Sigma) / exact':>22}"
          f"{'B_noise':>9}   (ratios of the means over the draws, +- one standard error)")
    take = lambda i: jax.tree.map(lambda a: a[i], data)
    for size in (8, 32, 128):
        idx = jax.random.randint(jax.random.key(size), (DRAWS, 2, size), 0, N)
        for name, second in (("an independent batch", 1), ("the same batch", 0)):
            one = lambda i: gns.hessian_estimate(loss, params, take(i[0]), GROUPS, take(i[second]))
            est = jax.jit(jax.vmap(one))(idx)
            q, t = np.asarray(est.ghg, np.float64), np.asarray(est.trace_h_sigma, np.float64)
            cell = lambda v, ref: f"{v.mean() / ref:.2f} +- {v.std() / np.sqrt(DRAWS) / ref:.2f}"
            print(f"{size:>5}  {name:<22}{cell(q, ghg):>22}{cell(t, trace):>22}"
                  f"{t.mean() / q.mean():>9.1f}")


if __name__ == "__main__":
    main()
