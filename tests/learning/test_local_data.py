"""A trainer's own data from an .npz file or an image folder, as TrainerData."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from mcfl_chain.learning.local_data import (
    DataError,
    image_folder_classes,
    lenet_images,
    load_image_folder,
    load_npz,
    load_trainer_data,
    trainer_data_from_arrays,
)


def _images(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, 28, 28), dtype=np.uint8)


def _write_png(path: Path, value: int, size: tuple[int, int] = (28, 28), mode: str = "L") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    colour = value if mode == "L" else (value, value, value)
    Image.new(mode, size, colour).save(path)


def test_npz_with_validation_becomes_lenet_tensors(tmp_path: Path) -> None:
    # Prepare
    file = tmp_path / "clinic.npz"
    x_train, x_val, x_test = _images(6, 1), _images(2, 2), _images(3, 3)
    np.savez(
        file,
        x_train=x_train,
        y_train=np.array([0, 1, 2, 0, 1, 2]),
        x_val=x_val,
        y_val=np.array([1, 1]),
        x_test=x_test,
        y_test=np.array([2, 0, 1]),
    )

    # Execute
    data = load_trainer_data(file)

    # Assert
    assert data.train_x.shape == (6, 1, 28, 28) and data.train_x.dtype == torch.float32
    assert data.val_x.shape == (2, 1, 28, 28) and data.test_x.shape == (3, 1, 28, 28)
    assert data.train_y.dtype == torch.int64 and data.train_y.tolist() == [0, 1, 2, 0, 1, 2]
    assert torch.equal(data.test_x[1, 0], torch.from_numpy(x_test[1] / np.float32(255)))
    assert data.num_classes == 3 and data.spec.dataset == "clinic"
    assert data.num_samples == 6 and data.indices.tolist() == list(range(11))


def test_npz_without_validation_has_an_empty_validation_split(tmp_path: Path) -> None:
    # Prepare: flat 784-pixel float images in [0, 1].
    file = tmp_path / "flat.npz"
    flat = np.random.default_rng(0).random((4, 784), dtype=np.float32)
    np.savez(file, x_train=flat, y_train=[0, 1, 0, 1], x_test=flat[:2], y_test=[1, 0])

    # Execute
    data = load_npz(file, lenet=True)

    # Assert
    assert data.val_x.shape == (0, 1, 28, 28) and data.val_y.shape == (0,)
    assert torch.equal(data.train_x.reshape(4, 784), torch.from_numpy(flat))


def test_npz_for_a_task_of_ones_own_keeps_any_feature_shape(tmp_path: Path) -> None:
    # Prepare
    file = tmp_path / "tabular.npz"
    np.savez(
        file, x_train=np.ones((5, 30)), y_train=[0] * 5, x_test=np.ones((2, 30)), y_test=[1, 1]
    )

    # Execute
    data = load_npz(file)

    # Assert
    assert data.train_x.shape == (5, 30) and data.train_x.dtype == torch.float32


def _valid(**changes: object) -> dict[str, object]:
    arrays = {
        "x_train": np.zeros((2, 28, 28)),
        "y_train": [0, 1],
        "x_test": np.zeros((1, 28, 28)),
        "y_test": [0],
    }
    return {**arrays, **changes}


@pytest.mark.parametrize(
    "arrays, match",
    [
        ({"x_train": np.zeros((2, 28, 28))}, "lacks the array\\(s\\) y_train, x_test, y_test"),
        (
            _valid(x_train=np.zeros((2, 32, 32))),
            "shape \\(2, 32, 32\\); the built-in architectures take 28×28",
        ),
        (_valid(x_train=np.full((2, 28, 28), 255.0)), "float images must be in \\[0, 1\\]"),
        (_valid(y_train=[0, 1, 1]), "x_train has shape \\(2, 1, 28, 28\\) and y_train \\(3,\\)"),
        (_valid(y_train=[0, -1]), "labels must be >= 0"),
        (_valid(y_train=[0.5, 1]), "non-integer labels"),
        (
            _valid(x_test=np.zeros((0, 28, 28)), y_test=np.zeros(0, int)),
            "need at least one sample each \\(train 2, test 0\\)",
        ),
    ],
)
def test_unusable_npz_files_say_why(tmp_path: Path, arrays: dict, match: str) -> None:
    # Prepare
    file = tmp_path / "bad.npz"
    np.savez(file, **arrays)

    # Execute / Assert
    with pytest.raises(DataError, match=match):
        load_trainer_data(file)


def test_pickled_arrays_are_refused(tmp_path: Path) -> None:
    # Prepare: an object array needs pickle to load.
    file = tmp_path / "pickled.npz"
    objects = np.empty(2, dtype=object)
    objects[:] = [{"a": 1}, {"b": 2}]
    np.savez(file, x_train=objects, y_train=[0, 1], x_test=objects, y_test=[0, 1])

    # Execute / Assert
    with pytest.raises(DataError, match="cannot read .*pickled.npz as a NumPy .npz archive"):
        load_npz(file)


@pytest.mark.parametrize(
    "name, content, match",
    [
        ("missing.npz", None, "missing.npz does not exist"),
        ("notes.npz", b"not a zip", "as a NumPy .npz archive"),
        ("nowhere", None, "does not exist: give an .npz file"),
    ],
)
def test_missing_or_foreign_files_say_what_to_give(
    tmp_path: Path, name: str, content: bytes | None, match: str
) -> None:
    # Prepare
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)

    # Execute / Assert
    with pytest.raises(DataError, match=match):
        load_trainer_data(path)


def test_lenet_images_accepts_every_documented_shape() -> None:
    # Prepare
    base = _images(3, 7)

    # Execute
    forms = [base, base[:, None], base[..., None], base.reshape(3, 784)]
    converted = [lenet_images(form) for form in forms]

    # Assert
    assert all(c.shape == (3, 1, 28, 28) and c.dtype == np.float32 for c in converted)
    assert all(np.array_equal(c, converted[0]) for c in converted)
    assert converted[0].max() <= 1.0


def test_image_folder_one_sub_folder_per_class(tmp_path: Path) -> None:
    # Prepare: 10 cats (grey 40), 10 dogs (grey 200, larger RGB JPEGs to be resized).
    root = tmp_path / "pets"
    for i in range(10):
        _write_png(root / "cat" / f"{i}.png", 40)
        _write_png(root / "dog" / f"{i}.JPG", 200, size=(64, 48), mode="RGB")
    (root / "cat" / "notes.txt").write_text("not an image")

    # Execute
    data = load_image_folder(root, split=(0.6, 0.2, 0.2), seed=3)

    # Assert
    assert image_folder_classes(root) == ["cat", "dog"]
    assert (len(data.train_y), len(data.val_y), len(data.test_y)) == (12, 4, 4)
    assert data.train_x.shape[1:] == (1, 28, 28) and data.num_classes == 2
    everything = torch.cat([data.train_x, data.val_x, data.test_x])
    labels = torch.cat([data.train_y, data.val_y, data.test_y])
    assert sorted(labels.tolist()) == [0] * 10 + [1] * 10
    assert torch.allclose(everything[labels == 0], torch.tensor(40 / 255), atol=1e-6)
    assert torch.allclose(everything[labels == 1], torch.tensor(200 / 255), atol=2 / 255)


def test_image_folder_with_train_and_test_folders_and_fixed_classes(tmp_path: Path) -> None:
    # Prepare: this trainer has no "bird" image, but the network's classes include it.
    root = tmp_path / "mine"
    for i in range(3):
        _write_png(root / "train" / "dog" / f"{i}.png", 10)
    _write_png(root / "train" / "cat" / "0.png", 20)
    _write_png(root / "test" / "cat" / "0.png", 20)
    _write_png(root / "val" / "dog" / "0.png", 10)

    # Execute
    data = load_trainer_data(root, classes=("bird", "cat", "dog"))

    # Assert
    assert data.train_y.tolist() == [1, 2, 2, 2]
    assert data.val_y.tolist() == [2] and data.test_y.tolist() == [1]
    assert data.num_classes == 3


@pytest.mark.parametrize("problem", ["unknown class", "unreadable", "empty", "no folder"])
def test_image_folder_problems_name_the_file(tmp_path: Path, problem: str) -> None:
    # Prepare
    root = tmp_path / "images"
    root.mkdir()
    match = {
        "unknown class": "'fox' is not among the classes",
        "unreadable": "cannot read the image .*broken.png",
        "empty": "no image in",
        "no folder": "does not exist",
    }[problem]
    if problem == "unknown class":
        _write_png(root / "fox" / "0.png", 1)
    elif problem == "unreadable":
        (root / "cat").mkdir()
        (root / "cat" / "broken.png").write_bytes(b"\x89PNG garbage")
    elif problem == "empty":
        (root / "cat").mkdir()
    else:
        root = tmp_path / "absent"

    # Execute / Assert
    with pytest.raises(DataError, match=match):
        load_image_folder(root, classes=("cat", "dog"))


def test_arrays_with_labels_beyond_the_declared_classes_are_refused() -> None:
    with pytest.raises(DataError, match="label 5 is beyond the 3 classes"):
        trainer_data_from_arrays(np.zeros((2, 4)), [0, 5], np.zeros((1, 4)), [0], num_classes=3)
