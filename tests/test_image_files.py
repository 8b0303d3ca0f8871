"""The image-file readers and the verified download, on tiny fixtures in the real formats.

Each fixture is written byte by byte as its data set lays it out (gzip IDX, CIFAR-10 binary
records with channel-major planes, SVHN's MATLAB X (32, 32, 3, N) with label 10 for digit 0),
so the loaders are checked against known arrays. Downloads come from file:// URLs: no network.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import logging
import re
import struct
import tarfile
from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat

from scaling.errors import ConfigError
from scaling.tasks import image_files, storage
from scaling.tasks.image_files import DATASETS, ensure_files, files_sha256, load

NUM_TRAIN, NUM_TEST = 20, 10
IDX_FILES = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]


@pytest.fixture(autouse=True)
def fresh_cache():
    image_files.read_folder.cache_clear()
    yield
    image_files.read_folder.cache_clear()


def images(n: int, shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, *shape), dtype=np.uint8)


def labels(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.arange(n) % 10).astype(np.uint8)


def write_idx(path: Path, array: np.ndarray, magic: int | None = None) -> None:
    """Big-endian magic (0x801 labels, 0x803 images), one uint32 per dim, then the bytes."""
    magic = magic if magic is not None else 0x800 + array.ndim
    header = struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.tobytes())


def cifar_bytes(x: np.ndarray, y: np.ndarray) -> bytes:
    """Per record: the label byte, then the whole R plane, G plane and B plane, each row-major."""
    return b"".join(bytes([int(label)]) + b"".join(image[:, :, c].tobytes() for c in range(3))
                    for image, label in zip(x, y))


def write_fixtures(name: str, folder: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The data set's files in `folder`; the (x uint8 NHWC, y) each split should load as."""
    folder.mkdir(parents=True, exist_ok=True)
    shape = DATASETS[name].shape
    parts = {"train": (images(NUM_TRAIN, shape, 1), labels(NUM_TRAIN, 2)),
             "test": (images(NUM_TEST, shape, 3), labels(NUM_TEST, 4))}
    if name in ("mnist", "fashion_mnist"):
        for prefix, (x, y) in zip(("train", "t10k"), parts.values()):
            write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", x[..., 0])
            write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", y)
    elif name == "cifar10":
        x, y = parts["train"]
        for i in range(5):  # four records per training batch
            (folder / f"data_batch_{i + 1}.bin").write_bytes(
                cifar_bytes(x[4 * i:4 * i + 4], y[4 * i:4 * i + 4]))
        (folder / "test_batch.bin").write_bytes(cifar_bytes(*parts["test"]))
    else:
        for part, (x, y) in parts.items():
            savemat(folder / f"{part}_32x32.mat", {
                "X": x.transpose(1, 2, 3, 0), "y": np.where(y == 0, 10, y)[:, None]})
    return parts


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_table_names_the_distributed_files_and_real_digests():
    idx = (IDX_FILES[:2], IDX_FILES[2:])
    expected = {
        "mnist": idx, "fashion_mnist": idx,
        "cifar10": ([f"data_batch_{i}.bin" for i in range(1, 6)], ["test_batch.bin"]),
        "svhn": (["train_32x32.mat"], ["test_32x32.mat"]),
    }
    assert list(DATASETS) == list(expected)
    for name, (train, test) in expected.items():
        dataset = DATASETS[name]
        assert dataset.name == dataset.subfolder == name
        assert (list(dataset.train_files), list(dataset.test_files)) == (train, test)
        assert dataset.num_classes == 10
        for url, filename, digest in dataset.downloads:
            assert url.endswith("/" + filename)
            assert re.fullmatch(r"[0-9a-f]{64}", digest), (name, filename)
    assert [(d.num_train, d.num_test) for d in DATASETS.values()] == [
        (60000, 10000), (60000, 10000), (50000, 10000), (73257, 26032)]
    assert [f for _, f, _ in DATASETS["mnist"].downloads] == IDX_FILES
    assert DATASETS["cifar10"].downloads[0][0] == (
        "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz")


@pytest.mark.parametrize("name", list(DATASETS))
def test_load_returns_the_known_arrays(name, tmp_path, caplog):
    parts = write_fixtures(name, tmp_path / name)
    with caplog.at_level(logging.DEBUG, logger=image_files.__name__):
        train, test = load(name, tmp_path, download=False)
    assert "not the canonical" in caplog.text  # tiny fixtures load; the difference is logged
    for got, (x, y) in zip((train, test), parts.values()):
        expected_x = x.astype(np.float32) / np.float32(255)
        assert got["x"].dtype == np.float32 and got["y"].dtype == np.int32
        assert got["x"].shape == (len(x), *DATASETS[name].shape)
        np.testing.assert_array_equal(got["x"], expected_x)
        np.testing.assert_array_equal(got["y"], y)
        assert not got["x"].flags.writeable and not got["y"].flags.writeable
    assert load(name, tmp_path, download=False)[0] is train  # cached per (name, folder)


def test_cifar_planes_become_the_channels_of_each_pixel(tmp_path):
    planes = np.arange(3 * 32 * 32, dtype=np.int64).reshape(3, 32, 32) % 251
    path = tmp_path / "b.bin"
    path.write_bytes(bytes([7]) + planes.astype(np.uint8).tobytes())
    x, y = image_files.read_cifar_bin(path)
    assert x.shape == (1, 32, 32, 3) and list(y) == [7]
    for row, col in [(0, 0), (0, 1), (1, 0), (31, 30)]:
        assert list(x[0, row, col]) == [planes[c, row, col] for c in range(3)]


def test_svhn_label_10_is_digit_0_and_images_move_the_count_first(tmp_path):
    raw = images(3, (32, 32, 3), 5).transpose(1, 2, 3, 0)  # the file's (32, 32, 3, N)
    savemat(tmp_path / "s.mat", {"X": raw, "y": np.array([[10], [1], [9]], np.uint8)})
    x, y = image_files.read_svhn_mat(tmp_path / "s.mat")
    assert list(y) == [0, 1, 9]
    assert x.shape == (3, 32, 32, 3)
    np.testing.assert_array_equal(x[2], raw[:, :, :, 2])


def corrupt_case(case: str, tmp_path: Path) -> tuple[str, Path]:
    """Write a valid data set, spoil one file; (data set name, the file the error must name)."""
    name = "cifar10" if case.startswith("cifar") else "svhn" if case.startswith("svhn") else "mnist"
    folder = tmp_path / name
    parts = write_fixtures(name, folder)
    x, y = parts["train"]
    if case == "bad magic":
        path = folder / IDX_FILES[0]
        write_idx(path, x[..., 0], magic=0x804)
    elif case == "truncated idx":
        path = folder / IDX_FILES[0]
        data = gzip.decompress(path.read_bytes())
        path.write_bytes(gzip.compress(data[:-100]))
    elif case == "not gzip":
        path = folder / IDX_FILES[1]
        path.write_bytes(b"\x00\x00\x08\x01 plain bytes")
    elif case == "idx label out of range":
        path = folder / IDX_FILES[1]
        write_idx(path, np.where(y == 3, 10, y).astype(np.uint8))
    elif case == "idx count mismatch":
        path = folder / IDX_FILES[1]
        write_idx(path, y[:-1])
    elif case == "cifar length":
        path = folder / "data_batch_3.bin"
        path.write_bytes(path.read_bytes()[:-1])
    elif case == "cifar label out of range":
        path = folder / "test_batch.bin"
        data = bytearray(path.read_bytes())
        data[0] = 11
        path.write_bytes(bytes(data))
    elif case == "svhn label out of range":
        path = folder / "train_32x32.mat"
        savemat(path, {"X": x.transpose(1, 2, 3, 0), "y": np.full((len(y), 1), 11, np.uint8)})
    else:  # svhn count mismatch
        path = folder / "train_32x32.mat"
        savemat(path, {"X": x.transpose(1, 2, 3, 0), "y": (y[:-1] + 1)[:, None]})
    return name, path


@pytest.mark.parametrize("case", [
    "bad magic", "truncated idx", "not gzip", "idx label out of range", "idx count mismatch",
    "cifar length", "cifar label out of range", "svhn label out of range",
    "svhn count mismatch"])
def test_a_damaged_file_is_refused_by_name(case, tmp_path):
    name, path = corrupt_case(case, tmp_path)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        load(name, tmp_path, download=False)


def test_missing_files_without_download_name_the_folder_files_and_urls(tmp_path):
    folder = tmp_path / "mnist"
    write_fixtures("mnist", folder)
    (folder / IDX_FILES[3]).unlink()
    with pytest.raises(FileNotFoundError) as info:
        load("mnist", tmp_path, download=False)
    message = str(info.value)
    assert str(folder) in message and IDX_FILES[3] in message and "SCALING_DATA" in message
    assert DATASETS["mnist"].downloads[3][0] in message
    assert IDX_FILES[0] not in message  # only what is missing


def serve(dataset_name: str, source: Path) -> image_files.ImageDataset:
    """The data set with its downloads pointed at file:// copies of the fixtures in source."""
    canonical = DATASETS[dataset_name]
    return dataclasses.replace(canonical, downloads=tuple(
        (f"{source.as_uri()}/{filename}", filename, sha256(source / filename))
        for _, filename, _ in canonical.downloads))


@pytest.mark.parametrize("name", ["fashion_mnist", "svhn"])
def test_download_verifies_and_places_each_file(name, tmp_path, caplog):
    parts = write_fixtures(name, tmp_path / "source")
    root = tmp_path / "data"
    with caplog.at_level(logging.INFO, logger=image_files.__name__):
        folder = ensure_files(serve(name, tmp_path / "source"), root)
    assert folder == root / name
    assert sorted(p.name for p in folder.iterdir()) == sorted(DATASETS[name].files)
    assert sum("downloaded" in r.getMessage() for r in caplog.records) == len(
        DATASETS[name].downloads)
    np.testing.assert_array_equal(load(name, root, download=False)[1]["y"], parts["test"][1])
    for path in (tmp_path / "source").iterdir():  # present files are never fetched again
        path.unlink()
    assert ensure_files(serve_absent(name, tmp_path), root) == folder


def test_cifar_archive_is_verified_extracted_safely_and_removed(tmp_path):
    source = tmp_path / "source"
    parts = write_fixtures("cifar10", source / "cifar-10-batches-bin")
    (source / "cifar-10-batches-bin" / "batches.meta.txt").write_text("airplane\n")
    with tarfile.open(source / "cifar-10-binary.tar.gz", "w:gz") as tar:
        tar.add(source / "cifar-10-batches-bin", arcname="cifar-10-batches-bin")
        evil = tarfile.TarInfo("../escaped.bin")
        evil.size = 3
        tar.addfile(evil, io.BytesIO(b"bad"))
    root = tmp_path / "data"
    folder = ensure_files(serve("cifar10", source), root)
    assert sorted(p.name for p in folder.iterdir()) == sorted(DATASETS["cifar10"].files)
    assert not (root / "escaped.bin").exists() and not (tmp_path / "escaped.bin").exists()
    train, _ = load("cifar10", root, download=False)
    np.testing.assert_array_equal(train["x"], parts["train"][0] / np.float32(255))


def test_a_wrong_digest_leaves_no_file_under_the_final_name(tmp_path):
    write_fixtures("svhn", tmp_path / "source")
    dataset = serve("svhn", tmp_path / "source")
    url, filename, real = dataset.downloads[0]
    bad = dataclasses.replace(dataset, downloads=((url, filename, "0" * 64),))
    with pytest.raises(ValueError, match=f"{filename}.*{'0' * 64}.*{real}"):
        ensure_files(bad, tmp_path / "data")
    assert list((tmp_path / "data" / "svhn").iterdir()) == []  # no temporary file left either


def serve_absent(name: str, tmp_path: Path) -> image_files.ImageDataset:
    """The data set with downloads from a folder that does not exist: a server out of reach."""
    absent = (tmp_path / "absent").as_uri()
    return dataclasses.replace(DATASETS[name], downloads=tuple(
        (f"{absent}/{f}", f, d) for _, f, d in DATASETS[name].downloads))


def test_a_failed_download_says_where_to_put_the_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="SCALING_DATA") as info:
        ensure_files(serve_absent("svhn", tmp_path), tmp_path / "data")
    assert str(tmp_path / "data" / "svhn") in str(info.value)
    assert "train_32x32.mat" in str(info.value)
    assert list((tmp_path / "data" / "svhn").iterdir()) == []


def test_a_download_cut_off_midway_leaves_no_file(tmp_path, monkeypatch):
    class CutOff(io.BytesIO):
        def read(self, size=-1):
            if self.tell():
                raise ConnectionResetError("connection reset by peer")
            return super().read(1000)

    monkeypatch.setattr(image_files.urllib.request, "urlopen",
                        lambda url, timeout: CutOff(bytes(5000)))
    with pytest.raises(FileNotFoundError, match="connection reset"):
        ensure_files(DATASETS["mnist"], tmp_path)
    assert list((tmp_path / "mnist").iterdir()) == []


def test_scaling_data_and_xdg_cache_choose_the_folder(tmp_path, monkeypatch):
    parts = write_fixtures("mnist", tmp_path / "env" / "mnist")
    monkeypatch.setenv("SCALING_DATA", str(tmp_path / "env"))
    assert storage.data_dir() == tmp_path / "env"
    np.testing.assert_array_equal(load("mnist", download=False)[0]["y"], parts["train"][1])
    monkeypatch.delenv("SCALING_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert storage.data_dir() == tmp_path / "xdg" / "scaling"


def test_files_sha256_names_each_data_file(tmp_path):
    write_fixtures("cifar10", tmp_path / "cifar10")
    digests = files_sha256(DATASETS["cifar10"], tmp_path)
    assert list(digests) == list(DATASETS["cifar10"].files)
    assert digests["test_batch.bin"] == sha256(tmp_path / "cifar10" / "test_batch.bin")


def test_an_unknown_data_set_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="mnist"):
        load("imagenet", tmp_path, download=False)
