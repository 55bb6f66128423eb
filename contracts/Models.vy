# pragma version 0.4.3
"""
@title MCFL Models: the model DAG and the round state machine
@license MIT
@notice Every model version of a MultiConfederated Learning network is an
        ERC-721 token whose id is `uint256(modelId)`, with
        `modelId = keccak256(abi.encode(bytes32 parent, uint256[] updateIds))`
        and `updateIds` strictly ascending, so anyone can recompute it off
        chain. The root model (id 0) exists from deployment with the genesis
        weights CID and the task descriptor. A new model id is minted to its
        first aggregator; submitting an existing id adds one to its popularity.
        Rounds have two phases, PROPOSE (0) then AGGREGATE (1). A phase ends
        when every trainer counted in the round's quorum has voted
        (`finishProposals`, then `nextRound`), or, when a phase duration was
        set, by any registered trainer's vote after the deadline.
        https://eips.ethereum.org/EIPS/eip-721
"""

from .interfaces import ITrainers
from .modules import erc721_base
from .modules import render

initializes: erc721_base
exports: (
    erc721_base.setApprovalForAll,
    erc721_base.isApprovedForAll,
    erc721_base.supportsInterface,
)


event PhaseChanged:
    round: indexed(uint256)
    phase: uint256

event NewRound:
    prevRound: indexed(uint256)
    round: indexed(uint256)

event TrainerVoted:
    round: indexed(uint256)
    trainer: indexed(address)
    phase: uint256
    trainerId: uint256
    counted: bool
    votes: uint256

event ModelAppended:
    round: indexed(uint256)
    modelId: indexed(bytes32)
    parent: indexed(bytes32)
    updateIds: DynArray[uint256, MAX_UPDATES]
    popularity: uint256
    aggregator: address
    weightsCid: Bytes[render.CID_LENGTH]


PROPOSE: constant(uint256) = 0
AGGREGATE: constant(uint256) = 1

# @dev Bound on the updates aggregated into one model; a higher bound makes
#      every aggregation pay for more memory, and 256 covers networks far
#      larger than the thesis' 38 trainers.
MAX_UPDATES: constant(uint256) = 256

# @dev `_state` packs the whole round state machine in one slot, so a vote
#      reads and writes a single word:
#      round (bits 0-63) | phase (64-71) | started (72) | phaseStart (80-143)
#      | quorum (144-175) | votes (176-207).
_ROUND_MASK: constant(uint256) = (1 << 64) - 1
_PHASE_SHIFT: constant(uint256) = 64
_STARTED_BIT: constant(uint256) = 1 << 72
_START_SHIFT: constant(uint256) = 80
_QUORUM_SHIFT: constant(uint256) = 144
_VOTES_SHIFT: constant(uint256) = 176
_MASK32: constant(uint256) = (1 << 32) - 1
_MASK64: constant(uint256) = (1 << 64) - 1

# @dev `_models[id]` packs a model's token data in one slot:
#      owner (bits 0-159) | round (160-191) | index (192-223) | popularity (224-255).
#      The index is the model's creation number, which Updates stores instead
#      of the 32-byte parent id to keep a proposal in one slot.
_ADDRESS_MASK: constant(uint256) = (1 << 160) - 1
_M_ROUND_SHIFT: constant(uint256) = 160
_M_INDEX_SHIFT: constant(uint256) = 192
_M_POPULARITY_SHIFT: constant(uint256) = 224

# @dev `_meta[id]` packs what only views need: parent index (bits 0-31),
#      has weights CID (bit 32), CID codec is dag-pb rather than raw (bit 33).
_HAS_CID_BIT: constant(uint256) = 1 << 32
_DAG_PB_BIT: constant(uint256) = 1 << 33


DEPLOYER: immutable(address)
TRAINERS: immutable(address)

# @dev Trainers needed before round 0 opens (deployment parameter, >= 1).
minTrainers: public(immutable(uint256))

# @dev Phase duration in seconds after which any vote ends the phase; 0: none.
phaseDuration: public(immutable(uint256))

# @dev Task descriptor, e.g. "lenet:fashion-mnist": trainers that cannot run
#      it refuse the network.
task: public(String[128])

# @dev The only contract allowed to append models, linked once after deployment.
updates: public(address)

_state: uint256
_models: HashMap[bytes32, uint256]
_meta: HashMap[bytes32, uint256]
# @dev sha2-256 digest of each model's weights CID (the root: genesis weights).
_weightsDigest: HashMap[bytes32, bytes32]
# @dev Model id by creation index, and the number of models created.
_modelAt: HashMap[uint256, bytes32]
totalSupply: public(uint256)
_balances: HashMap[address, uint256]
# @dev Per trainer id, the last phase it voted in as `round * 2 + phase + 1`:
#      one reused slot per trainer, keyed by id so a key rotation cannot vote twice.
_voteStamp: HashMap[uint256, uint256]


@deploy
def __init__(trainers: address, genesis_cid: Bytes[render.CID_LENGTH],
             task_descriptor: String[128], min_trainers: uint256, phase_duration: uint256):
    """
    @notice Deploy the model DAG with its root model (id 0) minted to the deployer.
    @param trainers Address of the Trainers contract.
    @param genesis_cid Binary CIDv1 (raw or dag-pb, sha2-256) of the initial weights.
    @param task_descriptor Task descriptor, e.g. "lenet:fashion-mnist".
    @param min_trainers Registered trainers needed before round 0 opens (>= 1).
    @param phase_duration Seconds after which any vote ends a phase; 0 for no deadline.
    """
    assert trainers.is_contract, "Models: the Trainers address is not a contract"
    assert min_trainers >= 1 and min_trainers <= _MASK32, \
        "Models: minTrainers must be between 1 and 2**32 - 1"
    assert phase_duration <= _MASK32, "Models: phaseDuration must be below 2**32 seconds"
    assert len(task_descriptor) > 0, "Models: the task descriptor must not be empty"
    self._check_printable(task_descriptor)
    dag_pb: bool = False
    digest: bytes32 = empty(bytes32)
    dag_pb, digest = render._parse_cid(genesis_cid)
    DEPLOYER = msg.sender
    TRAINERS = trainers
    minTrainers = min_trainers
    phaseDuration = phase_duration
    self.task = task_descriptor
    root: bytes32 = empty(bytes32)
    self._models[root] = convert(msg.sender, uint256) | (1 << _M_POPULARITY_SHIFT)
    self._meta[root] = _HAS_CID_BIT | (_DAG_PB_BIT if dag_pb else 0)
    self._weightsDigest[root] = digest
    self.totalSupply = 1
    self._balances[msg.sender] = 1
    log erc721_base.Transfer(sender=empty(address), receiver=msg.sender, tokenId=0)


@external
def setUpdates(updates: address):
    """
    @notice Link the Updates contract, the only caller of `appendGeneration` (once, by the deployer).
    @param updates Address of the Updates contract.
    """
    assert msg.sender == DEPLOYER, "Models: only the deployer may link the Updates contract"
    assert self.updates == empty(address), "Models: the Updates contract is already linked"
    assert updates.is_contract, "Models: the Updates address is not a contract"
    self.updates = updates


@external
def trainerRegistered(count: uint256) -> bool:
    """
    @notice Hook for Trainers: `count` trainers are registered; opens round 0
            once `minTrainers` are.
    @param count Number of registered trainers.
    @return Whether rounds have started.
    """
    assert msg.sender == TRAINERS, "Models: only the Trainers contract may report registrations"
    if self._state & _STARTED_BIT != 0:
        return True
    if count < minTrainers:
        return False
    self._state = _STARTED_BIT | (block.timestamp << _START_SHIFT) | (count << _QUORUM_SHIFT)
    log PhaseChanged(round=0, phase=PROPOSE)
    return True


@external
def finishProposals():
    """
    @notice Vote to end the PROPOSE phase of the current round.
    @dev The vote counts when the caller's trainer id is within the round's
         quorum snapshot; trainers registered mid-round may vote but are only
         counted from the next round. After the phase deadline, any registered
         trainer's call (even a second one) ends the phase.
    """
    self._vote(PROPOSE)


@external
def nextRound():
    """
    @notice Vote to end the AGGREGATE phase, which opens the next round.
    @dev Same counting rules as `finishProposals`. The new round's quorum is
         the number of trainers registered when it opens.
    """
    self._vote(AGGREGATE)


@external
@view
def proposalContext(parent: bytes32) -> (uint256, uint256):
    """
    @notice For Updates.propose: the current round and the creation index of `parent`.
    @dev Reverts when no round is open, the phase is not PROPOSE, or `parent` does not exist.
    @param parent Id of the model to train.
    @return (current round, index of the parent model).
    """
    state: uint256 = self._state
    assert state & _STARTED_BIT != 0, \
        "Models: rounds have not started: fewer than minTrainers trainers are registered"
    assert (state >> _PHASE_SHIFT) & 255 == PROPOSE, \
        "Models: updates can only be proposed in the PROPOSE phase"
    packed: uint256 = self._models[parent]
    assert packed != 0, "Models: the parent model does not exist"
    return state & _ROUND_MASK, (packed >> _M_INDEX_SHIFT) & _MASK32


@external
def appendGeneration(parentIndex: uint256, updateIds: DynArray[uint256, MAX_UPDATES],
                     aggregator: address, weightsCid: Bytes[render.CID_LENGTH]
                     ) -> (bytes32, bytes32, uint256, bool):
    """
    @notice Record that `aggregator` aggregated `updateIds` into a child of the
            model at `parentIndex`; only the Updates contract may call it.
    @dev Updates has already checked the ids (or, for an existing model id, the
         first aggregator's call did: the id commits to the same list).
         A new id is minted to `aggregator` with `weightsCid` (may be empty);
         an existing one gains one popularity and ignores `weightsCid`.
    @param parentIndex Creation index of the parent model.
    @param updateIds Strictly ascending update ids, all children of the parent.
    @param aggregator The trainer that submitted the aggregation.
    @param weightsCid Binary CIDv1 of the aggregated weights, or empty.
    @return (model id, parent id, current round, whether the model is new).
    """
    assert msg.sender == self.updates, "Models: only the Updates contract may append models"
    state: uint256 = self._state
    assert state & _STARTED_BIT != 0, \
        "Models: rounds have not started: fewer than minTrainers trainers are registered"
    assert (state >> _PHASE_SHIFT) & 255 == AGGREGATE, \
        "Models: updates can only be aggregated in the AGGREGATE phase"
    current: uint256 = state & _ROUND_MASK
    parent: bytes32 = self._modelAt[parentIndex]
    model_id: bytes32 = self._model_id(parent, updateIds)
    packed: uint256 = self._models[model_id]
    popularity: uint256 = 1
    recorded_cid: Bytes[render.CID_LENGTH] = b""
    is_new: bool = packed == 0
    if is_new:
        index: uint256 = self.totalSupply
        self.totalSupply = index + 1
        self._models[model_id] = convert(aggregator, uint256) | (current << _M_ROUND_SHIFT) \
            | (index << _M_INDEX_SHIFT) | (1 << _M_POPULARITY_SHIFT)
        self._modelAt[index] = model_id
        meta: uint256 = parentIndex
        if len(weightsCid) != 0:
            dag_pb: bool = False
            digest: bytes32 = empty(bytes32)
            dag_pb, digest = render._parse_cid(weightsCid)
            self._weightsDigest[model_id] = digest
            meta |= _HAS_CID_BIT | (_DAG_PB_BIT if dag_pb else 0)
            recorded_cid = weightsCid
        self._meta[model_id] = meta
        self._balances[aggregator] += 1
        log erc721_base.Transfer(sender=empty(address), receiver=aggregator,
                                 tokenId=convert(model_id, uint256))
    else:
        popularity = (packed >> _M_POPULARITY_SHIFT) + 1
        self._models[model_id] = (packed & ((1 << _M_POPULARITY_SHIFT) - 1)) \
            | (popularity << _M_POPULARITY_SHIFT)
    log ModelAppended(round=current, modelId=model_id, parent=parent, updateIds=updateIds,
                      popularity=popularity, aggregator=aggregator, weightsCid=recorded_cid)
    return model_id, parent, current, is_new


@external
@pure
def modelIdOf(parent: bytes32, updateIds: DynArray[uint256, MAX_UPDATES]) -> bytes32:
    """
    @notice The id a model made of `parent` and `updateIds` has (or would have).
    @dev The very computation `appendGeneration` uses; ordering is not checked here.
    @param parent The parent model id.
    @param updateIds The aggregated update ids (strictly ascending in a valid model).
    @return `keccak256(abi.encode(parent, updateIds))`.
    """
    return self._model_id(parent, updateIds)


@external
@view
def round() -> uint256:
    """
    @notice The current round (0 also before round 0 opens: see `started`).
    @return The round number.
    """
    return self._state & _ROUND_MASK


@external
@view
def phase() -> uint256:
    """
    @notice The current phase: 0 = PROPOSE, 1 = AGGREGATE.
    @return The phase.
    """
    return (self._state >> _PHASE_SHIFT) & 255


@external
@view
def started() -> bool:
    """
    @notice Whether round 0 has opened (`minTrainers` trainers registered).
    @return True once rounds run.
    """
    return self._state & _STARTED_BIT != 0


@external
@view
def phaseStart() -> uint256:
    """
    @notice Timestamp at which the current phase began.
    @return Unix time in seconds (0 before round 0).
    """
    return (self._state >> _START_SHIFT) & _MASK64


@external
@view
def phaseDeadline() -> uint256:
    """
    @notice Time after which any trainer's vote ends the current phase.
    @return Unix time in seconds, or 0 when phases have no deadline or rounds have not started.
    """
    if phaseDuration == 0 or self._state & _STARTED_BIT == 0:
        return 0
    return ((self._state >> _START_SHIFT) & _MASK64) + phaseDuration


@external
@view
def quorum() -> uint256:
    """
    @notice Votes needed to end the current phase: trainers registered when the round began.
    @return The quorum (0 before round 0).
    """
    return (self._state >> _QUORUM_SHIFT) & _MASK32


@external
@view
def votes() -> uint256:
    """
    @notice Counted votes in the current phase.
    @return The number of quorum members that voted.
    """
    return (self._state >> _VOTES_SHIFT) & _MASK32


@external
@view
def statusOf(trainer: address) -> (bool, uint256, uint256, bool, uint256, uint256, uint256):
    """
    @notice The round state as one trainer needs it, read in one call (so atomically).
    @dev Workers poll this; reading `round()` and `phase()` separately could pair a
         round with the next round's phase when a block lands in between.
    @param trainer Address of a trainer (any address: unregistered ones never voted).
    @return (started, round, phase, whether `trainer` voted in this phase,
             phase deadline or 0, counted votes, quorum).
    """
    state: uint256 = self._state
    started: bool = state & _STARTED_BIT != 0
    deadline: uint256 = 0
    voted: bool = False
    if started:
        if phaseDuration != 0:
            deadline = ((state >> _START_SHIFT) & _MASK64) + phaseDuration
        trainer_id: uint256 = staticcall ITrainers(TRAINERS).trainerId(trainer)
        voted = trainer_id != 0 and self._voteStamp[trainer_id] == self._stamp(state)
    return (started, state & _ROUND_MASK, (state >> _PHASE_SHIFT) & 255, voted, deadline,
            (state >> _VOTES_SHIFT) & _MASK32, (state >> _QUORUM_SHIFT) & _MASK32)


@external
@view
def hasVoted(trainer: address) -> bool:
    """
    @notice Whether the trainer token held by `trainer` voted in the current phase.
    @param trainer Address of a registered trainer.
    @return True when it voted (False for unregistered addresses).
    """
    trainer_id: uint256 = staticcall ITrainers(TRAINERS).trainerId(trainer)
    state: uint256 = self._state
    if trainer_id == 0 or state & _STARTED_BIT == 0:
        return False
    return self._voteStamp[trainer_id] == self._stamp(state)


@external
@view
def modelExists(modelId: bytes32) -> bool:
    """
    @notice Whether `modelId` is a model of the DAG.
    @param modelId A model id.
    @return True for the root and every appended model.
    """
    return self._models[modelId] != 0


@external
@view
def parentOf(modelId: bytes32) -> bytes32:
    """
    @notice Parent of model `modelId` (the root reports itself, id 0).
    @param modelId An existing model id.
    @return The parent model id.
    """
    self._packed(modelId)
    return self._modelAt[self._meta[modelId] & _MASK32]


@external
@view
def roundOf(modelId: bytes32) -> uint256:
    """
    @notice Round in which model `modelId` was first appended (root: 0).
    @param modelId An existing model id.
    @return The round number.
    """
    return (self._packed(modelId) >> _M_ROUND_SHIFT) & _MASK32


@external
@view
def popularityOf(modelId: bytes32) -> uint256:
    """
    @notice Number of accepted aggregations with id `modelId` (root: 1).
    @param modelId An existing model id.
    @return The popularity.
    """
    return self._packed(modelId) >> _M_POPULARITY_SHIFT


@external
@view
def indexOf(modelId: bytes32) -> uint256:
    """
    @notice Creation index of model `modelId` (root: 0).
    @param modelId An existing model id.
    @return The index.
    """
    return (self._packed(modelId) >> _M_INDEX_SHIFT) & _MASK32


@external
@view
def modelAt(index: uint256) -> bytes32:
    """
    @notice The model created `index`-th (0: the root).
    @param index A creation index below `totalSupply()`.
    @return The model id.
    """
    assert index < self.totalSupply, "Models: no model has this creation index"
    return self._modelAt[index]


@external
@view
def weightsCidOf(modelId: bytes32) -> Bytes[render.CID_LENGTH]:
    """
    @notice Binary CIDv1 of the weights recorded for `modelId` by its first aggregator.
    @param modelId An existing model id.
    @return The CID, or empty when none was recorded.
    """
    self._packed(modelId)
    meta: uint256 = self._meta[modelId]
    if meta & _HAS_CID_BIT == 0:
        return b""
    return render._cid_bytes(self._codec(meta), self._weightsDigest[modelId])


@external
@view
def genesisCid() -> Bytes[render.CID_LENGTH]:
    """
    @notice Binary CIDv1 of the initial weights (the root model's).
    @return The CID.
    """
    return render._cid_bytes(self._codec(self._meta[empty(bytes32)]),
                             self._weightsDigest[empty(bytes32)])


@external
@pure
def name() -> String[32]:
    """
    @notice ERC-721 metadata: the collection name.
    @return "MCFL Model".
    """
    return "MCFL Model"


@external
@pure
def symbol() -> String[8]:
    """
    @notice ERC-721 metadata: the collection symbol.
    @return "MCFLM".
    """
    return "MCFLM"


@external
@view
def balanceOf(owner: address) -> uint256:
    """
    @notice Number of model tokens held by `owner`.
    @param owner The address to count for; must not be the zero address.
    @return The count.
    """
    assert owner != empty(address), "ERC721: the zero address owns no token"
    return self._balances[owner]


@external
@view
def ownerOf(tokenId: uint256) -> address:
    """
    @notice Holder of model token `tokenId` (`uint256(modelId)`).
    @param tokenId A model token id.
    @return The holder; reverts when the model does not exist.
    """
    return convert(self._packed(convert(tokenId, bytes32)) & _ADDRESS_MASK, address)


@external
@view
def getApproved(tokenId: uint256) -> address:
    """
    @notice The address approved to move model token `tokenId`.
    @param tokenId A model token id that exists.
    @return The approved address, or the zero address.
    """
    self._packed(convert(tokenId, bytes32))
    return erc721_base._get_approved(tokenId)


@external
def approve(spender: address, tokenId: uint256):
    """
    @notice Approve `spender` to move model token `tokenId`.
    @param spender The address to approve (zero address: revoke).
    @param tokenId A model token owned by the caller or one of its operators.
    """
    owner: address = convert(self._packed(convert(tokenId, bytes32)) & _ADDRESS_MASK, address)
    erc721_base._approve(owner, spender, tokenId)


@external
def transferFrom(sender: address, receiver: address, tokenId: uint256):
    """
    @notice Move model token `tokenId`; the model's place in the DAG does not change.
    @param sender Current holder.
    @param receiver New holder.
    @param tokenId The model token id.
    """
    self._transfer(sender, receiver, tokenId)


@external
def safeTransferFrom(sender: address, receiver: address, tokenId: uint256,
                     data: Bytes[erc721_base.MAX_DATA] = b""):
    """
    @notice `transferFrom`, then check that a contract receiver accepts ERC-721 tokens.
    @param sender Current holder.
    @param receiver New holder.
    @param tokenId The model token id.
    @param data Passed to the receiver's `onERC721Received`.
    """
    self._transfer(sender, receiver, tokenId)
    erc721_base._check_receiver(sender, receiver, tokenId, data)


@external
@view
def tokenURI(tokenId: uint256) -> String[1536]:
    """
    @notice ERC-721 metadata of model token `tokenId` as a JSON data URI.
    @param tokenId A model token id (`uint256(modelId)`).
    @return `data:application/json,` followed by the JSON document.
    """
    model_id: bytes32 = convert(tokenId, bytes32)
    packed: uint256 = self._packed(model_id)
    meta: uint256 = self._meta[model_id]
    cid: String[59] = "none"
    if meta & _HAS_CID_BIT != 0:
        cid = render._cid(self._codec(meta), self._weightsDigest[model_id])
    return concat(
        'data:application/json,{"name":"MCFL model ', render._hex32(model_id),
        '","description":"A model version of a MultiConfederated Learning network: ',
        'its parent model plus the updates aggregated into it. Task: ', self.task, '.",',
        '"attributes":[{"trait_type":"round","value":',
        uint2str((packed >> _M_ROUND_SHIFT) & _MASK32),
        '},{"trait_type":"parent","value":"', render._hex32(self._modelAt[meta & _MASK32]),
        '"},{"trait_type":"popularity","value":', uint2str(packed >> _M_POPULARITY_SHIFT),
        '},{"trait_type":"index","value":', uint2str((packed >> _M_INDEX_SHIFT) & _MASK32),
        '},{"trait_type":"holder","value":"',
        render._hex_address(convert(packed & _ADDRESS_MASK, address)),
        '"},{"trait_type":"weights CID","value":"', cid, '"}]}'
    )


@internal
@pure
def _model_id(parent: bytes32, update_ids: DynArray[uint256, MAX_UPDATES]) -> bytes32:
    return keccak256(abi_encode(parent, update_ids))


@internal
@view
def _packed(model_id: bytes32) -> uint256:
    packed: uint256 = self._models[model_id]
    assert packed != 0, "Models: no model has this id"
    return packed


@internal
@pure
def _codec(meta: uint256) -> uint256:
    if meta & _DAG_PB_BIT != 0:
        return render.CODEC_DAG_PB
    return render.CODEC_RAW


@internal
@pure
def _check_printable(text: String[128]):
    # @dev tokenURI embeds the task in a JSON string: refuse what would need escaping.
    raw: Bytes[128] = convert(text, Bytes[128])
    for i: uint256 in range(128):
        if i >= len(raw):
            break
        c: uint256 = convert(convert(slice(raw, i, 1), bytes1), uint256)
        assert c >= 32 and c != 34 and c != 92 and c != 127, \
            "Models: the task descriptor must be printable ASCII without quotes or backslashes"


@internal
@pure
def _stamp(state: uint256) -> uint256:
    return (state & _ROUND_MASK) * 2 + ((state >> _PHASE_SHIFT) & 255) + 1


@internal
def _vote(expected_phase: uint256):
    trainer_id: uint256 = staticcall ITrainers(TRAINERS).trainerId(msg.sender)
    assert trainer_id != 0, "Models: the caller is not a registered trainer"
    state: uint256 = self._state
    assert state & _STARTED_BIT != 0, \
        "Models: rounds have not started: fewer than minTrainers trainers are registered"
    current_phase: uint256 = (state >> _PHASE_SHIFT) & 255
    if expected_phase == PROPOSE:
        assert current_phase == PROPOSE, \
            "Models: finishProposals is only allowed in the PROPOSE phase"
    else:
        assert current_phase == AGGREGATE, \
            "Models: nextRound is only allowed in the AGGREGATE phase"
    current: uint256 = state & _ROUND_MASK
    quorum: uint256 = (state >> _QUORUM_SHIFT) & _MASK32
    votes: uint256 = (state >> _VOTES_SHIFT) & _MASK32
    started_at: uint256 = (state >> _START_SHIFT) & _MASK64
    expired: bool = phaseDuration != 0 and block.timestamp >= started_at + phaseDuration
    stamp: uint256 = self._stamp(state)
    if self._voteStamp[trainer_id] == stamp:
        assert expired, "Models: this trainer already voted in this phase"
    else:
        self._voteStamp[trainer_id] = stamp
        counted: bool = trainer_id <= quorum
        if counted:
            votes += 1
        log TrainerVoted(round=current, trainer=msg.sender, phase=current_phase,
                         trainerId=trainer_id, counted=counted, votes=votes)
    if votes < quorum and not expired:
        self._state = (state & ~(_MASK32 << _VOTES_SHIFT)) | (votes << _VOTES_SHIFT)
        return
    if current_phase == PROPOSE:
        self._state = (state & _ROUND_MASK) | (AGGREGATE << _PHASE_SHIFT) | _STARTED_BIT \
            | (block.timestamp << _START_SHIFT) | (quorum << _QUORUM_SHIFT)
        log PhaseChanged(round=current, phase=AGGREGATE)
        return
    registered: uint256 = staticcall ITrainers(TRAINERS).totalSupply()
    self._state = (current + 1) | _STARTED_BIT | (block.timestamp << _START_SHIFT) \
        | (registered << _QUORUM_SHIFT)
    log NewRound(prevRound=current, round=current + 1)
    log PhaseChanged(round=current + 1, phase=PROPOSE)


@internal
def _transfer(sender: address, receiver: address, token_id: uint256):
    model_id: bytes32 = convert(token_id, bytes32)
    packed: uint256 = self._packed(model_id)
    erc721_base._authorize_transfer(convert(packed & _ADDRESS_MASK, address), sender,
                                    receiver, token_id)
    self._models[model_id] = (packed & ~_ADDRESS_MASK) | convert(receiver, uint256)
    self._balances[sender] -= 1
    self._balances[receiver] += 1
    log erc721_base.Transfer(sender=sender, receiver=receiver, tokenId=token_id)
