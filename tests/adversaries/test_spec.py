"""Adversaries named in text, and assigned to shares of a network deterministically."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.adversaries import (
    AdversarySpec,
    assign_adversaries,
    build_adversaries,
    parse_adversary,
    parse_adversary_shares,
    parse_adversary_spec,
    with_coalitions,
)
from mcfl_chain.adversaries.backdoor import Backdoor
from mcfl_chain.adversaries.label_flip import LabelFlip
from mcfl_chain.adversaries.sybil import Sybil


def test_parse_one_adversary_with_typed_parameters() -> None:
    # Execute
    spec = parse_adversary_spec("backdoor:target=7:fraction=0.3")
    adversary = parse_adversary("free-rider:source=peer")

    # Assert
    assert spec == AdversarySpec("backdoor", (("fraction", 0.3), ("target", 7)))
    assert str(spec) == "backdoor:fraction=0.3:target=7"
    built = spec.build()
    assert isinstance(built, Backdoor) and (built.target, built.fraction) == (7, 0.3)
    assert isinstance(parse_adversary("label-flip"), LabelFlip)
    assert adversary.source == "peer"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("label-flop", "unknown adversary 'label-flop'"),
        ("sign-flip:4", "'4' is not KEY=VALUE"),
        ("sign-flip:lambda=4", "no parameter lambda"),
        ("sign-flip:scale=-1", "finite number > 0"),
    ],
)
def test_parse_refuses_what_no_adversary_accepts(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_adversary(text)


def test_parse_shares() -> None:
    entries = parse_adversary_shares("label-flip:0.2, sign-flip:0.1:scale=4")
    assert entries == [
        (AdversarySpec("label-flip"), 0.2),
        (AdversarySpec("sign-flip", (("scale", 4),)), 0.1),
    ]
    with pytest.raises(ValueError, match="needs one share"):
        parse_adversary_shares("label-flip")
    with pytest.raises(ValueError, match="more than all"):
        parse_adversary_shares("label-flip:0.6,backdoor:0.5")
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        parse_adversary_shares("label-flip:0")


def test_assignment_counts_are_rounded_shares_and_deterministic() -> None:
    # Prepare: 10 trainers, 0.2 -> 2 label flippers, 0.25 -> 2.5 -> 3 backdoors.
    text = "label-flip:0.2,backdoor:0.25"

    # Execute
    assignment = assign_adversaries(text, 10, seed=3)

    # Assert
    names = [spec.name for spec in assignment.values()]
    assert names.count("label-flip") == 2 and names.count("backdoor") == 3
    assert list(assignment) == sorted(assignment)
    assert assignment == assign_adversaries(text, 10, seed=3)
    assert assignment != assign_adversaries(text, 10, seed=4)
    assert len(assign_adversaries("sybil:0.01", 6)) == 1  # a positive share: at least one


def test_assignment_refuses_more_adversaries_than_trainers() -> None:
    with pytest.raises(ValueError, match="need 4 trainers"):
        assign_adversaries("label-flip:0.5,backdoor:0.5", 3)


def test_build_gives_sybils_their_coalition() -> None:
    # Prepare
    assignment = {
        0: AdversarySpec("sybil"),
        2: AdversarySpec("sybil"),
        3: AdversarySpec("label-flip"),
    }
    addresses = ["0xA0", "0xA1", "0xA2", "0xA3"]

    # Execute
    adversaries = build_adversaries(assignment, addresses)

    # Assert
    sybil = adversaries[0]
    assert isinstance(sybil, Sybil) and sybil.coalition == {"0xa0", "0xa2"}
    assert isinstance(adversaries[3], LabelFlip) and set(adversaries) == {0, 2, 3}


def test_workers_are_told_their_coalition_in_their_adversarys_text() -> None:
    # Prepare
    assignment = assign_adversaries("sybil:0.5:payload=label-flip,label-flip:0.25", 4, seed=1)
    addresses = ["0xA0", "0xA1", "0xA2", "0xA3"]

    # Execute
    told = with_coalitions(assignment, addresses)

    # Assert: each Sybil's text names both Sybils' addresses and rebuilds the same adversary.
    sybils = sorted(i for i, spec in assignment.items() if spec.name == "sybil")
    coalition = "+".join(addresses[i] for i in sybils)
    for index, spec in told.items():
        if index in sybils:
            assert str(spec) == f"sybil:coalition={coalition}:payload=label-flip"
            rebuilt = parse_adversary(str(spec))
            assert isinstance(rebuilt, Sybil)
            assert rebuilt.coalition == {addresses[i].lower() for i in sybils}
        else:
            assert spec == assignment[index] and str(spec) == "label-flip"


def test_a_coalition_written_in_the_spec_is_kept() -> None:
    spec = parse_adversary_spec("sybil:coalition=0xA9")
    assert with_coalitions({0: spec, 1: spec}, ["0xA0", "0xA1"]) == {0: spec, 1: spec}


GROUPS_OF_12 = [f"group {i % 3}" for i in range(12)]


def test_concentrated_placement_fills_the_largest_group_but_for_one_trainer() -> None:
    # Prepare: 12 trainers in 3 groups of 4 (i mod 3), as the groups scenario makes them.
    def group_counts(assignment) -> list[int]:
        return sorted(
            (sum(GROUPS_OF_12[i] == g for i in assignment) for g in set(GROUPS_OF_12)),
            reverse=True,
        )

    # Execute
    two = assign_adversaries(
        "backdoor:0.2", 12, seed=3, placement="concentrated", groups=GROUPS_OF_12
    )
    five = assign_adversaries(
        "label-flip:0.4", 12, seed=3, placement="concentrated", groups=GROUPS_OF_12
    )
    mixed = assign_adversaries(
        "label-flip:0.2,backdoor:0.2", 12, seed=5, placement="concentrated", groups=GROUPS_OF_12
    )

    # Assert: 2 of the 4 trainers of one group; 5 as 3 + 2 (each group keeps an honest
    # trainer); ties between equal groups go to the group of trainer 0.
    assert group_counts(two) == [2, 0, 0] and {GROUPS_OF_12[i] for i in two} == {"group 0"}
    assert group_counts(five) == [3, 2, 0]
    assert sum(GROUPS_OF_12[i] == "group 0" for i in five) == 3
    assert group_counts(mixed) == [3, 1, 0]
    # the same inputs, the same seats; another seed, others within the group
    assert two == assign_adversaries(
        "backdoor:0.2", 12, seed=3, placement="concentrated", groups=GROUPS_OF_12
    )
    seats = {
        frozenset(
            assign_adversaries(
                "backdoor:0.2", 12, seed=s, placement="concentrated", groups=GROUPS_OF_12
            )
        )
        for s in range(8)
    }
    assert len(seats) > 1 and all(GROUPS_OF_12[i] == "group 0" for seat in seats for i in seat)


def test_concentrated_drawn_placement_fills_each_of_equal_groups_on_some_seeds() -> None:
    # Execute: 2 adversaries among 3 groups of 4, over seeds
    filled = {
        seed: {
            GROUPS_OF_12[i]
            for i in assign_adversaries(
                "sign-flip:0.2", 12, seed=seed, placement="concentrated-drawn", groups=GROUPS_OF_12
            )
        }
        for seed in range(12)
    }

    # Assert: always one group, half of it; every group on some seed; and the larger
    # group still comes first when sizes differ
    assert all(len(groups) == 1 for groups in filled.values())
    assert set().union(*filled.values()) == set(GROUPS_OF_12)
    uneven = ["0°"] * 6 + ["180°"] * 2
    for seed in range(6):
        drawn = assign_adversaries(
            "ipm:0.25", 8, seed=seed, placement="concentrated-drawn", groups=uneven
        )
        assert set(drawn) <= set(range(6))


def test_concentrated_placement_prefers_the_largest_group_then_holds_back_one_each() -> None:
    # 30:2 rotations: trainers 0-5 rotated 0°, 6-7 rotated 180°; then all 8 adversaries.
    groups = ["0°"] * 6 + ["180°"] * 2
    assert set(
        assign_adversaries("ipm:0.25", 8, seed=1, placement="concentrated", groups=groups)
    ) <= set(range(6))
    # 7 of 8: 5 in the big group, 1 in the small one, then the big group's held-back one
    seven = assign_adversaries("ipm:0.875", 8, seed=1, placement="concentrated", groups=groups)
    assert sum(i < 6 for i in seven) == 6 and sum(i >= 6 for i in seven) == 1


def test_random_placement_is_the_default_and_unknown_ones_are_refused() -> None:
    # random: the first trainers of the seeded permutation, as before placements existed
    drawn = assign_adversaries("label-flip:0.25", 8, seed=2)
    assert set(drawn) == set(np.random.default_rng(2).permutation(8)[:2].tolist())
    assert drawn == assign_adversaries("label-flip:0.25", 8, seed=2, placement="random")
    with pytest.raises(ValueError, match="placement must be one of random, concentrated"):
        assign_adversaries("label-flip:0.25", 8, placement="clustered")
    with pytest.raises(ValueError, match="needs the data group of each of the 8 trainers"):
        assign_adversaries("label-flip:0.25", 8, placement="concentrated", groups=["a"] * 7)
