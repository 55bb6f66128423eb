"""Contracts deployed on ape's in-process test chain, and helpers to drive rounds."""

from __future__ import annotations

import hashlib

import pytest
from multiformats import CID, multihash

from mcfl_chain.chain.cids import cid_to_bytes

TASK = "lenet:fashion-mnist"
MIN_TRAINERS = 3


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


@pytest.fixture(scope="session")
def deployer(accounts):
    return accounts[0]


@pytest.fixture(scope="session")
def people(accounts):
    """Accounts 1..11: trainers and outsiders."""
    return list(accounts[1:12])


def deploy(project, deployer, min_trainers=MIN_TRAINERS, phase_duration=0, link=True):
    trainers = project.Trainers.deploy(sender=deployer)
    models = project.Models.deploy(
        trainers, cid_to_bytes(GENESIS), TASK, min_trainers, phase_duration, sender=deployer
    )
    updates = project.Updates.deploy(trainers, models, sender=deployer)
    if link:
        trainers.setModels(models, sender=deployer)
        models.setUpdates(updates, sender=deployer)
    return trainers, models, updates


@pytest.fixture
def network(project, deployer):
    """Freshly deployed and linked (Trainers, Models, Updates); minTrainers = 3, no deadline."""
    return deploy(project, deployer)


@pytest.fixture
def running(network, people):
    """The network with trainers people[0..2] registered: round 0, PROPOSE, quorum 3."""
    trainers, _, _ = network
    for person in people[:MIN_TRAINERS]:
        trainers.register(sender=person)
    return network


def propose_all(updates, people, parent, round_label, samples=100):
    """Each of ``people`` proposes one update of ``parent``; returns their ids in order."""
    ids = []
    for i, person in enumerate(people):
        receipt = updates.propose(parent, cid_bin(f"{round_label}-{i}"), samples + i, sender=person)
        (event,) = receipt.decode_logs(updates.UpdateProposed)
        ids.append(event.updateId)
    return ids


def vote_all(models, people, phase):
    for person in people:
        if phase == 0:
            models.finishProposals(sender=person)
        else:
            models.nextRound(sender=person)
