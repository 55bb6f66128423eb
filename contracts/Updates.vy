# pragma version 0.4.3
"""
@title MCFL Updates: update proposals and aggregations
@license MIT
@notice Each update a trainer proposes is an ERC-721 token. Its id is
        `uint256(keccak256(abi.encode(proposer, parent, round)))`: the id
        itself enforces one proposal per (trainer, parent, round), and lets
        `aggregate` find the caller's own update without a lookup.
        `aggregate` submits a strictly ascending list of updates of one parent
        proposed this round; the Models contract turns it into a model id.
        https://eips.ethereum.org/EIPS/eip-721
"""

from .interfaces import IModels
from .interfaces import ITrainers
from .modules import erc721_base
from .modules import render

initializes: erc721_base
exports: (
    erc721_base.setApprovalForAll,
    erc721_base.isApprovedForAll,
    erc721_base.supportsInterface,
)


event UpdateProposed:
    proposer: indexed(address)
    parent: indexed(bytes32)
    updateId: indexed(uint256)
    round: uint256
    cid: Bytes[render.CID_LENGTH]
    numSamples: uint256


# @dev Bound on the updates of one aggregation, the same as Models'.
MAX_UPDATES: constant(uint256) = 256

# @dev Largest sample count a proposal can declare (30 bits of its slot).
MAX_SAMPLES: constant(uint256) = (1 << 30) - 1

# @dev `_updates[id]` packs a proposal in one slot, so proposing writes one new
#      word besides the CID digest and `aggregate` reads one word per update:
#      owner (bits 0-159) | round (160-191) | parent's creation index in Models
#      (192-223) | numSamples (224-253) | CID codec is dag-pb (254)
#      | its proposer has aggregated with it (255).
_ADDRESS_MASK: constant(uint256) = (1 << 160) - 1
_MASK32: constant(uint256) = (1 << 32) - 1
_ROUND_SHIFT: constant(uint256) = 160
_PARENT_SHIFT: constant(uint256) = 192
_SAMPLES_SHIFT: constant(uint256) = 224
_DAG_PB_BIT: constant(uint256) = 1 << 254
_AGGREGATED_BIT: constant(uint256) = 1 << 255


TRAINERS: immutable(address)
MODELS: immutable(address)

_updates: HashMap[uint256, uint256]
# @dev sha2-256 digest of each update's weights CID (codec bit in `_updates`).
_digest: HashMap[uint256, bytes32]
_balances: HashMap[address, uint256]


@deploy
def __init__(trainers: address, models: address):
    """
    @notice Deploy the update registry for the given Trainers and Models contracts.
    @param trainers Address of the Trainers contract.
    @param models Address of the Models contract (which must then `setUpdates` to this).
    """
    assert trainers.is_contract, "Updates: the Trainers address is not a contract"
    assert models.is_contract, "Updates: the Models address is not a contract"
    TRAINERS = trainers
    MODELS = models


@external
def propose(parent: bytes32, cid: Bytes[render.CID_LENGTH], numSamples: uint256) -> uint256:
    """
    @notice Propose an update of model `parent` trained by the caller this round.
    @dev Registered trainers only, PROPOSE phase only, `parent` must exist, and
         at most one proposal per (trainer, parent, round): the update id is
         derived from exactly these three.
    @param parent Id of the model the update was trained from.
    @param cid Binary CIDv1 (raw or dag-pb codec, sha2-256) of the update's weights.
    @param numSamples Training samples behind the update (1 to 2**30 - 1), FedAvg's weight.
    @return The update id (also its token id).
    """
    assert numSamples != 0 and numSamples <= MAX_SAMPLES, \
        "Updates: numSamples must be between 1 and 2**30 - 1"
    dag_pb: bool = False
    digest: bytes32 = empty(bytes32)
    dag_pb, digest = render._parse_cid(cid)
    assert staticcall ITrainers(TRAINERS).trainerId(msg.sender) != 0, \
        "Updates: the caller is not a registered trainer"
    current: uint256 = 0
    parent_index: uint256 = 0
    current, parent_index = staticcall IModels(MODELS).proposalContext(parent)
    update_id: uint256 = convert(keccak256(abi_encode(msg.sender, parent, current)), uint256)
    assert self._updates[update_id] == 0, \
        "Updates: the caller already proposed an update of this parent in this round"
    packed: uint256 = convert(msg.sender, uint256) | (current << _ROUND_SHIFT) \
        | (parent_index << _PARENT_SHIFT) | (numSamples << _SAMPLES_SHIFT)
    if dag_pb:
        packed |= _DAG_PB_BIT
    self._updates[update_id] = packed
    self._digest[update_id] = digest
    self._balances[msg.sender] += 1
    log erc721_base.Transfer(sender=empty(address), receiver=msg.sender, tokenId=update_id)
    log UpdateProposed(proposer=msg.sender, parent=parent, updateId=update_id, round=current,
                       cid=cid, numSamples=numSamples)
    return update_id


@external
def aggregate(updateIds: DynArray[uint256, MAX_UPDATES],
              weightsCid: Bytes[render.CID_LENGTH]) -> bytes32:
    """
    @notice Submit the caller's aggregation of `updateIds` as a child model of their parent.
    @dev Registered trainers only, AGGREGATE phase only. The list must be
         non-empty (at most 256 ids), strictly ascending, every id must exist,
         share one parent and come from this round, and it must contain the
         caller's own proposal for that parent and round: the update the caller
         proposed, whoever holds its token now (a trainer always keeps its own
         update). That proposal records the aggregation, which allows one
         aggregation per (trainer, parent, round). When the model id already
         exists the list is the one its first aggregator submitted (the id
         commits to it), so only the caller's own proposal is checked again.
    @param updateIds Strictly ascending update ids.
    @param weightsCid Binary CIDv1 of the aggregated weights, or empty; recorded
           only when the model id is new.
    @return The model id, `keccak256(abi.encode(parent, updateIds))`.
    """
    count: uint256 = len(updateIds)
    assert count != 0, "Updates: the list of update ids is empty"
    assert staticcall ITrainers(TRAINERS).trainerId(msg.sender) != 0, \
        "Updates: the caller is not a registered trainer"
    first: uint256 = self._updates[updateIds[0]]
    assert first != 0, "Updates: an update id in the list does not exist"
    parent_index: uint256 = (first >> _PARENT_SHIFT) & _MASK32
    model_id: bytes32 = empty(bytes32)
    parent: bytes32 = empty(bytes32)
    current: uint256 = 0
    is_new: bool = False
    model_id, parent, current, is_new = extcall IModels(MODELS).appendGeneration(
        parent_index, updateIds, msg.sender, weightsCid
    )
    assert (first >> _ROUND_SHIFT) & _MASK32 == current, \
        "Updates: an update in the list was not proposed in the current round"
    own: uint256 = convert(keccak256(abi_encode(msg.sender, parent, current)), uint256)
    found: bool = False
    if is_new:
        previous: uint256 = 0
        for i: uint256 in range(count, bound=MAX_UPDATES):
            update_id: uint256 = updateIds[i]
            assert i == 0 or update_id > previous, \
                "Updates: update ids must be strictly ascending"
            previous = update_id
            packed: uint256 = self._updates[update_id]
            assert packed != 0, "Updates: an update id in the list does not exist"
            assert (packed >> _PARENT_SHIFT) & _MASK32 == parent_index, \
                "Updates: the updates in the list do not all share one parent"
            assert (packed >> _ROUND_SHIFT) & _MASK32 == current, \
                "Updates: an update in the list was not proposed in the current round"
            if update_id == own:
                found = True
    else:
        for update_id: uint256 in updateIds:
            if update_id == own:
                found = True
                break
    assert found, \
        "Updates: the caller's own update of this parent in this round must be in the list"
    mine: uint256 = self._updates[own]
    assert mine & _AGGREGATED_BIT == 0, \
        "Updates: the caller already aggregated updates of this parent in this round"
    self._updates[own] = mine | _AGGREGATED_BIT
    return model_id


@external
@pure
def updateIdOf(proposer: address, parent: bytes32, round: uint256) -> uint256:
    """
    @notice The id an update of `parent` proposed by `proposer` in `round` has (or would have).
    @param proposer The proposing trainer's address.
    @param parent The parent model id.
    @param round The round.
    @return `uint256(keccak256(abi.encode(proposer, parent, round)))`.
    """
    return convert(keccak256(abi_encode(proposer, parent, round)), uint256)


@external
@view
def exists(updateId: uint256) -> bool:
    """
    @notice Whether update `updateId` was proposed.
    @param updateId An update id.
    @return True when it exists.
    """
    return self._updates[updateId] != 0


@external
@view
def parentOf(updateId: uint256) -> bytes32:
    """
    @notice The model update `updateId` was trained from.
    @param updateId An existing update id.
    @return The parent model id.
    """
    return staticcall IModels(MODELS).modelAt((self._packed(updateId) >> _PARENT_SHIFT) & _MASK32)


@external
@view
def roundOf(updateId: uint256) -> uint256:
    """
    @notice The round in which update `updateId` was proposed.
    @param updateId An existing update id.
    @return The round.
    """
    return (self._packed(updateId) >> _ROUND_SHIFT) & _MASK32


@external
@view
def numSamplesOf(updateId: uint256) -> uint256:
    """
    @notice The training sample count declared with update `updateId`.
    @param updateId An existing update id.
    @return The sample count.
    """
    return (self._packed(updateId) >> _SAMPLES_SHIFT) & MAX_SAMPLES


@external
@view
def cidOf(updateId: uint256) -> Bytes[render.CID_LENGTH]:
    """
    @notice Binary CIDv1 of the weights of update `updateId`.
    @param updateId An existing update id.
    @return The CID.
    """
    return render._cid_bytes(self._codec(self._packed(updateId)), self._digest[updateId])


@external
@view
def hasAggregated(trainer: address, parent: bytes32, round: uint256) -> bool:
    """
    @notice Whether `trainer` aggregated updates of `parent` in `round`.
    @param trainer A trainer address (the proposer of its own update).
    @param parent A model id.
    @param round A round.
    @return True when it did.
    """
    own: uint256 = convert(keccak256(abi_encode(trainer, parent, round)), uint256)
    return self._updates[own] & _AGGREGATED_BIT != 0


@external
@pure
def name() -> String[32]:
    """
    @notice ERC-721 metadata: the collection name.
    @return "MCFL Update".
    """
    return "MCFL Update"


@external
@pure
def symbol() -> String[8]:
    """
    @notice ERC-721 metadata: the collection symbol.
    @return "MCFLU".
    """
    return "MCFLU"


@external
@view
def balanceOf(owner: address) -> uint256:
    """
    @notice Number of update tokens held by `owner`.
    @param owner The address to count for; must not be the zero address.
    @return The count.
    """
    assert owner != empty(address), "ERC721: the zero address owns no token"
    return self._balances[owner]


@external
@view
def ownerOf(tokenId: uint256) -> address:
    """
    @notice Holder of update token `tokenId`.
    @param tokenId An update id.
    @return The holder; reverts when the update does not exist.
    """
    return convert(self._packed(tokenId) & _ADDRESS_MASK, address)


@external
@view
def getApproved(tokenId: uint256) -> address:
    """
    @notice The address approved to move update token `tokenId`.
    @param tokenId An update id that exists.
    @return The approved address, or the zero address.
    """
    self._packed(tokenId)
    return erc721_base._get_approved(tokenId)


@external
def approve(spender: address, tokenId: uint256):
    """
    @notice Approve `spender` to move update token `tokenId`.
    @param spender The address to approve (zero address: revoke).
    @param tokenId An update owned by the caller or one of its operators.
    """
    erc721_base._approve(convert(self._packed(tokenId) & _ADDRESS_MASK, address), spender, tokenId)


@external
def transferFrom(sender: address, receiver: address, tokenId: uint256):
    """
    @notice Move update token `tokenId`. Its proposer still counts as the
            trainer who proposed it for `aggregate`.
    @param sender Current holder.
    @param receiver New holder.
    @param tokenId The update id.
    """
    self._transfer(sender, receiver, tokenId)


@external
def safeTransferFrom(sender: address, receiver: address, tokenId: uint256,
                     data: Bytes[erc721_base.MAX_DATA] = b""):
    """
    @notice `transferFrom`, then check that a contract receiver accepts ERC-721 tokens.
    @param sender Current holder.
    @param receiver New holder.
    @param tokenId The update id.
    @param data Passed to the receiver's `onERC721Received`.
    """
    self._transfer(sender, receiver, tokenId)
    erc721_base._check_receiver(sender, receiver, tokenId, data)


@external
@view
def tokenURI(tokenId: uint256) -> String[1024]:
    """
    @notice ERC-721 metadata of update token `tokenId` as a JSON data URI.
    @param tokenId An update id.
    @return `data:application/json,` followed by the JSON document.
    """
    packed: uint256 = self._packed(tokenId)
    parent: bytes32 = staticcall IModels(MODELS).modelAt((packed >> _PARENT_SHIFT) & _MASK32)
    aggregated: String[5] = "false"
    if packed & _AGGREGATED_BIT != 0:
        aggregated = "true"
    return concat(
        'data:application/json,{"name":"MCFL update ',
        render._hex32(convert(tokenId, bytes32)),
        '","description":"Weights a trainer of a MultiConfederated Learning network ',
        'trained from a parent model during one round.",',
        '"attributes":[{"trait_type":"round","value":',
        uint2str((packed >> _ROUND_SHIFT) & _MASK32),
        '},{"trait_type":"parent","value":"', render._hex32(parent),
        '"},{"trait_type":"samples","value":', uint2str((packed >> _SAMPLES_SHIFT) & MAX_SAMPLES),
        '},{"trait_type":"holder","value":"',
        render._hex_address(convert(packed & _ADDRESS_MASK, address)),
        '"},{"trait_type":"aggregated by its proposer","value":', aggregated,
        '},{"trait_type":"CID","value":"', render._cid(self._codec(packed), self._digest[tokenId]),
        '"}]}'
    )


@internal
@view
def _packed(update_id: uint256) -> uint256:
    packed: uint256 = self._updates[update_id]
    assert packed != 0, "Updates: no update has this id"
    return packed


@internal
@pure
def _codec(packed: uint256) -> uint256:
    if packed & _DAG_PB_BIT != 0:
        return render.CODEC_DAG_PB
    return render.CODEC_RAW


@internal
def _transfer(sender: address, receiver: address, token_id: uint256):
    packed: uint256 = self._packed(token_id)
    erc721_base._authorize_transfer(convert(packed & _ADDRESS_MASK, address), sender,
                                    receiver, token_id)
    self._updates[token_id] = (packed & ~_ADDRESS_MASK) | convert(receiver, uint256)
    self._balances[sender] -= 1
    self._balances[receiver] += 1
    log erc721_base.Transfer(sender=sender, receiver=receiver, tokenId=token_id)
