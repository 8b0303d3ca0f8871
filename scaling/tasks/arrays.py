"""A researcher's own arrays: classification or regression from .npz or .npy files, no code.

`train` and `eval` each name an .npz file or a folder holding x.npy and y.npy (read
memory-mapped): `x` the inputs, any shape after the example axis, `y` integer class labels
(classification) or float targets (regression, shape (N,) or (N, k)). The kind follows y's
dtype. Inputs are used as stored (cast to float32): normalise them before writing.
"""

from __future__ import annotations

import functools
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from scaling.errors import ConfigError, need
from scaling.tasks.base import Batch, Params
from scaling.tasks.models import ClassifierTask
from scaling.tasks.storage import file_sha256, read_only

KEYS = ("x", "y")


@dataclass
class ArraysOptions:
    """train, eval: an .npz file or a folder of x.npy and y.npy each; num_classes: labels are
    0 .. num_classes-1 (default: the largest label + 1); crop_padding, flip: on-device image
    augmentation of (H, W, C) inputs (a random crop of the zero-padded image, a mirror)."""

    train: str = ""
    eval: str = ""
    num_classes: int | None = None
    crop_padding: int = 0
    flip: bool = False


class Header(NamedTuple):
    shape: tuple[int, ...]
    dtype: np.dtype


def _npy_header(handle: Any) -> Header:
    version = np.lib.format.read_magic(handle)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    shape, _, dtype = read_header(handle)
    return Header(tuple(shape), np.dtype(dtype))


def headers(path: str, key: str) -> dict[str, Header]:
    """Shapes and dtypes of x and y without reading the data (ConfigError naming `key`)."""
    p = Path(path)
    need(bool(path) and p.exists(), key, path,
         "the path of an existing .npz file or of a folder holding x.npy and y.npy")
    try:
        if p.is_dir():
            found = {k: p / f"{k}.npy" for k in KEYS if (p / f"{k}.npy").is_file()}
            need(set(found) == set(KEYS), key, path, "a folder holding both x.npy and y.npy")
            out = {}
            for k, file in found.items():
                with open(file, "rb") as handle:
                    out[k] = _npy_header(handle)
            return out
        with zipfile.ZipFile(p) as archive:
            names = set(archive.namelist())
            need(all(f"{k}.npy" in names for k in KEYS), key, path,
                 f"an .npz holding arrays x and y (it holds {', '.join(sorted(names)) or 'none'})")
            out = {}
            for k in KEYS:
                with archive.open(f"{k}.npy") as handle:
                    out[k] = _npy_header(handle)
            return out
    except (zipfile.BadZipFile, ValueError, OSError) as err:
        raise ConfigError(f"{key}: {path!r} cannot be read as .npz or .npy ({err})") from None


def check_headers(train: dict[str, Header], eval_: dict[str, Header]) -> str:
    """'classification' or 'regression', after checking the two files agree (ConfigError)."""
    for key, h in (("task.train", train), ("task.eval", eval_)):
        x, y = h["x"], h["y"]
        need(len(x.shape) >= 1 and x.shape[0] >= 1, key, f"x of shape {x.shape}",
             "x with a leading example axis and at least one example")
        need(x.dtype.kind in "fiu", key, f"x of dtype {x.dtype}", "numeric inputs (float or integer)")
        need(y.dtype.kind in "fiu", key, f"y of dtype {y.dtype}",
             "integer labels (classification) or float targets (regression)")
        need(len(y.shape) >= 1 and y.shape[0] == x.shape[0], key,
             f"x of {x.shape[0]} examples, y of shape {y.shape}", "as many labels as inputs")
        need(y.dtype.kind == "f" or len(y.shape) == 1, key, f"y of shape {y.shape}",
             "integer labels of shape (N,)")
        need(y.dtype.kind != "f" or len(y.shape) <= 2, key, f"y of shape {y.shape}",
             "float targets of shape (N,) or (N, k)")
    need(train["x"].shape[1:] == eval_["x"].shape[1:], "task.eval",
         f"inputs of shape {eval_['x'].shape[1:]}", f"the training inputs' shape {train['x'].shape[1:]}")
    kinds = {("regression" if h["y"].dtype.kind == "f" else "classification") for h in (train, eval_)}
    need(len(kinds) == 1, "task.eval", f"{' and '.join(sorted(kinds))} labels",
         "the same kind of y as the training file (both integer or both float)")
    need(train["y"].shape[1:] == eval_["y"].shape[1:], "task.eval", f"y of shape {eval_['y'].shape}",
         f"targets shaped like the training file's {train['y'].shape[1:]}")
    return kinds.pop()


def read(path: str) -> dict[str, np.ndarray]:
    """x and y, memory-mapped from a folder of .npy files or read from an .npz."""
    p = Path(path)
    if p.is_dir():
        return {k: np.load(p / f"{k}.npy", mmap_mode="r") for k in KEYS}
    with np.load(p) as data:
        return {k: data[k] for k in KEYS}


def check_values(arrays: dict[str, np.ndarray], key: str, num_classes: int | None) -> None:
    """No NaN or infinite inputs or targets, labels within range (ConfigError naming `key`)."""
    for name in KEYS:
        a = arrays[name]
        if a.dtype.kind == "f":
            bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
            need(bad == 0, key, f"{bad} NaN or infinite values in {name}", f"finite {name}")
    if num_classes is not None:
        y = arrays["y"]
        low, high = int(y.min()), int(y.max())
        need(low >= 0 and high < num_classes, key, f"labels from {low} to {high}",
             f"labels in 0 .. {num_classes - 1} (task.num_classes={num_classes})")


@functools.lru_cache(maxsize=4)
def load(train: str, eval_: str, num_classes: int | None
         ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    """(train, eval, outputs): x float32 and y int32 (or float32 targets), after every check."""
    kind = check_headers(headers(train, "task.train"), headers(eval_, "task.eval"))
    raw = {"task.train": read(train), "task.eval": read(eval_)}
    if kind == "classification" and num_classes is None:
        num_classes = max(int(a["y"].max()) for a in raw.values()) + 1
        need(num_classes >= 2, "task.num_classes", None,
             "at least two classes (the largest label in the files is 0)")
    for key, arrays in raw.items():
        check_values(arrays, key, num_classes if kind == "classification" else None)
    label_type = np.int32 if kind == "classification" else np.float32
    cast = lambda a: read_only({"x": np.asarray(a["x"], np.float32),
                                "y": np.asarray(a["y"], label_type)})
    y_shape = raw["task.train"]["y"].shape
    outputs = num_classes if kind == "classification" else (y_shape[1] if len(y_shape) == 2 else 1)
    return cast(raw["task.train"]), cast(raw["task.eval"]), outputs


class Arrays(ClassifierTask):
    """Classification (cross entropy, accuracy) or regression (squared error) on the user's
    arrays, with an MLP, CNN, ResNet or an outside flax module."""

    name: ClassVar[str] = "arrays"
    Options: ClassVar[type] = ArraysOptions
    models: ClassVar[tuple[str, ...]] = ("default", "mlp", "cnn", "resnet")
    regression_metrics: ClassVar[tuple[str, ...]] = ("train_loss", "eval_loss")

    @classmethod
    def kind(cls, options: ArraysOptions) -> str:
        return check_headers(headers(options.train, "task.train"), headers(options.eval, "task.eval"))

    @classmethod
    def validate(cls, cfg: Any) -> None:
        super().validate(cfg)
        o = cfg.task.options
        train = headers(o.train, "task.train")
        kind = check_headers(train, headers(o.eval, "task.eval"))
        need(o.num_classes is None or (kind == "classification" and o.num_classes >= 2),
             "task.num_classes", o.num_classes,
             "null for float targets (regression)" if kind == "regression" else "an integer >= 2")
        cls.check_augmentation(cfg, train["x"].shape[1:])

    @classmethod
    def metric_names(cls, options: ArraysOptions) -> tuple[str, ...]:
        return cls.regression_metrics if cls.kind(options) == "regression" else cls.metrics

    @classmethod
    def num_train_examples(cls, options: ArraysOptions) -> int:
        return headers(options.train, "task.train")["x"].shape[0]

    def load(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        o = self.options
        train, eval_, self.num_classes = load(o.train, o.eval, o.num_classes)
        self.regression = train["y"].dtype.kind == "f"
        if self.regression:
            self.metrics = self.regression_metrics
        return train, eval_

    def per_example_loss(self, params: Params, batch: Batch) -> jax.Array:
        if not self.regression:
            return super().per_example_loss(params, batch)
        error = self.net.apply({"params": params}, batch["x"]) - self.targets(batch["y"])
        return 0.5 * jnp.sum(jnp.square(error), axis=-1)

    def evaluate(self, params: Params, eval_data: Batch) -> dict[str, jax.Array]:
        if not self.regression:
            return super().evaluate(params, eval_data)
        return {"eval_loss": jnp.mean(self.per_example_loss(params, eval_data))}

    @staticmethod
    def targets(y: jax.Array) -> jax.Array:
        return y[:, None] if y.ndim == 1 else y

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {**super().describe(), "kind": "regression" if self.regression else "classification",
                "files": {"train": str(Path(o.train).resolve()), "eval": str(Path(o.eval).resolve())},
                "files_sha256": {"train": file_sha256(o.train), "eval": file_sha256(o.eval)}}
