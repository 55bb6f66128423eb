# pragma version 0.4.3
"""
@title MCFL Trainers: one identity token per trainer
@license MIT
@notice An ERC-721 token per trainer of a MultiConfederated Learning network.
        `register` mints one to the caller (one per address) under the
        registration policy chosen at deployment:
        - OPEN (0): anyone may register;
        - ALLOWLIST (1): only addresses an admin admitted (`setAllowed`),
          one identity per admission: registering uses the admission up,
          and the admin admits the address again for another one;
        - DEPOSIT (2): the caller pays `deposit` wei, refunded by
          `withdrawDeposit` once `cooldown` seconds have passed since `exit`.
        A token may be transferred to an address that holds none, which
        rotates a trainer's key without changing its trainer id: every
        per-trainer rule of the protocol is keyed by that id. `exit` burns the
        caller's token for good, but not in a round in which that trainer
        voted (a new identity registered in the same round would be a second
        voice). Trainer ids are sequential from 1 and never reused.
        https://eips.ethereum.org/EIPS/eip-721
"""

from ethereum.ercs import IERC165
from ethereum.ercs import IERC721
from .interfaces import IModels
from .modules import erc721
from .modules import render

implements: IERC165
implements: IERC721

initializes: erc721
# Every ERC-721 function (the module's whole external interface).
exports: erc721.__interface__


event AllowlistChanged:
    account: indexed(address)
    allowed: bool

event AdminTransferred:
    previousAdmin: indexed(address)
    newAdmin: indexed(address)

event TrainerExited:
    trainerId: indexed(uint256)
    holder: indexed(address)
    refund: uint256
    availableAt: uint256

event DepositWithdrawn:
    account: indexed(address)
    amount: uint256


OPEN: public(constant(uint256)) = 0
ALLOWLIST: public(constant(uint256)) = 1
DEPOSIT: public(constant(uint256)) = 2

# @dev Accounts one `setAllowed` call may change.
MAX_ALLOWLIST_BATCH: public(constant(uint256)) = 64

# @dev Longest refund cooldown: a year, so a typo cannot lock deposits for ages.
MAX_COOLDOWN: public(constant(uint256)) = 365 * 86400

# @dev States of an address's admission under ALLOWLIST: none (0), admitted and
#      unused (1), used by a registration (2: the admin must admit it again).
_ADMITTED: constant(uint256) = 1
_USED: constant(uint256) = 2

# @dev `_refunds[account]` packs a pending refund: amount (bits 0-191)
#      | time it becomes withdrawable (192-255).
_AMOUNT_MASK: constant(uint256) = (1 << 192) - 1
_AVAILABLE_SHIFT: constant(uint256) = 192


# @dev Creator of the contract: the only one allowed to link it to Models once.
DEPLOYER: immutable(address)

# @dev The registration policy (OPEN, ALLOWLIST or DEPOSIT), fixed at deployment.
policy: public(immutable(uint256))

# @dev Wei a DEPOSIT registration takes (0 under the other policies).
deposit: public(immutable(uint256))

# @dev Seconds between `exit` and the refund of a deposit (0 but under DEPOSIT).
cooldown: public(immutable(uint256))

# @dev Keeper of the allowlist (the zero address but under ALLOWLIST).
admin: public(address)

# @dev Admission of each address under ALLOWLIST: 0, _ADMITTED or _USED.
_admissions: HashMap[address, uint256]

# @dev The Models contract, told about registrations until round 0 opens.
models: public(address)

# @dev Live trainer tokens (minted minus burnt by `exit`).
totalSupply: public(uint256)

# @dev The last trainer id minted; ids are never reused.
lastTrainerId: public(uint256)

# @dev The trainer id held by each address (0: none) is `erc721._tokenOf`, the
#      holder of each id `erc721._tokens` (one token per address).

_refunds: HashMap[address, uint256]

# @dev Set once Models reported that round 0 has opened: later registrations
#      need not notify it any more.
_roundsStarted: bool


@deploy
def __init__(registration_policy: uint256, allowlist_admin: address, deposit_wei: uint256,
             cooldown_seconds: uint256):
    """
    @notice Deploy the trainer registry with its registration policy; link it
            with `setModels` next.
    @dev Parameters a policy does not use must be zero, so that a deployment
         record can never claim a deposit or an admin the contract ignores.
    @param registration_policy OPEN (0), ALLOWLIST (1) or DEPOSIT (2).
    @param allowlist_admin Keeper of the allowlist under ALLOWLIST; the zero
           address otherwise.
    @param deposit_wei Wei each registration takes under DEPOSIT (> 0); 0 otherwise.
    @param cooldown_seconds Seconds from `exit` to the refund under DEPOSIT (at most a
           year); 0 otherwise.
    """
    assert registration_policy <= DEPOSIT, \
        "Trainers: the policy must be OPEN (0), ALLOWLIST (1) or DEPOSIT (2)"
    if registration_policy == ALLOWLIST:
        assert allowlist_admin != empty(address), "Trainers: the ALLOWLIST policy needs an admin"
    else:
        assert allowlist_admin == empty(address), \
            "Trainers: only the ALLOWLIST policy has an admin"
    if registration_policy == DEPOSIT:
        assert deposit_wei != 0, "Trainers: the DEPOSIT policy needs a deposit above 0"
        assert cooldown_seconds <= MAX_COOLDOWN, \
            "Trainers: the cooldown must not exceed a year"
    else:
        assert deposit_wei == 0 and cooldown_seconds == 0, \
            "Trainers: only the DEPOSIT policy takes a deposit and has a cooldown"
    erc721.__init__("MCFL Trainer", "MCFLT", "Trainers: no trainer token has this id", True)
    DEPLOYER = msg.sender
    policy = registration_policy
    deposit = deposit_wei
    cooldown = cooldown_seconds
    self.admin = allowlist_admin
    if allowlist_admin != empty(address):
        log AdminTransferred(previousAdmin=empty(address), newAdmin=allowlist_admin)


@external
def setModels(models: address):
    """
    @notice Link this registry to the Models contract (once, by the deployer).
    @param models Address of the Models contract, which must name this registry.
    """
    assert msg.sender == DEPLOYER, "Trainers: only the deployer may link the Models contract"
    assert self.models == empty(address), "Trainers: the Models contract is already linked"
    assert models.is_contract, "Trainers: the Models address is not a contract"
    assert staticcall IModels(models).trainers() == self, \
        "Trainers: that Models contract belongs to another Trainers contract"
    self.models = models


@external
@payable
def register() -> uint256:
    """
    @notice Register the caller as a trainer: mint it the next trainer token.
    @dev Under ALLOWLIST the caller must hold an unused admission, which this
         uses up (`AllowlistChanged(caller, false)`): one admission gives one
         identity, however often the token then moves or is burnt, and the
         admin admits the address again for another. Under DEPOSIT the caller
         sends exactly `deposit` wei; under the other policies no value. While
         round 0 has not opened, Models is told the id and the live count so
         it can open the round once `minTrainers` trainers exist.
    @return The caller's trainer id.
    """
    assert self.models != empty(address), "Trainers: not linked to a Models contract yet"
    assert erc721._tokenOf[msg.sender] == 0, "Trainers: this address is already registered"
    if policy == ALLOWLIST:
        admission: uint256 = self._admissions[msg.sender]
        assert admission != _USED, \
            "Trainers: this address used its admission; the admin must admit it again"
        assert admission == _ADMITTED, "Trainers: this address is not on the allowlist"
        self._admissions[msg.sender] = _USED
        log AllowlistChanged(account=msg.sender, allowed=False)
    if policy == DEPOSIT:
        assert msg.value == deposit, "Trainers: registration takes exactly the deposit"
    else:
        assert msg.value == 0, "Trainers: registration takes no payment under this policy"
    trainer_id: uint256 = self.lastTrainerId + 1
    self.lastTrainerId = trainer_id
    live: uint256 = self.totalSupply + 1
    self.totalSupply = live
    erc721._tokenOf[msg.sender] = trainer_id
    erc721._tokens[trainer_id] = convert(msg.sender, uint256)
    log erc721.Transfer(sender=empty(address), receiver=msg.sender, tokenId=trainer_id)
    if not self._roundsStarted:
        self._roundsStarted = extcall IModels(self.models).trainerRegistered(trainer_id, live)
    return trainer_id


@external
def exit():
    """
    @notice Leave the network: burn the caller's trainer token. Under DEPOSIT
            its deposit becomes withdrawable by the caller after `cooldown`.
    @dev The trainer id is never reused. Refused in a round in which the
         trainer voted: otherwise its address (or its party) could register
         a new identity and vote, propose and aggregate a second time in that
         round, and the burnt id would stay a member of the next phase's
         quorum. From the next round on the exit is free; Models then drops
         the id from the current phase's quorum if it was a member (ending
         the phase when every other member voted), so a departure costs no
         deadline. Under ALLOWLIST the admission stays used.
    """
    trainer_id: uint256 = erc721._tokenOf[msg.sender]
    assert trainer_id != 0, "Trainers: the caller holds no trainer token"
    assert extcall IModels(self.models).trainerExited(trainer_id), \
        "Trainers: this trainer voted in this round; it may exit from the next round on"
    erc721._tokenOf[msg.sender] = 0
    erc721._tokens[trainer_id] = 0
    self.totalSupply -= 1
    log erc721.Transfer(sender=msg.sender, receiver=empty(address), tokenId=trainer_id)
    refund: uint256 = 0
    available_at: uint256 = 0
    if policy == DEPOSIT:
        refund = (self._refunds[msg.sender] & _AMOUNT_MASK) + deposit
        available_at = block.timestamp + cooldown
        self._refunds[msg.sender] = refund | (available_at << _AVAILABLE_SHIFT)
    log TrainerExited(trainerId=trainer_id, holder=msg.sender, refund=refund,
                      availableAt=available_at)


@external
def withdrawDeposit():
    """
    @notice Send the caller the deposits of the trainers it exited with, once
            the cooldown of the latest exit has passed.
    """
    pending: uint256 = self._refunds[msg.sender]
    amount: uint256 = pending & _AMOUNT_MASK
    assert amount != 0, "Trainers: no deposit to withdraw for this address"
    assert block.timestamp >= pending >> _AVAILABLE_SHIFT, \
        "Trainers: the deposit is still in its cooldown"
    self._refunds[msg.sender] = 0
    success: bool = raw_call(msg.sender, b"", value=amount, revert_on_failure=False)
    assert success, "Trainers: sending the deposit failed"
    log DepositWithdrawn(account=msg.sender, amount=amount)


@external
@view
def refundOf(account: address) -> (uint256, uint256):
    """
    @notice The deposit `account` may withdraw, and from when.
    @param account An address that exited under DEPOSIT.
    @return (amount in wei, Unix time from which `withdrawDeposit` pays it).
    """
    pending: uint256 = self._refunds[account]
    return pending & _AMOUNT_MASK, pending >> _AVAILABLE_SHIFT


@external
def setAllowed(accounts: DynArray[address, MAX_ALLOWLIST_BATCH], allowed: bool):
    """
    @notice Admit addresses (one registration each) or revoke their unused or
            used admission (admin only).
    @dev The allowlist gates registration only: revoking does not burn a
         token the address holds, and a trainer token may move to an address
         off the list (key rotation keeps the admitted identity). Admitting
         an address whose admission was used gives it one more registration.
    @param accounts The addresses to change.
    @param allowed True to admit them, False to revoke their admission.
    """
    assert msg.sender == self.admin, "Trainers: only the admin may change the allowlist"
    admission: uint256 = 0
    if allowed:
        admission = _ADMITTED
    for account: address in accounts:
        self._admissions[account] = admission
        log AllowlistChanged(account=account, allowed=allowed)


@external
@view
def isAllowed(account: address) -> bool:
    """
    @notice Whether `account` holds an unused admission: it may register
            (under ALLOWLIST) once it holds no trainer token.
    @param account The address to look up.
    @return True when admitted and not yet registered with that admission.
    """
    return self._admissions[account] == _ADMITTED


@external
@view
def admissionUsed(account: address) -> bool:
    """
    @notice Whether `account` registered with its admission and was not admitted
            again since.
    @param account The address to look up.
    @return True when its admission is used up.
    """
    return self._admissions[account] == _USED


@external
def transferAdmin(newAdmin: address):
    """
    @notice Hand the allowlist to another admin (admin only).
    @param newAdmin The new admin; not the zero address.
    """
    assert msg.sender == self.admin, "Trainers: only the admin may transfer the admin role"
    assert newAdmin != empty(address), "Trainers: the new admin must not be the zero address"
    log AdminTransferred(previousAdmin=msg.sender, newAdmin=newAdmin)
    self.admin = newAdmin


@external
@view
def isRegistered(trainer: address) -> bool:
    """
    @notice Whether `trainer` holds a trainer token.
    @param trainer The address to look up.
    @return True when registered.
    """
    return erc721._tokenOf[trainer] != 0


@external
@view
def trainerId(trainer: address) -> uint256:
    """
    @notice The trainer id held by `trainer`, 0 when it holds none.
    @param trainer The address to look up.
    @return The trainer id (token id) or 0.
    """
    return erc721._tokenOf[trainer]


@external
@view
def tokenURI(tokenId: uint256) -> String[render.MAX_URI]:
    """
    @notice ERC-721 metadata of trainer token `tokenId`.
    @param tokenId A trainer id that exists.
    @return `data:application/json;base64,` followed by the JSON document.
    """
    holder: address = convert(erc721._packed(tokenId) & erc721.ADDRESS_MASK, address)
    number: String[78] = uint2str(tokenId)
    return render._json_data_url(concat(
        '{"name":"MCFL trainer #', number,
        '","description":"Identity of a trainer of a MultiConfederated Learning network.',
        ' Its holder proposes updates, aggregates them and votes on rounds.",',
        '"attributes":[{"trait_type":"trainer id","value":', number,
        '},{"trait_type":"holder","value":"', render._hex_address(holder), '"}]}'
    ))
