"""The contract every workload meets, so the engine can train any of them the same way.

A task owns its data (arrays held on the device, or a sampler that runs on the device), its
model, a per-example loss and its evaluation. The engine does batching, weighting, optimizers,
noise-scale statistics and stopping; tasks never see learning rates or devices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import jax
import numpy as np

from scaling.errors import need
from scaling.tasks import is_import_path

Batch = dict[str, jax.Array]
Params = Any


@dataclass
class NoOptions:
    """For tasks without options of their own."""


class Task:
    """Base class: subclasses set the class attributes and implement the methods below."""

    name: ClassVar[str] = ""
    Options: ClassVar[type] = NoOptions
    metrics: ClassVar[tuple[str, ...]] = ("train_loss", "eval_loss")
    models: ClassVar[tuple[str, ...]] = ("default",)
    finite_data: ClassVar[bool] = True
    outside_models: ClassVar[bool] = False  # model.name may be a flax module's import path
    host_windows: ClassVar[bool] = False  # draws windows the host can draw too (host_batch)

    def __init__(self, options: Any, model: Any) -> None:
        self.options = options
        self.model_config = model

    # ---- what the config validation asks before anything is built
    @classmethod
    def validate(cls, cfg: Any) -> None:
        """Reject a model name or options this task cannot use (raise ConfigError)."""
        accepted = ", ".join(cls.models)
        if cls.outside_models:
            accepted += " or the import path of a flax module (package.module:Class)"
        ok = cfg.model.name in cls.models or (cls.outside_models and is_import_path(cfg.model.name))
        need(ok, "model.name", cfg.model.name, f"{accepted} for task {cls.name or cfg.task.name}")

    @classmethod
    def metric_names(cls, options: Any) -> tuple[str, ...]:
        """The metrics runs of these options report (a subset of `metrics` where it varies)."""
        return cls.metrics

    @classmethod
    def tokens_per_example(cls, options: Any) -> int | None:
        """Tokens in one example (sequence tasks), None where tokens mean nothing."""
        return None

    @classmethod
    def num_train_examples(cls, options: Any) -> int | None:
        """Training-set size without building the data (None for sampled tasks)."""
        return None

    # ---- data
    def train_arrays(self) -> dict[str, np.ndarray] | None:
        """The whole training set as arrays with a leading example axis (finite tasks)."""
        return None

    def streamed_example(self) -> dict[str, np.ndarray]:
        """One example of each array a host-streamed chunk holds, for its shapes and dtypes."""
        return {k: a[:1] for k, a in (self.train_arrays() or {}).items()}

    def eval_arrays(self) -> dict[str, np.ndarray]:
        """The fixed evaluation set (may be empty when evaluation is exact)."""
        return {}

    def sample(self, key: jax.Array, batch_size: int, data: Batch) -> Batch:
        """A fresh batch drawn on the device (sampled tasks); `data` is train_arrays() on the
        device (empty when the task has none), e.g. a token stream to cut windows from."""
        raise NotImplementedError(f"task {self.name} has a finite data set, not a sampler")

    # A task whose per-example loss is affine in the example may set this (per instance) and
    # implement sample_means: the engine then draws each noise-scale group's mean example,
    # weighted by the group's size, instead of the group (the same gradients in distribution).
    draws_means: bool = False

    def sample_means(self, key: jax.Array, num: int, size: int, data: Batch) -> Batch:
        """`num` examples, each distributed as the mean of `size` i.i.d. examples."""
        raise NotImplementedError(f"task {self.name} draws whole batches")

    def augment(self, key: jax.Array, batch: Batch) -> Batch:
        """This step's batch transformed on the device (finite tasks; default unchanged).

        `key` comes from the run's data key and the step only, so runs that differ in learning
        rate alone see identical augmented batches.
        """
        return batch

    # ---- model
    def init(self, key: jax.Array) -> Params:
        raise NotImplementedError

    def per_example_loss(self, params: Params, batch: Batch) -> jax.Array:
        """Loss of each example, shape (B,); the engine weights and averages."""
        raise NotImplementedError

    def evaluate(self, params: Params, eval_data: Batch) -> dict[str, jax.Array]:
        """Scalars named as in `metrics` (eval_loss, and eval_accuracy where it applies)."""
        raise NotImplementedError

    def param_counts(self) -> dict[str, int]:
        """N with and without the embeddings (the tables of flax Embed modules, whose leaves
        are named 'embedding'), counted once from shapes: nothing is initialised."""
        if getattr(self, "_param_counts", None) is None:
            self._param_counts = self._count_params()
        return dict(self._param_counts)

    def _count_params(self) -> dict[str, int]:
        leaves = jax.tree_util.tree_flatten_with_path(jax.eval_shape(self.init, jax.random.key(0)))[0]
        size = lambda leaf: int(np.prod(leaf.shape))
        total = sum(size(leaf) for _, leaf in leaves)
        embedding = sum(size(leaf) for path, leaf in leaves
                        if path and getattr(path[-1], "key", None) == "embedding")
        return {"params": total, "params_non_embedding": total - embedding}

    def flops_per_example(self) -> float | None:
        """Model FLOPs of one example's forward and backward pass by formula, where the task
        has one (language models); None: XLA's count of the compiled gradient stands."""
        return None

    def describe(self) -> dict[str, Any]:
        """Facts about the data worth recording with every run (sizes, hashes)."""
        return {"task": self.name}
