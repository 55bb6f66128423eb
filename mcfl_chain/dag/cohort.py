"""The per-round cohort draw, computed exactly as ``Models.vy`` draws it (PROTOCOL §4).

In a network deployed with ``cohortBps`` below 10,000, trainer ``t`` is drawn for round
``r`` when the ``(r % 16)``-th 16-bit word (from the least significant) of
``keccak256(abi.encode(bytes32 cohortSeed, uint256 t, uint256 r // 16))`` is below
``cohortBps * 65536 // 10000``: a Bernoulli draw per trainer and round, as Flower's
``fraction_fit`` samples clients, that anyone recomputes from the public seed and that
nobody can re-roll.
"""

from __future__ import annotations

import functools

from eth_abi import encode
from eth_utils import keccak

ALL_TRAINERS_BPS = 10_000
MAX_DRAW_ROUNDS = 4096


def drawn_in(seed: bytes, trainer_id: int, round_: int, cohort_bps: int) -> bool:
    """Whether trainer ``trainer_id`` is in round ``round_``'s cohort (as ``Models._draw``)."""
    if cohort_bps >= ALL_TRAINERS_BPS:
        return True
    word = int.from_bytes(
        keccak(encode(["bytes32", "uint256", "uint256"], [seed, trainer_id, round_ >> 4])), "big"
    )
    return (word >> ((round_ & 15) * 16)) & 0xFFFF < cohort_bps * 65536 // ALL_TRAINERS_BPS


def next_draw(seed: bytes, trainer_id: int, first: int, cohort_bps: int) -> int:
    """The first round from ``first`` on that the trainer is drawn for, at most
    ``MAX_DRAW_ROUNDS`` ahead (the contract then takes the last round it looked at)."""
    for round_ in range(first, first + MAX_DRAW_ROUNDS):
        if drawn_in(seed, trainer_id, round_, cohort_bps):
            return round_
    return first + MAX_DRAW_ROUNDS - 1


@functools.lru_cache(maxsize=64)
def cohort_of(seed: bytes, round_: int, cohort_bps: int, highest_id: int) -> frozenset[int]:
    """The trainer ids from 1 to ``highest_id`` drawn for ``round_``.

    A trainer that joined after the round's draw (its own draw starts at the round after
    its ``join``) is in this set when the draw picks it, though the contract does not
    count it: the set tells whom a round is for, not who was admitted. Kept for the
    trainers of a host, which all ask."""
    return frozenset(t for t in range(1, highest_id + 1) if drawn_in(seed, t, round_, cohort_bps))
