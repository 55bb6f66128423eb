"""Trainers: registration policies, exit and deposits, key rotation, the trainer token."""

import ape
import pytest

from .conftest import ALLOWLIST, DEPOSIT, OPEN, ZERO, deploy, read_data_url

DEPOSIT_WEI = 10**16
COOLDOWN = 3_600
NOT_ALLOWED = "Trainers: this address is not on the allowlist"
USED = "Trainers: this address used its admission; the admin must admit it again"


@pytest.fixture
def allowlisted(project, deployer, people):
    """A network under ALLOWLIST kept by people[10]."""
    return deploy(project, deployer, policy=ALLOWLIST, admin=people[10])


@pytest.fixture
def deposited(project, deployer):
    """A network under DEPOSIT: 0.01 ether per trainer, refunded one hour after exit."""
    return deploy(project, deployer, policy=DEPOSIT, deposit=DEPOSIT_WEI, cooldown=COOLDOWN)


# -- open registration ------------------------------------------------------------------


def test_register_mints_sequential_ids_and_reports_them(network, people):
    # Prepare
    trainers, _, _ = network
    # Execute
    receipts = [trainers.register(sender=p) for p in people[:2]]
    # Assert
    assert [trainers.trainerId(p) for p in people[:2]] == [1, 2]
    assert trainers.totalSupply() == 2 and trainers.lastTrainerId() == 2
    assert trainers.isRegistered(people[0]) and not trainers.isRegistered(people[5])
    assert trainers.ownerOf(2) == people[1] and trainers.balanceOf(people[1]) == 1
    assert trainers.balanceOf(people[5]) == 0
    (transfer,) = receipts[0].decode_logs(trainers.Transfer)
    assert (transfer.sender, transfer.receiver, transfer.tokenId) == (ZERO, people[0], 1)
    assert (trainers.policy(), trainers.deposit(), trainers.cooldown()) == (OPEN, 0, 0)
    assert trainers.admin() == ZERO


def test_register_refusals(network, people):
    trainers, _, _ = network
    trainers.register(sender=people[0])
    with ape.reverts("Trainers: this address is already registered"):
        trainers.register(sender=people[0])
    with ape.reverts("Trainers: registration takes no payment under this policy"):
        trainers.register(sender=people[1], value=1)


def test_register_before_linking_is_refused(project, deployer, people):
    trainers, _, _ = deploy(project, deployer, link=False)
    with ape.reverts("Trainers: not linked to a Models contract yet"):
        trainers.register(sender=people[0])


def test_set_models_is_once_deployer_only_and_checked(project, deployer, people):
    # Prepare
    trainers, models, _ = deploy(project, deployer, link=False)
    other, _, _ = deploy(project, deployer, link=False)
    # Execute / Assert
    with ape.reverts("Trainers: only the deployer may link the Models contract"):
        trainers.setModels(models, sender=people[0])
    with ape.reverts("Trainers: the Models address is not a contract"):
        trainers.setModels(people[0], sender=deployer)
    with ape.reverts("Trainers: that Models contract belongs to another Trainers contract"):
        other.setModels(models, sender=deployer)
    trainers.setModels(models, sender=deployer)
    assert trainers.models() == models.address
    with ape.reverts("Trainers: the Models contract is already linked"):
        trainers.setModels(models, sender=deployer)


@pytest.mark.parametrize(
    "args, reason",
    [
        ((3, ZERO, 0, 0), "Trainers: the policy must be OPEN (0), ALLOWLIST (1) or DEPOSIT (2)"),
        ((ALLOWLIST, ZERO, 0, 0), "Trainers: the ALLOWLIST policy needs an admin"),
        ((OPEN, "admin", 0, 0), "Trainers: only the ALLOWLIST policy has an admin"),
        ((DEPOSIT, ZERO, 0, 0), "Trainers: the DEPOSIT policy needs a deposit above 0"),
        ((DEPOSIT, ZERO, 1, 365 * 86400 + 1), "Trainers: the cooldown must not exceed a year"),
        (
            (OPEN, ZERO, 1, 0),
            "Trainers: only the DEPOSIT policy takes a deposit and has a cooldown",
        ),
        (
            (ALLOWLIST, "admin", 0, 5),
            "Trainers: only the DEPOSIT policy takes a deposit and has a cooldown",
        ),
    ],
)
def test_constructor_refuses_parameters_the_policy_does_not_use(
    project, deployer, people, args, reason
):
    policy, admin, deposit, cooldown = args
    with ape.reverts(reason):
        project.Trainers.deploy(
            policy, people[9] if admin == "admin" else admin, deposit, cooldown, sender=deployer
        )


# -- allowlist ----------------------------------------------------------------------------


def test_allowlist_gates_registration(allowlisted, people):
    # Prepare
    trainers, _, _ = allowlisted
    admin = people[10]
    with ape.reverts(NOT_ALLOWED):
        trainers.register(sender=people[0])
    # Execute
    receipt = trainers.setAllowed([people[0], people[1]], True, sender=admin)
    trainers.register(sender=people[0])
    trainers.setAllowed([people[1]], False, sender=admin)
    # Assert
    assert [(e.account, e.allowed) for e in receipt.decode_logs(trainers.AllowlistChanged)] == [
        (people[0], True),
        (people[1], True),
    ]
    assert trainers.trainerId(people[0]) == 1 and not trainers.isAllowed(people[0])
    assert not trainers.isAllowed(people[1])
    with ape.reverts(NOT_ALLOWED):
        trainers.register(sender=people[1])
    assert trainers.policy() == ALLOWLIST and trainers.admin() == admin


def test_allowlist_removal_keeps_the_identity_and_rotation_needs_no_entry(allowlisted, people):
    trainers, _, _ = allowlisted
    trainers.setAllowed([people[0]], True, sender=people[10])
    trainers.register(sender=people[0])
    trainers.setAllowed([people[0]], False, sender=people[10])
    trainers.transferFrom(people[0], people[4], 1, sender=people[0])
    assert trainers.trainerId(people[4]) == 1 and not trainers.isAllowed(people[4])


def test_an_admission_gives_one_identity(allowlisted, people):
    # Prepare: people[0] is admitted once, registers, and hands its token to people[4]
    trainers, _, _ = allowlisted
    admin = people[10]
    trainers.setAllowed([people[0]], True, sender=admin)
    receipt = trainers.register(sender=people[0])
    trainers.transferFrom(people[0], people[4], 1, sender=people[0])
    # Execute / Assert: the admission was used up by the registration
    (used,) = receipt.decode_logs(trainers.AllowlistChanged)
    assert (used.account, used.allowed) == (people[0], False)
    assert not trainers.isAllowed(people[0])
    with ape.reverts(USED):
        trainers.register(sender=people[0])
    assert trainers.totalSupply() == 1
    # the admin re-admits explicitly: one more identity, and no third
    trainers.setAllowed([people[0]], True, sender=admin)
    trainers.register(sender=people[0])
    trainers.transferFrom(people[0], people[5], 2, sender=people[0])
    with ape.reverts(USED):
        trainers.register(sender=people[0])
    assert trainers.totalSupply() == 2 and trainers.lastTrainerId() == 2


def test_exit_leaves_the_admission_used(allowlisted, people):
    trainers, _, _ = allowlisted
    trainers.setAllowed([people[0]], True, sender=people[10])
    trainers.register(sender=people[0])
    trainers.exit(sender=people[0])
    with ape.reverts(USED):
        trainers.register(sender=people[0])


def test_revoking_a_used_admission_leaves_the_address_off_the_list(allowlisted, people):
    trainers, _, _ = allowlisted
    trainers.setAllowed([people[0]], True, sender=people[10])
    trainers.register(sender=people[0])
    trainers.exit(sender=people[0])
    trainers.setAllowed([people[0]], False, sender=people[10])
    with ape.reverts(NOT_ALLOWED):
        trainers.register(sender=people[0])


def test_an_admitted_address_holding_a_rotated_token_keeps_its_own_admission(allowlisted, people):
    # Prepare: people[1] is admitted but receives people[0]'s token first
    trainers, _, _ = allowlisted
    trainers.setAllowed([people[0], people[1]], True, sender=people[10])
    trainers.register(sender=people[0])
    trainers.transferFrom(people[0], people[1], 1, sender=people[0])
    with ape.reverts("Trainers: this address is already registered"):
        trainers.register(sender=people[1])
    # Execute: once it hands the token on, its own admission gives its own identity
    trainers.transferFrom(people[1], people[4], 1, sender=people[1])
    trainers.register(sender=people[1])
    # Assert: two admissions, two identities
    assert trainers.totalSupply() == 2 and trainers.trainerId(people[1]) == 2


def test_only_the_admin_keeps_the_allowlist_and_can_hand_it_over(allowlisted, people):
    # Prepare
    trainers, _, _ = allowlisted
    admin, successor = people[10], people[9]
    # Execute / Assert
    with ape.reverts("Trainers: only the admin may change the allowlist"):
        trainers.setAllowed([people[0]], True, sender=people[0])
    with ape.reverts("Trainers: only the admin may transfer the admin role"):
        trainers.transferAdmin(people[0], sender=people[0])
    with ape.reverts("Trainers: the new admin must not be the zero address"):
        trainers.transferAdmin(ZERO, sender=admin)
    receipt = trainers.transferAdmin(successor, sender=admin)
    (event,) = receipt.decode_logs(trainers.AdminTransferred)
    assert (event.previousAdmin, event.newAdmin) == (admin, successor)
    trainers.setAllowed([people[0]], True, sender=successor)
    with ape.reverts("Trainers: only the admin may change the allowlist"):
        trainers.setAllowed([people[1]], True, sender=admin)


def test_open_networks_have_no_allowlist_keeper(network, people):
    trainers, _, _ = network
    with ape.reverts("Trainers: only the admin may change the allowlist"):
        trainers.setAllowed([people[0]], True, sender=people[0])


# -- deposits and exit ---------------------------------------------------------------------


def test_deposit_registration_takes_exactly_the_deposit(deposited, people):
    trainers, _, _ = deposited
    for wrong in (0, DEPOSIT_WEI - 1, DEPOSIT_WEI + 1):
        with ape.reverts("Trainers: registration takes exactly the deposit"):
            trainers.register(sender=people[0], value=wrong)
    trainers.register(sender=people[0], value=DEPOSIT_WEI)
    assert trainers.balance == DEPOSIT_WEI
    assert (trainers.policy(), trainers.deposit(), trainers.cooldown()) == (
        DEPOSIT,
        DEPOSIT_WEI,
        COOLDOWN,
    )


def test_exit_burns_and_refunds_after_the_cooldown(deposited, people, chain):
    # Prepare
    trainers, _, _ = deposited
    trainers.register(sender=people[0], value=DEPOSIT_WEI)
    # Execute
    receipt = trainers.exit(sender=people[0])
    (exited,) = receipt.decode_logs(trainers.TrainerExited)
    with ape.reverts("Trainers: the deposit is still in its cooldown"):
        trainers.withdrawDeposit(sender=people[0])
    chain.pending_timestamp = exited.availableAt
    before = people[0].balance
    withdrawal = trainers.withdrawDeposit(sender=people[0])
    # Assert
    assert (exited.trainerId, exited.holder, exited.refund) == (1, people[0], DEPOSIT_WEI)
    assert exited.availableAt == chain.blocks[receipt.block_number].timestamp + COOLDOWN
    (burn,) = receipt.decode_logs(trainers.Transfer)
    assert (burn.sender, burn.receiver, burn.tokenId) == (people[0], ZERO, 1)
    assert not trainers.isRegistered(people[0]) and trainers.totalSupply() == 0
    with ape.reverts("Trainers: no trainer token has this id"):
        trainers.ownerOf(1)
    fee = withdrawal.total_fees_paid
    assert people[0].balance == before + DEPOSIT_WEI - fee and trainers.balance == 0
    (withdrawn,) = withdrawal.decode_logs(trainers.DepositWithdrawn)
    assert (withdrawn.account, withdrawn.amount) == (people[0], DEPOSIT_WEI)
    assert trainers.refundOf(people[0]) == (0, 0)
    with ape.reverts("Trainers: no deposit to withdraw for this address"):
        trainers.withdrawDeposit(sender=people[0])


def test_refunds_of_several_exits_add_up(deposited, people):
    trainers, _, _ = deposited
    for _ in range(2):
        trainers.register(sender=people[0], value=DEPOSIT_WEI)
        trainers.exit(sender=people[0])
    amount, _ = trainers.refundOf(people[0])
    assert amount == 2 * DEPOSIT_WEI and trainers.lastTrainerId() == 2


def test_a_rotated_identity_takes_its_deposit_along(deposited, people):
    trainers, _, _ = deposited
    trainers.register(sender=people[0], value=DEPOSIT_WEI)
    trainers.transferFrom(people[0], people[4], 1, sender=people[0])
    with ape.reverts("Trainers: the caller holds no trainer token"):
        trainers.exit(sender=people[0])
    trainers.exit(sender=people[4])
    assert trainers.refundOf(people[4])[0] == DEPOSIT_WEI
    assert trainers.refundOf(people[0]) == (0, 0)


def test_refund_to_an_address_refusing_payment_fails_readably(project, deployer):
    trainers, _, _ = deploy(project, deployer, policy=DEPOSIT, deposit=DEPOSIT_WEI, cooldown=0)
    depositor = project.DepositorMock.deploy(trainers, sender=deployer)
    depositor.register(sender=deployer, value=DEPOSIT_WEI)
    with ape.reverts("Trainers: sending the deposit failed"):
        depositor.leave(sender=deployer)


def test_exit_under_open_registration_burns_without_refund(network, people):
    # Prepare
    trainers, _, _ = network
    trainers.register(sender=people[0])
    # Execute
    receipt = trainers.exit(sender=people[0])
    trainers.register(sender=people[0])
    # Assert
    (exited,) = receipt.decode_logs(trainers.TrainerExited)
    assert (exited.refund, exited.availableAt) == (0, 0)
    assert trainers.trainerId(people[0]) == 2
    with ape.reverts("Trainers: no deposit to withdraw for this address"):
        trainers.withdrawDeposit(sender=people[0])


# -- key rotation and the ERC-721 surface ----------------------------------------------


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
    with ape.reverts(
        "ERC721: the receiver already holds a token of this collection (one per address)"
    ):
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
    document = read_data_url(trainers.tokenURI(1))
    # Assert
    assert document["name"] == "MCFL trainer #1"
    assert (trainers.name(), trainers.symbol()) == ("MCFL Trainer", "MCFLT")
    assert all(trainers.supportsInterface(i) for i in ("0x01ffc9a7", "0x80ac58cd", "0x5b5e139f"))
    assert not trainers.supportsInterface("0xffffffff")
