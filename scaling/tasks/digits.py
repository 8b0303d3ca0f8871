"""scikit-learn's 8x8 handwritten digits: a tiny, offline, finite classification task.

1,797 images ship inside scikit-learn, so every machine builds the same data with no download.
The train/test split is a fixed permutation (RandomState(0)), independent of any run seed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from scaling.errors import need
from scaling.tasks.models import ClassifierTask
from scaling.tasks.storage import read_only

NUM_IMAGES = 1797  # len(sklearn.datasets.load_digits().target); a test checks it


@dataclass
class DigitsOptions:
    """test_fraction: share of the 1,797 images held out for evaluation."""

    test_fraction: float = 0.2


def split_sizes(test_fraction: float) -> tuple[int, int]:
    """(train, test) counts; the one formula both the loader and num_train_examples use."""
    num_test = int(NUM_IMAGES * test_fraction)
    return NUM_IMAGES - num_test, num_test


@functools.lru_cache(maxsize=4)
def load(test_fraction: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Images scaled to [0, 1] as (N, 64) float32, labels int32, split by a fixed permutation."""
    from sklearn.datasets import load_digits  # ~1 s to import; only when used

    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int32)
    order = np.random.RandomState(0).permutation(len(y))
    num_train, _ = split_sizes(test_fraction)
    train, test = order[:num_train], order[num_train:]
    return (read_only({"x": x[train], "y": y[train]}),
            read_only({"x": x[test], "y": y[test]}))


class Digits(ClassifierTask):
    """10-way classification of 8x8 digit images with an MLP (model.hidden)."""

    name: ClassVar[str] = "digits"
    Options: ClassVar[type] = DigitsOptions
    models: ClassVar[tuple[str, ...]] = ("default", "mlp")
    finite_data: ClassVar[bool] = True

    @classmethod
    def validate(cls, cfg: Any) -> None:
        super().validate(cfg)
        fraction = cfg.task.options.test_fraction
        num_train, num_test = split_sizes(fraction) if 0 < fraction < 1 else (0, 0)
        need(num_train >= 1 and num_test >= 1, "task.test_fraction", fraction,
             f"a number in (0, 1) leaving at least one of the {NUM_IMAGES} images on each side")

    @classmethod
    def num_train_examples(cls, options: DigitsOptions) -> int:
        return split_sizes(options.test_fraction)[0]

    def load(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        return load(float(self.options.test_fraction))
