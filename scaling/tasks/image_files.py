"""MNIST, Fashion-MNIST, CIFAR-10 and SVHN read from the files their authors distribute.

The readers parse the published formats directly (gzip IDX, CIFAR-10 binary records, SVHN's
MATLAB files), so no framework or converted copy sits between a run and the bytes it trained
on. A missing file is downloaded to a temporary name and renamed only once its sha256 matches
the published digest, so a killed or corrupted download never passes for data; files_sha256
lets run records name the exact files used. Files live in data_dir()/<subfolder>.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import logging
import struct
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from scaling.errors import need
from scaling.tasks.storage import data_dir, file_sha256, read_only, write_atomically

log = logging.getLogger(__name__)

IDX_MAGIC = {0x801: 1, 0x803: 3}  # uint8 labels (N,) and uint8 images (N, H, W)
CIFAR_RECORD = 1 + 3 * 32 * 32  # one label byte, then the R, G and B planes, each row-major


@dataclass(frozen=True)
class ImageDataset:
    """A data set's files and their format ("idx", "cifar_bin" or "svhn_mat"), image shape,
    counts, and canonical downloads as (url, filename, sha256); archive_folder is the folder
    holding the data files inside an archive download ("" when the files come one by one)."""

    name: str
    subfolder: str
    format: str
    train_files: tuple[str, ...]
    test_files: tuple[str, ...]
    shape: tuple[int, int, int]  # (H, W, C)
    num_train: int
    num_test: int
    downloads: tuple[tuple[str, str, str], ...]
    num_classes: int = 10
    archive_folder: str = ""

    @property
    def files(self) -> tuple[str, ...]:
        return self.train_files + self.test_files


IDX_TRAIN = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")
IDX_TEST = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _idx_dataset(name: str, base_url: str, digests: tuple[str, ...]) -> ImageDataset:
    """MNIST's layout, shared by Fashion-MNIST; digests in the order of IDX_TRAIN + IDX_TEST."""
    return ImageDataset(name, name, "idx", IDX_TRAIN, IDX_TEST, (28, 28, 1), 60000, 10000,
                        tuple((base_url + f, f, d) for f, d in zip(IDX_TRAIN + IDX_TEST, digests)))


# Published digests, as tensorflow/datasets records them in tensorflow_datasets/url_checksums/
# mnist.txt, fashion_mnist.txt, cifar10.txt and svhn_cropped.txt.
DATASETS: dict[str, ImageDataset] = {
    "mnist": _idx_dataset("mnist", "https://storage.googleapis.com/cvdf-datasets/mnist/", (
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6")),
    "fashion_mnist": _idx_dataset(
        "fashion_mnist", "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/", (
            "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
            "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
            "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
            "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5")),
    "cifar10": ImageDataset(
        "cifar10", "cifar10", "cifar_bin", tuple(f"data_batch_{i}.bin" for i in range(1, 6)),
        ("test_batch.bin",), (32, 32, 3), 50000, 10000,
        (("https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz", "cifar-10-binary.tar.gz",
          "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd"),),
        archive_folder="cifar-10-batches-bin"),
    "svhn": ImageDataset(
        "svhn", "svhn", "svhn_mat", ("train_32x32.mat",), ("test_32x32.mat",), (32, 32, 3),
        73257, 26032,
        (("http://ufldl.stanford.edu/housenumbers/train_32x32.mat", "train_32x32.mat",
          "435e94d69a87fde4fd4d7f3dd208dfc32cb6ae8af2240d066de1df7508d083b8"),
         ("http://ufldl.stanford.edu/housenumbers/test_32x32.mat", "test_32x32.mat",
          "cdce80dfb2a2c4c6160906d0bd7c68ec5a99d7ca4831afa54f09182025b6a75b"))),
}


def read_idx(path: Path) -> np.ndarray:
    """A gzip IDX file of uint8 as its (N,) or (N, H, W) array, its header checked against
    the byte count so a truncated download cannot load as fewer images."""
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise ValueError(f"{path}: not a readable gzip file ({e})") from e
    magic = int.from_bytes(data[:4], "big")
    if magic not in IDX_MAGIC:
        raise ValueError(f"{path}: magic {magic:#010x} is not an IDX uint8 file (0x00000801 "
                         "labels or 0x00000803 images)")
    header = 4 + 4 * IDX_MAGIC[magic]
    if len(data) < header:
        raise ValueError(f"{path}: {len(data)} bytes, shorter than its {header}-byte header")
    dims = struct.unpack(f">{IDX_MAGIC[magic]}I", data[4:header])
    if len(data) != header + int(np.prod(dims)):
        raise ValueError(f"{path}: header says shape {dims} ({int(np.prod(dims))} bytes of "
                         f"data) but the file holds {len(data) - header}")
    return np.frombuffer(data, np.uint8, offset=header).reshape(dims)


def read_cifar_bin(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A CIFAR-10 binary batch as images uint8 (N, 32, 32, 3) and labels uint8 (N,)."""
    data = np.fromfile(path, np.uint8)
    if data.size % CIFAR_RECORD:
        raise ValueError(f"{path}: {data.size} bytes is not a whole number of "
                         f"{CIFAR_RECORD}-byte records")
    records = data.reshape(-1, CIFAR_RECORD)
    return records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), records[:, 0]


def read_svhn_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """SVHN's cropped digits as images uint8 (N, 32, 32, 3) and labels int64 (N,), where the
    file's label 10 (its name for digit 0) becomes 0."""
    from scipy.io import loadmat  # ~0.3 s to import; only when used

    try:
        mat = loadmat(path)
    except Exception as e:  # scipy raises several unrelated types for a damaged file
        raise ValueError(f"{path}: not a readable MATLAB file ({e})") from e
    x, y = mat.get("X"), mat.get("y")
    if x is None or y is None or x.dtype != np.uint8 or x.ndim != 4 or x.shape[:3] != (32, 32, 3):
        raise ValueError(f"{path}: expected X uint8 (32, 32, 3, N) and y, got "
                         f"{None if x is None else (x.dtype, x.shape)} and {type(y).__name__}")
    y = y.reshape(-1).astype(np.int64)
    if y.size and (y.min() < 1 or y.max() > 10):
        raise ValueError(f"{path}: labels span {y.min()}..{y.max()}, expected 1..10")
    return x.transpose(3, 0, 1, 2), np.where(y == 10, 0, y)


def _read_part(dataset: ImageDataset, paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    """Images uint8 (N, H, W, C) and labels of one split, by the data set's file format."""
    if dataset.format == "idx":  # an images file, then a labels file
        return read_idx(paths[0])[..., None], read_idx(paths[1])
    if dataset.format == "svhn_mat":
        return read_svhn_mat(paths[0])
    parts = [read_cifar_bin(p) for p in paths]
    return np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts])


def _load_part(dataset: ImageDataset, folder: Path, part: str) -> dict[str, np.ndarray]:
    """One split as x float32 in [0, 1] and y int32, its shape, counts and labels checked."""
    files = dataset.train_files if part == "train" else dataset.test_files
    x, y = _read_part(dataset, [folder / f for f in files])
    where = f"{dataset.name} {part} ({', '.join(str(folder / f) for f in files)})"
    if x.ndim != 4 or x.shape[1:] != dataset.shape:
        raise ValueError(f"{where}: images of shape {x.shape[1:]}, expected {dataset.shape}")
    if y.shape != (len(x),):
        raise ValueError(f"{where}: {len(x)} images but labels of shape {y.shape}")
    if y.size and (y.min() < 0 or y.max() >= dataset.num_classes):
        raise ValueError(f"{where}: labels span {y.min()}..{y.max()}, expected "
                         f"0..{dataset.num_classes - 1}")
    expected = dataset.num_train if part == "train" else dataset.num_test
    if len(x) != expected:
        log.debug("%s: %d examples, not the canonical %d", where, len(x), expected)
    return {"x": x.astype(np.float32) / np.float32(255), "y": y.astype(np.int32)}


@functools.lru_cache(maxsize=4)
def read_folder(name: str, folder: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(train, test) of data set `name` from `folder`, read once per process (read-only)."""
    dataset = DATASETS[name]
    return (read_only(_load_part(dataset, folder, "train")),
            read_only(_load_part(dataset, folder, "test")))


def load(name: str, root: Path | None = None, download: bool = True,
         ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(train, test) dicts of x float32 (N, H, W, C) in [0, 1] and y int32 from
    root/<subfolder> (root defaults to data_dir()), fetching missing files if `download`."""
    need(name in DATASETS, "task.name", name, f"one of {', '.join(DATASETS)}")
    return read_folder(name, ensure_files(DATASETS[name], root, download))


def _copy_into_place(source: BinaryIO, dest: Path, sha256: str | None = None) -> int:
    """Copy to dest atomically (renamed into place only when complete and, if `sha256` is
    given, matching it), so an interrupted or corrupt copy never sits under the final name;
    the size."""
    def copy(out: BinaryIO) -> int:
        digest, size = hashlib.sha256(), 0
        while chunk := source.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
        if sha256 is not None and digest.hexdigest() != sha256:
            raise ValueError(f"{dest}: sha256 mismatch, expected {sha256}, got "
                             f"{digest.hexdigest()}; the download was deleted")
        return size

    return write_atomically(dest, copy)


def _extract(dataset: ImageDataset, archive: Path) -> None:
    """Copy just the data files out of the archive, then delete it. Destinations are the
    data set's own file names, never the archive's, so no member can write elsewhere."""
    with tarfile.open(archive, "r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        for name in dataset.files:
            member = f"{dataset.archive_folder}/{name}"
            info = members.get(member)
            if info is None or not info.isfile():
                raise ValueError(f"{archive}: no regular file {member} in the archive")
            _copy_into_place(tar.extractfile(info), archive.parent / name)
    archive.unlink()


def _missing(dataset: ImageDataset, folder: Path, missing: list[str], why: str,
             ) -> FileNotFoundError:
    """The error for absent files: which, where they go, where they come from, and why."""
    urls = ", ".join(url for url, f, _ in dataset.downloads  # an archive holds several
                     if f in missing or f not in dataset.files)
    inside = f" (the files in its {dataset.archive_folder}/)" if dataset.archive_folder else ""
    return FileNotFoundError(
        f"{dataset.name}: {', '.join(missing)} not found in {folder}. Put them there from "
        f"{urls}{inside}, or set SCALING_DATA to a folder whose {dataset.subfolder}/ holds "
        f"them; {why}")


def ensure_files(dataset: ImageDataset, root: Path | None = None, download: bool = True) -> Path:
    """root/<subfolder> holding every data file, downloading and verifying missing ones when
    `download`; pass a dataclasses.replace'd dataset to fetch from other URLs (a mirror)."""
    folder = Path(root if root is not None else data_dir()) / dataset.subfolder
    missing = [f for f in dataset.files if not (folder / f).is_file()]
    if not missing:
        return folder
    if not download:
        raise _missing(dataset, folder, missing, "download=False, so nothing was fetched")
    folder.mkdir(parents=True, exist_ok=True)
    for url, filename, sha256 in dataset.downloads:
        dest = folder / filename
        if filename in dataset.files and dest.is_file():
            continue
        if not dest.is_file():  # an archive kept by an interrupted extraction was verified
            log.info("downloading %s to %s", url, folder)
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    size = _copy_into_place(response, dest, sha256)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                raise _missing(dataset, folder, missing, f"downloading {url} failed: {e}") from e
            log.info("downloaded %s (%d bytes) from %s", dest, size, url)
        if dataset.archive_folder:
            _extract(dataset, dest)
    return folder


def files_sha256(dataset: ImageDataset, root: Path | None = None) -> dict[str, str]:
    """sha256 of each data file under root/<subfolder>, for the run records."""
    folder = Path(root if root is not None else data_dir()) / dataset.subfolder
    return {name: file_sha256(folder / name) for name in dataset.files}
