"""Deployment files and the off-chain ids."""

import json

import pytest
from conftest import fake_cid
from hypothesis import given
from hypothesis import strategies as st
from multiformats import CID, multihash

from mcfl_chain.chain.cids import cid_from_bytes, cid_to_bytes
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.chain.errors import DeploymentError
from mcfl_chain.dag import ROOT_MODEL_ID, model_id, update_id

ADMIN = "0xABaBaBaBABabABabAbAbABAbABabababaBaBABaB"  # "0x" + "ab" * 20, checksummed


def _deployment(**fields):
    return Deployment(
        chain_id=31337,
        rpc_url="http://127.0.0.1:8545",
        addresses={
            name: "0x" + f"{i}" * 40 for i, name in enumerate(("Trainers", "Models", "Updates"), 1)
        },
        abis={"Trainers": [], "Models": [{"type": "event"}], "Updates": []},
        deployment_block=1,
        genesis_cid=fake_cid("g"),
        task="lenet:mnist",
        min_trainers=2,
        phase_duration=30,
        **fields,
    )


def test_deployment_round_trip(tmp_path):
    original = _deployment()
    path = original.save(tmp_path / "sub" / "deployment.json")
    assert Deployment.load(path) == original
    assert not list((tmp_path / "sub").glob("*.tmp"))


def test_deployment_round_trip_with_the_registration_fields(tmp_path):
    # Prepare
    allowlist = _deployment(registration="allowlist", admin=ADMIN, max_samples=60_000)
    deposit = _deployment(registration="deposit", deposit=10**18, cooldown=3_600)

    # Execute
    loaded = [
        Deployment.load(d.save(tmp_path / f"{d.registration}.json")) for d in (allowlist, deposit)
    ]
    written = json.loads((tmp_path / "deposit.json").read_text())

    # Assert
    assert loaded == [allowlist, deposit]
    assert (loaded[0].admin, loaded[0].max_samples) == (ADMIN, 60_000)
    assert (loaded[1].deposit, loaded[1].cooldown, loaded[1].admin) == (10**18, 3_600, None)
    assert {"registration", "admin", "deposit", "cooldown", "max_samples"} <= written.keys()


def test_an_old_deployment_file_loads_with_the_defaults(tmp_path):
    # Prepare: a file written before the registration fields existed.
    data = json.loads(_deployment().save(tmp_path / "d.json").read_text())
    for key in ("registration", "admin", "deposit", "cooldown", "max_samples"):
        del data[key]
    (tmp_path / "old.json").write_text(json.dumps(data))

    # Execute
    loaded = Deployment.load(tmp_path / "old.json")

    # Assert
    assert (loaded.registration, loaded.admin, loaded.deposit, loaded.cooldown) == (
        "open",
        None,
        0,
        0,
    )
    assert loaded.max_samples == 1_000_000 and loaded == _deployment()


def test_an_unknown_registration_policy_is_refused(tmp_path):
    data = json.loads(_deployment().save(tmp_path / "d.json").read_text())
    data["registration"] = "lottery"
    (tmp_path / "d.json").write_text(json.dumps(data))
    with pytest.raises(DeploymentError, match="unknown registration policy 'lottery'"):
        Deployment.load(tmp_path / "d.json")


def test_deployment_load_errors(tmp_path):
    with pytest.raises(DeploymentError, match="no deployment file"):
        Deployment.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DeploymentError, match="cannot read deployment file"):
        Deployment.load(tmp_path / "bad.json")
    (tmp_path / "partial.json").write_text(json.dumps({"chain_id": 1}))
    with pytest.raises(DeploymentError, match="missing abis, addresses"):
        Deployment.load(tmp_path / "partial.json")
    data = json.loads(_deployment().save(tmp_path / "d.json").read_text())
    del data["addresses"]["Updates"]
    (tmp_path / "d.json").write_text(json.dumps(data))
    with pytest.raises(DeploymentError, match="'addresses' lacks Updates"):
        Deployment.load(tmp_path / "d.json")


def test_lower_case_addresses_are_checksummed_and_a_wrong_checksum_is_refused(tmp_path):
    # Prepare: a file whose addresses were written in lower case (correct, not checksummed).
    data = json.loads(_deployment().save(tmp_path / "d.json").read_text())
    data["addresses"]["Models"] = "0x" + "ab" * 20
    data["admin"] = "0x" + "ab" * 20
    (tmp_path / "lower.json").write_text(json.dumps(data))
    data["addresses"]["Models"] = "0xaBaBaBaBABabABabAbAbABAbABabababaBaBABaB"  # one letter off
    (tmp_path / "typo.json").write_text(json.dumps(data))
    data["addresses"]["Models"] = "0x12"
    (tmp_path / "short.json").write_text(json.dumps(data))

    # Execute
    loaded = Deployment.load(tmp_path / "lower.json")

    # Assert: lower case is accepted and normalised; a mixed case that fails its checksum
    # (a typo) or a string that is no address is refused in one line.
    assert (loaded.addresses["Models"], loaded.admin) == (ADMIN, ADMIN)
    with pytest.raises(DeploymentError) as typo:
        Deployment.load(tmp_path / "typo.json")
    assert "'Models' address 0xaBaB" in str(typo.value) and "checksum" in str(typo.value)
    assert "\n" not in str(typo.value)
    with pytest.raises(DeploymentError, match="'Models' address '0x12' is not an address"):
        Deployment.load(tmp_path / "short.json")


def test_model_id_validates_like_the_contract():
    assert len(model_id(ROOT_MODEL_ID, [1, 2])) == 32
    assert model_id(ROOT_MODEL_ID, [1, 2]) != model_id(ROOT_MODEL_ID, [1, 3])
    with pytest.raises(ValueError, match="strictly ascending"):
        model_id(ROOT_MODEL_ID, [2, 1])
    with pytest.raises(ValueError, match="strictly ascending"):
        model_id(ROOT_MODEL_ID, [2, 2])
    with pytest.raises(ValueError, match="empty"):
        model_id(ROOT_MODEL_ID, [])
    with pytest.raises(ValueError, match="32-byte"):
        model_id(b"\x00", [1])
    with pytest.raises(ValueError, match="not a uint256"):
        model_id(ROOT_MODEL_ID, [2**256])
    with pytest.raises(ValueError, match="32-byte"):
        update_id(1, b"", 0)


def test_cid_conversion():
    cid = fake_cid("x")
    assert cid_from_bytes(cid_to_bytes(cid)) == cid and len(cid_to_bytes(cid)) == 36
    assert cid_from_bytes(b"") is None
    with pytest.raises(ValueError, match="CIDv1 with the raw or dag-pb codec"):
        cid_to_bytes("QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG")


@given(codec=st.sampled_from(["raw", "dag-pb"]), digest=st.binary(min_size=32, max_size=32))
def test_the_contracts_binary_cids_read_as_multiformats_reads_them(codec, digest):
    # The contracts' form (v1, raw or dag-pb, sha2-256) is spelled out in cid_from_bytes
    binary = bytes(CID("base32", 1, codec, ("sha2-256", digest)))
    assert cid_from_bytes(binary) == str(CID.decode(binary).set(base="base32"))


@pytest.mark.parametrize(("codec", "hashing"), [("raw", "sha2-512"), ("dag-pb", "blake2b-256")])
def test_other_binary_cids_still_read_through_multiformats(codec, hashing):
    cid = CID("base32", 1, codec, multihash.digest(b"blob", hashing))
    assert cid_from_bytes(bytes(cid)) == cid.encode("base32")


@given(
    proposals=st.lists(
        st.tuples(
            st.binary(min_size=32, max_size=32), st.binary(max_size=40), st.integers(1, 2**64)
        ),
        max_size=4,
    ),
    heads=st.lists(
        st.tuples(*(st.integers(0, 2**256 - 1) for _ in range(4)), st.binary(max_size=40)),
        max_size=3,
    ),
    parents=st.lists(st.binary(min_size=32, max_size=32), max_size=3),
    ids=st.lists(st.integers(0, 2**256 - 1), max_size=300),
)
def test_the_clients_calldata_is_web3s_encoding(proposals, heads, parents, ids):
    # Prepare: the Models contract's ABI, no chain needed
    from web3 import Web3

    from mcfl_chain.chain.artifacts import load_artifacts
    from mcfl_chain.chain.client import calldata

    models = (
        Web3().eth.contract(address="0x" + "12" * 20, abi=load_artifacts()["Models"].abi).functions
    )

    # Execute / Assert: the two transactions of a round, and a bare vote
    for call in (
        models.submitProposals(proposals),
        models.submitAggregations(heads, parents, ids),
        models.join(),
    ):
        assert calldata(call) == call._encode_transaction_data()
