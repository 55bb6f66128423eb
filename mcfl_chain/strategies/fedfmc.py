"""FedFMC, Fork-Merge-Consolidate (Kopparapu & Lin 2020), without a server.

The paper's server averages the devices of each group, decides who forks and runs the
merges. Here every trainer applies the same deterministic rules to what the chain
records, so that the trainers of a group submit the same update set (one model id) and
anyone can check the result. A **group** is a branch of the DAG: the model its trainers
aggregated last round (``Candidate.mine``), and its members the proposers of that
model's updates.

**Fork stage** (rounds ``0 .. fork_rounds − 1``, the paper's T; Algorithm 2)

- Round 0: everybody trains the root and aggregates every update on it (FedAvg): one
  shared model. Contract calls, as in every round: ``submitProposals`` with the update
  on the trained model, ``submitAggregations`` with one aggregation.
- Other rounds: a trainer trains its group's model and aggregates every update on it
  (a trainer without one, its last aggregation lost, joins the model with its smallest
  validation loss).
- A fork-eligible round (:func:`fork_eligible`: at least ``fork_start`` rounds from the
  start, rounds ``fork_gap`` apart, none in the last ``fork_end`` rounds of the stage)
  first finds the group's **poorly served** members (:func:`poorly_served`): those
  whose ``lₙ − min lᵢ > h_f · σ(lᵢ)`` over the group (paper §5.1, ``h_f`` =
  ``fork_threshold``). A flagged trainer then scores every candidate model on its own
  validation split and **moves** to the one with the smallest loss, or **forks** when
  that is its own group's model (:func:`fork_or_move`). A mover trains the other
  group's model; a forker trains its own group's model, but aggregates only the
  updates of the flagged trainers that stayed on it, so the forkers of a group in a
  round form one new branch (one new group rather than one per trainer: a group of
  one would never be flagged again, nor rejoin anybody). The members that are not
  flagged aggregate every update on the model but the forkers'.

  *What lᵢ is here.* A trainer cannot observe its peers' validation losses: nothing on
  chain carries them. The observable proxy is each member's **update drift**,
  ``‖wᵢ − θ‖ / ‖θ‖`` between the update it proposed last round and the model it
  trained it from (:func:`update_drift`): the further a model is from fitting a
  trainer's data, the further that trainer's local epochs move it. Every update is
  public, so every trainer computes the same drifts and flags the same members; only
  the move-or-fork choice uses the trainer's private validation loss, as in the paper.

**Merge stage** (from round ``fork_rounds``; Algorithm 3)

- The **groups** are the models of the fork stage's last round, ordered by popularity
  (members) descending, then id: group 0 is the base of the consolidated model.
  Every later model's origin is the set of groups it descends from, so every trainer
  knows, from the chain alone, which model is which group's and which is the
  consolidated one.
- Group f (f = 1 .. groups − 1) is folded in during ``merge_rounds`` rounds (the
  paper's M: at most M rounds per merge; here exactly M, since the paper's
  convergence test reads an accuracy that trainers observe each on their own data
  and would not agree on). The **active** trainers are the members of groups 0..f.
- Merge round (the step's first): every active trainer trains both the previous
  consolidated model and group f's model (``submitProposals`` with two updates: the
  contract wants an aggregator's own update on every parent of a merge) and submits
  one aggregation with **both parents** and every update on either
  (``submitAggregations`` with ``parentCount = 2``): the consolidated model is a model
  with several parents, ``keccak256(abi.encode(bytes32[] parents, uint256[] updateIds))``.
  Its weights are the FedAvg of those updates, the two models weighted alike.
- The step's other rounds: active trainers train the consolidated model and aggregate
  every update on it. Trainers of groups not yet merged keep training their group's
  model meanwhile (its latest version must stay among the round's candidates, which
  are the previous round's models).
- With ``ewc`` on, every training of an active trainer during step f adds the EWC
  penalty ``λ Σᵢ Fᵢ (θᵢ − θ*ᵢ)²`` (:mod:`mcfl_chain.algorithms.ewc`), θ* being the
  consolidated model the step started from, F the diagonal of its Fisher information
  on (at most 256 of) the trainer's own training samples — a classifier's over its own
  prediction, which stays bounded where θ* is confidently wrong — and λ = 1 / number
  of groups (paper §4.1). The penalty is the strategy's :meth:`regulariser`, which the
  worker adds to the training loss: it is local and never on chain.
- After the last merge everybody trains the consolidated model with plain FedAvg.

**What the chain lets every trainer verify.** Each model id commits to its parents and
its updates, and every update's weights are public: anybody can recompute the drifts,
hence who was flagged in a fork round; that a fork round's two models split the updates
on a group's model into exactly the flagged trainers' and the others'; that a merge
joins the models the schedule names (the previous consolidated model and group f's,
by the groups' order) with every update proposed on them; and every model's weights
(FedAvg). What stays private: a flagged trainer's validation losses (hence whether it
moved to the best model or forked) and whether its training used the EWC penalty —
local training is never checkable from its result.

A defence (``--defence``) runs on the updates these rules keep.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mcfl_chain.algorithms.divergence import flatten_state
from mcfl_chain.algorithms.ewc import ewc_lambda
from mcfl_chain.algorithms.proximal import QuadraticPenalty
from mcfl_chain.strategies.base import Candidate, K, Strategy, StrategyOption, register_strategy

FORK_ROUNDS = 25
"""T, the fork stage's rounds: the paper's §4.3 forks over rounds 0-24."""
MERGE_ROUNDS = 10
"""M, the rounds of one merge. The paper gives no figure, only an early stop that looks
at 5-round windows (so at least 5)."""
FORK_THRESHOLD = 2.0
"""h_f, in standard deviations. The paper gives no figure. Since max − min ≥ 2σ for any
figures (σ the population standard deviation), an h_f below 2 flags the top member of
every group whose figures are not all equal, at every fork round, and groups fragment;
from 2 on, a group of two never splits and larger groups flag only members far above
the rest. The paper's test has a blind spot there: a group of two equal halves (two
archetypes, as many trainers each) has max − min = 2σ exactly, so it splits only below
2, or by noise. Lower h_f for such data (the later fork rounds' moves regroup trainers
flagged by chance)."""
FORK_START, FORK_GAP, FORK_END = 5, 4, 5
"""Fork eligibility (paper §5.1): from round 5, every 4 rounds, none in the last 5."""


def fork_eligible(
    round_: int, fork_rounds: int, start: int = 5, gap: int = 4, end: int = 5
) -> bool:
    """Whether round ``round_`` (from 0) is eligible for forking (paper §5.1).

    At least ``start`` rounds from the start, ``gap`` rounds between two eligible
    rounds, and more than ``end`` rounds before the end of the ``fork_rounds`` rounds
    of the fork stage: ``start ≤ t < fork_rounds − end`` and ``(t − start) % gap == 0``.
    With the paper's values (T = 25, 5, 4, 5): rounds 5, 9, 13 and 17.
    """
    return start <= round_ < fork_rounds - end and (round_ - start) % gap == 0


def performs_poorly(own: float, group: Sequence[float], threshold: float) -> bool:
    """The paper's forking test: ``lₙ − min lᵢ > h_f · σ(lᵢ)`` over the group.

    Parameters
    ----------
    own : float
        lₙ, the trainer's figure (paper: its validation loss on the group's model).
    group : Sequence[float]
        lᵢ for every member of the group, the trainer included.
    threshold : float
        h_f.

    Returns
    -------
    bool
        Strictly above: a group whose figures are all equal flags nobody.
    """
    values = np.asarray(group, dtype=np.float64)
    if values.size == 0:
        raise ValueError("the group's figures are empty: the trainer itself belongs to it")
    return bool(own - values.min() > threshold * values.std())


def poorly_served(figures: Mapping[int, float], threshold: float) -> frozenset[int]:
    """The members of a group for which :func:`performs_poorly` holds.

    Parameters
    ----------
    figures : Mapping[int, float]
        Trainer id → its figure (here its update drift, :func:`update_drift`).
    threshold : float
        h_f.
    """
    values = list(figures.values())
    return frozenset(t for t, value in figures.items() if performs_poorly(value, values, threshold))


def fork_or_move(current: K, losses: Mapping[K, float]) -> K | None:
    """Where a poorly served trainer goes (paper Algorithm 2): the model with the
    smallest loss on its validation data, or None — fork a new group — when that is its
    current group's model.

    Ties go to the current model (a fork), then to the smaller key; NaN losses are
    ignored.

    Raises
    ------
    ValueError
        If no loss is measured.
    """
    measured = {key: loss for key, loss in losses.items() if not np.isnan(loss)}
    if not measured:
        raise ValueError("no candidate model has a measured loss to choose by")
    best = min(measured, key=lambda key: (measured[key], key != current, key))
    return None if best == current else best


def update_drift(update: np.ndarray, parent: np.ndarray) -> float:
    """``‖w − θ‖ / ‖θ‖``: how far local training moved a model (absolute when ‖θ‖ = 0)."""
    distance = float(np.linalg.norm(update - parent))
    norm = float(np.linalg.norm(parent))
    return distance / norm if norm > 0 else distance


@dataclass(frozen=True)
class Stage:
    """Where a round falls in FedFMC's schedule.

    Attributes
    ----------
    phase : {"fork", "merge", "done"}
        Fork stage, merge stage, or after the last merge.
    step : int
        In the merge stage, f: group f is being folded in (1 .. groups − 1); else 0.
    index : int
        In the merge stage, the round's index in its step (0: the merge round).
    """

    phase: str
    step: int = 0
    index: int = 0


def stage_of(round_: int, fork_rounds: int, merge_rounds: int, groups: int) -> Stage:
    """The stage of round ``round_`` with ``groups`` groups at the end of the fork stage.

    The merge of group f (1 .. groups − 1) starts in round
    ``fork_rounds + (f − 1) · merge_rounds`` and lasts ``merge_rounds`` rounds.
    """
    if round_ < fork_rounds:
        return Stage("fork")
    step, index = divmod(round_ - fork_rounds, merge_rounds)
    if step + 1 >= groups:
        return Stage("done")
    return Stage("merge", step + 1, index)


@register_strategy("fedfmc")
class FedFMCStrategy(Strategy):
    """FedFMC's rules (module docstring)."""

    fork_rounds = StrategyOption(
        int, FORK_ROUNDS, "FedFMC: T, the rounds of the fork stage (paper: 25).", minimum=1
    )
    merge_rounds = StrategyOption(
        int,
        MERGE_ROUNDS,
        "FedFMC: M, the rounds each group's merge lasts (the paper gives none).",
        minimum=1,
    )
    fork_threshold = StrategyOption(
        float,
        FORK_THRESHOLD,
        "FedFMC: h_f, a member is poorly served when its update drift exceeds the group's "
        "smallest by more than h_f standard deviations (the paper gives none; below 2 it "
        "flags every group's top member).",
        minimum=0,
    )
    fork_start = StrategyOption(
        int, FORK_START, "FedFMC: first fork-eligible round (paper: 5).", minimum=1
    )
    fork_gap = StrategyOption(
        int, FORK_GAP, "FedFMC: rounds between fork-eligible rounds (paper: 4).", minimum=1
    )
    fork_end = StrategyOption(
        int,
        FORK_END,
        "FedFMC: last rounds of the fork stage that may not fork (paper: 5).",
        minimum=0,
    )
    ewc = StrategyOption(
        bool,
        True,
        "FedFMC: train merges with the EWC penalty (on) or without (off, the paper's ablation).",
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # Chain facts never change once recorded: computed once per key.
        self._flagged: dict[Hashable, frozenset[int]] = {}
        self._origins: dict[Hashable, frozenset[Hashable]] = {}
        self._fishers: dict[Hashable, Any] = {}
        self._groups: list[Hashable] | None = None

    # -- the fork stage ----------------------------------------------------------------

    def is_fork_round(self, round_: int) -> bool:
        """Whether ``round_`` is fork-eligible with this strategy's options."""
        return fork_eligible(
            round_, self.fork_rounds, self.fork_start, self.fork_gap, self.fork_end
        )

    def flagged(self, model: Hashable) -> frozenset[int]:
        """Trainer ids of ``model``'s members that it serves poorly, by their drifts.

        Members whose update (or its parent's weights) cannot be had are left out,
        neither flagged nor counted.
        """
        if model not in self._flagged:
            context = self._context()
            info = context.need("model_info")(model)
            update_info = context.need("update_info")
            update_vector = context.need("update_vector")
            model_weights = context.need("model_weights")
            parents: dict[Hashable, np.ndarray] = {}
            drifts: dict[int, list[float]] = {}
            for uid in info.update_ids:
                update = update_info(uid)
                try:
                    vector = update_vector(uid)
                    if update.parent not in parents:
                        parents[update.parent] = flatten_state(model_weights(update.parent))
                except LookupError:
                    continue
                drifts.setdefault(update.trainer_id, []).append(
                    update_drift(vector, parents[update.parent])
                )
            figures = {t: float(np.mean(d)) for t, d in drifts.items()}
            self._flagged[model] = (
                poorly_served(figures, self.fork_threshold) if figures else frozenset()
            )
        return self._flagged[model]

    # -- the merge stage ---------------------------------------------------------------

    def groups(self) -> list[Hashable]:
        """The groups at the end of the fork stage: the models of its last round with
        models, by popularity descending then id (group 0 first)."""
        if self._groups is None:
            context = self._context()
            models_of_round = context.need("models_of_round")
            model_info = context.need("model_info")
            boundary = self.fork_rounds - 1
            while boundary >= 0 and not models_of_round(boundary):
                boundary -= 1
            keys = models_of_round(boundary) if boundary >= 0 else []
            infos = [model_info(key) for key in keys]
            self._groups = [i.key for i in sorted(infos, key=lambda i: (-i.popularity, i.key))]
        return self._groups

    def origin(self, model: Hashable) -> frozenset[Hashable]:
        """The groups ``model`` descends from (itself, for a model of the fork stage)."""
        model_info = self._context().need("model_info")
        todo = [model]
        while todo:
            key = todo[-1]
            if key in self._origins:
                todo.pop()
                continue
            try:
                info = model_info(key)
            except KeyError:
                info = None
            if info is None or info.round is None or info.round < self.fork_rounds:
                self._origins[key] = frozenset({key})
                todo.pop()
                continue
            missing = [p for p in info.parents if p not in self._origins]
            if missing:
                todo.extend(missing)
                continue
            self._origins[key] = frozenset().union(*(self._origins[p] for p in info.parents))
            todo.pop()
        return self._origins[model]

    def stage(self, round_: int) -> Stage:
        """The stage of ``round_`` (the groups are read once the fork stage is over)."""
        if round_ < self.fork_rounds:
            return Stage("fork")
        return stage_of(round_, self.fork_rounds, self.merge_rounds, len(self.groups()))

    def _models_before(self, round_: int) -> list[Hashable]:
        """The models of the latest round before ``round_`` that has some."""
        models_of_round = self._context().need("models_of_round")
        for earlier in range(round_ - 1, -1, -1):
            models = models_of_round(earlier)
            if models:
                return list(models)
        return []

    def _with_origin(
        self, models: Sequence[Hashable], origin: frozenset[Hashable]
    ) -> Hashable | None:
        return next((m for m in models if self.origin(m) == origin), None)

    def merge_pair(self, step: int) -> tuple[Hashable, Hashable] | None:
        """The two models merge ``step`` joins: (previous consolidated model, group
        ``step``'s latest model), as the round before the merge round left them; None if
        the chain lacks one of them."""
        groups = self.groups()
        start = self.fork_rounds + (step - 1) * self.merge_rounds
        models = self._models_before(start)
        consolidated = self._with_origin(models, frozenset(groups[:step]))
        group = self._with_origin(models, frozenset({groups[step]}))
        if consolidated is None or group is None:
            return None
        return consolidated, group

    # -- the rules ---------------------------------------------------------------------

    def _round(self) -> int:
        if self.round is None:
            raise RuntimeError("FedFMCStrategy: the worker must call begin_round() first")
        return self.round

    def choose_models(self, candidates: Sequence[Candidate[K]]) -> list[K]:
        """The group's model; in a fork round a poorly served trainer's move or fork;
        in the merge stage the models of the merge step (module docstring)."""
        if not candidates:
            return []
        round_ = self._round()
        if round_ == 0 or (round_ < self.fork_rounds and len(candidates) == 1):
            # The root, or the fork stage's only model: whoever forks trains it too.
            return [candidates[0].key]
        lowest = min(candidates, key=lambda c: (np.nan_to_num(c.loss, nan=np.inf), c.key))
        mine = min(
            (c for c in candidates if c.mine),
            key=lambda c: (np.nan_to_num(c.loss, nan=np.inf), c.key),
            default=lowest,
        )
        stage = self.stage(round_)
        if stage.phase == "fork":
            if self.is_fork_round(round_) and self._context().trainer_id in self.flagged(mine.key):
                target = fork_or_move(mine.key, {c.key: c.loss for c in candidates})
                return [mine.key if target is None else target]
            return [mine.key]
        keys = [c.key for c in candidates]
        if stage.phase == "done":
            # Everybody on the consolidated model: the one that descends from most groups.
            return [max(candidates, key=lambda c: (len(self.origin(c.key)), c.popularity)).key]
        active = frozenset(self.groups()[: stage.step + 1])
        if not self.origin(mine.key) <= active:
            return [mine.key]
        if stage.index == 0:
            pair = self.merge_pair(stage.step)
            if pair is not None and all(key in keys for key in pair):
                return list(pair)  # type: ignore[arg-type]
            return [mine.key]
        consolidated = self._with_origin(keys, active)
        return [mine.key if consolidated is None else consolidated]  # type: ignore[list-item]

    def merges(self, parents: Sequence[K]) -> list[tuple[K, ...]]:
        """In a merge round, the trained models as one merge; else one aggregation each."""
        stage = self.stage(self._round())
        if stage.phase == "merge" and stage.index == 0 and len(parents) > 1:
            return [tuple(sorted(parents))]  # type: ignore[type-var]
        return super().merges(parents)

    def choose_updates(
        self,
        own: K,
        vectors: Mapping[K, np.ndarray],
        parent: np.ndarray | None = None,
        *,
        first_round: bool = False,
    ) -> list[K]:
        """Every update on the parent(s); in a fork round, the forkers' alone for a
        forker and the others' for everybody else."""
        if own not in vectors:
            raise KeyError(f"the own update {own!r} is not among the updates to select from")
        everything = sorted(vectors)  # type: ignore[type-var]
        if first_round:
            return everything
        update_info = self._context().need("update_info")
        mine = update_info(own)
        if not (mine.round < self.fork_rounds and self.is_fork_round(mine.round)):
            return everything
        flagged = self.flagged(mine.parent)
        forkers = {key for key in vectors if update_info(key).trainer_id in flagged}
        if own in forkers:
            return sorted(forkers)  # type: ignore[type-var]
        return [key for key in everything if key not in forkers]

    def regulariser(self, parent: K) -> Callable[[Any], Any] | None:
        """During merge step f, for a model of groups 0..f: the EWC penalty anchored at
        the consolidated model the step started from (None otherwise, or ``ewc`` off)."""
        if not self.ewc:
            return None
        stage = self.stage(self._round())
        if stage.phase != "merge":
            return None
        groups = self.groups()
        if not self.origin(parent) <= frozenset(groups[: stage.step + 1]):
            return None
        pair = self.merge_pair(stage.step)
        if pair is None:
            return None
        anchor_key = pair[0]
        context = self._context()
        anchor = context.need("model_weights")(anchor_key)
        if anchor_key not in self._fishers:
            self._fishers = {anchor_key: context.need("fisher_diagonal")(anchor)}
        fisher = self._fishers[anchor_key]
        lam = ewc_lambda(len(groups))
        # ewc_penalty's λ Σ F (θ − θ*)² as a quadratic penalty: the batched compute applies it.
        return QuadraticPenalty(anchor, {name: lam * f for name, f in fisher.items()})
