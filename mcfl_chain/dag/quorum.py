"""Who votes in a phase and whose votes count, read from the synced vote and phase
records (PROTOCOL §4): pure functions of a :class:`~mcfl_chain.dag.graph.ModelDAG`.

A phase's members are the previous phase's voters; in round 0's first phase, the
trainers registered when it opened (ids 1 to its quorum, unless one exited before). In a
carry-over phase (its quorum larger than the previous phase's voters) the previous
phase's own members that did not vote count too, once.

In a cohort network (PROTOCOL §4, "Cohorts") a PROPOSE phase's members are the trainers
drawn for its round, and an AGGREGATE phase's its PROPOSE phase's voters, with, in a
carry-over, the drawn ones that were silent; the caller gives the draw.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

from mcfl_chain.chain.client import Phase
from mcfl_chain.dag.graph import ModelDAG


def votes_in(dag: ModelDAG, round_: int, phase: Phase) -> list[dict[str, Any]]:
    """The ``TrainerVoted`` records of (round, phase), counted or not."""
    return [v for v in dag.votes if v.get("round") == round_ and v.get("phase") == int(phase)]


def voters_in(dag: ModelDAG, round_: int, phase: Phase) -> set[int]:
    """Trainer ids that voted in (round, phase), counted or not."""
    return {int(v["trainer_id"]) for v in votes_in(dag, round_, phase)}


def phase_members(
    dag: ModelDAG,
    round_: int,
    phase: Phase,
    quorum: int,
    carry: bool = True,
    drawn: Callable[[int], AbstractSet[int]] | None = None,
) -> set[int]:
    """Trainer ids whose votes count in (round, phase), whose quorum is ``quorum``.

    ``carry=False`` leaves out the carried-over members (the recursion's one step back:
    a silent member is carried over once, not forever). ``drawn``: in a cohort network,
    the trainer ids drawn for a round.
    """
    if drawn is not None:
        if phase is Phase.PROPOSE:
            return set(drawn(round_))
        members = voters_in(dag, round_, Phase.PROPOSE)
        if carry and quorum > len(members):
            members |= drawn(round_)
        return members
    if round_ == 0 and phase is Phase.PROPOSE:
        return set(range(1, quorum + 1))
    before = (round_ - 1, Phase.AGGREGATE) if phase is Phase.PROPOSE else (round_, Phase.PROPOSE)
    members = voters_in(dag, *before)
    if carry and quorum > len(members):  # a carry-over phase (exits aside)
        opened = [
            int(r["quorum"])
            for r in dag.phases
            if "quorum" in r and (r["round"], r["phase"]) == (before[0], int(before[1]))
        ]
        members |= phase_members(dag, *before, opened[-1] if opened else 0, carry=False)
    return members
