"""Misbehaving trainers: one module per adversary behind :class:`~.base.Adversary`.

- ``malformed``         garbage-weights, nan-weights, unreachable-cid (updates no one can use)
- ``label_flip``        label-flip: trains on labels shifted by a fixed derangement
- ``backdoor``          backdoor: a trigger patch relabelled to a target class; attack success
- ``sign_flip``         sign-flip (parent − λ·step) and scaling (parent + λ·step)
- ``free_rider``        free-rider: the parent's weights, or a disguised copy of a peer's update
- ``sample_inflation``  sample-inflation: declares the contract's maximum sample count
- ``sybil``             sybil: colluding identities inflate their own model's popularity

``make_adversary(name, **params)`` or ``parse_adversary("name:key=value")`` builds one;
``assign_adversaries("label-flip:0.2,backdoor:0.2", n)`` spreads them over a network's
trainers, and ``with_coalitions`` writes each one's spec as its worker is told it
(``--adversary TEXT``, colluders' coalition included). The worker runs honestly without
one.
"""

from mcfl_chain.adversaries import (
    backdoor,
    free_rider,
    label_flip,
    malformed,
    sample_inflation,
    sign_flip,
    sybil,
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
    "Adversary",
    "AdversarySpec",
    "CandidateView",
    "Publication",
    "adversary_parameters",
    "assign_adversaries",
    "backdoor",
    "build_adversaries",
    "free_rider",
    "label_flip",
    "make_adversary",
    "malformed",
    "parse_adversary",
    "parse_adversary_shares",
    "parse_adversary_spec",
    "register_adversary",
    "sample_inflation",
    "sign_flip",
    "sybil",
    "with_coalitions",
]
