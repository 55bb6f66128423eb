# pragma version 0.4.3
"""
@title What every MCFL contract agrees on: bounds, call shapes and id formulas
@license MIT
@notice The arguments of the two calls a trainer sends each round
        (`Models.submitProposals`, `Models.submitAggregations`), the bounds of
        their lists, and the deterministic update and model ids, which
        clients recompute off chain (mcfl_chain/dag/model_id.py).
@dev Bounds are part of the ABI: a list longer than its bound fails ABI
     decoding and reverts without a reason, so both contracts expose them as
     public constants for clients to check first.
"""

from . import render


# @dev Proposals in one `submitProposals` call: a trainer trains at most
#      ceil(sqrt(models)) models a round, and 16 covers 256 live models.
MAX_PROPOSALS: constant(uint256) = 16

# @dev Aggregations in one `submitAggregations` call.
MAX_AGGREGATIONS: constant(uint256) = 16

# @dev Parents of one `submitAggregations` call, all aggregations together
#      (and so of one merge). Every aggregation needs the caller's own update
#      of each of its parents, so a trainer never touches more parents than it
#      proposed on.
MAX_PARENTS: constant(uint256) = MAX_PROPOSALS

# @dev Updates in one aggregation: at least 256 (networks far larger than the
#      thesis' 38 trainers).
MAX_UPDATES: constant(uint256) = 256

# @dev Update ids of one `submitAggregations` call, all aggregations together
#      (two full aggregations). The call's lists are copied to memory at their
#      bound, and every call pays for that memory: 512 rather than 256 costs
#      each call about 1,600 gas more (measured).
MAX_CALL_UPDATES: constant(uint256) = 2 * MAX_UPDATES


# @dev One update a trainer proposes: the model it trained, the binary CIDv1 of
#      its weights, and the samples behind it (FedAvg's weight).
struct Proposal:
    parent: bytes32
    cid: Bytes[render.CID_LENGTH]
    numSamples: uint256

# @dev Highest aggregation rule code (codes are a uint8 registry off chain,
#      mcfl_chain/algorithms/robust: 0 FedAvg, 1 median, 2 trimmed mean,
#      3 norm clipping, 4 per-head FedAvg). The contract does not know which
#      codes are assigned: a reader that does not know a code cannot rebuild
#      the model's weights, and says so.
MAX_RULE: constant(uint256) = 255

# @dev One aggregation a trainer submits. Its parents are the next
#      `parentCount` entries of the call's `parents` list, strictly ascending;
#      its update ids the next `updateCount` entries of the call's `updateIds`
#      list, strictly ascending. The lists are flat because a list of lists is
#      copied to memory at its full bound (16 x 256 ids), which would cost
#      every call some 60,000 gas. `rule` and `ruleParameter` name the
#      aggregation rule that computes the weights from the updates (0 and 0:
#      the network's default, FedAvg or the rule its architecture names); the
#      model id commits to them (`_rule_model_id`).
struct Aggregation:
    parentCount: uint256
    updateCount: uint256
    rule: uint256
    ruleParameter: uint256
    weightsCid: Bytes[render.CID_LENGTH]


@internal
@pure
def _update_id(trainer_id: uint256, parent: bytes32, round: uint256) -> uint256:
    """
    @dev `uint256(keccak256(abi.encode(uint256 trainerId, bytes32 parent, uint256 round)))`:
         keyed by trainer id, so a trainer keeps one update per parent and
         round whichever address holds its token.
    """
    return convert(keccak256(abi_encode(trainer_id, parent, round)), uint256)



@internal
@pure
def _rule_model_id(base_id: bytes32, rule: uint256, parameter: uint256) -> bytes32:
    """
    @dev The model id of an aggregation with rule (`rule`, `parameter`), from
         `base_id`, the id the same parents and update ids have under rule 0:
         `base_id` itself for rule 0 (ids from before rules are unchanged),
         else `keccak256(abi.encode(bytes32 baseId, uint256 rule, uint256 parameter))`.
         Hashing the base id again, not the lists, costs a rule a 96-byte hash
         and no second copy of the list. No rule id equals a rule-0 id: the only
         rule-0 encoding of 96 bytes is one parent with an empty id list, which
         no aggregation may have.
    """
    if rule == 0 and parameter == 0:
        return base_id
    return keccak256(abi_encode(base_id, rule, parameter))
