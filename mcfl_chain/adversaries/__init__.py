"""Misbehaving trainers: one module per adversary behind :class:`~.base.Adversary`.

- ``malformed``         garbage-weights, nan-weights, unreachable-cid (updates no one can use)
- ``label_flip``        label-flip: trains on labels shifted by a fixed derangement
- ``backdoor``          backdoor: a trigger patch relabelled to a target class; attack success
- ``sign_flip``         sign-flip (parent − λ·step) and scaling (parent + λ·step)
- ``free_rider``        free-rider: the parent's weights, or a disguised copy of a peer's update
- ``sample_inflation``  sample-inflation: declares the contract's maximum sample count
- ``sybil``             sybil: colluding identities inflate their own model's popularity
- ``sybil_payloads``    sybil-backdoor, sybil-sign-flip: Sybils whose updates carry an attack

Adaptive attacks, which read the round's honest updates from the chain before proposing
(``round_reader`` says how, and when):

- ``alie``              alie: "a little is enough", mean − z_max·std per coordinate
- ``ipm``               ipm: inner-product manipulation, −ε times the honest mean step
- ``min_max``           min-max, min-sum: the mean pushed along a direction while within
                        the honest updates' own largest distance (sum of squares)
- ``filter_aware``      filter-aware: placed inside MCFL's Algorithm 2 tolerance, as far
                        along a harmful direction as it allows

``make_adversary(name, **params)`` or ``parse_adversary("name:key=value")`` builds one;
``assign_adversaries("label-flip:0.2,backdoor:0.2", n)`` spreads them over a network's
trainers (at random, or concentrated in one data group), and ``with_coalitions`` writes
each one's spec as its worker is told it (``--adversary TEXT``, colluders' coalition
included). The worker runs honestly without
one.
"""

from mcfl_chain.adversaries import (
    alie,
    backdoor,
    filter_aware,
    free_rider,
    ipm,
    label_flip,
    malformed,
    min_max,
    sample_inflation,
    sign_flip,
    sybil,
    sybil_payloads,
)
from mcfl_chain.adversaries.base import (
    ADVERSARIES,
    Adversary,
    CandidateView,
    Publication,
    adversary_parameters,
    make_adversary,
    register_adversary,
)
from mcfl_chain.adversaries.spec import (
    GROUPED_PLACEMENTS,
    PLACEMENTS,
    AdversarySpec,
    assign_adversaries,
    build_adversaries,
    parse_adversary,
    parse_adversary_shares,
    parse_adversary_spec,
    with_coalitions,
)

__all__ = [
    "ADVERSARIES",
    "GROUPED_PLACEMENTS",
    "PLACEMENTS",
    "Adversary",
    "AdversarySpec",
    "CandidateView",
    "Publication",
    "adversary_parameters",
    "alie",
    "assign_adversaries",
    "backdoor",
    "build_adversaries",
    "filter_aware",
    "free_rider",
    "ipm",
    "label_flip",
    "make_adversary",
    "malformed",
    "min_max",
    "parse_adversary",
    "parse_adversary_shares",
    "parse_adversary_spec",
    "register_adversary",
    "sample_inflation",
    "sign_flip",
    "sybil",
    "sybil_payloads",
    "with_coalitions",
]
