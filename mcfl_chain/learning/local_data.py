"""A trainer's own data from files, as the :class:`~mcfl_chain.learning.scenario.TrainerData`
the worker trains on.

Two layouts need no code (``mcfl-chain worker --data PATH``):

- ``FILE.npz`` (NumPy, read without pickle): arrays ``x_train``, ``y_train``, ``x_test``,
  ``y_test`` and optionally ``x_val``, ``y_val``. Without them the validation split
  is empty.
- ``DIR`` of images (PNG or JPEG, read with Pillow), one sub-folder per class named
  after it: either ``DIR/<class>/*.png``, cut into train / validation / test by
  ``split`` with ``seed``, or ``DIR/train/<class>/``, ``DIR/test/<class>/`` and
  optionally ``DIR/val/<class>/`` used as they are.

Class ``i`` is the ``i``-th class name in sorted order, unless ``classes`` lists them:
trainers of one network must agree on it, so give ``classes`` when some trainer lacks
a class. For the built-in architectures (:func:`load_trainer_data`) images become the
LeNet input, float32 N×1×28×28 in [0, 1]: grey-scale, resized to 28×28; NumPy arrays
must already be 28×28 (N×28×28, N×1×28×28, N×28×28×1 or N×784), ``uint8`` in 0..255
or floats in [0, 1]. A task of one's own (:mod:`mcfl_chain.learning.tasks`) can use
:func:`trainer_data_from_arrays` on any feature shape.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from mcfl_chain.learning.scenario import DEFAULT_SPLIT, TrainerData, TrainerDataSpec

LENET_IMAGE = (1, 28, 28)
"""Input shape (channels, height, width) of the built-in architectures."""

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
"""File name endings read as images (any case)."""

_SPLIT_FOLDERS = {"train": ("train",), "val": ("val", "validation"), "test": ("test",)}


class DataError(ValueError):
    """A trainer's data files cannot be used; the message says which file and why."""


def trainer_data_from_arrays(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    x_val: np.ndarray | None = None,
    y_val: np.ndarray | None = None,
    *,
    name: str = "own-data",
    num_classes: int | None = None,
) -> TrainerData:
    """Wrap a trainer's own arrays as :class:`TrainerData` (features float32, labels int64).

    Parameters
    ----------
    x_train, y_train, x_test, y_test
        Features (N×..., any shape after the first axis) and integer labels (N).
    x_val, y_val
        Optional validation split; both or neither.
    name
        Dataset name recorded in the data's spec (for logs and reports).
    num_classes
        Number of classes; by default one more than the largest label.

    Returns
    -------
    TrainerData
        With ``indices`` numbering the samples 0..N-1 in train, validation, test order.

    Raises
    ------
    DataError
        Mismatched lengths, an empty train or test split, non-integer or negative
        labels, labels beyond ``num_classes``, or features of different shapes.
    """
    if (x_val is None) != (y_val is None):
        raise DataError(f"{name}: give both x_val and y_val, or neither")
    empty_x = np.zeros((0, *np.shape(x_train)[1:]), dtype=np.float32)
    splits = {
        "train": (x_train, y_train),
        "val": (x_val, y_val) if x_val is not None else (empty_x, np.zeros(0, np.int64)),
        "test": (x_test, y_test),
    }
    xs: dict[str, np.ndarray] = {}
    ys: dict[str, np.ndarray] = {}
    for split, (x, y) in splits.items():
        x, y = np.asarray(x), np.asarray(y)
        if y.ndim != 1 or x.ndim < 1 or x.shape[0] != y.shape[0]:
            raise DataError(
                f"{name}: x_{split} has shape {x.shape} and y_{split} {y.shape}; "
                f"expected N samples and N labels"
            )
        if y.size and (
            not np.issubdtype(y.dtype, np.integer) and not np.array_equal(y, np.round(y))
        ):
            raise DataError(f"{name}: y_{split} holds non-integer labels; use class indices")
        if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
            raise DataError(f"{name}: x_{split} has dtype {x.dtype}; expected numbers")
        xs[split], ys[split] = x.astype(np.float32, copy=False), y.astype(np.int64)
    if len(ys["train"]) == 0 or len(ys["test"]) == 0:
        raise DataError(
            f"{name}: the train and test splits need at least one sample each "
            f"(train {len(ys['train'])}, test {len(ys['test'])})"
        )
    shapes = {x.shape[1:] for x in xs.values() if len(x)}
    if len(shapes) > 1:
        raise DataError(f"{name}: the splits have different feature shapes {sorted(shapes)}")
    labels = np.concatenate(list(ys.values()))
    if labels.min() < 0:
        raise DataError(f"{name}: labels must be >= 0, found {int(labels.min())}")
    classes = int(labels.max()) + 1 if num_classes is None else num_classes
    if labels.max() >= classes:
        raise DataError(
            f"{name}: label {int(labels.max())} is beyond the {classes} classes declared"
        )

    def tensors(split: str) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(np.ascontiguousarray(xs[split])), torch.from_numpy(ys[split])

    train_x, train_y = tensors("train")
    val_x, val_y = tensors("val")
    test_x, test_y = tensors("test")
    return TrainerData(
        spec=TrainerDataSpec(dataset=name, group="own data"),
        num_classes=classes,
        train_images=train_x,
        train_y=train_y,
        val_images=val_x,
        val_y=val_y,
        test_images=test_x,
        test_y=test_y,
        indices=np.arange(labels.shape[0]),
    )


def lenet_images(x: np.ndarray, what: str = "images") -> np.ndarray:
    """Images in any accepted 28×28 form as the built-in models' input.

    Parameters
    ----------
    x
        N×28×28, N×1×28×28, N×28×28×1 or N×784; ``uint8`` (0..255) or floats in [0, 1].
    what
        Names the array in error messages.

    Returns
    -------
    numpy.ndarray
        float32, N×1×28×28, values in [0, 1].

    Raises
    ------
    DataError
        Another shape, or floats outside [0, 1].
    """
    x = np.asarray(x)
    n = x.shape[0] if x.ndim else 0
    if x.shape[1:] in ((28, 28), (1, 28, 28), (28, 28, 1), (784,)):
        shaped = x.reshape(n, *LENET_IMAGE)
    else:
        raise DataError(
            f"{what} have shape {x.shape}; the built-in architectures take 28×28 grey-scale "
            f"images (N×28×28, N×1×28×28, N×28×28×1 or N×784): resize them, or bring "
            f"your own task (mcfl_chain.learning.tasks)"
        )
    if x.dtype == np.uint8:
        return shaped.astype(np.float32) / 255.0
    values = shaped.astype(np.float32)
    if values.size and (not np.isfinite(values).all() or values.min() < 0 or values.max() > 1):
        raise DataError(
            f"{what} hold values from {values.min():g} to {values.max():g}; float images "
            f"must be in [0, 1] (divide 0..255 values by 255, or store them as uint8)"
        )
    return values


def load_npz(
    path: str | os.PathLike[str], *, lenet: bool = False, num_classes: int | None = None
) -> TrainerData:
    """Read a trainer's data from a ``.npz`` file (see the module docstring).

    Parameters
    ----------
    path
        The file, with arrays ``x_train``, ``y_train``, ``x_test``, ``y_test`` and
        optionally ``x_val``, ``y_val``. Pickled arrays are refused.
    lenet
        Convert the ``x_*`` arrays with :func:`lenet_images` (built-in architectures).
    num_classes
        Passed to :func:`trainer_data_from_arrays`.

    Raises
    ------
    DataError
        The file is missing or not an npz, an array is missing or unusable.
    """
    file = Path(path)
    try:
        with np.load(file, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except FileNotFoundError:
        raise DataError(f"the data file {file} does not exist") from None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise DataError(f"cannot read {file} as a NumPy .npz archive: {exc}") from None
    required = ("x_train", "y_train", "x_test", "y_test")
    missing = [key for key in required if key not in arrays]
    if missing:
        raise DataError(
            f"{file} lacks the array(s) {', '.join(missing)}; it holds "
            f"{', '.join(sorted(arrays)) or 'nothing'} (expected {', '.join(required)}, "
            f"optionally x_val, y_val)"
        )
    if lenet:
        for key in [k for k in arrays if k.startswith("x_")]:
            arrays[key] = lenet_images(arrays[key], f"{file.name}:{key}")
    return trainer_data_from_arrays(
        arrays["x_train"],
        arrays["y_train"],
        arrays["x_test"],
        arrays["y_test"],
        arrays.get("x_val"),
        arrays.get("y_val"),
        name=file.stem,
        num_classes=num_classes,
    )


def _class_folders(root: Path) -> dict[str, list[Path]]:
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    return {
        folder.name: sorted(
            f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES
        )
        for folder in folders
    }


def _read_image(path: Path, size: tuple[int, int], channels: int) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            converted = image.convert("L" if channels == 1 else "RGB")
            resized = converted.resize(size, Image.Resampling.BILINEAR)
            pixels = np.asarray(resized, dtype=np.float32) / 255.0
    except (OSError, UnidentifiedImageError) as exc:
        raise DataError(f"cannot read the image {path}: {exc}") from None
    return pixels[None] if channels == 1 else pixels.transpose(2, 0, 1)


def image_folder_classes(path: str | os.PathLike[str]) -> list[str]:
    """The class names an image folder holds, sorted (see the module docstring)."""
    root = Path(path)
    roots = _split_roots(root)
    names = {name for split_root in roots.values() for name in _class_folders(split_root)}
    return sorted(names)


def _split_roots(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        raise DataError(
            f"the data folder {root} does not exist (or is not a folder); it should "
            f"hold one sub-folder of images per class"
        )
    children = {p.name.lower(): p for p in root.iterdir() if p.is_dir()}
    if "train" in children and "test" in children:
        found = {}
        for split, names in _SPLIT_FOLDERS.items():
            for name in names:
                if name in children:
                    found[split] = children[name]
                    break
        return found
    return {"all": root}


def load_image_folder(
    path: str | os.PathLike[str],
    *,
    image_size: tuple[int, int] = (28, 28),
    channels: int = 1,
    classes: Sequence[str] | None = None,
    split: tuple[float, float, float] = DEFAULT_SPLIT,
    seed: int = 0,
) -> TrainerData:
    """Read a folder of class sub-folders of images (see the module docstring).

    Parameters
    ----------
    path
        ``DIR/<class>/*.png|jpg`` or ``DIR/{train,val,test}/<class>/...``.
    image_size
        (width, height) every image is resized to.
    channels
        1 (grey-scale, ``L``) or 3 (``RGB``); images become float32 C×H×W in [0, 1].
    classes
        All class names of the network, in label order; by default the sorted
        sub-folder names found here.
    split
        Train, validation and test fractions for the single-folder layout.
    seed
        Seed of the shuffle before that split.

    Raises
    ------
    DataError
        No such folder, no image, an unreadable image, or a class folder not in
        ``classes``.
    """
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, got {channels}")
    root = Path(path)
    roots = _split_roots(root)
    names = list(classes) if classes is not None else image_folder_classes(root)
    index = {name: i for i, name in enumerate(names)}
    arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for split_name, split_root in roots.items():
        files: list[Path] = []
        labels: list[int] = []
        for name, images in _class_folders(split_root).items():
            if name not in index:
                raise DataError(
                    f"{split_root / name} is a class folder, but {name!r} is not among the "
                    f"classes {names}"
                )
            files.extend(images)
            labels.extend([index[name]] * len(images))
        shape = (channels, image_size[1], image_size[0])
        x = np.stack([_read_image(f, image_size, channels) for f in files]) if files else None
        arrays[split_name] = (
            x if x is not None else np.zeros((0, *shape), np.float32),
            np.asarray(labels, dtype=np.int64),
        )
    total = sum(len(y) for _, y in arrays.values())
    if total == 0:
        raise DataError(
            f"no image in {root}: expected {root}/<class>/*.png (or .jpg, .jpeg), one "
            f"sub-folder per class"
        )
    if "all" in arrays:
        x, y = arrays.pop("all")
        order = np.random.default_rng(seed).permutation(len(y))
        n_train = round(split[0] * len(y))
        n_val = round(split[1] * len(y))
        cuts = {
            "train": order[:n_train],
            "val": order[n_train : n_train + n_val],
            "test": order[n_train + n_val :],
        }
        arrays = {part: (x[rows], y[rows]) for part, rows in cuts.items()}
    val = arrays.get("val")
    return trainer_data_from_arrays(
        *arrays["train"],
        *arrays["test"],
        *(val if val is not None else (None, None)),
        name=root.name,
        num_classes=len(names),
    )


def load_trainer_data(
    path: str | os.PathLike[str],
    *,
    classes: Sequence[str] | None = None,
    split: tuple[float, float, float] = DEFAULT_SPLIT,
    seed: int = 0,
) -> TrainerData:
    """A trainer's own data for the built-in architectures, from ``FILE.npz`` or ``DIR``.

    This is what ``--data PATH`` reads: an ``.npz`` file through :func:`load_npz`
    (images converted by :func:`lenet_images`), a folder through
    :func:`load_image_folder` (grey-scale, 28×28).

    Raises
    ------
    DataError
        The path does not exist, is neither an ``.npz`` file nor a folder, or its
        content cannot be used (the message names the file and the problem).
    """
    target = Path(path)
    if target.is_dir():
        return load_image_folder(target, classes=classes, split=split, seed=seed)
    if target.suffix.lower() == ".npz" or target.is_file():
        num_classes = len(classes) if classes is not None else None
        return load_npz(target, lenet=True, num_classes=num_classes)
    raise DataError(
        f"the data path {target} does not exist: give an .npz file (x_train, y_train, "
        f"x_test, y_test) or a folder with one sub-folder of images per class"
    )
