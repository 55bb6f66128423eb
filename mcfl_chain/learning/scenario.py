"""A trainer's data: dataset + masks + seed, split into train / validation / test.

Paper §4.2: each trainer splits its data into a training, a validation and a test set;
the test set is used only to select models. Paper §5.1: the dataset is split among the
trainers and no sample is used by two trainers, so every scenario here partitions the
dataset disjointly (:class:`~mcfl_chain.learning.masks.Partition` or
:class:`~mcfl_chain.learning.masks.Dirichlet`) before any skewing mask.

Building a trainer's data, all from ``spec.seed`` (deterministic):

1. final probability per sample = product of the masks (thesis §4.7);
2. each sample is kept at random with that probability;
3. if more than ``n_samples`` are kept, a uniform random subset of ``n_samples`` stays;
4. the kept samples are shuffled, transformed once (feature skew) and cut into the
   train / validation / test fractions.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mcfl_chain.learning.datasets import load_dataset
from mcfl_chain.learning.masks import (
    ClassSubset,
    Dirichlet,
    Gaussian,
    Mask,
    MaskError,
    Partition,
    Rotation,
    apply_transforms,
    combined_probabilities,
    mask_from_dict,
    parse_mask,
)

DEFAULT_SPLIT = (0.7, 0.15, 0.15)
"""Default train / validation / test fractions of a trainer's data."""


@dataclass(frozen=True)
class TrainerDataSpec:
    """Everything that determines one trainer's data.

    Attributes
    ----------
    dataset : str
        Dataset registry name (see :func:`~mcfl_chain.learning.datasets.available_datasets`).
    masks : tuple of Mask
        Masks applied in order; empty means the whole dataset.
    seed : int
        Seed of the sampling, the shuffle and the split.
    n_samples : int or None
        Cap on the number of samples kept (before the split); None keeps all selected.
    split : tuple of float
        Train, validation and test fractions, each >= 0, summing to 1.
    group : str
        Label of the trainer's group in its scenario, for reporting (e.g. ``"classes 0-3"``).
    """

    dataset: str
    masks: tuple[Mask, ...] = ()
    seed: int = 0
    n_samples: int | None = None
    split: tuple[float, float, float] = DEFAULT_SPLIT
    group: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "masks", tuple(self.masks))
        object.__setattr__(self, "split", tuple(float(f) for f in self.split))
        if len(self.split) != 3 or min(self.split) < 0 or not math.isclose(sum(self.split), 1.0):
            raise ValueError(
                f"split must be three fractions >= 0 summing to 1 (train, validation, test), "
                f"got {self.split}"
            )
        if self.n_samples is not None and self.n_samples < 1:
            raise ValueError(f"n_samples must be at least 1 or None, got {self.n_samples}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready) for config files; inverse of :meth:`from_dict`."""
        return {
            "dataset": self.dataset,
            "masks": [mask.to_dict() for mask in self.masks],
            "seed": self.seed,
            "n_samples": self.n_samples,
            "split": list(self.split),
            "group": self.group,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainerDataSpec:
        """Rebuild a spec from :meth:`to_dict`'s output; masks may also be strings."""
        masks = tuple(
            parse_mask(m) if isinstance(m, str) else mask_from_dict(m)
            for m in data.get("masks", ())
        )
        return cls(
            dataset=str(data["dataset"]),
            masks=masks,
            seed=int(data.get("seed", 0)),
            n_samples=data.get("n_samples"),
            split=tuple(data.get("split", DEFAULT_SPLIT)),  # type: ignore[arg-type]
            group=str(data.get("group", "")),
        )


@dataclass(frozen=True, eq=False)
class SharedImages:
    """Images kept as their dataset stores them: rows of one ``uint8`` tensor of the
    whole dataset, which every trainer built from that dataset in a process shares.

    A host of many trainers keeps Fashion-MNIST once, as 55 MB of bytes, and each share
    as its row numbers (12 kB for 1,500 images) instead of 4.7 MB of float32 each. The
    bytes become float32 only when read, a batch at a time, on the device that reads
    them, through :attr:`values` (the dataset's own conversion of each byte, so the
    floats are those of converting first: :func:`decode`).

    Attributes
    ----------
    pixels : torch.Tensor
        ``uint8`` N×C×H×W, the whole dataset (read-only: it is shared).
    values : torch.Tensor
        ``float32`` (256,), what each byte stands for
        (:meth:`~mcfl_chain.learning.datasets.LabeledDataset.byte_values`).
    rows : torch.Tensor
        ``int64``, the rows of ``pixels`` these images are, in order.
    """

    pixels: torch.Tensor
    values: torch.Tensor
    rows: torch.Tensor

    @property
    def shape(self) -> torch.Size:
        return torch.Size((self.rows.shape[0], *self.pixels.shape[1:]))

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def part(self, start: int, stop: int) -> SharedImages:
        """Images ``start`` to ``stop`` (exclusive), sharing the same pixels."""
        return replace(self, rows=self.rows[start:stop])

    def floats(self) -> torch.Tensor:
        """Every one of these images as ``float32`` (a new tensor on the pixels' device)."""
        return decode(self.pixels, self.values, self.rows)

    def shares_pixels(self, other: SharedImages) -> bool:
        """Whether ``other`` reads the same stored pixels (one gather serves both)."""
        return (
            self.pixels.data_ptr() == other.pixels.data_ptr()
            and self.pixels.shape == other.pixels.shape
            and self.pixels.device == other.pixels.device
        )


def decode(pixels: torch.Tensor, values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``pixels[rows]`` as float32 images: each byte looked up in ``values`` (exact on
    any device, where dividing by 255 on a GPU multiplies by a rounded reciprocal), in
    the layout the float path gives (channel stride one: see
    :func:`~mcfl_chain.learning.datasets.LabeledDataset.take`), so convolutions pick the
    same kernels and the results are the same bits. ``rows`` may have any shape."""
    stored = pixels[rows]
    images = values.index_select(0, stored.flatten().to(torch.int32)).view(stored.shape)
    if images.dim() >= 3 and images.shape[-3] == 1:
        strides = list(images.stride())
        strides[-3] = 1  # that axis has size 1: the stride addresses no memory
        images = images.as_strided(images.shape, strides)
    return images


Images = torch.Tensor | SharedImages
"""A split's images: float32 in memory, or rows of a shared byte dataset."""


@dataclass(frozen=True)
class TrainerData:
    """One trainer's data, preloaded once (no per-sample transform while training).

    ``*_images`` are the splits' images: float32 N×1×28×28 tensors, or
    :class:`SharedImages` (rows of a dataset's bytes that a host's trainers share,
    turned into floats when read); ``*_x`` give them as float32 tensors either way.
    ``*_y`` are int64 N. ``indices`` are the dataset indices of the kept samples in
    train, validation, test order.
    """

    spec: TrainerDataSpec
    num_classes: int
    train_images: Images
    train_y: torch.Tensor
    val_images: Images
    val_y: torch.Tensor
    test_images: Images
    test_y: torch.Tensor
    indices: np.ndarray = field(repr=False)

    @property
    def train_x(self) -> torch.Tensor:
        """The training images as float32 (converted anew on each read when shared)."""
        return _floats(self.train_images)

    @property
    def val_x(self) -> torch.Tensor:
        """The validation images as float32 (converted anew on each read when shared)."""
        return _floats(self.val_images)

    @property
    def test_x(self) -> torch.Tensor:
        """The test images as float32 (converted anew on each read when shared)."""
        return _floats(self.test_images)

    @property
    def num_samples(self) -> int:
        """Number of training samples (the weight of this trainer's updates in FedAvg)."""
        return int(self.train_y.shape[0])

    def class_counts(self) -> np.ndarray:
        """Samples per class over the three splits together, int64 of shape (num_classes,)."""
        labels = torch.cat([self.train_y, self.val_y, self.test_y]).numpy()
        return np.bincount(labels, minlength=self.num_classes)


def _floats(images: Images) -> torch.Tensor:
    return images.floats() if isinstance(images, SharedImages) else images


def build_trainer_data(
    spec: TrainerDataSpec, root: str | Path | None = None, *, shared: bool = False
) -> TrainerData:
    """Build a trainer's train / validation / test tensors from its spec (deterministic).

    Parameters
    ----------
    spec : TrainerDataSpec
        Dataset, masks, seed, cap and split.
    root : str or pathlib.Path, optional
        Data directory passed to :func:`~mcfl_chain.learning.datasets.load_dataset`.
    shared : bool, default False
        Keep the images as :class:`SharedImages`, rows of the dataset's bytes, where the
        dataset stores bytes and no mask transforms the images (a host building many
        trainers: the dataset is kept once for all of them). The floats read from them
        are the same bits as without.

    Returns
    -------
    TrainerData
        The same tensors for the same spec, on any machine.

    Raises
    ------
    ValueError
        If the masks keep no sample, or the split leaves the train set empty.
    """
    dataset = load_dataset(spec.dataset, root)
    try:
        probabilities = combined_probabilities(spec.masks, dataset.labels, dataset.num_classes)
    except MaskError as error:
        raise ValueError(f"trainer data {spec.dataset!r}: {error}") from error
    rng = np.random.default_rng(spec.seed)
    kept = np.flatnonzero(rng.random(probabilities.shape[0]) < probabilities)
    if spec.n_samples is not None and kept.shape[0] > spec.n_samples:
        kept = np.sort(rng.choice(kept, size=spec.n_samples, replace=False))
    if kept.shape[0] == 0:
        masks = ", ".join(str(m) for m in spec.masks)
        raise ValueError(
            f"the masks [{masks}] keep no sample of {spec.dataset!r}: loosen them "
            "(more classes, fewer partitions, a larger std)"
        )
    order = rng.permutation(kept)
    n_train = round(spec.split[0] * order.shape[0])
    n_val = round(spec.split[1] * order.shape[0])
    if n_train == 0:
        raise ValueError(
            f"only {order.shape[0]} samples kept for {spec.dataset!r}: the train split "
            f"{spec.split[0]} leaves no training sample; keep more samples"
        )
    values = dataset.byte_values()
    x: Images
    if shared and values is not None and not _transforms(spec.masks):
        rows = torch.from_numpy(order.astype(np.int64))
        x = SharedImages(_stored(dataset.pixels), torch.from_numpy(values), rows)
    else:
        images = apply_transforms(spec.masks, dataset.take(order))
        x = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
    y = torch.from_numpy(dataset.labels[order].copy())
    cut = (n_train, n_train + n_val)
    return TrainerData(
        spec=spec,
        num_classes=dataset.num_classes,
        train_images=_part(x, 0, cut[0]),
        train_y=y[: cut[0]],
        val_images=_part(x, cut[0], cut[1]),
        val_y=y[cut[0] : cut[1]],
        test_images=_part(x, cut[1], len(order)),
        test_y=y[cut[1] :],
        indices=order,
    )


_STORED: weakref.WeakValueDictionary[int, torch.Tensor] = weakref.WeakValueDictionary()
"""One tensor per stored byte array (by identity), while a trainer's data holds it."""


def _stored(pixels: np.ndarray) -> torch.Tensor:
    """The dataset's bytes as one tensor object for every trainer (sharing the array's
    memory), so that a device keeps one copy of it and one gather serves them all. The
    tensor holds the array, so the id is not reused while the entry lives."""
    tensor = _STORED.get(id(pixels))
    if tensor is None:
        with warnings.catch_warnings():
            # The dataset's arrays are read-only on purpose; nothing writes through this.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            tensor = torch.from_numpy(pixels)
        _STORED[id(pixels)] = tensor
    return tensor


def _part(images: Images, start: int, stop: int) -> Images:
    return images.part(start, stop) if isinstance(images, SharedImages) else images[start:stop]


def _transforms(masks: Sequence[Mask]) -> bool:
    """Whether a mask changes the images (feature skew), which then exist only as floats."""
    return any(type(mask).transform is not Mask.transform for mask in masks)


# --- Whole scenarios --------------------------------------------------------------------


def _class_groups(num_classes: int, n_groups: int) -> list[tuple[int, ...]]:
    return [
        tuple(int(c) for c in part) for part in np.array_split(np.arange(num_classes), n_groups)
    ]


def _label(classes: Sequence[int]) -> str:
    return f"classes {classes[0]}-{classes[-1]}" if len(classes) > 1 else f"class {classes[0]}"


@dataclass(frozen=True)
class ScenarioContext:
    """What a scenario kind builds its trainers' data specs from (see
    :func:`scenario_specs` for each parameter); ``n_groups`` is resolved (3 by default,
    or the length of ``group_sizes``)."""

    n_trainers: int
    seed: int
    dataset: str
    samples_per_trainer: int | None
    split: tuple[float, float, float]
    num_classes: int
    n_groups: int
    std: float
    alpha: float
    other_dataset: str
    group_sizes: Sequence[int] | None

    @property
    def trainers(self) -> range:
        return range(self.n_trainers)

    def spec(
        self, i: int, masks: Sequence[Mask], group: str, name: str | None = None
    ) -> TrainerDataSpec:
        """Trainer ``i``'s spec: its own seed ``seed·1000 + i``, the scenario's sample cap
        and split."""
        return TrainerDataSpec(
            dataset=name or self.dataset,
            masks=tuple(masks),
            seed=self.seed * 1000 + i,
            n_samples=self.samples_per_trainer,
            split=self.split,
            group=group,
        )


@dataclass(frozen=True)
class ScenarioKind:
    """One kind of scenario: how its trainers' data specs are built."""

    build: Callable[[ScenarioContext], list[TrainerDataSpec]]
    grouped: bool = False
    """It places trainers in ``n_groups`` groups (1 <= n_groups <= n_trainers)."""
    sized: bool = False
    """It accepts ``group_sizes`` (groups of chosen sizes, in trainer order)."""
    groups: int | None = None
    """How many data groups a kind that is not ``grouped`` declares (two datasets: 2,
    IID: 1); None when its trainers' distributions form no groups (each its own)."""


SCENARIO_KINDS: dict[str, ScenarioKind] = {}
"""Scenario kind name → :class:`ScenarioKind`, as :func:`scenario_specs` accepts them."""


def register_scenario(
    name: str, *, grouped: bool = False, sized: bool = False, groups: int | None = None
) -> Callable[[Callable[[ScenarioContext], list[TrainerDataSpec]]], ScenarioKind]:
    """Register a scenario kind under ``name``: adding a kind is one decorated function.
    ``groups``: the number of data groups of a kind that is not ``grouped``."""

    def decorate(build: Callable[[ScenarioContext], list[TrainerDataSpec]]) -> ScenarioKind:
        if name in SCENARIO_KINDS:
            raise ValueError(f"scenario kind {name!r} is registered twice")
        kind = ScenarioKind(build, grouped, sized, groups)
        SCENARIO_KINDS[name] = kind
        return kind

    return decorate


@register_scenario("iid", groups=1)
def _iid(c: ScenarioContext) -> list[TrainerDataSpec]:
    """Trainer *i* gets part *i* of ``n_trainers`` equal parts (paper §5.2)."""
    return [c.spec(i, [Partition(i, c.n_trainers, c.seed)], "iid") for i in c.trainers]


@register_scenario("groups", grouped=True)
def _groups(c: ScenarioContext) -> list[TrainerDataSpec]:
    """Contiguous disjoint class groups; trainer *i* in group ``i mod n_groups``, sharing
    the group's samples equally (paper §5.3)."""
    n_groups = c.n_groups
    groups = _class_groups(c.num_classes, n_groups)
    members = [[i for i in c.trainers if i % n_groups == g] for g in range(n_groups)]
    return [
        c.spec(
            i,
            [
                ClassSubset(groups[i % n_groups]),
                Partition(members[i % n_groups].index(i), len(members[i % n_groups]), c.seed),
            ],
            _label(groups[i % n_groups]),
        )
        for i in c.trainers
    ]


@register_scenario("gaussian")
def _gaussian(c: ScenarioContext) -> list[TrainerDataSpec]:
    """Part *i* through a gaussian mask centred on class ``i mod num_classes`` (thesis
    §5.3.2)."""
    return [
        c.spec(
            i,
            [Partition(i, c.n_trainers, c.seed), Gaussian(i % c.num_classes, c.std)],
            f"mean class {i % c.num_classes}",
        )
        for i in c.trainers
    ]


@register_scenario("dirichlet")
def _dirichlet(c: ScenarioContext) -> list[TrainerDataSpec]:
    """Dirichlet label skew with ``alpha``."""
    return [
        c.spec(i, [Dirichlet(c.alpha, i, c.n_trainers, c.seed)], "dirichlet") for i in c.trainers
    ]


@register_scenario("two-datasets", groups=2)
def _two_datasets(c: ScenarioContext) -> list[TrainerDataSpec]:
    """The first half of the trainers share ``dataset``, the others ``other_dataset``
    (thesis §5.3.3)."""
    first = (c.n_trainers + 1) // 2
    second = c.n_trainers - first
    return [
        c.spec(i, [Partition(i, first, c.seed)], c.dataset)
        if i < first
        else c.spec(i, [Partition(i - first, second, c.seed)], c.other_dataset, c.other_dataset)
        for i in c.trainers
    ]


@register_scenario("rotations", grouped=True, sized=True)
def _rotations(c: ScenarioContext) -> list[TrainerDataSpec]:
    """IID parts; group *g*'s images rotated by ``g·360/n_groups`` degrees (FACADE's
    feature skew)."""
    if c.group_sizes is None:
        group_of = [i % c.n_groups for i in c.trainers]
    else:
        group_of = [g for g, size in enumerate(c.group_sizes) for _ in range(size)]
    return [
        c.spec(
            i,
            [Partition(i, c.n_trainers, c.seed), Rotation(360.0 * group_of[i] / c.n_groups)],
            f"rotation {360.0 * group_of[i] / c.n_groups:g}°",
        )
        for i in c.trainers
    ]


def _checked_group_sizes(kind: str, group_sizes: Sequence[int], n_trainers: int) -> int:
    """The number of groups ``group_sizes`` makes, once checked against ``n_trainers``."""
    if kind not in SCENARIO_KINDS or not SCENARIO_KINDS[kind].sized:
        takers = ", ".join(name for name, k in SCENARIO_KINDS.items() if k.sized)
        raise ValueError(f"group_sizes applies to the {takers} scenario, not to {kind!r}")
    sizes = list(group_sizes)
    if not sizes or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in sizes):
        raise ValueError(f"group_sizes must be whole numbers >= 1, got {sizes}")
    if sum(sizes) != n_trainers:
        raise ValueError(
            f"group_sizes {sizes} add up to {sum(sizes)} trainers; the scenario has "
            f"n_trainers={n_trainers}"
        )
    return len(sizes)


SCENARIOS = tuple(SCENARIO_KINDS)
"""Scenario kinds accepted by :func:`scenario_specs`."""


def declared_group_count(
    kind: str,
    *,
    n_trainers: int | None = None,
    n_groups: int | None = None,
    group_sizes: Sequence[int] | None = None,
) -> int | None:
    """How many data groups scenario ``kind`` declares (what a clustered baseline that
    is told the truth, IFCA's k, should get).

    A grouped kind: ``n_groups``, or the length of ``group_sizes``, or 3 (as
    :func:`scenario_specs` resolves them); a kind with a fixed structure its own count
    (two datasets: 2; IID: 1); None for a kind whose trainers' distributions form no
    groups (gaussian: one mean class per trainer; Dirichlet: one draw per trainer).
    With ``n_trainers``, never more groups than trainers.

    Raises
    ------
    ValueError
        For an unknown kind.
    """
    if kind not in SCENARIO_KINDS:
        raise ValueError(f"unknown scenario kind {kind!r}; known: {', '.join(SCENARIOS)}")
    declared = SCENARIO_KINDS[kind]
    if declared.grouped:
        count = len(group_sizes) if group_sizes is not None else n_groups or 3
    elif declared.groups is None:
        return None
    else:
        count = declared.groups
    return count if n_trainers is None else min(count, n_trainers)


def scenario_specs(
    kind: str,
    n_trainers: int,
    seed: int,
    *,
    dataset: str = "fashion-mnist",
    samples_per_trainer: int | None = None,
    split: tuple[float, float, float] = DEFAULT_SPLIT,
    num_classes: int = 10,
    n_groups: int | None = None,
    std: float = 1.0,
    alpha: float = 0.5,
    other_dataset: str = "mnist",
    group_sizes: Sequence[int] | None = None,
) -> list[TrainerDataSpec]:
    """Data specs of every trainer of a scenario (paper §5, thesis ch. 5).

    Trainers never share a sample: each kind first splits the dataset disjointly.
    Trainer ``i`` gets seed ``seed·1000 + i`` for its own sampling and split.

    Each kind is a function registered in :data:`SCENARIO_KINDS`
    (:func:`register_scenario`): adding a kind is adding one.

    Parameters
    ----------
    kind : str
        - ``"iid"``: trainer *i* gets part *i* of ``n_trainers`` equal parts (paper §5.2).
        - ``"groups"``: the classes are cut into ``n_groups`` contiguous disjoint groups
          (10 classes, 3 groups: 0-3, 4-6, 7-9); trainer *i* joins group ``i mod
          n_groups`` and the group's trainers share its samples equally (paper §5.3).
        - ``"gaussian"``: trainer *i* keeps part *i* of ``n_trainers`` through a gaussian
          mask centred on class ``i mod num_classes`` with ``std`` (thesis §5.3.2).
        - ``"dirichlet"``: Dirichlet label skew with ``alpha``.
        - ``"two-datasets"``: the first half of the trainers share ``dataset``, the
          others ``other_dataset`` (thesis §5.3.3).
        - ``"rotations"``: IID parts, equal for every trainer; trainer *i* is in group
          ``i mod n_groups``, or with ``group_sizes`` the first ``group_sizes[0]``
          trainers form group 0, the next ``group_sizes[1]`` group 1, and so on
          (FACADE's majority and minority clusters, e.g. ``[24, 8]``); group *g*'s
          images are rotated by ``g·360/n_groups`` degrees (FACADE's feature skew:
          0° and 180° for two groups).
    n_trainers : int
        Number of trainers (>= 1).
    seed : int
        Scenario seed: seeds the disjoint split and every trainer's own seed.
    dataset : str, default "fashion-mnist"
        Dataset of every trainer (the first half for ``"two-datasets"``).
    samples_per_trainer : int, optional
        Cap on each trainer's samples, for fast small demos.
    split : tuple of float
        Train / validation / test fractions of each trainer.
    num_classes : int, default 10
        Classes of the dataset (to build class groups and gaussian means).
    n_groups : int, optional
        Number of groups for ``"groups"`` and ``"rotations"``: 3, or with
        ``group_sizes`` its length (giving both, they must agree).
    group_sizes : sequence of int, optional
        ``"rotations"`` only: the trainers in each group, in trainer order; they must
        add up to ``n_trainers``.
    std : float, default 1.0
        Standard deviation, in classes, for ``"gaussian"``.
    alpha : float, default 0.5
        Concentration for ``"dirichlet"``.
    other_dataset : str, default "mnist"
        Second dataset for ``"two-datasets"``.

    Returns
    -------
    list of TrainerDataSpec
        One spec per trainer, in trainer order, each labelled with its group.
    """
    if n_trainers < 1:
        raise ValueError(f"a scenario needs at least one trainer, got n_trainers={n_trainers}")
    if kind not in SCENARIO_KINDS:
        raise ValueError(f"unknown scenario kind {kind!r}; known: {', '.join(SCENARIOS)}")
    if group_sizes is not None:
        sized = _checked_group_sizes(kind, group_sizes, n_trainers)
        if n_groups not in (None, sized):
            raise ValueError(
                f"n_groups={n_groups} but group_sizes {list(group_sizes)} make {sized} groups"
            )
        n_groups = sized
    n_groups = 3 if n_groups is None else n_groups
    if SCENARIO_KINDS[kind].grouped and not 1 <= n_groups <= n_trainers:
        raise ValueError(f"{kind}: need 1 <= n_groups <= n_trainers, got n_groups={n_groups}")
    context = ScenarioContext(
        n_trainers, seed, dataset, samples_per_trainer, split, num_classes, n_groups, std,
        alpha, other_dataset, group_sizes,
    )  # fmt: skip
    return SCENARIO_KINDS[kind].build(context)
