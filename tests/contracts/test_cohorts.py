"""Cohorts (PROTOCOL §4): a network that draws the trainers of each round.

The seed comes from the block before the deployment, so which trainer is drawn for which
round differs from run to run; every test reads the seed and recomputes the draw with
:mod:`mcfl_chain.dag.cohort`, and plays the rounds it needs (a round with members and
non-members comes within a few rounds at 50 %).
"""

import ape

from mcfl_chain.dag.cohort import drawn_in, next_draw
from mcfl_chain.dag.model_id import ROOT_MODEL_ID, update_id

from .conftest import AGGREGATE, ALL, PROPOSE, aggregate, cid_bin, deploy, propose, vote

HALF = 5_000
TRAINERS = 6
NOT_IN_COHORT = (
    "Models: not in this round's cohort; an empty call may only end a phase that is over"
)
DRAWN_LATER = "Models: the trainer is drawn for a later round; no new draw before it"


def _past_deadline(models, chain):
    chain.pending_timestamp = models.phaseDeadline()


def _cohort_network(project, deployer, people, bps=HALF, trainers=TRAINERS):
    """A cohort network with ``trainers`` registered (ids 1..n; round 0 opens with the
    last); returns (contracts, seed, person of each id)."""
    network = deploy(project, deployer, min_trainers=trainers, cohort_bps=bps)
    for person in people[:trainers]:
        network[0].register(sender=person)
    seed = bytes(network[1].cohortSeed())
    return network, seed, {i + 1: people[i] for i in range(trainers)}


def _drawn(models, ids):
    """Trainer ids whose draw is the current round."""
    current = models.round()
    return sorted(i for i in ids if tuple(models.drawnRoundOf(i)) == (True, current))


def _play(models, trainers, by_id, seed, bps=HALF):
    """Play the current round with its drawn trainers, each proposing on the root and
    aggregating its own update; checks each voter's new draw. Returns the round's members."""
    current = models.round()
    members = _drawn(models, by_id)
    assert models.quorum() == len(members)
    if not members:  # nobody drawn: any trainer's empty calls end both phases
        vote(models, by_id[1], PROPOSE)
        vote(models, by_id[1], AGGREGATE)
        return members
    for i in members:
        propose(models, by_id[i], [(ROOT_MODEL_ID, cid_bin(f"{current}-{i}"), 10)])
        assert tuple(models.drawnRoundOf(i)) == (True, next_draw(seed, i, current + 1, bps))
    for i in members:
        own = update_id(i, ROOT_MODEL_ID, current)
        aggregate(models, by_id[i], [([ROOT_MODEL_ID], [own], b"")])
    return members


def test_the_draw_is_the_python_recomputation(project, deployer, people):
    # Prepare / Execute: six trainers registered before round 0; each drawn then
    (trainers, models, _), seed, by_id = _cohort_network(project, deployer, people)
    # Assert
    assert models.cohortBps() == HALF
    firsts = {i: next_draw(seed, i, 0, HALF) for i in by_id}
    for i, first in firsts.items():
        assert tuple(models.drawnRoundOf(i)) == (True, first)
        assert drawn_in(seed, i, first, HALF)
    for r in set(firsts.values()):
        assert models.drawnFor(r) == sum(f == r for f in firsts.values())
    assert models.started() and models.quorum() == models.drawnFor(0)


def test_only_the_drawn_propose_and_no_phase_waits_for_the_others(project, deployer, people):
    # Prepare
    (trainers, models, _), seed, by_id = _cohort_network(project, deployer, people)
    # Execute: rounds until one has members and non-members (at 50 %: within a few)
    while not 0 < len(_drawn(models, by_id)) < TRAINERS:
        _play(models, trainers, by_id, seed)
    current = models.round()
    members = _drawn(models, by_id)
    outsider = by_id[next(i for i in by_id if i not in members)]
    # Assert: an outsider can neither propose nor vote, nor end the phase early
    with ape.reverts(NOT_IN_COHORT):
        propose(models, outsider, [(ROOT_MODEL_ID, cid_bin("out"), 10)])
    with ape.reverts(NOT_IN_COHORT):
        vote(models, outsider, PROPOSE)
    assert not models.statusOf(outsider)[4]
    # ... and the phases end with the members' votes alone
    for i in members:
        propose(models, by_id[i], [(ROOT_MODEL_ID, cid_bin(f"m-{i}"), 10)])
    assert (models.phase(), models.quorum()) == (AGGREGATE, len(members))
    with ape.reverts(NOT_IN_COHORT):
        vote(models, outsider, AGGREGATE)
    for i in members:
        own = update_id(i, ROOT_MODEL_ID, current)
        aggregate(models, by_id[i], [([ROOT_MODEL_ID], [own], b"")])
    assert (models.round(), models.phase()) == (current + 1, PROPOSE)
    assert models.quorum() == models.drawnFor(current + 1)


def test_a_phase_without_members_ends_on_any_empty_call(project, deployer, people, chain):
    # Prepare: at 1 % a round of three trainers is empty 97 % of the time; redeploy
    # until round 0 is
    for _ in range(10):
        (trainers, models, _), seed, by_id = _cohort_network(
            project, deployer, people, bps=100, trainers=3
        )
        if models.quorum() == 0:
            break
    assert models.quorum() == 0
    someone = by_id[1]
    # Assert: no proposal outside the cohort, even in an empty phase
    with ape.reverts(NOT_IN_COHORT):
        propose(models, someone, [(ROOT_MODEL_ID, cid_bin("x"), 10)])
    # Execute: an empty call ends it without being a vote; so does the next
    ended = vote(models, someone, PROPOSE)
    assert not ended.decode_logs(models.TrainerVoted)
    (changed,) = ended.decode_logs(models.PhaseChanged)
    assert (changed.round, changed.phase, changed.quorum) == (0, AGGREGATE, 0)
    ended = vote(models, someone, AGGREGATE)
    (changed,) = ended.decode_logs(models.PhaseChanged)
    assert (changed.round, changed.phase) == (1, PROPOSE)
    assert changed.quorum == models.drawnFor(1)


def test_a_silent_drawn_member_costs_its_round_then_joins_again(project, deployer, people, chain):
    # Prepare: a round with two members or more and an outsider
    (trainers, models, _), seed, by_id = _cohort_network(project, deployer, people)
    while not 1 < len(_drawn(models, by_id)) < TRAINERS:
        _play(models, trainers, by_id, seed)
    current = models.round()
    silent, *others = _drawn(models, by_id)
    outsider = by_id[next(i for i in by_id if i not in _drawn(models, by_id))]
    for i in others:
        propose(models, by_id[i], [(ROOT_MODEL_ID, cid_bin(f"s-{i}"), 10)])
    # Execute / Assert: the phase waits for the silent member until its deadline, then
    # anyone ends it; the silent member is carried into AGGREGATE once
    assert models.phase() == PROPOSE
    with ape.reverts(NOT_IN_COHORT):
        vote(models, outsider, PROPOSE)
    _past_deadline(models, chain)
    vote(models, outsider, PROPOSE)
    assert (models.phase(), models.quorum()) == (AGGREGATE, len(others) + 1)
    assert models.statusOf(by_id[silent])[4]
    for i in others:
        aggregate(
            models, by_id[i], [([ROOT_MODEL_ID], [update_id(i, ROOT_MODEL_ID, current)], b"")]
        )
    _past_deadline(models, chain)
    vote(models, outsider, AGGREGATE)
    # ... and no further: it has no draw ahead, so no round waits for it
    assert models.round() == current + 1
    assert tuple(models.drawnRoundOf(silent)) == (True, current)
    assert not models.statusOf(by_id[silent])[4]
    # It joins: drawn for a round from the next one on, counted there
    later = next_draw(seed, silent, current + 2, HALF)
    before = models.drawnFor(later)
    receipt = models.join(sender=by_id[silent])
    (drawn,) = receipt.decode_logs(models.TrainerDrawn)
    assert (drawn.round, drawn.trainerId, drawn.drawnRound) == (current + 1, silent, later)
    assert not receipt.decode_logs(models.TrainerVoted)
    assert models.drawnFor(later) == before + 1
    # A second join would re-roll the draw: refused
    with ape.reverts(DRAWN_LATER):
        models.join(sender=by_id[silent])


def test_a_newcomer_joins_to_be_drawn(project, deployer, people):
    (trainers, models, _), seed, by_id = _cohort_network(project, deployer, people)
    trainers.register(sender=people[TRAINERS])
    newcomer = TRAINERS + 1
    assert tuple(models.drawnRoundOf(newcomer)) == (False, 0)
    with ape.reverts(NOT_IN_COHORT):
        propose(models, people[TRAINERS], [(ROOT_MODEL_ID, cid_bin("new"), 10)])
    models.join(sender=people[TRAINERS])
    assert tuple(models.drawnRoundOf(newcomer)) == (True, next_draw(seed, newcomer, 1, HALF))


def test_an_exit_takes_a_pending_draw_out_of_its_round(project, deployer, people):
    (trainers, models, _), seed, by_id = _cohort_network(project, deployer, people)
    ahead = [i for i in by_id if models.drawnRoundOf(i)[1] > 0]
    if not ahead:  # every trainer drawn for round 0: play it, then some draw ahead
        _play(models, trainers, by_id, seed)
        ahead = [i for i in by_id if models.drawnRoundOf(i)[1] > models.round()]
    leaving = ahead[0]
    later = models.drawnRoundOf(leaving)[1]
    before = models.drawnFor(later)
    trainers.exit(sender=by_id[leaving])
    assert models.drawnFor(later) == before - 1


def test_constructor_and_views_without_cohorts(network, people):
    trainers, models, _ = network
    for person in people[:3]:
        trainers.register(sender=person)
    assert models.cohortBps() == ALL
    assert tuple(models.drawnRoundOf(2)) == (True, 0)
