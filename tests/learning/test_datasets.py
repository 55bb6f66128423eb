"""Dataset loading: IDX parsing, the registry, the digits adaptation, clear errors."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np
import pytest

from mcfl_chain.learning import datasets
from mcfl_chain.learning.datasets import (
    MNIST_MD5,
    DatasetError,
    available_datasets,
    load_dataset,
    packaged_directories,
    read_idx,
    release_datasets,
)


def _write_idx(path: Path, array: np.ndarray, compress: bool) -> None:
    codes = {np.dtype(np.uint8): 0x08}
    header = bytes([0, 0, codes[array.dtype], array.ndim])
    header += b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    data = header + array.tobytes()
    if compress:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)


def _fake_mnist(directory: Path, n_train: int, n_test: int, compress: bool) -> None:
    rng = np.random.default_rng(0)
    suffix = ".gz" if compress else ""
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        _write_idx(directory / f"{prefix}-images-idx3-ubyte{suffix}", images, compress)
        _write_idx(directory / f"{prefix}-labels-idx1-ubyte{suffix}", labels, compress)


def test_registry_names() -> None:
    assert available_datasets() == ["digits", "fashion-mnist", "mnist"]


@pytest.mark.parametrize("compress", [True, False])
def test_read_idx_round_trip(tmp_path: Path, compress: bool) -> None:
    # Prepare
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    path = tmp_path / ("a.idx.gz" if compress else "a.idx")
    _write_idx(path, array, compress)
    # Execute
    read = read_idx(path)
    # Assert
    np.testing.assert_array_equal(read, array)


def test_read_idx_rejects_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.idx"
    _write_idx(path, np.zeros((4, 4), dtype=np.uint8), compress=False)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(DatasetError, match="truncated"):
        read_idx(path)


def test_mnist_from_a_user_directory_merges_train_then_test(tmp_path: Path) -> None:
    # Prepare: a tiny MNIST in torchvision's layout, uncompressed.
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    _fake_mnist(raw, n_train=30, n_test=7, compress=False)
    # Execute
    dataset = load_dataset("mnist", tmp_path)
    # Assert
    assert dataset.images.shape == (37, 1, 28, 28)
    assert dataset.images.dtype == np.float32 and dataset.labels.dtype == np.int64
    assert 0.0 <= dataset.images.min() and dataset.images.max() <= 1.0
    assert dataset.official_train_size == 30
    np.testing.assert_array_equal(dataset.labels[:12], np.arange(12) % 10)
    np.testing.assert_array_equal(dataset.labels[30:], np.arange(7) % 10)
    assert not dataset.images.flags.writeable


def test_a_decoded_dataset_is_kept_mapped_and_redone_when_its_files_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Arrange: a user cache of this test's own and a small MNIST
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _fake_mnist(tmp_path, n_train=12, n_test=4, compress=True)
    first = load_dataset("mnist", tmp_path)
    release_datasets()

    # Execute: the next process's load reads the decoded arrays, mapped read-only
    again = load_dataset("mnist", tmp_path)
    release_datasets()
    assert isinstance(again.pixels, np.memmap) and not again.pixels.flags.writeable
    np.testing.assert_array_equal(again.pixels, first.pixels)
    np.testing.assert_array_equal(again.labels, first.labels)
    assert again.official_train_size == first.official_train_size == 12
    assert len(list((tmp_path / "cache" / "mcfl-chain" / "datasets").iterdir())) == 1

    # Assert: other files are decoded anew, not served from the old entry
    _fake_mnist(tmp_path, n_train=20, n_test=4, compress=True)
    changed = load_dataset("mnist", tmp_path)
    release_datasets()
    assert len(changed) == 24 and changed.official_train_size == 20


def test_data_dir_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mnist").mkdir()
    _fake_mnist(tmp_path / "mnist", n_train=11, n_test=3, compress=True)
    monkeypatch.setenv("MCFL_DATA_DIR", str(tmp_path))
    assert len(load_dataset("mnist")) == 14


def test_missing_files_name_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCFL_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(datasets, "PACKAGED", {})  # a machine where `make node` never ran
    with pytest.raises(DatasetError, match="MCFL_DATA_DIR/mnist") as error:
        load_dataset("mnist", tmp_path / "nowhere")
    assert "train-images-idx3-ubyte" in str(error.value)
    assert "make node" in str(error.value)


def test_mnist_is_the_original_files_from_the_npm_package(monkeypatch: pytest.MonkeyPatch) -> None:
    # Arrange: the checkout's copy, which `make node` installs (package.json)
    directory = packaged_directories("mnist")[0]
    assert directory.is_dir(), f"{directory} is missing: run `make node`"
    monkeypatch.delenv("MCFL_DATA_DIR", raising=False)

    # Assert: the four files are MNIST's, to the byte, and load as the merged dataset
    for stem, md5 in MNIST_MD5.items():
        assert hashlib.md5((directory / stem).read_bytes()).hexdigest() == md5, stem
    dataset = load_dataset("mnist")
    assert dataset.images.shape == (70000, 1, 28, 28)
    assert dataset.official_train_size == 60000
    assert dataset.pixels.dtype == np.uint8 and dataset.num_classes == 10


def test_unknown_dataset_lists_known_ones() -> None:
    with pytest.raises(DatasetError, match="digits, fashion-mnist, mnist"):
        load_dataset("cifar")


def test_digits_are_upscaled_and_centred_to_28x28() -> None:
    dataset = load_dataset("digits")
    assert dataset.images.shape == (1797, 1, 28, 28)
    assert dataset.num_classes == 10 and dataset.official_train_size is None
    # 2-pixel zero border around the 24×24 upscaled digit.
    assert dataset.images[:, :, :2, :].max() == 0.0
    assert dataset.images[:, :, 26:, :].max() == 0.0
    assert dataset.images.max() == 1.0
    # Each original pixel became a 3×3 block.
    first = dataset.images[0, 0, 2:26, 2:26]
    np.testing.assert_array_equal(first[0:3, 0:3], np.full((3, 3), first[0, 0]))


def test_fashion_mnist_from_the_debian_package() -> None:
    dataset = load_dataset("fashion-mnist")
    assert dataset.images.shape == (70000, 1, 28, 28)
    assert dataset.official_train_size == 60000
    np.testing.assert_array_equal(np.bincount(dataset.labels), np.full(10, 7000))
    assert dataset.class_names[9] == "Ankle boot"
    # kept as bytes; a trainer's samples are converted alone, to the same floats
    assert dataset.pixels.dtype == np.uint8 and not dataset.pixels.flags.writeable
    some = np.random.default_rng(0).permutation(70000)[:1500]
    taken = dataset.take(some)
    assert taken.dtype == np.float32 and taken.shape == (1500, 1, 28, 28)
    expected = dataset.pixels[some].astype(np.float64) / 255.0
    np.testing.assert_array_equal(taken, expected.astype(np.float32))
    np.testing.assert_array_equal(taken, dataset.images[some])
    # a byte looked up in its table is that same float: every byte value checked
    table = dataset.byte_values()
    assert table is not None and table.dtype == np.float32
    np.testing.assert_array_equal(table[dataset.pixels[some]], taken)
    np.testing.assert_array_equal(table, (np.arange(256) / 255.0).astype(np.float32))


def test_release_datasets_drops_the_cache():
    from mcfl_chain.learning.datasets import load_dataset, release_datasets

    first = load_dataset("digits")
    assert load_dataset("digits") is first
    release_datasets()
    assert load_dataset("digits") is not first
