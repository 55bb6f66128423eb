"""Each sampling mask on hand-checked labels, their composition and serialisation."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.learning.masks import (
    Balanced,
    ClassSubset,
    Dirichlet,
    Gaussian,
    MaskError,
    Partition,
    Rotation,
    combined_probabilities,
    mask_from_dict,
    parse_mask,
)

LABELS = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2], dtype=np.int64)


def test_balanced_keeps_the_rarest_class_whole() -> None:
    p = Balanced().probabilities(LABELS, 4)
    np.testing.assert_allclose(p[LABELS == 0], 2 / 4)
    np.testing.assert_allclose(p[LABELS == 1], 1.0)
    np.testing.assert_allclose(p[LABELS == 2], 2 / 6)
    # Expected count per class is then equal (2 each); absent class 3 is ignored.
    assert [p[LABELS == c].sum() for c in range(3)] == pytest.approx([2, 2, 2])


def test_gaussian_follows_the_bell_over_classes() -> None:
    p = Gaussian(mean_class=1, std=1.0).probabilities(LABELS, 3)
    assert p[LABELS == 1] == pytest.approx([1.0, 1.0])
    np.testing.assert_allclose(p[LABELS == 0], np.exp(-0.5))
    np.testing.assert_allclose(p[LABELS == 2], np.exp(-0.5))
    narrow = Gaussian(mean_class=0, std=0.5).probabilities(LABELS, 3)
    np.testing.assert_allclose(narrow[LABELS == 2], np.exp(-8.0))


def test_gaussian_rejects_a_non_positive_std() -> None:
    with pytest.raises(MaskError, match="std must be > 0"):
        Gaussian(mean_class=0, std=0.0)


def test_partitions_are_disjoint_equal_and_cover_everything() -> None:
    labels = np.arange(103) % 10
    parts = [Partition(i, 4, seed=7).probabilities(labels, 10) for i in range(4)]
    np.testing.assert_array_equal(sum(parts), np.ones(103))
    assert sorted(int(p.sum()) for p in parts) == [25, 26, 26, 26]
    # Another seed deals the samples differently.
    assert not np.array_equal(parts[0], Partition(0, 4, seed=8).probabilities(labels, 10))


def test_partition_checks_its_index() -> None:
    with pytest.raises(MaskError, match="0 <= i < k"):
        Partition(4, 4)


def test_class_subset_keeps_only_listed_classes() -> None:
    p = ClassSubset((0, 2)).probabilities(LABELS, 3)
    np.testing.assert_array_equal(p, (LABELS != 1).astype(float))
    with pytest.raises(MaskError, match=r"classes \[5\] do not exist"):
        ClassSubset((5,)).probabilities(LABELS, 3)


def test_dirichlet_shares_are_disjoint_and_cover_every_sample() -> None:
    labels = np.repeat(np.arange(10), 100)
    shares = [Dirichlet(0.3, i, 5, seed=1).probabilities(labels, 10) for i in range(5)]
    np.testing.assert_array_equal(sum(shares), np.ones(1000))


def test_dirichlet_small_alpha_skews_labels_more_than_large_alpha() -> None:
    labels = np.repeat(np.arange(10), 500)

    def mean_top_class_share(alpha: float) -> float:
        tops = []
        for i in range(10):
            kept = labels[Dirichlet(alpha, i, 10, seed=3).probabilities(labels, 10) == 1]
            tops.append(np.bincount(kept, minlength=10).max() / max(1, kept.size))
        return float(np.mean(tops))

    assert mean_top_class_share(0.1) > 0.5 > mean_top_class_share(100.0)


def test_rotation_is_a_transform_not_a_selection() -> None:
    image = np.zeros((1, 1, 4, 4), dtype=np.float32)
    image[0, 0, 0, 3] = 1.0  # top-right corner
    rotation = Rotation(90)
    np.testing.assert_array_equal(rotation.probabilities(LABELS, 3), np.ones(12))
    rotated = rotation.transform(image)
    assert rotated[0, 0, 0, 0] == 1.0  # counter-clockwise: top-right goes to top-left
    np.testing.assert_array_equal(Rotation(360).transform(image), image)


def test_arbitrary_angle_rotation_agrees_with_the_exact_quarter_turn() -> None:
    images = np.random.default_rng(0).random((3, 1, 28, 28), dtype=np.float32)
    almost = Rotation(89.999).transform(images)
    exact = Rotation(90).transform(images)
    assert almost.shape == images.shape and almost.dtype == np.float32
    np.testing.assert_allclose(almost[..., 2:-2, 2:-2], exact[..., 2:-2, 2:-2], atol=1e-3)


def test_masks_compose_by_product() -> None:
    masks = [ClassSubset((0, 1)), Gaussian(0, 1.0)]
    p = combined_probabilities(masks, LABELS, 3)
    np.testing.assert_allclose(p, np.array([1, 1, 1, 1, *[np.exp(-0.5)] * 2, *[0] * 6]))
    np.testing.assert_array_equal(combined_probabilities([], LABELS, 3), np.ones(12))


@pytest.mark.parametrize(
    "mask",
    [
        Balanced(),
        Gaussian(4, 1.5),
        Partition(2, 38, seed=5),
        ClassSubset((0, 3, 7)),
        Dirichlet(0.5, 3, 10, seed=2),
        Rotation(90.0),
    ],
)
def test_masks_round_trip_through_dicts_and_strings(mask: object) -> None:
    assert mask_from_dict(mask.to_dict()) == mask  # type: ignore[attr-defined]
    assert parse_mask(str(mask)) == mask


def test_parse_accepts_positional_arguments_and_bare_names() -> None:
    assert parse_mask("partition(0, 38)") == Partition(0, 38)
    assert parse_mask("balanced") == Balanced()
    assert parse_mask("classes([1, 2])") == ClassSubset((1, 2))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("shuffle(3)", "unknown mask kind 'shuffle'"),
        ("gaussian(mean_class=os.getcwd())", "literal"),
        ("partition(1, 2, 3, 4)", "at most 3 arguments"),
        ("gaussian(mean=1)", "does not accept"),
        ("partition(0,", "cannot parse"),
    ],
)
def test_parse_rejects_bad_masks_clearly(text: str, message: str) -> None:
    with pytest.raises(MaskError, match=message):
        parse_mask(text)
