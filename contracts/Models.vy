# pragma version 0.4.3
"""
@title MCFL Models: the round state machine and the model DAG
@license MIT
@notice Trainers send this contract two transactions a round:
        `submitProposals` (all their updates of the round and their PROPOSE
        vote) and `submitAggregations` (all their aggregations and their
        AGGREGATE vote); either may carry an empty list and then only votes.
        Every model version is an ERC-721 token whose id is `uint256(modelId)`:
        - one parent: `keccak256(abi.encode(bytes32 parent, uint256[] updateIds))`;
        - a merge of several parents:
          `keccak256(abi.encode(bytes32[] parents, uint256[] updateIds))`,
        with parents and update ids strictly ascending, so anyone can recompute
        it off chain. That is the id of an aggregation with rule 0, the
        network's default (FedAvg, or the rule the task's architecture names).
        An aggregation with another rule (median, trimmed mean...: a code and
        a parameter word) hashes that id, `baseId`, again with them:
        `keccak256(abi.encode(bytes32 baseId, uint256 rule, uint256 ruleParameter))`
        (`protocol._rule_model_id`), so the id says how to rebuild the weights.
        The root model (id 0) exists from deployment with the genesis weights
        CID and the task descriptor. A new model id is minted to
        its first aggregator; submitting an existing id adds one to its
        popularity.
        Quorum: the trainers that voted in the previous phase must vote (round
        0's first phase: the trainers registered when it opened). Anybody
        else's vote is recorded and makes it a member of the next phase. A phase
        ends when every member voted, or with any vote once its deadline passed.
        Members silent through a phase that ended at its deadline stay members
        of the next phase (once: a carry-over phase carries nobody over), so an
        organisation back within a phase of the others is waited for. `join`
        is a bare vote in whichever phase is open when it is mined: a trainer
        out of the quorum gets back in without racing the phase's end.
        Cohorts (a network deployed with `cohortBps` below 10,000): each round
        only the trainers drawn for it train, propose, aggregate and vote; a
        round's quorum is the trainers drawn for it, so no phase waits for the
        others. A trainer is drawn for round r when a 16-bit word of
        `keccak256(abi.encode(cohortSeed, trainerId, r >> 4))` is below
        `cohortBps` of 65,536, a draw everyone recomputes and nobody can
        re-roll; it learns its next round when it votes in its own.
        https://eips.ethereum.org/EIPS/eip-721
"""

from ethereum.ercs import IERC165
from ethereum.ercs import IERC721
from .interfaces import ITrainers
from .interfaces import IUpdates
from .modules import erc721
from .modules import protocol
from .modules import render

implements: IERC165
implements: IERC721

initializes: erc721
# Every ERC-721 function (the module's whole external interface).
exports: erc721.__interface__


event PhaseChanged:
    round: indexed(uint256)
    phase: uint256
    quorum: uint256

event NewRound:
    prevRound: indexed(uint256)
    round: indexed(uint256)

event TrainerVoted:
    round: indexed(uint256)
    trainerId: indexed(uint256)
    phase: uint256
    counted: bool
    votes: uint256
    voters: uint256

event ModelCreated:
    round: indexed(uint256)
    modelId: indexed(bytes32)
    trainerId: indexed(uint256)
    index: uint256
    parents: DynArray[bytes32, protocol.MAX_PARENTS]
    updateIds: DynArray[uint256, protocol.MAX_UPDATES]
    rule: uint256
    ruleParameter: uint256
    aggregator: address
    weightsCid: Bytes[render.CID_LENGTH]

event ModelAppended:
    round: indexed(uint256)
    modelId: indexed(bytes32)
    trainerId: indexed(uint256)
    popularity: uint256

event TrainerDrawn:
    round: indexed(uint256)
    trainerId: indexed(uint256)
    drawnRound: uint256


PROPOSE: public(constant(uint256)) = 0
AGGREGATE: public(constant(uint256)) = 1

# @dev The bounds of the two submissions (see modules/protocol.vy), readable
#      by clients that refuse oversized lists before sending them.
MAX_PROPOSALS: public(constant(uint256)) = protocol.MAX_PROPOSALS
MAX_AGGREGATIONS: public(constant(uint256)) = protocol.MAX_AGGREGATIONS
MAX_PARENTS: public(constant(uint256)) = protocol.MAX_PARENTS
MAX_UPDATES: public(constant(uint256)) = protocol.MAX_UPDATES
MAX_CALL_UPDATES: public(constant(uint256)) = protocol.MAX_CALL_UPDATES
MAX_RULE: public(constant(uint256)) = protocol.MAX_RULE
CID_LENGTH: public(constant(uint256)) = render.CID_LENGTH
MAX_TASK_LENGTH: public(constant(uint256)) = 128

# @dev Cohorts: `cohortBps` of ALL_TRAINERS (10,000 basis points) draws every
#      trainer for every round, the protocol without cohorts. At least
#      MIN_COHORT_BPS (1 %), so that a trainer's next round is found within
#      MAX_DRAW_ROUNDS (missed with probability 0.99**4096 < 1e-17; it is then
#      drawn for the last round looked at).
ALL_TRAINERS: constant(uint256) = 10_000
MIN_COHORT_BPS: constant(uint256) = 100
MAX_DRAW_ROUNDS: constant(uint256) = 4096

# @dev `_state` packs the whole round state machine in one slot, so a vote
#      reads and writes a single word:
#      round (bits 0-31) | phase (32) | started (33) | carry-over (34)
#      | phase start time (40-103) | quorum (104-135) | counted votes (136-167)
#      | voters (168-199) | highest trainer id of round 0's first quorum (200-231).
#      The carry-over bit marks a phase whose quorum also holds the members
#      silent through the previous phase (it ended at its deadline).
_MASK32: constant(uint256) = (1 << 32) - 1
_MASK64: constant(uint256) = (1 << 64) - 1
_PHASE_SHIFT: constant(uint256) = 32
_STARTED_BIT: constant(uint256) = 1 << 33
_CARRY_BIT: constant(uint256) = 1 << 34
_START_SHIFT: constant(uint256) = 40
_QUORUM_SHIFT: constant(uint256) = 104
_VOTES_SHIFT: constant(uint256) = 136
_VOTERS_SHIFT: constant(uint256) = 168
_FIRST_SHIFT: constant(uint256) = 200

# @dev `erc721._tokens[uint256(id)]` packs a model's token data in one slot:
#      owner (bits 0-159) | round (160-191) | index (192-223) | popularity (224-255).
#      The index is the model's creation number, which Updates stores instead
#      of the 32-byte parent id to keep a proposal in one slot. Parents, update
#      ids and weights CIDs are in the `ModelCreated` event only: no rule
#      needs them on chain, and their three slots would cost a trainer of a
#      forking round (two new models) some 130,000 gas more.
_M_ROUND_SHIFT: constant(uint256) = 160
_M_INDEX_SHIFT: constant(uint256) = 192
_M_POPULARITY_SHIFT: constant(uint256) = 224

# @dev `_voteStamp[id]` of a cohort network also holds, in bits 64-95, the
#      round the trainer is drawn for, plus one (0: never drawn).
_DRAWN_SHIFT: constant(uint256) = 64


DEPLOYER: immutable(address)

# @dev The Trainers contract: trainer ids of callers.
trainers: public(immutable(address))

# @dev Trainers needed before round 0 opens (deployment parameter, >= 1).
minTrainers: public(immutable(uint256))

# @dev Seconds after the start of a phase from which any vote ends it.
#      Always set: without a deadline one silent member stalls the network.
phaseDuration: public(immutable(uint256))

# @dev Basis points of the trainers drawn for each round (10,000: all of them)
#      and the seed of the draw, fixed at deployment.
cohortBps: public(immutable(uint256))
cohortSeed: public(immutable(bytes32))

# @dev Task descriptor, e.g. "lenet:fashion-mnist": trainers that cannot run
#      it refuse the network.
task: public(String[MAX_TASK_LENGTH])

# @dev The Updates contract, linked once after deployment.
updates: public(address)

_state: uint256

# @dev A model's aggregation rule, stored only when it is not the default
#      (rule 0, parameter 0), so FedAvg models cost no more than before:
#      the code, and the parameter word when it is not 0.
_rules: HashMap[bytes32, uint256]
_ruleParameters: HashMap[bytes32, uint256]

# @dev The root's weights: sha2-256 digest and whether the CID codec is dag-pb.
_genesisDigest: bytes32
_genesisDagPb: bool

# @dev Number of models (the root included): the next creation index.
totalSupply: public(uint256)

# @dev Per trainer id, the last phase it voted in, as `phaseNumber << 1 | counted`
#      with `phaseNumber = 2 * round + phase + 1`. One reused slot per trainer,
#      keyed by id so that a key rotation cannot vote twice; it also tells
#      whether the trainer voted in the previous phase, i.e. is a quorum member.
_voteStamp: HashMap[uint256, uint256]

# @dev Cohort networks: per round, the live trainers drawn for it (its
#      PROPOSE phase's quorum), eight rounds to a slot (32 bits each, round r
#      at bits 32 * (r % 8) of slot r / 8), so that most draws rewrite a slot
#      rather than fill a fresh one (5,000 gas instead of 22,100). Every live
#      trainer with a draw ahead is counted in exactly one round: draws happen
#      at its own votes and `join`, and `trainerExited` takes it back out.
_drawnCounts: HashMap[uint256, uint256]


@deploy
def __init__(trainers_: address, genesis_cid: Bytes[render.CID_LENGTH],
             task_descriptor: String[MAX_TASK_LENGTH], min_trainers: uint256,
             phase_duration: uint256, cohort_bps: uint256):
    """
    @notice Deploy the model DAG with its root model (id 0) minted to the deployer.
    @param trainers_ Address of the Trainers contract.
    @param genesis_cid Binary CIDv1 (raw or dag-pb, sha2-256) of the initial weights.
    @param task_descriptor Task descriptor, e.g. "lenet:fashion-mnist": 1 to 128
           printable ASCII characters without quotes or backslashes.
    @param min_trainers Registered trainers needed before round 0 opens (>= 1).
    @param phase_duration Seconds after which any vote ends a phase (1 to 2**32 - 1).
    @param cohort_bps Basis points of the trainers drawn for each round: 10,000
           (every trainer, every round) or 100 to 9,999 (a cohort a round).
    """
    assert trainers_.is_contract, "Models: the Trainers address is not a contract"
    assert min_trainers >= 1 and min_trainers <= _MASK32, \
        "Models: minTrainers must be between 1 and 2**32 - 1"
    assert phase_duration >= 1 and phase_duration <= _MASK32, \
        "Models: phaseDuration must be between 1 and 2**32 - 1 seconds (deadlines are mandatory)"
    assert cohort_bps >= MIN_COHORT_BPS and cohort_bps <= ALL_TRAINERS, \
        "Models: cohortBps must be between 100 and 10000"
    assert len(task_descriptor) > 0, "Models: the task descriptor must not be empty"
    self._check_printable(task_descriptor)
    dag_pb: bool = False
    digest: bytes32 = empty(bytes32)
    dag_pb, digest = render._parse_cid(genesis_cid)
    DEPLOYER = msg.sender
    trainers = trainers_
    minTrainers = min_trainers
    phaseDuration = phase_duration
    cohortBps = cohort_bps
    # The previous block's hash: fixed before this deployment, unknown to
    # trainers until it is mined (they register afterwards).
    cohortSeed = keccak256(abi_encode(blockhash(block.number - 1), self))
    self.task = task_descriptor
    erc721.__init__("MCFL Model", "MCFLM", "Models: no model has this id", False)
    erc721._tokens[0] = convert(msg.sender, uint256) | (1 << _M_POPULARITY_SHIFT)
    self._genesisDigest = digest
    self._genesisDagPb = dag_pb
    self.totalSupply = 1
    erc721._balances[msg.sender] = 1
    log erc721.Transfer(sender=empty(address), receiver=msg.sender, tokenId=0)


@external
def setUpdates(updates: address):
    """
    @notice Link the Updates contract (once, by the deployer).
    @param updates Address of the Updates contract, which must name this contract.
    """
    assert msg.sender == DEPLOYER, "Models: only the deployer may link the Updates contract"
    assert self.updates == empty(address), "Models: the Updates contract is already linked"
    assert updates.is_contract, "Models: the Updates address is not a contract"
    assert staticcall IUpdates(updates).models() == self, \
        "Models: that Updates contract belongs to another Models contract"
    self.updates = updates


@external
def trainerRegistered(trainerId: uint256, liveTrainers: uint256) -> bool:
    """
    @notice Hook for Trainers: trainer `trainerId` registered and `liveTrainers`
            tokens exist; opens round 0 once `minTrainers` do.
    @dev Round 0's first quorum is every live trainer at that moment, i.e.
         those with an id up to `trainerId` that hold a token.
    @param trainerId The id just minted (the highest so far).
    @param liveTrainers Number of live trainer tokens.
    @return Whether rounds have started.
    """
    assert msg.sender == trainers, "Models: only the Trainers contract may report registrations"
    if self._state & _STARTED_BIT != 0:
        return True
    if cohortBps < ALL_TRAINERS:
        # Drawn now for its first round (round 0 on): later registrants `join`.
        self._voteStamp[trainerId] = self._draw(trainerId, 0) << _DRAWN_SHIFT
    if liveTrainers < minTrainers:
        return False
    quorum: uint256 = liveTrainers
    if cohortBps < ALL_TRAINERS:
        quorum = self._drawn_for(0)
    self._state = _STARTED_BIT | (block.timestamp << _START_SHIFT) \
        | (quorum << _QUORUM_SHIFT) | (trainerId << _FIRST_SHIFT)
    log PhaseChanged(round=0, phase=PROPOSE, quorum=quorum)
    return True


@external
def trainerExited(trainerId: uint256) -> bool:
    """
    @notice Hook for Trainers: trainer `trainerId` asks to exit (its token is
            burnt if this returns True).
    @dev Refused (False, nothing changed) when the trainer voted in the
         current round: a new identity of the same party could otherwise vote,
         propose and aggregate again in that round, and the burnt id would be
         a member of the next phase's quorum that never votes. Accepted
         otherwise; a member of the current phase's quorum (it voted in the
         previous phase, so this is a PROPOSE phase, or round 0's first)
         leaves it: the quorum drops by one, and the phase ends now when every
         remaining member voted and someone did (a quorum of 0 with no voter
         ends on the next vote, so the next quorum is never 0).
    @param trainerId The exiting trainer's id.
    @return Whether the exit may go on.
    """
    assert msg.sender == trainers, "Models: only the Trainers contract may report exits"
    state: uint256 = self._state
    stamp: uint256 = self._voteStamp[trainerId]
    if cohortBps < ALL_TRAINERS:
        # A draw still ahead: that round no longer waits for this trainer.
        drawn: uint256 = stamp >> _DRAWN_SHIFT
        if drawn != 0 and (state & _STARTED_BIT == 0 or drawn > (state & _MASK32) + 1):
            self._drawnCounts[(drawn - 1) >> 3] -= 1 << (((drawn - 1) & 7) * 32)
    if state & _STARTED_BIT == 0:
        return True
    if (stamp >> 1) & _MASK32 > (state & _MASK32) * 2:
        return False
    if not self._is_member(state, trainerId, stamp):
        return True
    quorum: uint256 = ((state >> _QUORUM_SHIFT) & _MASK32) - 1
    voters: uint256 = (state >> _VOTERS_SHIFT) & _MASK32
    if voters != 0 and (state >> _VOTES_SHIFT) & _MASK32 >= quorum:
        # Every remaining member voted: nobody silent to carry over.
        self._next_phase(state, voters, 0)
    else:
        self._state = (state & ~(_MASK32 << _QUORUM_SHIFT)) | (quorum << _QUORUM_SHIFT)
    return True


@external
def submitProposals(proposals: DynArray[protocol.Proposal, protocol.MAX_PROPOSALS]):
    """
    @notice Propose the caller's updates of this round and cast its PROPOSE vote.
    @dev PROPOSE phase only. Each proposal's parent must exist; at most one
         update per (trainer id, parent, round), which the update id itself
         enforces. The list may be empty (a vote alone). Proposals travel with
         the trainer's first vote of the phase: after the deadline a trainer
         that already voted may call again with an empty list to end the phase.
    @param proposals (parent, binary CIDv1 of the weights, sample count) per update.
    """
    trainer_id: uint256 = self._trainer_id(msg.sender)
    state: uint256 = self._state
    previous: uint256 = 0
    record: bool = False
    previous, record = self._admit(state, trainer_id, PROPOSE, len(proposals) != 0)
    if len(proposals) != 0:
        indices: DynArray[uint256, protocol.MAX_PROPOSALS] = []
        for proposal: protocol.Proposal in proposals:
            packed: uint256 = erc721._tokens[convert(proposal.parent, uint256)]
            assert packed != 0, "Models: the parent model does not exist"
            indices.append((packed >> _M_INDEX_SHIFT) & _MASK32)
        extcall IUpdates(self.updates).recordProposals(
            msg.sender, trainer_id, state & _MASK32, proposals, indices
        )
    self._count_vote(state, trainer_id, previous, record)


@external
def submitAggregations(aggregations: DynArray[protocol.Aggregation, protocol.MAX_AGGREGATIONS],
                       parents: DynArray[bytes32, protocol.MAX_PARENTS],
                       updateIds: DynArray[uint256, protocol.MAX_CALL_UPDATES]):
    """
    @notice Submit the caller's aggregations of this round and cast its AGGREGATE vote.
    @dev AGGREGATE phase only. Aggregation i takes the next `parentCount`
         entries of `parents` and the next `updateCount` entries of
         `updateIds`; together they use both lists exactly. Per aggregation:
         1 to 16 parents, strictly ascending; 1 to 256 update ids holding the
         caller's own update of every parent (a trainer always keeps its own
         update, and only aggregates parents it trained). A new model id also
         has its list checked by Updates: strictly ascending, every id exists,
         was proposed this round and is a child of one of the parents. An
         existing id commits to the list its first aggregator submitted, so
         only the caller's own updates are checked again. No parent appears
         twice in a call, and aggregations travel with the trainer's first vote
         of the phase: one aggregation per (trainer id, parent, round). Empty
         lists make a vote alone. The rule code is at most MAX_RULE; rule 0
         takes parameter 0 (one id per default aggregation). The model id
         commits to the rule (see the contract's header): the same ids with
         another rule make another model.
    @param aggregations (parentCount, updateCount, rule code, rule parameter
           word, weights CID or empty) per aggregation.
    @param parents The parents of every aggregation, one after the other.
    @param updateIds The update ids of every aggregation, one after the other.
    """
    trainer_id: uint256 = self._trainer_id(msg.sender)
    state: uint256 = self._state
    previous: uint256 = 0
    record: bool = False
    previous, record = self._admit(state, trainer_id, AGGREGATE, len(aggregations) != 0)
    current: uint256 = state & _MASK32
    for k: uint256 in range(len(parents), bound=protocol.MAX_PARENTS):
        for m: uint256 in range(k, bound=protocol.MAX_PARENTS):
            assert parents[m] != parents[k], "Models: a parent appears twice in the call"
    next_parent: uint256 = 0
    next_update: uint256 = 0
    for aggregation: protocol.Aggregation in aggregations:
        assert aggregation.parentCount != 0, "Models: an aggregation needs at least one parent"
        assert aggregation.parentCount <= len(parents) - next_parent, \
            "Models: the aggregations take more parents than the call carries"
        assert aggregation.updateCount != 0, "Models: an aggregation needs at least one update id"
        assert aggregation.updateCount <= protocol.MAX_UPDATES, \
            "Models: an aggregation holds at most MAX_UPDATES update ids"
        assert aggregation.updateCount <= len(updateIds) - next_update, \
            "Models: the aggregations take more update ids than the call carries"
        assert aggregation.rule <= protocol.MAX_RULE, \
            "Models: the aggregation rule code is above MAX_RULE"
        assert aggregation.rule != 0 or aggregation.ruleParameter == 0, \
            "Models: rule 0 (the network's default aggregation) takes parameter 0"
        ids: DynArray[uint256, protocol.MAX_UPDATES] = []
        for k: uint256 in range(aggregation.updateCount, bound=protocol.MAX_UPDATES):
            ids.append(updateIds[next_update + k])
        next_update += aggregation.updateCount
        group: DynArray[bytes32, protocol.MAX_PARENTS] = []
        for k: uint256 in range(aggregation.parentCount, bound=protocol.MAX_PARENTS):
            parent: bytes32 = parents[next_parent + k]
            assert k == 0 or convert(parent, uint256) > convert(group[k - 1], uint256), \
                "Models: the parents of an aggregation must be strictly ascending"
            assert protocol._update_id(trainer_id, parent, current) in ids, \
                "Models: the caller's own update of every parent must be in the list"
            group.append(parent)
        next_parent += aggregation.parentCount
        if len(aggregation.weightsCid) != 0:
            render._parse_cid(aggregation.weightsCid)
        model_id: bytes32 = empty(bytes32)
        if len(group) == 1:
            model_id = keccak256(abi_encode(group[0], ids))
        else:
            model_id = keccak256(abi_encode(group, ids))
        model_id = protocol._rule_model_id(model_id, aggregation.rule, aggregation.ruleParameter)
        packed: uint256 = erc721._tokens[convert(model_id, uint256)]
        popularity: uint256 = 1
        if packed == 0:
            indices: DynArray[uint256, protocol.MAX_PARENTS] = []
            for parent: bytes32 in group:
                parent_packed: uint256 = erc721._tokens[convert(parent, uint256)]
                assert parent_packed != 0, "Models: the parent model does not exist"
                indices.append((parent_packed >> _M_INDEX_SHIFT) & _MASK32)
            # checkUpdates reverts with the reason of the first failing rule.
            assert staticcall IUpdates(self.updates).checkUpdates(ids, indices, current)
            index: uint256 = self._mint(model_id, current)
            if aggregation.rule != 0:
                self._rules[model_id] = aggregation.rule
                if aggregation.ruleParameter != 0:
                    self._ruleParameters[model_id] = aggregation.ruleParameter
            log ModelCreated(round=current, modelId=model_id, trainerId=trainer_id, index=index,
                             parents=group, updateIds=ids, rule=aggregation.rule,
                             ruleParameter=aggregation.ruleParameter, aggregator=msg.sender,
                             weightsCid=aggregation.weightsCid)
        else:
            popularity = (packed >> _M_POPULARITY_SHIFT) + 1
            erc721._tokens[convert(model_id, uint256)] = \
                (packed & ((1 << _M_POPULARITY_SHIFT) - 1)) \
                | (popularity << _M_POPULARITY_SHIFT)
        log ModelAppended(round=current, modelId=model_id, trainerId=trainer_id,
                          popularity=popularity)
    assert next_parent == len(parents) and next_update == len(updateIds), \
        "Models: the aggregations must use every parent and update id of the call"
    self._count_vote(state, trainer_id, previous, record)


@external
def join():
    """
    @notice Cast a bare vote in whichever phase is open when this transaction is
            mined, so that the caller is a member of the next phase.
    @dev For a trainer out of the quorum (a newcomer, or one away for more than
         a phase): a vote sent with `submitProposals` or `submitAggregations`
         names its phase and reverts when that phase ends before it is mined,
         which a fast quorum can make happen every time. This vote cannot miss:
         wherever it lands it is recorded, and the next phase does not end
         before the caller votes in it or its deadline passes. Same rules as an
         empty submission otherwise: registered, rounds started, one vote per
         phase (after the deadline a repeated call ends the phase).
         In a cohort network, `join` by a trainer of this round's cohort is
         its bare vote as above; by any other trainer it is no vote: it draws
         the trainer's next round (from the next round on), where it is a
         member, unless a draw of it is still ahead (no re-roll).
    """
    trainer_id: uint256 = self._trainer_id(msg.sender)
    state: uint256 = self._state
    if cohortBps < ALL_TRAINERS and state & _STARTED_BIT != 0:
        stamp: uint256 = self._voteStamp[trainer_id]
        if (stamp >> 1) & _MASK32 != self._phase_number(state) \
                and not self._is_member(state, trainer_id, stamp):
            current: uint256 = state & _MASK32
            assert stamp >> _DRAWN_SHIFT <= current + 1, \
                "Models: the trainer is drawn for a later round; no new draw before it"
            drawn: uint256 = self._draw(trainer_id, current + 1)
            self._voteStamp[trainer_id] = (stamp & ((1 << _DRAWN_SHIFT) - 1)) \
                | (drawn << _DRAWN_SHIFT)
            log TrainerDrawn(round=current, trainerId=trainer_id, drawnRound=drawn - 1)
            return
    previous: uint256 = 0
    record: bool = False
    previous, record = self._admit(state, trainer_id, (state >> _PHASE_SHIFT) & 1, False)
    self._count_vote(state, trainer_id, previous, record)


@external
@pure
def modelIdOf(parents: DynArray[bytes32, protocol.MAX_PARENTS],
              updateIds: DynArray[uint256, protocol.MAX_UPDATES],
              rule: uint256, ruleParameter: uint256) -> bytes32:
    """
    @notice The id a model made of `parents` and `updateIds` with aggregation
            rule (`rule`, `ruleParameter`) has (or would have).
    @dev The very computation `submitAggregations` uses; ordering and the rule's
         bounds are not checked here.
    @param parents One parent, or the ascending parents of a merge.
    @param updateIds The aggregated update ids (strictly ascending in a valid model).
    @param rule The aggregation rule code (0: the network's default).
    @param ruleParameter The rule's parameter word (0 for rule 0).
    @return `baseId` = `keccak256(abi.encode(parents[0], updateIds))` for one
            parent, `keccak256(abi.encode(parents, updateIds))` for several; for
            rule 0 and parameter 0 the id is `baseId`, otherwise
            `keccak256(abi.encode(baseId, rule, ruleParameter))`.
    """
    assert len(parents) != 0, "Models: an aggregation needs at least one parent"
    base_id: bytes32 = empty(bytes32)
    if len(parents) == 1:
        base_id = keccak256(abi_encode(parents[0], updateIds))
    else:
        base_id = keccak256(abi_encode(parents, updateIds))
    return protocol._rule_model_id(base_id, rule, ruleParameter)


@external
@view
def ruleOf(modelId: bytes32) -> (uint256, uint256):
    """
    @notice The aggregation rule model `modelId` was made with.
    @dev (0, 0), the network's default, for the root and every model
         aggregated without a rule.
    @param modelId An existing model id.
    @return (rule code, rule parameter word).
    """
    self._packed(modelId)
    return (self._rules[modelId], self._ruleParameters[modelId])


@external
@view
def drawnFor(roundNumber: uint256) -> uint256:
    """
    @notice Live trainers drawn for round `roundNumber` (cohort networks; 0 without
            cohorts): the quorum its PROPOSE phase opens with, once it opens.
    @param roundNumber A round.
    @return The count.
    """
    return self._drawn_for(roundNumber)


@external
@view
def drawnRoundOf(trainerId: uint256) -> (bool, uint256):
    """
    @notice The round trainer `trainerId` is drawn for next: it proposes and
            votes there, and in no round before it.
    @dev Without cohorts every trainer takes part in every round: (True, the
         current round). With cohorts: (False, 0) before a first draw (a
         trainer registered after round 0 opened draws with `join`); a round
         already past means it missed it and may `join` again.
    @param trainerId A trainer id.
    @return (whether it has a draw, that round).
    """
    if not cohortBps < ALL_TRAINERS:
        return (True, self._state & _MASK32)
    drawn: uint256 = self._voteStamp[trainerId] >> _DRAWN_SHIFT
    if drawn == 0:
        return (False, 0)
    return (True, drawn - 1)


@external
@view
def round() -> uint256:
    """
    @notice The current round (0 also before round 0 opens: see `started`).
    @return The round number.
    """
    return self._state & _MASK32


@external
@view
def phase() -> uint256:
    """
    @notice The current phase: 0 = PROPOSE, 1 = AGGREGATE.
    @return The phase.
    """
    return (self._state >> _PHASE_SHIFT) & 1


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
    @notice Time from which any trainer's vote ends the current phase.
    @return Unix time in seconds, or 0 before round 0.
    """
    if self._state & _STARTED_BIT == 0:
        return 0
    return ((self._state >> _START_SHIFT) & _MASK64) + phaseDuration


@external
@view
def quorum() -> uint256:
    """
    @notice Members of the current phase: the trainers that voted in the
            previous phase (round 0's first phase: those live when it opened),
            and, when that phase ended at its deadline, its silent members.
    @return The quorum (0 before round 0).
    """
    return (self._state >> _QUORUM_SHIFT) & _MASK32


@external
@view
def votes() -> uint256:
    """
    @notice Members that voted in the current phase; the phase ends when they are the quorum.
    @return The counted votes.
    """
    return (self._state >> _VOTES_SHIFT) & _MASK32


@external
@view
def voters() -> uint256:
    """
    @notice Distinct trainers that voted in the current phase, members or not:
            the quorum of the next phase.
    @return The number of voters.
    """
    return (self._state >> _VOTERS_SHIFT) & _MASK32


@external
@view
def statusOf(trainer: address) -> (bool, uint256, uint256, bool, bool, uint256, uint256,
                                   uint256, uint256):
    """
    @notice The round state as one trainer needs it, read in one call (so atomically).
    @dev Workers poll this; reading `round()` and `phase()` separately could pair a
         round with the next round's phase when a block lands in between.
    @param trainer Address of a trainer (any address: unregistered ones never vote).
    @return (started, round, phase, whether `trainer` voted in this phase,
             whether its vote counts (or counted) in this phase's quorum,
             phase deadline or 0, counted votes, quorum, voters).
    """
    state: uint256 = self._state
    started: bool = state & _STARTED_BIT != 0
    deadline: uint256 = 0
    voted: bool = False
    member: bool = False
    if started:
        deadline = ((state >> _START_SHIFT) & _MASK64) + phaseDuration
        trainer_id: uint256 = staticcall ITrainers(trainers).trainerId(trainer)
        if trainer_id != 0:
            stamp: uint256 = self._voteStamp[trainer_id]
            voted = (stamp >> 1) & _MASK32 == self._phase_number(state)
            if voted:
                member = stamp & 1 != 0
            else:
                member = self._is_member(state, trainer_id, stamp)
    return (started, state & _MASK32, (state >> _PHASE_SHIFT) & 1, voted, member, deadline,
            (state >> _VOTES_SHIFT) & _MASK32, (state >> _QUORUM_SHIFT) & _MASK32,
            (state >> _VOTERS_SHIFT) & _MASK32)


@external
@view
def hasVoted(trainer: address) -> bool:
    """
    @notice Whether the trainer token held by `trainer` voted in the current phase.
    @param trainer Address of a registered trainer.
    @return True when it voted (False for unregistered addresses).
    """
    trainer_id: uint256 = staticcall ITrainers(trainers).trainerId(trainer)
    state: uint256 = self._state
    if trainer_id == 0 or state & _STARTED_BIT == 0:
        return False
    return (self._voteStamp[trainer_id] >> 1) & _MASK32 == self._phase_number(state)


@external
@view
def modelExists(modelId: bytes32) -> bool:
    """
    @notice Whether `modelId` is a model of the DAG.
    @param modelId A model id.
    @return True for the root and every created model.
    """
    return erc721._tokens[convert(modelId, uint256)] != 0


@external
@view
def roundOf(modelId: bytes32) -> uint256:
    """
    @notice Round in which model `modelId` was created (root: 0, before round 0 opens).
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
    @notice Creation index of model `modelId` (root: 0); Updates records parents by it.
    @param modelId An existing model id.
    @return The index.
    """
    return (self._packed(modelId) >> _M_INDEX_SHIFT) & _MASK32


@external
@view
def genesisCid() -> Bytes[render.CID_LENGTH]:
    """
    @notice Binary CIDv1 of the initial weights (the root model's).
    @return The CID.
    """
    return render._cid_bytes(self._codec(self._genesisDagPb), self._genesisDigest)


@external
@view
def tokenURI(tokenId: uint256) -> String[render.MAX_URI]:
    """
    @notice ERC-721 metadata of model token `tokenId`.
    @dev The root also shows its weights CID; the parents, updates and
         weights CID of other models are in their `ModelCreated` event.
    @param tokenId A model token id (`uint256(modelId)`).
    @return `data:application/json;base64,` followed by the JSON document.
    """
    model_id: bytes32 = convert(tokenId, bytes32)
    packed: uint256 = self._packed(model_id)
    extra: String[100] = ""
    if tokenId == 0:
        extra = concat(',{"trait_type":"weights CID","value":"',
                       render._cid(self._codec(self._genesisDagPb), self._genesisDigest), '"}')
    return render._json_data_url(concat(
        '{"name":"MCFL model ', render._hex32(model_id),
        '","description":"A model version of a MultiConfederated Learning network: ',
        'its parent models plus the updates aggregated into it. Task: ', self.task, '",',
        '"attributes":[{"trait_type":"round","value":',
        uint2str((packed >> _M_ROUND_SHIFT) & _MASK32),
        '},{"trait_type":"popularity","value":', uint2str(packed >> _M_POPULARITY_SHIFT),
        '},{"trait_type":"index","value":', uint2str((packed >> _M_INDEX_SHIFT) & _MASK32),
        '},{"trait_type":"holder","value":"',
        render._hex_address(convert(packed & erc721.ADDRESS_MASK, address)), '"}', extra, ']}'
    ))


@internal
@view
def _trainer_id(caller: address) -> uint256:
    trainer_id: uint256 = staticcall ITrainers(trainers).trainerId(caller)
    assert trainer_id != 0, "Models: the caller is not a registered trainer"
    return trainer_id


@internal
@view
def _admit(state: uint256, trainer_id: uint256, expected_phase: uint256,
           submitting: bool) -> (uint256, bool):
    """
    @dev Checks that `trainer_id` may vote in `expected_phase` now, with
         submissions or not, and returns its previous vote stamp and whether
         the call is a vote to record. In a cohort network a trainer out of
         the phase's cohort does not vote: it may only end a phase that is
         over (its deadline passed, or every member voted: a phase without
         members) with an empty call, so that no phase ever needs a member to end.
    """
    assert state & _STARTED_BIT != 0, \
        "Models: rounds have not started: fewer than minTrainers trainers are registered"
    if expected_phase == PROPOSE:
        assert (state >> _PHASE_SHIFT) & 1 == PROPOSE, \
            "Models: proposals are only submitted in the PROPOSE phase"
    else:
        assert (state >> _PHASE_SHIFT) & 1 == AGGREGATE, \
            "Models: aggregations are only submitted in the AGGREGATE phase"
    previous: uint256 = self._voteStamp[trainer_id]
    if (previous >> 1) & _MASK32 == self._phase_number(state):
        assert block.timestamp >= ((state >> _START_SHIFT) & _MASK64) + phaseDuration, \
            "Models: this trainer already voted in this phase"
        assert not submitting, \
            "Models: submissions travel with the trainer's first vote of the phase; " \
            "after the deadline only an empty call may end the phase"
    elif cohortBps < ALL_TRAINERS and not self._is_member(state, trainer_id, previous):
        over: bool = (state >> _VOTES_SHIFT) & _MASK32 >= (state >> _QUORUM_SHIFT) & _MASK32 \
            or block.timestamp >= ((state >> _START_SHIFT) & _MASK64) + phaseDuration
        assert not submitting and over, \
            "Models: not in this round's cohort; an empty call may only end a phase " \
            "that is over"
        return (previous, False)
    return (previous, True)


@internal
def _count_vote(state: uint256, trainer_id: uint256, previous: uint256, record: bool):
    """
    @dev Records the vote `_admit` allowed, then ends the phase when every
         member voted or the deadline passed. The next quorum is the voters of
         this phase (never 0, since the vote that ends a phase is one of them)
         plus, unless this phase is itself a carry-over, its silent members.
         `record` False: not a vote (a trainer out of the cohort ending a phase
         that is over). In a cohort network a vote of a trainer drawn for
         this round draws its next round.
    """
    current: uint256 = state & _MASK32
    current_phase: uint256 = (state >> _PHASE_SHIFT) & 1
    quorum: uint256 = (state >> _QUORUM_SHIFT) & _MASK32
    votes: uint256 = (state >> _VOTES_SHIFT) & _MASK32
    voters: uint256 = (state >> _VOTERS_SHIFT) & _MASK32
    phase_number: uint256 = self._phase_number(state)
    if record and (previous >> 1) & _MASK32 != phase_number:
        counted: bool = self._is_member(state, trainer_id, previous)
        stamp: uint256 = (phase_number << 1) | convert(counted, uint256)
        if cohortBps < ALL_TRAINERS:
            drawn: uint256 = previous >> _DRAWN_SHIFT
            if drawn == current + 1:
                drawn = self._draw(trainer_id, current + 1)
            stamp |= drawn << _DRAWN_SHIFT
        self._voteStamp[trainer_id] = stamp
        voters += 1
        if counted:
            votes += 1
        log TrainerVoted(round=current, trainerId=trainer_id, phase=current_phase,
                         counted=counted, votes=votes, voters=voters)
    expired: bool = block.timestamp >= ((state >> _START_SHIFT) & _MASK64) + phaseDuration
    if votes < quorum and not expired:
        self._state = (state & ~((_MASK64 << _VOTES_SHIFT))) | (votes << _VOTES_SHIFT) \
            | (voters << _VOTERS_SHIFT)
        return
    # A member silent until the deadline may be on its way back (a restart, a
    # network outage): the next phase waits for it too. Only once, so one that
    # is gone costs two deadlines, not one per phase.
    silent: uint256 = 0
    if state & _CARRY_BIT == 0:
        silent = quorum - votes
    self._next_phase(state, voters, silent)


@internal
def _next_phase(state: uint256, voters: uint256, silent: uint256):
    """
    @dev Ends the phase of `state`: the next one starts now with the `voters`
         of this one and its `silent` members (carried over: 0 or more) as its quorum.
    """
    current: uint256 = state & _MASK32
    current_phase: uint256 = (state >> _PHASE_SHIFT) & 1
    next_round: uint256 = current + current_phase
    next_phase: uint256 = 1 - current_phase
    quorum: uint256 = voters + silent
    carry: uint256 = 0
    if cohortBps < ALL_TRAINERS and next_phase == PROPOSE:
        # A round's members are the trainers drawn for it, nobody else.
        quorum = self._drawn_for(next_round)
    elif silent != 0:
        carry = _CARRY_BIT
    self._state = next_round | (next_phase << _PHASE_SHIFT) | _STARTED_BIT | carry \
        | (block.timestamp << _START_SHIFT) | (quorum << _QUORUM_SHIFT) \
        | (state & (_MASK32 << _FIRST_SHIFT))
    if next_phase == PROPOSE:
        log NewRound(prevRound=current, round=next_round)
    log PhaseChanged(round=next_round, phase=next_phase, quorum=quorum)


@internal
@view
def _is_member(state: uint256, trainer_id: uint256, stamp: uint256) -> bool:
    """
    @dev A member voted in the previous phase; in round 0's first phase, the
         members are the trainers live when it opened (ids up to the one
         recorded then; burnt ids can no longer vote). In a carry-over phase
         the members of the previous phase that did not vote in it are members
         too: their stamp is two phases old (round 0's first members: none).
         In a cohort network the members of a PROPOSE phase are the trainers
         drawn for its round; of an AGGREGATE phase, its PROPOSE phase's
         voters, and when that phase ended at its deadline, the drawn ones
         that were silent in it.
    """
    phase_number: uint256 = self._phase_number(state)
    if cohortBps < ALL_TRAINERS:
        drawn_now: bool = stamp >> _DRAWN_SHIFT == (state & _MASK32) + 1
        if (state >> _PHASE_SHIFT) & 1 == PROPOSE:
            return drawn_now
        if (stamp >> 1) & _MASK32 == phase_number - 1:
            return True
        return drawn_now and state & _CARRY_BIT != 0
    if phase_number == 1:
        return trainer_id <= (state >> _FIRST_SHIFT) & _MASK32
    last: uint256 = stamp >> 1
    if last == phase_number - 1:
        return True
    if state & _CARRY_BIT == 0:
        return False
    if phase_number == 2:
        return last == 0 and trainer_id <= (state >> _FIRST_SHIFT) & _MASK32
    return last == phase_number - 2


@internal
def _draw(trainer_id: uint256, first: uint256) -> uint256:
    """
    @dev Draws the first round from `first` on that `trainer_id` is drawn for
         (at most MAX_DRAW_ROUNDS ahead), counts it in `drawnFor` and returns
         it plus one, as the vote stamp holds it. One hash serves 16 rounds:
         round r is drawn when the (r % 16)-th 16-bit word (from the least
         significant) of `keccak256(abi.encode(cohortSeed, trainerId, r >> 4))`
         is below `cohortBps * 65536 // 10000` (mcfl_chain/dag/cohort.py).
    """
    threshold: uint256 = cohortBps * 65536 // ALL_TRAINERS
    r: uint256 = first
    word: uint256 = convert(keccak256(abi_encode(cohortSeed, trainer_id, r >> 4)), uint256)
    for i: uint256 in range(MAX_DRAW_ROUNDS):
        if (word >> ((r & 15) * 16)) & 65535 < threshold or i == MAX_DRAW_ROUNDS - 1:
            break
        r += 1
        if r & 15 == 0:
            word = convert(keccak256(abi_encode(cohortSeed, trainer_id, r >> 4)), uint256)
    self._drawnCounts[r >> 3] += 1 << ((r & 7) * 32)
    return r + 1


@internal
@view
def _drawn_for(r: uint256) -> uint256:
    return (self._drawnCounts[r >> 3] >> ((r & 7) * 32)) & _MASK32


@internal
def _mint(model_id: bytes32, current: uint256) -> uint256:
    """
    @dev Records a new model, minted to the caller, and returns its creation index.
    """
    index: uint256 = self.totalSupply
    self.totalSupply = index + 1
    erc721._tokens[convert(model_id, uint256)] = convert(msg.sender, uint256) \
        | (current << _M_ROUND_SHIFT) | (index << _M_INDEX_SHIFT) | (1 << _M_POPULARITY_SHIFT)
    erc721._balances[msg.sender] += 1
    log erc721.Transfer(sender=empty(address), receiver=msg.sender,
                        tokenId=convert(model_id, uint256))
    return index


@internal
@pure
def _phase_number(state: uint256) -> uint256:
    return (state & _MASK32) * 2 + ((state >> _PHASE_SHIFT) & 1) + 1


@internal
@view
def _packed(model_id: bytes32) -> uint256:
    return erc721._packed(convert(model_id, uint256))


@internal
@pure
def _codec(dag_pb: bool) -> uint256:
    if dag_pb:
        return render.CODEC_DAG_PB
    return render.CODEC_RAW


@internal
@pure
def _check_printable(text: String[MAX_TASK_LENGTH]):
    # @dev tokenURI embeds the task in a JSON string: refuse what would need escaping.
    raw: Bytes[MAX_TASK_LENGTH] = convert(text, Bytes[MAX_TASK_LENGTH])
    for i: uint256 in range(MAX_TASK_LENGTH):
        if i >= len(raw):
            break
        c: uint256 = convert(convert(slice(raw, i, 1), bytes1), uint256)
        assert c >= 32 and c < 127 and c != 34 and c != 92, \
            "Models: the task descriptor must be printable ASCII without quotes or backslashes"
