"""Optimizer families as optax transformations whose scalars live in the state (inject_hyperparams).

Runs of one family share a compiled program; their learning rates, momenta, weight decays and
betas are per-run data. Weight decay for sgd/momentum/nesterov/adam is L2 added to the gradient;
adamw decouples it (Loshchilov and Hutter).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax


def make_optimizer(name: str) -> Callable[..., optax.GradientTransformation]:
    """A factory taking exactly scaling.config.names.HYPERPARAMS[name] as keyword arguments."""
    def sgd(learning_rate, weight_decay):
        return optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(learning_rate))

    def momentum(learning_rate, momentum, weight_decay):
        return optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(learning_rate, momentum))

    def nesterov(learning_rate, momentum, weight_decay):
        return optax.chain(optax.add_decayed_weights(weight_decay),
                           optax.sgd(learning_rate, momentum, nesterov=True))

    def adam(learning_rate, b1, b2, eps, weight_decay):
        return optax.chain(optax.add_decayed_weights(weight_decay), optax.adam(learning_rate, b1, b2, eps))

    def adamw(learning_rate, b1, b2, eps, weight_decay):
        return optax.adamw(learning_rate, b1, b2, eps, weight_decay=weight_decay)

    return {"sgd": sgd, "momentum": momentum, "nesterov": nesterov, "adam": adam, "adamw": adamw}[name]


def set_learning_rate(opt_state: Any, lr: Any) -> Any:
    """The scheduled learning rate for this step, written where inject_hyperparams reads it."""
    return set_hyperparams(opt_state, {"learning_rate": lr})


def set_hyperparams(opt_state: Any, values: dict[str, Any]) -> Any:
    """Scalars written where inject_hyperparams reads them, each in its own dtype (a run that
    goes on at another batch size takes that batch size's beta2 and weight decay)."""
    hyper = dict(opt_state.hyperparams)
    hyper.update({k: jnp.asarray(v, hyper[k].dtype) for k, v in values.items()})
    return opt_state._replace(hyperparams=hyper)


def preconditioner(opt_state: Any) -> tuple[Any, jax.Array]:
    """Adam's diagonal metric 1/(sqrt(v_hat) + eps)^2 from the state before this step, and whether
    it exists yet (at least one update seen).

    v_hat is the bias-corrected second moment of the adam/adamw state under inject_hyperparams.
    Taken before the step's own gradient enters it, the metric does not depend on the batch it
    weighs, which keeps the two-batch noise-scale estimates unbiased in that metric.
    """
    is_adam = lambda x: isinstance(x, optax.ScaleByAdamState)
    (adam,) = [s for s in jax.tree.leaves(opt_state.inner_state, is_leaf=is_adam) if is_adam(s)]
    b2, eps = opt_state.hyperparams["b2"], opt_state.hyperparams["eps"]
    seen = adam.count > 0
    correction = jnp.where(seen, 1 - b2 ** adam.count, 1.0)
    metric = jax.tree.map(lambda v: 1.0 / jnp.square(jnp.sqrt(v / correction) + eps), adam.nu)
    return metric, seen
