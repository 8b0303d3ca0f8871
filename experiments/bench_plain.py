"""`scaling bench`'s tutorial arm beside a training loop written plainly, and the engine beside
both, in one process: so the ratio `scaling bench` prints is against a loop as fast as one a
researcher would write.

The plain loop is written here from scratch, as a tutorial writes it: the runs one after
another; per run an optax SGD with momentum (its learning rate a hyperparameter, so the step
compiles once); per epoch a numpy permutation, each batch sliced from numpy arrays on the host
and handed to one jitted step whose loss is read back every step. It uses the task's model and
loss and evaluates at the engine's evaluation points; its batches are its own (so its losses
are not the engine's runs: the comparison is of speed alone).

    python experiments/bench_plain.py                     # quickstart MLP [256, 256], B = 16
    python experiments/bench_plain.py --steps 200 --runs 4

Prints each arm's compile and training seconds and the ratios of training time, measured side
by side (the best of --repeats each).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from scaling.config import load
from scaling.formatting import text_table
from scaling.sweep import bench

ROOT = Path(__file__).resolve().parents[1]


def plain_arm(s: bench.Setup, train: dict[str, np.ndarray], eval_data: Any,
              repeats: int) -> bench.Arm:
    """The runs one after another, as a tutorial trains them (see the module docstring)."""
    spec, program, task = s.program.spec, s.program, s.program.task
    tx = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1, momentum=0.9)

    @jax.jit
    def step(params: Any, opt_state: Any, batch: dict) -> tuple:
        loss, grads = jax.value_and_grad(lambda p: jnp.mean(program.loss(p, batch)))(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    evaluate = jax.jit(program.evaluate)
    points, size = {int(p) for p in spec.eval_points}, spec.batch_size
    num = len(next(iter(train.values())))

    def run(lr: float, momentum: float, seed: int, steps: int) -> float:
        params = task.init(jax.random.key(seed))
        opt_state = tx.init(params)
        opt_state.hyperparams["learning_rate"] = jnp.asarray(lr, jnp.float32)
        opt_state.hyperparams["momentum"] = jnp.asarray(momentum, jnp.float32)
        rng, final, order = np.random.default_rng(seed), float("nan"), np.arange(0)
        for i in range(steps):
            start = (i * size) % num
            if start + size > num or i == 0:
                order, start = rng.permutation(num), 0
            idx = order[start:start + size]
            params, opt_state, loss = step(params, opt_state, {k: v[idx] for k, v in train.items()})
            float(loss)
            if i + 1 in points:
                final = float(evaluate(params, eval_data)["eval_loss"])
        return final

    begin = time.perf_counter()
    run(0.1, 0.9, 0, 1)
    compile_s, best, finals = time.perf_counter() - begin, float("inf"), []
    for _ in range(repeats):
        begin = time.perf_counter()
        finals = [run(r.learning_rate, r.momentum, r.seed, spec.total_steps) for r in s.runs]
        best = min(best, time.perf_counter() - begin)
    return bench.Arm("plain", compile_s, best, finals)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "quickstart.yaml"))
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("overrides", nargs="*", default=["model.hidden=[256,256]",
                                                         "learning_rate.num=16", "seeds=[0]"])
    args = parser.parse_args(argv)
    cfg = load(args.config, args.overrides)
    if cfg.optimizer.name != "momentum":
        raise SystemExit(f"error: the plain loop is written for momentum SGD; the config has "
                         f"optimizer.name {cfg.optimizer.name!r}")
    s = bench.setup(cfg, args.batch_size, args.steps, args.runs)
    train = {k: np.asarray(v) for k, v in (s.program.task.train_arrays() or {}).items()}
    arms = [s.engine(args.repeats), s.tutorial().arm(s.runs, args.repeats),
            plain_arm(s, train, s.loop_eval_data, args.repeats)]
    engine, tutorial, plain = arms
    print(f"{cfg.task.name}, {cfg.model.name} {cfg.model.hidden}, batch {args.batch_size}, "
          f"{len(s.runs)} runs x {args.steps} steps, {jax.device_count()} device(s)")
    print(text_table(["arm", "compile s", "train s", "train s / engine's"],
                     [[a.name, a.compile_s, a.train_s, a.train_s / engine.train_s] for a in arms]))
    print(f"tutorial / plain: {tutorial.train_s / plain.train_s:.2f}x in training")
    return 0


if __name__ == "__main__":
    sys.exit(main())
