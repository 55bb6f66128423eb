"""Non-IID sampling masks (thesis §4.7), composable.

A mask gives every sample of the whole dataset the probability that the trainer keeps
it. A trainer applies its masks one after the other: the final probability of a sample
is the product of the masks' probabilities, and each sample is then kept or dropped at
random with that probability (see :mod:`mcfl_chain.learning.scenario`). Masks:

- :class:`Balanced` — equal share per class: the rarest class is kept whole;
- :class:`Gaussian` — a normal distribution over the classes (mean class, std);
- :class:`Partition` — part *i* of *k* disjoint equal parts of the dataset;
- :class:`ClassSubset` — only the listed classes;
- :class:`Dirichlet` — label skew: per class, shares over trainers drawn from Dir(α);
- :class:`Rotation` — feature skew (FACADE): keeps every sample, rotates every image.

Masks that split a dataset among trainers (:class:`Partition`, :class:`Dirichlet`)
carry their own ``seed``, shared by all trainers of a scenario, so the parts are
disjoint whatever each trainer's own seed.

Every mask serialises to a plain dict (``to_dict``/:func:`mask_from_dict`) and to a
call-like string (``str(mask)``/:func:`parse_mask`), e.g. ``gaussian(mean_class=4, std=1.0)``,
``partition(i=0, k=38)``, ``classes(classes=(0, 1, 2))``; positional arguments are
accepted when parsing: ``partition(0, 38)``.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from abc import ABC
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np


class MaskError(ValueError):
    """A mask is malformed or cannot apply to a dataset."""


@dataclass(frozen=True)
class Mask(ABC):
    """Base of every mask: a selection probability per sample, and an image transform.

    Subclasses override :meth:`probabilities` (sample skew), :meth:`transform`
    (feature skew), or both. ``kind`` is the name used in dicts and strings.
    """

    kind: ClassVar[str]

    def probabilities(self, labels: np.ndarray, num_classes: int) -> np.ndarray:
        """Probability in [0, 1] that each sample is kept.

        Parameters
        ----------
        labels : numpy.ndarray
            Labels of the whole dataset, int64 of shape (N,).
        num_classes : int
            Number of classes of the dataset.

        Returns
        -------
        numpy.ndarray
            float64 array of shape (N,).
        """
        return np.ones(labels.shape[0], dtype=np.float64)

    def transform(self, images: np.ndarray) -> np.ndarray:
        """Transform the selected images once, when the trainer's data is built.

        Parameters
        ----------
        images : numpy.ndarray
            float32 images N×1×H×W.

        Returns
        -------
        numpy.ndarray
            Images of the same shape and dtype.
        """
        return images

    def to_dict(self) -> dict[str, Any]:
        """Plain dict ``{"kind": ..., field: value, ...}`` for config files."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {
            "kind": self.kind,
            **{k: list(v) if isinstance(v, tuple) else v for k, v in values.items()},
        }

    def __str__(self) -> str:
        arguments = ", ".join(
            f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)
        )
        return f"{self.kind}({arguments})"


MASKS: dict[str, type[Mask]] = {}
"""Registry: mask kind → class."""


def _register(cls: type[Mask]) -> type[Mask]:
    MASKS[cls.kind] = cls
    return cls


def _check_classes(classes: Sequence[int], num_classes: int, mask: Mask) -> None:
    bad = [c for c in classes if not 0 <= c < num_classes]
    if bad:
        raise MaskError(f"{mask}: classes {bad} do not exist in a {num_classes}-class dataset")


@_register
@dataclass(frozen=True)
class Balanced(Mask):
    """Equal expected count per class: class *c* is kept with probability min_count / count_c.

    Classes absent from the dataset are ignored.
    """

    kind: ClassVar[str] = "balanced"

    def probabilities(self, labels: np.ndarray, num_classes: int) -> np.ndarray:
        counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
        present = counts > 0
        per_class = np.zeros(num_classes, dtype=np.float64)
        per_class[present] = counts[present].min() / counts[present]
        return per_class[labels]


@_register
@dataclass(frozen=True)
class Gaussian(Mask):
    """Normal distribution over the class index (thesis §5.3.2).

    Class *c* is kept with probability ``exp(-(c - mean_class)² / (2·std²))``, so the mean
    class is kept whole. Classes are not wrapped around: with ``mean_class=0`` only the
    upper half of the bell is used.
    """

    mean_class: float
    std: float = 1.0
    kind: ClassVar[str] = "gaussian"

    def __post_init__(self) -> None:
        if not self.std > 0:
            raise MaskError(f"gaussian mask: std must be > 0, got {self.std}")

    def probabilities(self, labels: np.ndarray, num_classes: int) -> np.ndarray:
        classes = np.arange(num_classes, dtype=np.float64)
        per_class = np.exp(-((classes - self.mean_class) ** 2) / (2.0 * self.std**2))
        return per_class[labels]


@_register
@dataclass(frozen=True)
class Partition(Mask):
    """Part ``i`` of ``k`` disjoint parts of equal size (±1) of the whole dataset.

    The samples are shuffled with ``seed`` and dealt round-robin, so each part has about
    the dataset's class distribution and parts with the same ``k`` and ``seed`` never
    overlap.
    """

    i: int
    k: int
    seed: int = 0
    kind: ClassVar[str] = "partition"

    def __post_init__(self) -> None:
        if not 0 <= self.i < self.k:
            raise MaskError(f"partition mask: need 0 <= i < k, got i={self.i}, k={self.k}")

    def probabilities(self, labels: np.ndarray, num_classes: int) -> np.ndarray:
        order = np.random.default_rng(self.seed).permutation(labels.shape[0])
        keep = np.zeros(labels.shape[0], dtype=np.float64)
        keep[order[self.i :: self.k]] = 1.0
        return keep


@_register
@dataclass(frozen=True)
class ClassSubset(Mask):
    """Only the samples whose class is listed."""

    classes: tuple[int, ...] = field(default=())
    kind: ClassVar[str] = "classes"

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", tuple(int(c) for c in self.classes))
        if not self.classes:
            raise MaskError("classes mask: list at least one class")

    def probabilities(self, labels: np.ndarray, num_classes: int) -> np.ndarray:
        _check_classes(self.classes, num_classes, self)
        return np.isin(labels, self.classes).astype(np.float64)


@_register
@dataclass(frozen=True)
class Dirichlet(Mask):
    """Label skew: trainer ``trainer_index``'s share of a Dirichlet split among ``n_trainers``.

    For each class, the class's samples (shuffled with ``seed``) are cut among the
    trainers in proportions drawn from Dir(α·1). Small α gives few classes per trainer,
    large α tends to IID. Trainers of one scenario share ``seed`` and get disjoint shares.
    """

    alpha: float
    trainer_index: int
    n_trainers: int
    seed: int = 0
    kind: ClassVar[str] = "dirichlet"

    def __post_init__(self) -> None:
        if not self.alpha > 0:
            raise MaskError(f"dirichlet mask: alpha must be > 0, got {self.alpha}")
        if not 0 <= self.trainer_index < self.n_trainers:
            raise MaskError(
                "dirichlet mask: need 0 <= trainer_index < n_trainers, got "
                f"{self.trainer_index} and {self.n_trainers}"
            )

    def probabilities(self, labels: np.ndarray, num_classes: int) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        keep = np.zeros(labels.shape[0], dtype=np.float64)
        for c in range(num_classes):
            members = rng.permutation(np.flatnonzero(labels == c))
            shares = rng.dirichlet(np.full(self.n_trainers, self.alpha))
            cuts = np.round(np.cumsum(shares) * members.shape[0]).astype(np.int64)
            start = 0 if self.trainer_index == 0 else cuts[self.trainer_index - 1]
            keep[members[start : cuts[self.trainer_index]]] = 1.0
        return keep


@_register
@dataclass(frozen=True)
class Rotation(Mask):
    """Feature skew (FACADE): every image is rotated by ``degrees`` counter-clockwise.

    Multiples of 90° are exact pixel permutations; other angles use bilinear
    interpolation with zero fill. Applied once when the trainer's data is built.
    """

    degrees: float
    kind: ClassVar[str] = "rotation"

    def transform(self, images: np.ndarray) -> np.ndarray:
        quarter_turns, remainder = divmod(float(self.degrees), 90.0)
        if remainder == 0.0:
            return np.ascontiguousarray(np.rot90(images, k=int(quarter_turns) % 4, axes=(2, 3)))
        import torch  # noqa: PLC0415 (only arbitrary angles need interpolation)
        import torch.nn.functional as functional  # noqa: PLC0415

        theta = math.radians(self.degrees)
        # affine_grid maps output to input coordinates: rotating the image by +θ means
        # sampling the input at the output point rotated by -θ (y axis points down).
        matrix = torch.tensor(
            [[math.cos(theta), -math.sin(theta), 0.0], [math.sin(theta), math.cos(theta), 0.0]],
            dtype=torch.float32,
        )
        batch = torch.from_numpy(np.ascontiguousarray(images))
        grid = functional.affine_grid(
            matrix.expand(batch.shape[0], 2, 3), list(batch.shape), align_corners=False
        )
        rotated = functional.grid_sample(batch, grid, mode="bilinear", align_corners=False)
        return rotated.numpy()


def mask_from_dict(data: Mapping[str, Any]) -> Mask:
    """Rebuild a mask from :meth:`Mask.to_dict`'s output.

    Raises
    ------
    MaskError
        If the kind is unknown or the fields do not fit it.
    """
    values = dict(data)
    kind = values.pop("kind", None)
    if kind not in MASKS:
        raise MaskError(f"unknown mask kind {kind!r}; known: {', '.join(sorted(MASKS))}")
    try:
        return MASKS[kind](**values)
    except TypeError as error:
        raise MaskError(f"mask {kind!r} does not accept {values}: {error}") from error


def parse_mask(text: str) -> Mask:
    """Parse a mask written as a call, e.g. ``"gaussian(mean_class=4, std=1)"`` or ``"balanced"``.

    Arguments are Python literals (numbers, tuples, lists), positional or by name.

    Raises
    ------
    MaskError
        If the text is not a call of a known mask with literal arguments.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as error:
        raise MaskError(f"cannot parse mask {text!r}: {error.msg}") from error
    if isinstance(node, ast.Name):
        node = ast.Call(func=node, args=[], keywords=[])
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise MaskError(f"mask {text!r} must look like name(arg=value, ...)")
    kind = node.func.id
    if kind not in MASKS:
        raise MaskError(
            f"unknown mask kind {kind!r} in {text!r}; known: {', '.join(sorted(MASKS))}"
        )
    try:
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    except ValueError as error:
        raise MaskError(f"mask {text!r}: arguments must be literal values") from error
    names = [f.name for f in dataclasses.fields(MASKS[kind])]
    if len(args) > len(names):
        raise MaskError(f"mask {text!r}: {kind} takes at most {len(names)} arguments ({names})")
    return mask_from_dict({"kind": kind, **dict(zip(names, args, strict=False)), **kwargs})


def combined_probabilities(
    masks: Sequence[Mask], labels: np.ndarray, num_classes: int
) -> np.ndarray:
    """Product of the masks' probabilities: the final mask of thesis §4.7.

    Parameters
    ----------
    masks : sequence of Mask
        Applied in order (the product does not depend on the order).
    labels : numpy.ndarray
        Labels of the whole dataset.
    num_classes : int
        Number of classes of the dataset.

    Returns
    -------
    numpy.ndarray
        float64 probabilities of shape (N,); all ones when ``masks`` is empty.
    """
    result = np.ones(labels.shape[0], dtype=np.float64)
    for mask in masks:
        result *= mask.probabilities(labels, num_classes)
    return result


def apply_transforms(masks: Sequence[Mask], images: np.ndarray) -> np.ndarray:
    """Apply every mask's image transform in order (feature skew)."""
    for mask in masks:
        images = mask.transform(images)
    return images
