"""Why a worker's round budget (``--rounds``, ``--last-round``) leaves it nothing to play."""

from __future__ import annotations


def nothing_left(round_: int, rounds: int | None, last_round: int | None, first: int | None) -> str:
    """One line saying why round ``round_`` of the network is past this trainer's budget.

    ``first`` is the round ``--rounds`` counts from (the first this trainer took part in).
    """
    if last_round is not None and round_ > last_round:
        return (
            f"the network is at round {round_}, past --last-round {last_round}; nothing left "
            f"to play"
        )
    if rounds is not None and first is not None:
        return (
            f"the network is at round {round_}, past round {first + rounds - 1}, the last of "
            f"this trainer's budget of {rounds} round(s) from its first round {first} "
            f"(--rounds {rounds}); nothing left to play"
        )
    return f"the network is at round {round_}, past this trainer's rounds; nothing left to play"
