"""Trainers: registration, key rotation and the ERC-721 surface of trainer tokens."""

import ape

from .conftest import deploy

ZERO = "0x0000000000000000000000000000000000000000"


def test_register_mints_sequential_ids_and_reports_them(network, people):
    # Prepare
    trainers, _, _ = network
    # Execute
    receipts = [trainers.register(sender=p) for p in people[:2]]
    # Assert
    assert [trainers.trainerId(p) for p in people[:2]] == [1, 2]
    assert trainers.totalSupply() == 2
    assert trainers.isRegistered(people[0]) and not trainers.isRegistered(people[5])
    assert trainers.ownerOf(2) == people[1] and trainers.balanceOf(people[1]) == 1
    assert trainers.balanceOf(people[5]) == 0
    (transfer,) = receipts[0].decode_logs(trainers.Transfer)
    assert (transfer.sender, transfer.receiver, transfer.tokenId) == (ZERO, people[0], 1)


def test_register_twice_is_refused(network, people):
    trainers, _, _ = network
    trainers.register(sender=people[0])
    with ape.reverts("Trainers: this address is already registered"):
        trainers.register(sender=people[0])


def test_register_before_linking_is_refused(project, deployer, people):
    trainers, _, _ = deploy(project, deployer, link=False)
    with ape.reverts("Trainers: not linked to a Models contract yet"):
        trainers.register(sender=people[0])


def test_set_models_is_once_and_deployer_only(project, deployer, people):
    # Prepare
    trainers, models, _ = deploy(project, deployer, link=False)
    # Execute / Assert
    with ape.reverts("Trainers: only the deployer may link the Models contract"):
        trainers.setModels(models, sender=people[0])
    with ape.reverts("Trainers: the Models address is not a contract"):
        trainers.setModels(people[0], sender=deployer)
    trainers.setModels(models, sender=deployer)
    assert trainers.models() == models.address
    with ape.reverts("Trainers: the Models contract is already linked"):
        trainers.setModels(models, sender=deployer)


def test_key_rotation_moves_the_trainer_id(network, people):
    # Prepare
    trainers, _, _ = network
    trainers.register(sender=people[0])
    # Execute
    receipt = trainers.transferFrom(people[0], people[5], 1, sender=people[0])
    # Assert
    assert trainers.trainerId(people[5]) == 1 and trainers.trainerId(people[0]) == 0
    assert trainers.ownerOf(1) == people[5] and not trainers.isRegistered(people[0])
    (transfer,) = receipt.decode_logs(trainers.Transfer)
    assert (transfer.sender, transfer.receiver) == (people[0], people[5])


def test_transfer_to_a_registered_address_is_refused(network, people):
    trainers, _, _ = network
    trainers.register(sender=people[0])
    trainers.register(sender=people[1])
    with ape.reverts("Trainers: the receiver already holds a trainer token (one per address)"):
        trainers.transferFrom(people[0], people[1], 1, sender=people[0])


def test_transfer_refusals_of_the_shared_erc721_rules(network, people):
    # Prepare
    trainers, _, _ = network
    trainers.register(sender=people[0])
    # Execute / Assert
    with ape.reverts("ERC721: the sender does not own this token"):
        trainers.transferFrom(people[1], people[5], 1, sender=people[1])
    with ape.reverts("ERC721: cannot transfer to the zero address"):
        trainers.transferFrom(people[0], ZERO, 1, sender=people[0])
    with ape.reverts(
        "ERC721: caller is neither the owner, nor approved for this token, nor an operator"
    ):
        trainers.transferFrom(people[0], people[5], 1, sender=people[5])
    with ape.reverts("Trainers: no trainer token has this id"):
        trainers.transferFrom(people[0], people[5], 9, sender=people[0])


def test_approved_address_and_operator_may_transfer(network, people):
    # Prepare
    trainers, _, _ = network
    trainers.register(sender=people[0])
    trainers.register(sender=people[1])
    # Execute
    trainers.approve(people[6], 1, sender=people[0])
    approved = trainers.getApproved(1)
    trainers.transferFrom(people[0], people[5], 1, sender=people[6])
    trainers.setApprovalForAll(people[7], True, sender=people[1])
    trainers.transferFrom(people[1], people[8], 2, sender=people[7])
    # Assert
    assert approved == people[6]
    assert trainers.getApproved(1) == ZERO  # cleared by the transfer
    assert trainers.isApprovedForAll(people[1], people[7])
    assert trainers.ownerOf(1) == people[5] and trainers.ownerOf(2) == people[8]


def test_approve_refusals(network, people):
    trainers, _, _ = network
    trainers.register(sender=people[0])
    with ape.reverts("ERC721: only the owner of the token or its operator may approve"):
        trainers.approve(people[6], 1, sender=people[6])
    with ape.reverts("Trainers: no trainer token has this id"):
        trainers.approve(people[6], 5, sender=people[0])
    with ape.reverts("Trainers: no trainer token has this id"):
        trainers.getApproved(5)
    with ape.reverts("ERC721: an owner cannot make itself its own operator"):
        trainers.setApprovalForAll(people[0], True, sender=people[0])


def test_safe_transfer_checks_contract_receivers(project, network, deployer, people):
    # Prepare
    trainers, _, _ = network
    for p in people[:3]:
        trainers.register(sender=p)
    accepting = project.ReceiverMock.deploy(True, sender=deployer)
    refusing = project.ReceiverMock.deploy(False, sender=deployer)
    # Execute
    trainers.safeTransferFrom(people[0], accepting, 1, sender=people[0])
    trainers.safeTransferFrom(people[1], people[6], 2, b"hello", sender=people[1])
    # Assert
    assert trainers.ownerOf(1) == accepting.address and trainers.ownerOf(2) == people[6]
    with ape.reverts("ERC721: the receiving contract does not accept ERC-721 tokens"):
        trainers.safeTransferFrom(people[2], refusing, 3, sender=people[2])


def test_views_refuse_missing_tokens_and_the_zero_address(network):
    trainers, _, _ = network
    with ape.reverts("Trainers: no trainer token has this id"):
        trainers.ownerOf(1)
    with ape.reverts("ERC721: the zero address owns no token"):
        trainers.balanceOf(ZERO)
    with ape.reverts("Trainers: no trainer token has this id"):
        trainers.tokenURI(1)


def test_metadata_and_interfaces(network, people):
    # Prepare
    trainers, _, _ = network
    trainers.register(sender=people[0])
    # Execute
    uri = trainers.tokenURI(1)
    # Assert
    assert uri.startswith('data:application/json,{"name":"MCFL trainer #1"')
    assert people[0].address.lower() in uri
    assert (trainers.name(), trainers.symbol()) == ("MCFL Trainer", "MCFLT")
    assert all(trainers.supportsInterface(i) for i in ("0x01ffc9a7", "0x80ac58cd", "0x5b5e139f"))
    assert not trainers.supportsInterface("0xffffffff")
