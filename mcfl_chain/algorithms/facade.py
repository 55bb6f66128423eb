"""FACADE's aggregation (thesis Algorithm 1, lines 8-11): the core over every update,
each head over the updates that chose it — bit-identical on every machine.

A FACADE model is a shared core and ``k`` heads. Its state dict holds the core's
tensors under their usual names, head ``j``'s under ``heads.<j>.<name>``, and the
0-dimensional int64 tensor ``head_choice``: the head this copy of the model predicts
with. In an update it is the proposer's choice (the head with the lowest loss on its
data, the one it trained), so the choice travels inside the update's blob, covered by
its CID like every weight.

The aggregate of a set of updates (any order; they are sorted by id):

- every core tensor is the FedAvg of every update (:func:`~.fedavg.fedavg`: ascending
  id, sample-weighted, float64 accumulation, one IEEE operation at a time);
- head ``j`` is the FedAvg of the updates whose ``head_choice`` is ``j``;
- a head nobody chose is the FedAvg of every update. An honest trainer never changes a
  head it did not choose, so each update holds the parent's head there, and the FedAvg
  of equal float32 values is that value exactly (``w·nᵢ`` and their sums are exact in
  float64 while ``Σ nᵢ < 2²⁹``): the head stays the parent's without reading the parent;
- ``head_choice`` is the head most updates chose (ties to the lower index), the one a
  reader who does not choose for itself would use.

The rule reads the updates alone, so anyone holding the ids and the blobs recomputes a
model. It is registered as the aggregation rule ``per-head-fedavg`` (code 4,
:class:`PerHeadFedAvg`); a multi-head architecture names it
(:attr:`~mcfl_chain.learning.models.Architecture.aggregation`), so the network's task
descriptor on chain tells every reader which rule rebuilds its models.

The thesis averages with equal weights, ``1/(C_j + 1)``; here updates are weighted by
their samples as everywhere in the network (equal shares give the thesis' mean).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

import torch

from mcfl_chain.algorithms.fedavg import Update, check_updates, fedavg
from mcfl_chain.algorithms.robust.base import AggregationRule, register_aggregation_rule

HEAD_CHOICE = "head_choice"
"""Name of the 0-d int64 tensor holding the head a copy of the model predicts with."""

HEADS_PREFIX = "heads."
"""Tensors of head ``j`` are named ``heads.<j>.<name>``."""

_HEAD_TENSOR = re.compile(r"heads\.(\d+)\.")

StateDict = dict[str, torch.Tensor]


def head_of_tensor(name: str) -> int | None:
    """The head a tensor belongs to (``"heads.1.weight"`` → 1), None for the core."""
    match = _HEAD_TENSOR.match(name)
    return None if match is None else int(match.group(1))


def head_count(state: Mapping[str, torch.Tensor]) -> int:
    """k, the number of heads of a FACADE state dict (0 when it has none)."""
    heads = {head_of_tensor(name) for name in state} - {None}
    return len(heads)


def head_choice(state: Mapping[str, torch.Tensor]) -> int:
    """The head a state dict predicts with.

    Raises
    ------
    ValueError
        If it has no ``head_choice`` tensor, or the choice names no head of its own.
    """
    if HEAD_CHOICE not in state:
        raise ValueError(f"a FACADE state dict holds a {HEAD_CHOICE!r} tensor; this one has none")
    choice = int(state[HEAD_CHOICE].item())
    k = head_count(state)
    if not 0 <= choice < k:
        raise ValueError(f"{HEAD_CHOICE} is {choice}, but the model's heads are 0 to {k - 1}")
    return choice


def with_head(state: Mapping[str, torch.Tensor], head: int) -> StateDict:
    """The same weights predicting with head ``head`` (a new dict; tensors shared).

    Raises
    ------
    ValueError
        If ``head`` is not one of the state dict's heads.
    """
    k = head_count(state)
    if not 0 <= head < k:
        raise ValueError(f"head {head} does not exist: the model's heads are 0 to {k - 1}")
    return {**state, HEAD_CHOICE: torch.tensor(head, dtype=torch.int64)}


def lowest_loss_head(losses: Sequence[float]) -> int:
    """FACADE's cluster identity estimate (Algorithm 1, line 3): the index of the lowest
    loss; ties go to the lower index, a NaN loss never wins unless all are NaN (then 0).

    Raises
    ------
    ValueError
        If ``losses`` is empty.
    """
    if not losses:
        raise ValueError("no head to choose from: the model has no heads")
    ranked = [(loss != loss, loss if loss == loss else 0.0, j) for j, loss in enumerate(losses)]
    return min(ranked)[2]


def per_head_fedavg(updates: Sequence[Update]) -> StateDict:
    """FACADE's aggregate of FACADE updates (module docstring), bit-identical everywhere.

    Parameters
    ----------
    updates : Sequence[tuple[int, int, Mapping[str, torch.Tensor]]]
        ``(update id, num_samples, state dict)``, in any order; the state dicts have the
        same layout, with heads and a ``head_choice`` naming one of them.

    Returns
    -------
    dict[str, torch.Tensor]
        The aggregated state dict, keys sorted.

    Raises
    ------
    ValueError
        As :func:`~.fedavg.fedavg`, or when a state dict has no heads or a choice naming
        none of them.
    """
    rule = "FACADE's per-head FedAvg"
    check_updates(updates, rule)
    ordered = sorted(updates, key=lambda update: update[0])
    reference = ordered[0][2]
    k = head_count(reference)
    if k == 0:
        raise ValueError(f"{rule} needs models with heads ('{HEADS_PREFIX}<j>.' tensors)")
    choices: dict[int, int] = {}
    for update_id, _, state in ordered:
        try:
            choices[update_id] = head_choice(state)
        except ValueError as exc:
            raise ValueError(f"update {update_id}: {exc}") from None
    chosen = set(choices.values())
    # Core, HEAD_CHOICE (replaced below) and heads nobody chose: over every update.
    shared = [name for name in reference if head_of_tensor(name) not in chosen]
    result = fedavg([(uid, n, {name: s[name] for name in shared}) for uid, n, s in ordered])
    for head in sorted(chosen):
        names = [name for name in reference if head_of_tensor(name) == head]
        members = [(uid, n, s) for uid, n, s in ordered if choices[uid] == head]
        result.update(
            fedavg([(uid, n, {name: s[name] for name in names}) for uid, n, s in members])
        )
    votes = Counter(choices.values())
    majority = min(votes, key=lambda head: (-votes[head], head))
    result[HEAD_CHOICE] = torch.tensor(majority, dtype=torch.int64)
    return dict(sorted(result.items()))


@register_aggregation_rule("per-head-fedavg", code=4)
class PerHeadFedAvg(AggregationRule):
    """FACADE's aggregation (:func:`per_head_fedavg`) behind the aggregation-rule
    interface; no parameter, the parent is not read."""

    defence = False  # a multi-head architecture names it: it is such a network's rule 0

    def aggregate(
        self, updates: Sequence[Update], parent: Mapping[str, torch.Tensor] | None = None
    ) -> StateDict:
        return per_head_fedavg(updates)
