"""A phase's members from the synced vote and phase records (PROTOCOL §4)."""

from mcfl_chain.chain.client import Phase
from mcfl_chain.dag.graph import ModelDAG
from mcfl_chain.dag.quorum import phase_members, voters_in

P, A = Phase.PROPOSE, Phase.AGGREGATE


def _dag(votes: list[tuple[int, Phase, int]], phases: list[tuple[int, Phase, int]]) -> ModelDAG:
    dag = ModelDAG()
    dag.votes = [
        {"round": r, "phase": int(p), "trainer_id": t, "counted": True} for r, p, t in votes
    ]
    dag.phases = [{"round": r, "phase": int(p), "quorum": q} for r, p, q in phases]
    return dag


def test_round_zeros_first_phase_counts_the_trainers_registered_when_it_opened():
    assert phase_members(ModelDAG(), 0, P, 3) == {1, 2, 3}


def test_a_phases_members_are_the_previous_phases_voters():
    dag = _dag([(0, P, 1), (0, P, 2), (0, P, 3), (0, A, 1), (0, A, 3)], [(0, A, 3), (1, P, 2)])
    assert voters_in(dag, 0, A) == {1, 3}
    assert phase_members(dag, 0, A, 3) == {1, 2, 3}
    assert phase_members(dag, 1, P, 2) == {1, 3}


def test_a_silent_member_is_carried_over_once_not_forever():
    # trainer 2 votes in round 0's PROPOSE, then falls silent
    votes = [(0, P, 1), (0, P, 2), (0, P, 3), (0, A, 1), (0, A, 3), (1, P, 1), (1, P, 3)]
    phases = [(0, P, 3), (0, A, 3), (1, P, 3), (1, A, 2)]
    dag = _dag(votes, phases)
    # round 1's PROPOSE: quorum 3 against 2 voters before it, so trainer 2 is carried over
    assert phase_members(dag, 1, P, 3) == {1, 2, 3}
    # round 1's AGGREGATE: its quorum is the 2 voters, and trainer 2 is no longer in it
    assert phase_members(dag, 1, A, 2) == {1, 3}
    # even a larger quorum carries over only the previous phase's own (uncarried) members
    assert phase_members(dag, 1, A, 3) == {1, 3}


def test_in_a_cohort_network_a_round_is_for_its_drawn_trainers():
    # Prepare: round 1 draws trainers 4 and 7 (round 0's voters were 1-3)
    cohorts = {0: {1, 2, 3}, 1: {4, 7}}
    votes = [(0, P, 1), (0, P, 2), (0, P, 3), (0, A, 1), (0, A, 2), (0, A, 3), (1, P, 4)]
    dag = _dag(votes, [(0, P, 3), (0, A, 3), (1, P, 2)])
    # Execute / Assert: PROPOSE's members are the drawn, whoever voted the phase before
    assert phase_members(dag, 1, P, 2, drawn=cohorts.__getitem__) == {4, 7}
    # AGGREGATE's are PROPOSE's voters; after a deadline (carry-over), the silent drawn too
    assert phase_members(dag, 1, A, 1, drawn=cohorts.__getitem__) == {4}
    assert phase_members(dag, 1, A, 2, drawn=cohorts.__getitem__) == {4, 7}
