"""How noisy is B_simple's moving average for k groups per batch, measured every N steps?

The mnist1d MLP (hidden [128, 128]) at batch 128 is trained with plain SGD (lr 0.1, momentum
0.9) for 0, 1000 and 3000 steps; at those fixed parameters, 4000 i.i.d. batches each give one
two-batch estimate per group count k (scaling.gns.estimate). Feeding them, in order, to the
engine's bias-corrected moving averages (decay 0.95 per step, 0.95**N per measurement when
measuring every N-th step) gives the relative spread (std / mean) of B_simple's average in
steady state: the noise a run's recorded b_simple carries at that point of training. A spread
above 1 means the |G|^2 average at times reaches zero or below: B_simple explodes or flips sign.

    python experiments/gns_noise.py
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from scaling import config as config_mod, gns
from scaling.tasks import build_task

BATCH, DRAWS, DECAY = 128, 4000, 0.95


def spread(g2: np.ndarray, trace: np.ndarray, every: int) -> float:
    """Relative std of the ratio of the two moving averages, after a burn-in of 3 horizons."""
    decay = DECAY ** every
    state, values = gns.ema_init(), []
    for t in range(len(g2)):
        state = gns.ema_update(state, float(g2[t]), float(trace[t]), decay)
        if t > 3 / (1 - decay):
            values.append(float(gns.ema_value(state).b_simple))
    values = np.array(values)
    return float(values.std() / abs(values.mean()))


def main() -> None:
    cfg = config_mod.from_dict({"task": {"name": "mnist1d", "num_samples": 10000},
                                "model": {"name": "mlp", "hidden": [128, 128]},
                                "batch": {"sizes": [BATCH]}, "learning_rate": {"values": [0.1]},
                                "budget": {"max_steps": 1}})
    task = build_task(cfg)
    data = {k: jnp.asarray(v) for k, v in task.train_arrays().items()}
    n = len(data["y"])
    loss_fn = lambda p, b: jnp.mean(task.per_example_loss(p, b))
    tx = optax.sgd(0.1, 0.9)

    @jax.jit
    def step(p, s, key):
        idx = jax.random.randint(key, (BATCH,), 0, n)
        g = jax.grad(loss_fn)(p, jax.tree.map(lambda a: a[idx], data))
        u, s = tx.update(g, s, p)
        return optax.apply_updates(p, u), s

    params = task.init(jax.random.key(0))
    state, done = tx.init(params), 0
    print(f"{'steps':>6}{'k':>4}{'B_simple':>10}  relative spread of the moving average: "
          "every step / every 4th / every 8th")
    for trained in (0, 1000, 3000):
        for i in range(done, trained):
            params, state = step(params, state, jax.random.key(i))
        done = trained
        idx = jax.random.randint(jax.random.key(99), (DRAWS, BATCH), 0, n)
        for k in (2, 4, 8):
            batch = lambda i: jax.tree.map(lambda a: a[i], data)
            draw = jax.vmap(lambda i: gns.estimate(loss_fn, params, batch(i), k))
            est = jax.jit(draw)(idx)
            g2, trace = np.asarray(est.g2), np.asarray(est.trace_sigma)
            cells = " / ".join(f"{spread(g2, trace, every):.3f}" for every in (1, 4, 8))
            print(f"{trained:>6}{k:>4}{trace.mean() / g2.mean():>10.1f}  {cells}")


if __name__ == "__main__":
    main()
