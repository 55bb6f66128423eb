"""Contracts deployed on ape's in-process test chain, and helpers to drive rounds."""

from __future__ import annotations

import hashlib
import json
import urllib.request

import pytest
from multiformats import CID, multihash

from mcfl_chain.chain.cids import cid_to_bytes
from mcfl_chain.dag.model_id import update_id

TASK = "lenet:fashion-mnist"
MIN_TRAINERS = 3
DURATION = 600
MAX_SAMPLES = 1_000_000
OPEN, ALLOWLIST, DEPOSIT = 0, 1, 2
ALL = 10_000
"""cohortBps of a network without cohorts: every trainer in every round."""
PROPOSE, AGGREGATE = 0, 1
ZERO = "0x0000000000000000000000000000000000000000"


def cid_str(label: str, codec: str = "raw") -> str:
    """A CIDv1 string (sha2-256) of ``label``."""
    digest = hashlib.sha256(label.encode()).digest()
    return str(CID("base32", 1, codec, multihash.wrap(digest, "sha2-256")))


def cid_bin(label: str, codec: str = "raw") -> bytes:
    """The 36-byte binary CID the contracts take."""
    return cid_to_bytes(cid_str(label, codec))


GENESIS = cid_str("genesis")
CID_LENGTH_REASON = "CID: expected a 36-byte binary CIDv1 (raw or dag-pb codec, sha2-256 multihash)"
CID_SHAPE_REASON = (
    "CID: only CIDv1 with the raw (0x55) or dag-pb (0x70) codec and a sha2-256 digest"
)
NOT_STARTED = "Models: rounds have not started: fewer than minTrainers trainers are registered"


@pytest.fixture(scope="session", autouse=True)
def _no_per_transaction_inspection():
    """Skip two things ape does after every transaction that these contracts never need,
    a tenth of the contract tests' time: tracing it for Vyper ``print()`` output (the
    contracts print nothing) and, after a deployment, reading the new code for a known
    proxy pattern (none is a proxy)."""
    import ape_ethereum.ecosystem
    import ape_ethereum.provider

    def post_send(tx, receipt):
        pass

    patch = pytest.MonkeyPatch()
    patch.setattr(ape_ethereum.provider, "_post_send_transaction", post_send)
    patch.setattr(ape_ethereum.ecosystem.Ethereum, "get_proxy_info", lambda self, address: None)
    yield
    patch.undo()


@pytest.fixture(scope="session")
def deployer(accounts):
    return accounts[0]


@pytest.fixture(scope="session")
def people(accounts):
    """Accounts 1..11: trainers and outsiders."""
    return list(accounts[1:12])


def deploy(
    project,
    deployer,
    min_trainers=MIN_TRAINERS,
    phase_duration=DURATION,
    link=True,
    policy=OPEN,
    admin=ZERO,
    deposit=0,
    cooldown=0,
    max_samples=MAX_SAMPLES,
    task=TASK,
    cohort_bps=ALL,
):
    """Deploy (Trainers, Models, Updates), linked unless ``link`` is False."""
    trainers = project.Trainers.deploy(policy, admin, deposit, cooldown, sender=deployer)
    models = project.Models.deploy(
        trainers,
        cid_to_bytes(GENESIS),
        task,
        min_trainers,
        phase_duration,
        cohort_bps,
        sender=deployer,
    )
    updates = project.Updates.deploy(models, max_samples, sender=deployer)
    if link:
        trainers.setModels(models, sender=deployer)
        models.setUpdates(updates, sender=deployer)
    return trainers, models, updates


@pytest.fixture(scope="module")
def network(project, deployer):
    """Deployed and linked contracts: open registration, minTrainers 3, 600 s phases.

    Deployed once per module: ape's function isolation gives every test the chain as it
    was after this deployment (each test's transactions are undone after it)."""
    return deploy(project, deployer)


@pytest.fixture
def running(network, people):
    """The network with trainers people[0..2] (ids 1..3) registered: round 0, PROPOSE."""
    trainers, _, _ = network
    for person in people[:MIN_TRAINERS]:
        trainers.register(sender=person)
    return network


def propose(models, person, proposals):
    """``submitProposals`` of (parent, cid, samples) triples; returns the receipt."""
    return models.submitProposals([tuple(p) for p in proposals], sender=person)


def aggregate(models, person, aggregations):
    """``submitAggregations`` of (parents, update ids, weights CID) triples, or
    (parents, update ids, weights CID, rule code, rule parameter) 5-tuples."""
    full = [tuple(a) + (0, 0) if len(a) == 3 else tuple(a) for a in aggregations]
    return models.submitAggregations(
        [(len(ps), len(ids), rule, word, cid) for ps, ids, cid, rule, word in full],
        [p for ps, *_ in full for p in ps],
        [u for _, ids, *_ in full for u in ids],
        sender=person,
    )


def vote(models, person, phase):
    """An empty submission: the vote alone."""
    if phase == PROPOSE:
        return models.submitProposals([], sender=person)
    return models.submitAggregations([], [], [], sender=person)


def vote_all(models, people, phase):
    for person in people:
        vote(models, person, phase)


def propose_all(models, trainers, people, parent, label, samples=100):
    """Each of ``people`` proposes one update of ``parent``; returns their ids in order."""
    ids = []
    for i, person in enumerate(people):
        propose(models, person, [(parent, cid_bin(f"{label}-{i}"), samples + i)])
        ids.append(update_id(trainers.trainerId(person), parent, models.round()))
    return ids


def own(trainers, models, person, parent):
    """The update id of ``person``'s trainer for ``parent`` in the current round."""
    return update_id(trainers.trainerId(person), parent, models.round())


def read_data_url(uri: str) -> dict:
    """The JSON document of a data URL, read by Python's standard data-URL handler."""
    with urllib.request.urlopen(uri) as response:  # noqa: S310 - a data: URL, no network
        return json.loads(response.read())
