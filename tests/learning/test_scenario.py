"""Trainer data: determinism of sampling and split, and the scenarios' guarantees."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mcfl_chain.learning.datasets import load_dataset
from mcfl_chain.learning.masks import ClassSubset, Gaussian, Partition, Rotation
from mcfl_chain.learning.scenario import (
    SCENARIO_KINDS,
    SCENARIOS,
    ScenarioContext,
    ScenarioKind,
    SharedImages,
    TrainerDataSpec,
    build_trainer_data,
    declared_group_count,
    scenario_specs,
)


def _all_tensors(data: object) -> list[torch.Tensor]:
    names = ("train_x", "train_y", "val_x", "val_y", "test_x", "test_y")
    return [getattr(data, name) for name in names]


def test_same_spec_gives_identical_tensors_and_another_seed_does_not() -> None:
    # Prepare
    spec = TrainerDataSpec("digits", (Gaussian(3, 2.0),), seed=11, split=(0.6, 0.2, 0.2))
    # Execute
    first, second = build_trainer_data(spec), build_trainer_data(spec)
    other = build_trainer_data(TrainerDataSpec("digits", (Gaussian(3, 2.0),), seed=12))
    # Assert
    for a, b in zip(_all_tensors(first), _all_tensors(second), strict=True):
        assert torch.equal(a, b)
    assert not np.array_equal(first.indices, other.indices)


def test_split_fractions_are_disjoint_and_follow_the_spec() -> None:
    data = build_trainer_data(TrainerDataSpec("digits", seed=1, split=(0.5, 0.2, 0.3)))
    n = len(data.indices)
    assert n == 1797  # no mask, no cap: the whole dataset
    assert (data.train_y.shape[0], data.val_y.shape[0]) == (round(0.5 * n), round(0.2 * n))
    assert data.train_y.shape[0] + data.val_y.shape[0] + data.test_y.shape[0] == n
    assert len(set(data.indices.tolist())) == n
    assert data.num_samples == data.train_y.shape[0]
    assert data.train_x.dtype == torch.float32 and data.train_y.dtype == torch.int64


def test_cap_keeps_exactly_n_samples() -> None:
    data = build_trainer_data(TrainerDataSpec("digits", (Partition(0, 2),), seed=0, n_samples=100))
    assert len(data.indices) == 100


def test_masks_shape_the_class_distribution() -> None:
    data = build_trainer_data(TrainerDataSpec("digits", (ClassSubset((2, 5)),), seed=0))
    counts = data.class_counts()
    assert set(np.flatnonzero(counts)) == {2, 5}


def test_rotation_is_applied_to_the_built_tensors() -> None:
    plain = build_trainer_data(TrainerDataSpec("digits", (Partition(0, 4),), seed=3))
    rotated = build_trainer_data(
        TrainerDataSpec("digits", (Partition(0, 4), Rotation(180)), seed=3)
    )
    assert torch.equal(rotated.train_y, plain.train_y)
    assert torch.equal(rotated.train_x, torch.flip(plain.train_x, dims=(2, 3)))


def test_fashion_mnist_trainers_get_the_layout_and_values_recorded_runs_were_trained_with() -> None:
    # torch picks convolution kernels from the strides (a one-channel batch with channel
    # stride 1 counts as channels-last), so the layout is part of reproducing a run.
    plain_spec = TrainerDataSpec("fashion-mnist", (Partition(0, 40),), seed=5, n_samples=300)
    plain = build_trainer_data(plain_spec)
    rotated = build_trainer_data(
        TrainerDataSpec("fashion-mnist", (Partition(0, 40), Rotation(180)), seed=5, n_samples=300)
    )
    assert plain.train_x.stride() == (784, 1, 28, 1)
    assert rotated.train_x.stride() == (784, 784, 28, 1)
    raw = load_dataset("fashion-mnist").pixels[plain.indices]
    expected = torch.from_numpy((raw.astype(np.float64) / 255.0).astype(np.float32))
    assert torch.equal(torch.cat([plain.train_x, plain.val_x, plain.test_x]), expected)
    assert torch.equal(rotated.train_x, torch.flip(plain.train_x, dims=(2, 3)))


def test_shared_shares_read_the_dataset_bytes_as_the_same_floats_in_the_same_layout() -> None:
    # Prepare: two trainers of a host, and one built alone
    specs = [
        TrainerDataSpec("fashion-mnist", (Partition(i, 40),), seed=5, n_samples=300)
        for i in range(2)
    ]
    alone = build_trainer_data(specs[0])
    # Execute
    first, second = (build_trainer_data(spec, shared=True) for spec in specs)
    # Assert: rows of one byte tensor, not copies; the floats read are the same bits
    assert isinstance(first.train_images, SharedImages)
    assert isinstance(second.test_images, SharedImages)
    assert first.train_images.pixels is second.test_images.pixels
    assert first.train_images.pixels.dtype == torch.uint8
    assert first.train_images.shape == alone.train_x.shape
    for a, b in zip(_all_tensors(first), _all_tensors(alone), strict=True):
        assert torch.equal(a, b) and a.stride() == b.stride()
    # a mask that transforms the images, or a dataset of floats, keeps floats
    rotated = TrainerDataSpec("fashion-mnist", (Partition(0, 40), Rotation(90)), n_samples=30)
    assert isinstance(build_trainer_data(rotated, shared=True).train_images, torch.Tensor)
    digits = TrainerDataSpec("digits", (Partition(0, 9),))
    assert isinstance(build_trainer_data(digits, shared=True).train_images, torch.Tensor)


def test_a_mask_that_keeps_nothing_is_reported() -> None:
    spec = TrainerDataSpec("digits", (ClassSubset((1,)), ClassSubset((2,))), seed=0)
    with pytest.raises(ValueError, match="keep no sample"):
        build_trainer_data(spec)


def test_bad_split_is_refused() -> None:
    with pytest.raises(ValueError, match="summing to 1"):
        TrainerDataSpec("digits", split=(0.5, 0.5, 0.5))


def test_spec_round_trips_through_a_dict_and_accepts_mask_strings() -> None:
    spec = TrainerDataSpec(
        "digits", (Partition(1, 3, 9), Gaussian(2, 1.0)), 5, 50, (0.8, 0.1, 0.1), "g"
    )
    assert TrainerDataSpec.from_dict(spec.to_dict()) == spec
    written = {
        "dataset": "digits",
        "masks": ["partition(1, 3, 9)", "gaussian(2, 1.0)"],
        "seed": 5,
        "n_samples": 50,
        "split": [0.8, 0.1, 0.1],
        "group": "g",
    }
    assert TrainerDataSpec.from_dict(written) == spec


def _built(kind: str, n: int, **params: object) -> list:
    specs = scenario_specs(kind, n, seed=4, dataset="digits", **params)  # type: ignore[arg-type]
    return [build_trainer_data(spec) for spec in specs]


@pytest.mark.parametrize("kind", ["iid", "groups", "gaussian", "dirichlet", "rotations"])
def test_no_sample_is_shared_between_trainers(kind: str) -> None:
    datas = _built(kind, 6)
    indices = np.concatenate([d.indices for d in datas])
    assert len(indices) == len(set(indices.tolist()))


def test_iid_trainers_together_hold_the_whole_dataset() -> None:
    datas = _built("iid", 5)
    assert sum(len(d.indices) for d in datas) == 1797


def test_groups_scenario_gives_disjoint_class_groups() -> None:
    # Prepare / Execute: 7 trainers, 3 groups of classes 0-3, 4-6, 7-9.
    specs = scenario_specs("groups", 7, seed=1, dataset="digits")
    datas = [build_trainer_data(spec) for spec in specs]
    # Assert
    assert [s.group for s in specs[:3]] == ["classes 0-3", "classes 4-6", "classes 7-9"]
    for spec, data in zip(specs, datas, strict=True):
        classes = set(np.flatnonzero(data.class_counts()).tolist())
        expected = {"classes 0-3": {0, 1, 2, 3}, "classes 4-6": {4, 5, 6}, "classes 7-9": {7, 8, 9}}
        assert classes == expected[spec.group]
    # Group 0's three trainers (0, 3, 6) share its samples: together, all of classes 0-3.
    digits = load_dataset("digits")
    group0 = np.concatenate([datas[i].indices for i in (0, 3, 6)])
    np.testing.assert_array_equal(np.sort(group0), np.flatnonzero(digits.labels <= 3))


def test_gaussian_scenario_centres_each_trainer_on_its_mean_class() -> None:
    specs = scenario_specs("gaussian", 10, seed=2, dataset="digits", std=1.0)
    for spec in specs[3:7]:
        counts = build_trainer_data(spec).class_counts()
        mean_class = int(spec.group.split()[-1])
        assert spec.group == f"mean class {spec.seed - 2000}"
        observed_mean = (np.arange(10) * counts).sum() / counts.sum()
        assert abs(observed_mean - mean_class) < 0.75
        far = np.abs(np.arange(10) - mean_class) >= 3
        assert counts[far].sum() <= 0.1 * counts.sum()


def test_two_datasets_scenario_splits_trainers_by_dataset() -> None:
    specs = scenario_specs(
        "two-datasets",
        5,
        seed=0,
        dataset="fashion-mnist",
        other_dataset="digits",
        samples_per_trainer=60,
    )
    assert [s.dataset for s in specs] == ["fashion-mnist"] * 3 + ["digits"] * 2
    assert [s.group for s in specs] == ["fashion-mnist"] * 3 + ["digits"] * 2
    assert all(len(build_trainer_data(s).indices) == 60 for s in specs)


def test_trainers_get_distinct_seeds_and_the_cap() -> None:
    specs = scenario_specs("dirichlet", 4, seed=3, samples_per_trainer=40, alpha=1.0)
    assert len({s.seed for s in specs}) == 4
    assert all(s.n_samples == 40 for s in specs)


def test_unknown_scenario_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=", ".join(SCENARIOS)):
        scenario_specs("chaos", 3, seed=0)


def test_a_scenario_kind_is_added_by_one_registry_entry(monkeypatch) -> None:
    # Prepare: odd and even classes, trainer i in half i mod 2, placed in n_groups
    def halves(c: ScenarioContext) -> list[TrainerDataSpec]:
        classes = [tuple(range(h, c.num_classes, 2)) for h in (0, 1)]
        return [
            c.spec(i, [ClassSubset(classes[i % 2]), Partition(i, c.n_trainers, c.seed)],
                   "odd" if i % 2 else "even")
            for i in c.trainers
        ]  # fmt: skip

    monkeypatch.setitem(SCENARIO_KINDS, "halves", ScenarioKind(halves, grouped=True))

    # Execute
    specs = scenario_specs("halves", 4, seed=2, dataset="digits", samples_per_trainer=50)

    # Assert: its specs, each with the scenario's seed scheme and cap; the checks of a
    # grouped kind apply to it
    assert [s.group for s in specs] == ["even", "odd", "even", "odd"]
    assert specs[1].masks == (ClassSubset((1, 3, 5, 7, 9)), Partition(1, 4, 2))
    assert [(s.seed, s.n_samples) for s in specs] == [(2000 + i, 50) for i in range(4)]
    with pytest.raises(ValueError, match="halves: need 1 <= n_groups <= n_trainers"):
        scenario_specs("halves", 2, seed=0, n_groups=3)


def test_rotations_with_group_sizes_make_a_majority_and_a_minority_cluster() -> None:
    # Prepare / Execute: FACADE's 24:8 at a quarter of its size, 6:2
    specs = scenario_specs("rotations", 8, seed=3, dataset="digits", group_sizes=[6, 2])

    # Assert: the first six upright, the last two rotated 180°; equal IID shares
    assert [s.group for s in specs] == ["rotation 0°"] * 6 + ["rotation 180°"] * 2
    assert [s.masks[1] for s in specs] == [Rotation(0.0)] * 6 + [Rotation(180.0)] * 2
    assert [s.masks[0] for s in specs] == [Partition(i, 8, 3) for i in range(8)]


@pytest.mark.parametrize(
    ("kind", "sizes", "message"),
    [
        ("rotations", [6, 1], r"add up to 7 trainers; the scenario has n_trainers=8"),
        ("rotations", [8, 0], r"whole numbers >= 1"),
        ("groups", [4, 4], r"applies to the rotations scenario, not to 'groups'"),
    ],
)
def test_group_sizes_that_do_not_fit_are_refused(kind: str, sizes: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        scenario_specs(kind, 8, seed=0, dataset="digits", group_sizes=sizes)
    with pytest.raises(ValueError, match=r"n_groups=3 but group_sizes \[6, 2\] make 2 groups"):
        scenario_specs("rotations", 8, seed=0, dataset="digits", n_groups=3, group_sizes=[6, 2])


def test_each_kind_declares_its_number_of_data_groups() -> None:
    # Assert: what a clustered baseline told the truth gets as k; none for kinds whose
    # trainers' distributions form no groups, never more than the trainers.
    assert declared_group_count("groups") == 3
    assert declared_group_count("groups", n_groups=4) == 4
    assert declared_group_count("rotations", group_sizes=[15, 1]) == 2
    assert declared_group_count("two-datasets") == 2
    assert declared_group_count("two-datasets", n_trainers=1) == 1
    assert declared_group_count("iid") == 1
    assert declared_group_count("gaussian") is None
    assert declared_group_count("dirichlet") is None
    # the labels scenario_specs gives agree where a kind declares a count
    for kind, params in (
        ("groups", {"n_groups": 2}),
        ("two-datasets", {"other_dataset": "digits"}),
    ):
        specs = scenario_specs(kind, 6, 0, dataset="fashion-mnist", **params)
        assert len({spec.group for spec in specs}) == declared_group_count(
            kind, n_trainers=6, n_groups=params.get("n_groups")
        )
    with pytest.raises(ValueError, match="unknown scenario kind"):
        declared_group_count("nope")
