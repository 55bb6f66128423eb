"""Adversaries named in text, and assigned to a share of a network's trainers.

One adversary: ``NAME[:KEY=VALUE[:KEY=VALUE...]]``, e.g. ``label-flip``,
``sign-flip:scale=4``, ``backdoor:target=7:fraction=0.3`` (:func:`parse_adversary`).

Shares of a network, for the simulator: a comma-separated list of
``NAME:SHARE[:KEY=VALUE...]``, e.g. ``label-flip:0.2,backdoor:0.2:target=7``
(:func:`assign_adversaries`). Each entry gets ``SHARE·n`` trainers rounded to the
nearest (halves up), at least one for a positive share; the trainers are taken in the
order :func:`placement_order` gives, entries in their order, so the same text, ``n``,
seed and placement always give the same assignment:

- ``random`` (the default): a permutation of ``0 … n−1`` seeded by ``seed``;
- ``concentrated``, the worst case for a data group: the scenario's largest group (ties:
  the one whose first trainer comes first) fills first, in the seeded order, but for one
  trainer, then the next largest group likewise, and only then the trainers held back.
  A group is left one honest trainer because a group made only of adversaries has
  nobody to harm: two adversaries in a group of four are half of it, five among three
  groups of four are three in one group and two in the next;
- ``concentrated-drawn``: the same, but ties between groups of one size go to the group
  the seeded order reaches first, so that equal groups (``groups``: three of four) are
  each filled on some seeds. ``concentrated`` always fills the group of trainer 0 there,
  which the defence benchmarks found is not always the group that loses most.

Values are read as ``true``/``false``, an integer, a float, or else kept as text; the
adversary's constructor checks them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mcfl_chain.adversaries.base import Adversary, adversary_parameters, make_adversary
from mcfl_chain.algorithms.robust.spec import Value, parse_key_values

PLACEMENTS = ("random", "concentrated", "concentrated-drawn")
"""Where adversaries sit among a network's trainers (module docstring)."""
GROUPED_PLACEMENTS = ("concentrated", "concentrated-drawn")
"""The placements that need each trainer's data group."""


@dataclass(frozen=True)
class AdversarySpec:
    """An adversary's name and parameters, as written on a command line.

    Attributes
    ----------
    name : str
        A registered adversary.
    params : tuple[tuple[str, Value], ...]
        ``(parameter, value)`` pairs, sorted by parameter.
    """

    name: str
    params: tuple[tuple[str, Value], ...] = ()

    def build(self, **extra: Any) -> Adversary:
        """A new adversary with these parameters (and ``extra`` ones, e.g. a coalition)."""
        return make_adversary(self.name, **dict(self.params), **extra)

    def __str__(self) -> str:
        return ":".join([self.name, *(f"{key}={value}" for key, value in self.params)])


def _spec(name: str, fields: Sequence[str], text: str) -> AdversarySpec:
    params = parse_key_values(fields, f"adversary {text!r}")
    spec = AdversarySpec(name.strip(), tuple(sorted(params.items())))
    spec.build()  # refuse an unknown name, parameter or value now, not in a worker
    return spec


def parse_adversary_spec(text: str) -> AdversarySpec:
    """Read ``NAME[:KEY=VALUE...]``.

    Raises
    ------
    ValueError
        If a field is not ``KEY=VALUE``, or the adversary refuses the name or a parameter.
    """
    name, *fields = text.split(":")
    return _spec(name, fields, text)


def parse_adversary(text: str) -> Adversary:
    """The adversary ``NAME[:KEY=VALUE...]`` names: ``parse_adversary("sign-flip:scale=4")``."""
    return parse_adversary_spec(text).build()


def parse_adversary_shares(text: str) -> list[tuple[AdversarySpec, float]]:
    """Read ``NAME:SHARE[:KEY=VALUE...]`` entries separated by commas.

    Raises
    ------
    ValueError
        If an entry has no share in (0, 1], the shares add up to more than 1, or an
        adversary refuses its name or a parameter.
    """
    entries: list[tuple[AdversarySpec, float]] = []
    for entry in (part.strip() for part in text.split(",")):
        name, *fields = entry.split(":")
        shares = [field for field in fields if "=" not in field]
        if len(shares) != 1:
            raise ValueError(
                f"adversary entry {entry!r} needs one share of the trainers, e.g. {name}:0.2"
            )
        try:
            share = float(shares[0])
        except ValueError:
            raise ValueError(
                f"adversary entry {entry!r}: share {shares[0]!r} is no number"
            ) from None
        if not 0.0 < share <= 1.0:
            raise ValueError(f"adversary entry {entry!r}: the share must be in (0, 1], got {share}")
        entries.append((_spec(name, [f for f in fields if "=" in f], entry), share))
    total = math.fsum(share for _, share in entries)
    if total > 1.0 + 1e-9:
        raise ValueError(f"adversary shares add up to {total:g} of the trainers, more than all")
    return entries


def placement_order(
    n_trainers: int,
    seed: int = 0,
    placement: str = "random",
    groups: Sequence[str] | None = None,
) -> list[int]:
    """The order in which trainers are taken to play adversaries (module docstring).

    Parameters
    ----------
    n_trainers : int
        Trainers in the network.
    seed : int, default 0
        Seed of the permutation.
    placement : {"random", "concentrated", "concentrated-drawn"}, default "random"
        Module docstring.
    groups : Sequence[str], optional
        Each trainer's data group (:attr:`~mcfl_chain.learning.scenario.TrainerDataSpec.group`),
        needed by ``concentrated``.

    Raises
    ------
    ValueError
        For an unknown placement, or ``concentrated`` without one group per trainer.
    """
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    order: list[int] = np.random.default_rng(seed).permutation(n_trainers).tolist()
    if placement == "random":
        return order
    if groups is None or len(groups) != n_trainers:
        raise ValueError(
            f"concentrated placement needs the data group of each of the {n_trainers} "
            f"trainers, got {0 if groups is None else len(groups)}"
        )
    members: dict[str, list[int]] = {}
    for index in order:
        members.setdefault(groups[index], []).append(index)

    # members is in the seeded order and sorted() is stable: concentrated-drawn leaves
    # groups of one size in the order the seed reached them, concentrated ranks them by
    # their lowest index.
    def tie(drawn: list[int]) -> int:
        return 0 if placement == "concentrated-drawn" else min(drawn)

    ranked = sorted(members.values(), key=lambda drawn: (-len(drawn), tie(drawn)))
    first = [index for drawn in ranked for index in drawn[:-1]]
    return first + [drawn[-1] for drawn in ranked]


def assign_adversaries(
    shares: str | Sequence[tuple[AdversarySpec, float]],
    n_trainers: int,
    seed: int = 0,
    placement: str = "random",
    groups: Sequence[str] | None = None,
) -> dict[int, AdversarySpec]:
    """Which trainers play which adversary (module docstring); honest ones are absent.

    Parameters
    ----------
    shares : str or Sequence[tuple[AdversarySpec, float]]
        ``"label-flip:0.2,backdoor:0.2"`` or its parsed form.
    n_trainers : int
        Trainers in the network.
    seed : int, default 0
        Seed of the permutation the adversarial trainers are drawn from.
    placement : {"random", "concentrated", "concentrated-drawn"}, default "random"
        Where they sit (module docstring).
    groups : Sequence[str], optional
        Each trainer's data group, for ``concentrated``.

    Returns
    -------
    dict[int, AdversarySpec]
        Trainer index → adversary, ascending indices.

    Raises
    ------
    ValueError
        If the text is refused, the shares need more trainers than there are, or the
        placement is refused (:func:`placement_order`).
    """
    entries = parse_adversary_shares(shares) if isinstance(shares, str) else list(shares)
    counts = [max(1, math.floor(share * n_trainers + 0.5)) for _, share in entries]
    if sum(counts) > n_trainers:
        raise ValueError(
            f"the adversary shares need {sum(counts)} trainers ({counts}) but the network "
            f"has {n_trainers}; lower the shares or add trainers"
        )
    order = placement_order(n_trainers, seed, placement, groups)
    assignment: dict[int, AdversarySpec] = {}
    for (spec, _), count in zip(entries, counts, strict=True):
        for index in order[:count]:
            assignment[index] = spec
        order = order[count:]
    return dict(sorted(assignment.items()))


def build_adversaries(
    assignment: Mapping[int, AdversarySpec], addresses: Mapping[int, str] | Sequence[str]
) -> dict[int, Adversary]:
    """One adversary per assigned trainer; colluders learn their coalition.

    An adversary whose constructor takes a ``coalition`` (e.g. ``sybil``) gets the
    addresses of every trainer assigned the same spec, itself included.

    Parameters
    ----------
    assignment : Mapping[int, AdversarySpec]
        From :func:`assign_adversaries`.
    addresses : Mapping[int, str] or Sequence[str]
        Each trainer's address, by trainer index.
    """
    result: dict[int, Adversary] = {}
    for index, spec in assignment.items():
        if "coalition" in adversary_parameters(spec.name):
            members = [addresses[i] for i, other in sorted(assignment.items()) if other == spec]
            result[index] = spec.build(coalition=members)
        else:
            result[index] = spec.build()
    return result


def with_coalitions(
    assignment: Mapping[int, AdversarySpec], addresses: Mapping[int, str] | Sequence[str]
) -> dict[int, AdversarySpec]:
    """``assignment`` as each trainer's worker is told it (``--adversary TEXT``): a
    colluding adversary's spec (one whose constructor takes a ``coalition``) gains
    ``coalition=ADDRESS+ADDRESS…``, the addresses of every trainer assigned the same
    spec, itself included, as :func:`build_adversaries` gives them; a coalition already
    written in the spec is kept.

    Parameters
    ----------
    assignment : Mapping[int, AdversarySpec]
        From :func:`assign_adversaries`.
    addresses : Mapping[int, str] or Sequence[str]
        Each trainer's address, by trainer index.
    """
    result: dict[int, AdversarySpec] = {}
    for index, spec in assignment.items():
        params = dict(spec.params)
        if "coalition" in adversary_parameters(spec.name) and "coalition" not in params:
            members = [addresses[i] for i, other in sorted(assignment.items()) if other == spec]
            params["coalition"] = "+".join(members)
            spec = AdversarySpec(spec.name, tuple(sorted(params.items())))
        result[index] = spec
    return result
