"""Submissions the contracts would refuse are refused before sending, with a readable
message naming the limit, and nothing reaches the chain (the nonce is unchanged)."""

from __future__ import annotations

import pytest
from conftest import fake_cid
from multiformats import CID, multihash

from mcfl_chain.chain import AggregationArg, ChainClient, ProposalArg, ProtocolLimitError
from mcfl_chain.dag.model_id import ROOT_MODEL_ID

ROOT = ROOT_MODEL_ID


def _model(i: int) -> bytes:
    return i.to_bytes(32, "big")


def _cid(codec: str, hashfun: str) -> str:
    return str(CID("base32", 1, codec, multihash.digest(b"weights", hashfun)))


SHA512_CID = _cid("raw", "sha2-512")  # 68 bytes
CBOR_CID = _cid("dag-cbor", "sha2-256")  # 36 bytes, a codec the contracts refuse
CIDV0 = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"


def _proposals(count: int, samples: int = 1, cid: str | None = None) -> list[ProposalArg]:
    return [ProposalArg(_model(i), cid or fake_cid(f"u{i}"), samples) for i in range(count)]


def _aggregation(parents: range | list[int], ids: range | list[int], cid=None) -> AggregationArg:
    return AggregationArg(tuple(_model(p) for p in parents), tuple(ids), cid)


REFUSALS = {
    "too many proposals": (
        "proposals",
        _proposals(17),
        "MAX_PROPOSALS",
        r"^17 proposals in one call: the contracts take at most 16 \(MAX_PROPOSALS\)$",
    ),
    "samples above the cap": (
        "proposals",
        _proposals(1, samples=1_000_001),
        "maxSamples",
        r"^proposal 1 of 1: 1000001 samples in one update: the network takes 1 to 1000000 "
        r"\(Updates\.maxSamples\)$",
    ),
    "no samples": (
        "proposals",
        _proposals(1, samples=0),
        "maxSamples",
        r"0 samples in one update: the network takes 1 to 1000000",
    ),
    "CID too long": (
        "proposals",
        _proposals(1, cid=SHA512_CID),
        "CID_LENGTH",
        r"^proposal 1 of 1: the CID \w+ has 68 bytes: the contracts take at most 36 "
        r"\(CID_LENGTH: a CIDv1 with a sha2-256 digest\)$",
    ),
    "not a CID": (
        "proposals",
        _proposals(1, cid="not-a-cid"),
        "CID",
        r"^proposal 1 of 1: 'not-a-cid' is not a CID",
    ),
    "CID of another codec": (
        "proposals",
        _proposals(1, cid=CBOR_CID),
        "CID",
        r"the contracts accept CIDv1 with the raw or dag-pb codec and a sha2-256 digest",
    ),
    "CIDv0": (
        "proposals",
        _proposals(1, cid=CIDV0),
        "CID",
        r"the contracts accept CIDv1 with the raw or dag-pb codec",
    ),
    "parent twice": (
        "proposals",
        [ProposalArg(ROOT, fake_cid("a"), 1), ProposalArg(ROOT, fake_cid("b"), 1)],
        "ONE_UPDATE_PER_PARENT",
        r"^proposal 2 of 2: parent 0x0{64} appears twice in the call: the contracts take one "
        r"update per parent and round$",
    ),
    "parent not 32 bytes": (
        "proposals",
        [ProposalArg(b"\x01" * 20, fake_cid("a"), 1)],
        "id",
        r"the parent must be a 32-byte model id, got 20 bytes",
    ),
    "too many aggregations": (
        "aggregations",
        [_aggregation([i], [i]) for i in range(17)],
        "MAX_AGGREGATIONS",
        r"^17 aggregations in one call: the contracts take at most 16 \(MAX_AGGREGATIONS\)$",
    ),
    "too many parents": (
        "aggregations",
        [_aggregation(range(10), [1]), _aggregation(range(10, 17), [2])],
        "MAX_PARENTS",
        r"^17 parents in one call: the contracts take at most 16 \(MAX_PARENTS\), all "
        r"aggregations together$",
    ),
    "too many ids in one aggregation": (
        "aggregations",
        [_aggregation([1], range(257))],
        "MAX_UPDATES",
        r"^aggregation 1 of 1 has 257 update ids: the contracts take at most 256 per "
        r"aggregation \(MAX_UPDATES\)$",
    ),
    "too many ids in one call": (
        "aggregations",
        [
            _aggregation([1], range(200)),
            _aggregation([2], range(200, 400)),
            _aggregation([3], range(400, 513)),
        ],
        "MAX_CALL_UPDATES",
        r"^513 update ids in one call: the contracts take at most 512 \(MAX_CALL_UPDATES\), "
        r"all aggregations together$",
    ),
    "aggregation without parent": (
        "aggregations",
        [_aggregation([], [1])],
        "parentCount",
        r"^aggregation 1 of 1 has no parent: an aggregation needs at least one$",
    ),
    "aggregation without update": (
        "aggregations",
        [_aggregation([1], [])],
        "updateCount",
        r"^aggregation 1 of 1 has no update id: an aggregation needs at least one$",
    ),
    "parent in two aggregations": (
        "aggregations",
        [_aggregation([1, 2], [1]), _aggregation([2], [2])],
        "ONE_AGGREGATION_PER_PARENT",
        r"^aggregation 2 of 2: parent 0x0{63}2 appears twice in the call",
    ),
    "update id twice": (
        "aggregations",
        [_aggregation([1], [5, 3, 5])],
        "ASCENDING_UPDATE_IDS",
        r"^aggregation 1 of 1: update id 5 appears twice",
    ),
    "update id out of range": (
        "aggregations",
        [_aggregation([1], [2**256])],
        "id",
        r"is not a uint256",
    ),
    "weights CID too long": (
        "aggregations",
        [_aggregation([1], [1], SHA512_CID)],
        "CID_LENGTH",
        r"^aggregation 1 of 1: weights: the CID \w+ has 68 bytes",
    ),
    "weights not a CID": (
        "aggregations",
        [_aggregation([1], [1], "bafy-nothing")],
        "CID",
        r"^aggregation 1 of 1: weights: 'bafy-nothing' is not a CID",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_refused_submission_sends_nothing(devnet, case):
    # Prepare: any account will do, the refusal comes before anything is signed.
    kind, argument, limit, message = REFUSALS[case]
    _, deployment = devnet
    client = ChainClient(deployment, account_index=7)
    submit = client.submit_proposals if kind == "proposals" else client.submit_aggregations
    nonce = client.w3.eth.get_transaction_count(client.address, "pending")
    block = client.block_number()

    # Execute
    with pytest.raises(ProtocolLimitError) as refused:
        submit(argument)

    # Assert
    assert refused.value.limit == limit
    assert refused.value.reason is None
    assert __import__("re").search(message, str(refused.value)), str(refused.value)
    assert client.w3.eth.get_transaction_count(client.address, "pending") == nonce
    assert client.block_number() == block
