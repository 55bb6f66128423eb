# pragma version 0.4.3
"""
@title MCFL Updates: the update tokens
@license MIT
@notice Each update a trainer proposes is an ERC-721 token whose id is
        `uint256(keccak256(abi.encode(uint256 trainerId, bytes32 parent, uint256 round)))`:
        the id itself allows one update per (trainer id, parent, round),
        whichever address holds the trainer token, and lets anyone find a
        trainer's update without a lookup. Trainers submit through the Models
        contract (`submitProposals`), which records the updates here and has
        the update lists of new models checked here. The weights CID of an
        update is in its `UpdateProposed` event.
        https://eips.ethereum.org/EIPS/eip-721
"""

from ethereum.ercs import IERC165
from ethereum.ercs import IERC721
from .modules import erc721
from .modules import protocol
from .modules import render

implements: IERC165
implements: IERC721

initializes: erc721
# Every ERC-721 function (the module's whole external interface).
exports: erc721.__interface__


event UpdateProposed:
    updateId: indexed(uint256)
    parent: indexed(bytes32)
    trainerId: indexed(uint256)
    round: uint256
    proposer: address
    cid: Bytes[render.CID_LENGTH]
    numSamples: uint256


# @dev Largest sample cap a deployment may set: the 32 bits of the record.
MAX_SAMPLES_BOUND: public(constant(uint256)) = (1 << 32) - 1
CID_LENGTH: public(constant(uint256)) = render.CID_LENGTH

# @dev `erc721._tokens[id]` packs a proposal in one slot, so proposing writes one new
#      word and a new model's check reads one word per update:
#      owner (bits 0-159) | round (160-191) | parent's creation index in Models
#      (192-223) | numSamples (224-255). The weights CID is in the
#      `UpdateProposed` event only: a second slot per update would cost every
#      proposal 22,100 gas, a fifth of a trainer's round, for a value no rule reads.
_MASK32: constant(uint256) = (1 << 32) - 1
_ROUND_SHIFT: constant(uint256) = 160
_PARENT_SHIFT: constant(uint256) = 192
_SAMPLES_SHIFT: constant(uint256) = 224


# @dev The Models contract: the only one that records proposals.
models: public(immutable(address))

# @dev Network-wide cap on an update's declared sample count (FedAvg's
#      weight), fixed at deployment: without it one trainer's self-declared
#      count could outweigh every other update of an aggregation.
maxSamples: public(immutable(uint256))


@deploy
def __init__(models_: address, max_samples: uint256):
    """
    @notice Deploy the update registry of a Models contract.
    @param models_ Address of the Models contract (which must then `setUpdates` to this).
    @param max_samples Largest sample count an update may declare (1 to 2**32 - 1).
    """
    assert models_.is_contract, "Updates: the Models address is not a contract"
    assert max_samples >= 1 and max_samples <= MAX_SAMPLES_BOUND, \
        "Updates: maxSamples must be between 1 and 2**32 - 1"
    erc721.__init__("MCFL Update", "MCFLU", "Updates: no update has this id", False)
    models = models_
    maxSamples = max_samples


@external
def recordProposals(proposer: address, trainerId: uint256, round: uint256,
                    proposals: DynArray[protocol.Proposal, protocol.MAX_PROPOSALS],
                    parentIndices: DynArray[uint256, protocol.MAX_PROPOSALS]):
    """
    @notice Mint the updates of one `Models.submitProposals` call (Models only).
    @dev Models has checked the caller, the phase and the parents. Here: the
         sample count is within the cap, the CID well formed, and the trainer
         has no update of this parent in this round yet.
    @param proposer The trainer's address, which receives the update tokens.
    @param trainerId The trainer's id.
    @param round The current round.
    @param proposals The proposals as submitted.
    @param parentIndices Creation index of each proposal's parent.
    """
    assert msg.sender == models, "Updates: only the Models contract may record proposals"
    for i: uint256 in range(len(proposals), bound=protocol.MAX_PROPOSALS):
        num_samples: uint256 = proposals[i].numSamples
        assert num_samples != 0 and num_samples <= maxSamples, \
            "Updates: numSamples must be between 1 and maxSamples"
        cid: Bytes[render.CID_LENGTH] = proposals[i].cid
        render._parse_cid(cid)
        parent: bytes32 = proposals[i].parent
        update_id: uint256 = protocol._update_id(trainerId, parent, round)
        assert erc721._tokens[update_id] == 0, \
            "Updates: the trainer already proposed an update of this parent in this round"
        erc721._tokens[update_id] = convert(proposer, uint256) | (round << _ROUND_SHIFT) \
            | (parentIndices[i] << _PARENT_SHIFT) | (num_samples << _SAMPLES_SHIFT)
        log erc721.Transfer(sender=empty(address), receiver=proposer, tokenId=update_id)
        log UpdateProposed(updateId=update_id, parent=parent, trainerId=trainerId, round=round,
                           proposer=proposer, cid=cid, numSamples=num_samples)
    erc721._balances[proposer] += len(proposals)


@external
@view
def checkUpdates(updateIds: DynArray[uint256, protocol.MAX_UPDATES],
                 parentIndices: DynArray[uint256, protocol.MAX_PARENTS], round: uint256
                 ) -> bool:
    """
    @notice Revert unless `updateIds` may form a new model of the parents at
            `parentIndices` in `round`.
    @dev Strictly ascending, every id exists, was proposed in `round`, and is
         a child of one of the parents.
    @param updateIds The update ids of the aggregation.
    @param parentIndices Creation indices of the aggregation's parents.
    @param round The current round.
    @return True (every failure reverts with its reason).
    """
    previous: uint256 = 0
    single: bool = len(parentIndices) == 1
    for i: uint256 in range(len(updateIds), bound=protocol.MAX_UPDATES):
        update_id: uint256 = updateIds[i]
        assert i == 0 or update_id > previous, "Updates: update ids must be strictly ascending"
        previous = update_id
        packed: uint256 = erc721._tokens[update_id]
        assert packed != 0, "Updates: an update id in the list does not exist"
        assert (packed >> _ROUND_SHIFT) & _MASK32 == round, \
            "Updates: an update in the list was not proposed in the current round"
        parent_index: uint256 = (packed >> _PARENT_SHIFT) & _MASK32
        if single:
            assert parent_index == parentIndices[0], \
                "Updates: an update in the list is not a child of the aggregation's parents"
        else:
            assert parent_index in parentIndices, \
                "Updates: an update in the list is not a child of the aggregation's parents"
    return True


@external
@pure
def updateIdOf(trainerId: uint256, parent: bytes32, round: uint256) -> uint256:
    """
    @notice The id the update of `parent` by trainer `trainerId` in `round` has (or would have).
    @param trainerId The proposing trainer's id.
    @param parent The parent model id.
    @param round The round.
    @return `uint256(keccak256(abi.encode(trainerId, parent, round)))`.
    """
    return protocol._update_id(trainerId, parent, round)


@external
@view
def exists(updateId: uint256) -> bool:
    """
    @notice Whether update `updateId` was proposed.
    @param updateId An update id.
    @return True when it exists.
    """
    return erc721._tokens[updateId] != 0


@external
@view
def parentIndexOf(updateId: uint256) -> uint256:
    """
    @notice Creation index of the model update `updateId` was trained from.
    @dev `Models.indexOf` and the `index` of `ModelCreated` map indices to ids
         (the root is index 0); the `UpdateProposed` event carries the parent id.
    @param updateId An existing update id.
    @return The parent's creation index.
    """
    return (erc721._packed(updateId) >> _PARENT_SHIFT) & _MASK32


@external
@view
def roundOf(updateId: uint256) -> uint256:
    """
    @notice The round in which update `updateId` was proposed.
    @param updateId An existing update id.
    @return The round.
    """
    return (erc721._packed(updateId) >> _ROUND_SHIFT) & _MASK32


@external
@view
def numSamplesOf(updateId: uint256) -> uint256:
    """
    @notice The training sample count declared with update `updateId`.
    @param updateId An existing update id.
    @return The sample count.
    """
    return erc721._packed(updateId) >> _SAMPLES_SHIFT


@external
@view
def tokenURI(tokenId: uint256) -> String[render.MAX_URI]:
    """
    @notice ERC-721 metadata of update token `tokenId`.
    @param tokenId An update id.
    @return `data:application/json;base64,` followed by the JSON document.
    """
    packed: uint256 = erc721._packed(tokenId)
    return render._json_data_url(concat(
        '{"name":"MCFL update ', render._hex32(convert(tokenId, bytes32)),
        '","description":"Weights a trainer of a MultiConfederated Learning network ',
        'trained from a parent model during one round.",',
        '"attributes":[{"trait_type":"round","value":',
        uint2str((packed >> _ROUND_SHIFT) & _MASK32),
        '},{"trait_type":"parent index","value":', uint2str((packed >> _PARENT_SHIFT) & _MASK32),
        '},{"trait_type":"samples","value":', uint2str(packed >> _SAMPLES_SHIFT),
        '},{"trait_type":"holder","value":"',
        render._hex_address(convert(packed & erc721.ADDRESS_MASK, address)), '"}]}'
    ))
