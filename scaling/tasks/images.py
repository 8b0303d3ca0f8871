"""The image workloads of the batch-size papers: MNIST, Fashion-MNIST, CIFAR-10 and SVHN.

Data come from the files their authors distribute (scaling.tasks.image_files), under
task.data_dir or $SCALING_DATA; missing files are downloaded and checked by sha256 when the
network is reachable. Default models follow Shallue et al. 2018: the simple CNN for MNIST and
Fashion-MNIST, a CIFAR ResNet (model.depth, 20 by default; 8 in their CIFAR-10 workload) for
CIFAR-10 and SVHN, with group norm unless model.norm says otherwise (docs/tasks.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import flax.linen as nn
import numpy as np

from scaling.tasks import convnets, image_files
from scaling.tasks.models import ClassifierTask


@dataclass
class ImageOptions:
    """data_dir: the folder holding <subfolder>/ of the data set (default $SCALING_DATA, else the
    user cache); download: fetch missing files; crop_padding, flip: on-device augmentation (a
    random crop of the zero-padded image, a horizontal mirror with probability 1/2)."""

    data_dir: str | None = None
    download: bool = True
    crop_padding: int = 0
    flip: bool = False


class ImageTask(ClassifierTask):
    """One of image_files.DATASETS; subclasses name it and their default model."""

    Options: ClassVar[type] = ImageOptions
    models: ClassVar[tuple[str, ...]] = ("default", "mlp", "cnn", "resnet")
    dataset: ClassVar[str] = ""

    @classmethod
    def validate(cls, cfg: Any) -> None:
        super().validate(cfg)
        cls.check_augmentation(cfg, image_files.DATASETS[cls.dataset].shape)

    @classmethod
    def root(cls, options: ImageOptions) -> Path | None:
        return Path(options.data_dir) if options.data_dir else None

    @classmethod
    def read(cls, options: ImageOptions) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        return image_files.load(cls.dataset, cls.root(options), options.download)

    @classmethod
    def num_train_examples(cls, options: ImageOptions) -> int:
        """The files' count where they are present, else the published one (planning never
        downloads)."""
        dataset = image_files.DATASETS[cls.dataset]
        try:
            image_files.ensure_files(dataset, cls.root(options), download=False)
        except FileNotFoundError:
            return dataset.num_train
        return len(cls.read(options)[0]["y"])

    def load(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        return self.read(self.options)

    def network(self) -> nn.Module:
        if self.model_config.name == "default" and self.default_model == "cnn":
            return convnets.SimpleCNN(num_outputs=self.num_outputs)  # the paper's widths
        return super().network()

    def describe(self) -> dict[str, Any]:
        dataset = image_files.DATASETS[self.dataset]
        return {**super().describe(), "files_sha256": image_files.files_sha256(
            dataset, self.root(self.options))}


class MNIST(ImageTask):
    name: ClassVar[str] = "mnist"
    dataset: ClassVar[str] = "mnist"
    default_model: ClassVar[str] = "cnn"


class FashionMNIST(ImageTask):
    name: ClassVar[str] = "fashion_mnist"
    dataset: ClassVar[str] = "fashion_mnist"
    default_model: ClassVar[str] = "cnn"


class CIFAR10(ImageTask):
    name: ClassVar[str] = "cifar10"
    dataset: ClassVar[str] = "cifar10"
    default_model: ClassVar[str] = "resnet"


class SVHN(ImageTask):
    name: ClassVar[str] = "svhn"
    dataset: ClassVar[str] = "svhn"
    default_model: ClassVar[str] = "resnet"
