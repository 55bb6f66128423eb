# pragma version 0.4.3
"""
@title MCFL Trainers: one identity token per trainer
@license MIT
@notice An ERC-721 token per trainer of a MultiConfederated Learning network.
        `register` mints one to the caller (one per address); a token may be
        transferred to an address that holds none, which rotates a trainer's
        key without changing its trainer id. Trainer ids are sequential from 1,
        so the Models contract can tell who counts in a round's quorum by id.
        https://eips.ethereum.org/EIPS/eip-721
"""

from .interfaces import IModels
from .modules import erc721_base
from .modules import render

initializes: erc721_base
exports: (
    erc721_base.setApprovalForAll,
    erc721_base.isApprovedForAll,
    erc721_base.supportsInterface,
)


# @dev Creator of the contract: the only one allowed to link it to Models once.
DEPLOYER: immutable(address)

# @dev The Models contract told about registrations until round 0 opens.
models: public(address)

# @dev Number of trainer tokens: the last trainer id (tokens are never burnt).
totalSupply: public(uint256)

# @dev Trainer id held by each address (0: none) and holder of each id.
_trainerIdOf: HashMap[address, uint256]
_holderOf: HashMap[uint256, address]

# @dev Set once Models reported that round 0 has opened: later registrations
#      need not notify it any more.
_roundsStarted: bool


@deploy
def __init__():
    """
    @notice Deploy the trainer registry; link it with `setModels` next.
    """
    DEPLOYER = msg.sender


@external
def setModels(models: address):
    """
    @notice Link this registry to the Models contract (once, by the deployer).
    @param models Address of the Models contract.
    """
    assert msg.sender == DEPLOYER, "Trainers: only the deployer may link the Models contract"
    assert self.models == empty(address), "Trainers: the Models contract is already linked"
    assert models.is_contract, "Trainers: the Models address is not a contract"
    self.models = models


@external
def register() -> uint256:
    """
    @notice Register the caller as a trainer: mint it the next trainer token.
    @dev While round 0 has not opened, Models is told the new count so it can
         open the round once `minTrainers` trainers exist.
    @return The caller's trainer id.
    """
    assert self.models != empty(address), "Trainers: not linked to a Models contract yet"
    assert self._trainerIdOf[msg.sender] == 0, "Trainers: this address is already registered"
    trainer_id: uint256 = self.totalSupply + 1
    self.totalSupply = trainer_id
    self._trainerIdOf[msg.sender] = trainer_id
    self._holderOf[trainer_id] = msg.sender
    log erc721_base.Transfer(sender=empty(address), receiver=msg.sender, tokenId=trainer_id)
    if not self._roundsStarted:
        self._roundsStarted = extcall IModels(self.models).trainerRegistered(trainer_id)
    return trainer_id


@external
@view
def isRegistered(trainer: address) -> bool:
    """
    @notice Whether `trainer` holds a trainer token.
    @param trainer The address to look up.
    @return True when registered.
    """
    return self._trainerIdOf[trainer] != 0


@external
@view
def trainerId(trainer: address) -> uint256:
    """
    @notice The trainer id held by `trainer`, 0 when it holds none.
    @param trainer The address to look up.
    @return The trainer id (token id) or 0.
    """
    return self._trainerIdOf[trainer]


@external
@pure
def name() -> String[32]:
    """
    @notice ERC-721 metadata: the collection name.
    @return "MCFL Trainer".
    """
    return "MCFL Trainer"


@external
@pure
def symbol() -> String[8]:
    """
    @notice ERC-721 metadata: the collection symbol.
    @return "MCFLT".
    """
    return "MCFLT"


@external
@view
def balanceOf(owner: address) -> uint256:
    """
    @notice Number of trainer tokens held by `owner`: 0 or 1.
    @param owner The address to count for; must not be the zero address.
    @return 1 when `owner` is registered, else 0.
    """
    assert owner != empty(address), "ERC721: the zero address owns no token"
    if self._trainerIdOf[owner] != 0:
        return 1
    return 0


@external
@view
def ownerOf(tokenId: uint256) -> address:
    """
    @notice The holder of trainer token `tokenId`.
    @param tokenId A trainer id.
    @return Its holder; reverts when the id was never minted.
    """
    return self._holder(tokenId)


@external
@view
def getApproved(tokenId: uint256) -> address:
    """
    @notice The address approved to move trainer token `tokenId`.
    @param tokenId A trainer id that exists.
    @return The approved address, or the zero address.
    """
    self._holder(tokenId)
    return erc721_base._get_approved(tokenId)


@external
def approve(spender: address, tokenId: uint256):
    """
    @notice Approve `spender` to move trainer token `tokenId`.
    @param spender The address to approve (zero address: revoke).
    @param tokenId A trainer id owned by the caller or one of its operators.
    """
    erc721_base._approve(self._holder(tokenId), spender, tokenId)


@external
def transferFrom(sender: address, receiver: address, tokenId: uint256):
    """
    @notice Move trainer token `tokenId` (key rotation) to an address without one.
    @param sender Current holder.
    @param receiver New holder; must hold no trainer token.
    @param tokenId The trainer id.
    """
    self._transfer(sender, receiver, tokenId)


@external
def safeTransferFrom(sender: address, receiver: address, tokenId: uint256,
                     data: Bytes[erc721_base.MAX_DATA] = b""):
    """
    @notice `transferFrom`, then check that a contract receiver accepts ERC-721 tokens.
    @param sender Current holder.
    @param receiver New holder; must hold no trainer token.
    @param tokenId The trainer id.
    @param data Passed to the receiver's `onERC721Received`.
    """
    self._transfer(sender, receiver, tokenId)
    erc721_base._check_receiver(sender, receiver, tokenId, data)


@external
@view
def tokenURI(tokenId: uint256) -> String[512]:
    """
    @notice ERC-721 metadata of trainer token `tokenId` as a JSON data URI.
    @param tokenId A trainer id that exists.
    @return `data:application/json,` followed by the JSON document.
    """
    holder: address = self._holder(tokenId)
    number: String[78] = uint2str(tokenId)
    return concat(
        'data:application/json,{"name":"MCFL trainer #', number,
        '","description":"Identity of a trainer of a MultiConfederated Learning network.',
        ' Its holder may propose updates, aggregate them and vote on rounds.",',
        '"attributes":[{"trait_type":"trainer id","value":', number,
        '},{"trait_type":"holder","value":"', render._hex_address(holder), '"}]}'
    )


@internal
@view
def _holder(token_id: uint256) -> address:
    holder: address = self._holderOf[token_id]
    assert holder != empty(address), "Trainers: no trainer token has this id"
    return holder


@internal
def _transfer(sender: address, receiver: address, token_id: uint256):
    erc721_base._authorize_transfer(self._holder(token_id), sender, receiver, token_id)
    assert self._trainerIdOf[receiver] == 0, \
        "Trainers: the receiver already holds a trainer token (one per address)"
    self._trainerIdOf[sender] = 0
    self._trainerIdOf[receiver] = token_id
    self._holderOf[token_id] = receiver
    log erc721_base.Transfer(sender=sender, receiver=receiver, tokenId=token_id)
