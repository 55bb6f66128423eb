"""The MCFL strategy (paper §4): Algorithm 1 to choose models, Algorithm 2 to choose updates.

The defaults of ``start``, ``aggregate_on`` and ``selection`` are MCFL as its authors
ran it; their other values bring back earlier readings of the paper, kept for ablation
(docs/RESULTS.md, "Ablation"):

``start``
    ``"own"`` (default): in the network's first round every trainer trains a model of
    its own initialisation and aggregates only its own update, so the DAG starts with
    one branch per trainer that Algorithm 1's popularity bonus then merges. Thesis
    §5.3.1: "chaque nœud commence dans sa propre branche"; the authors' code
    (Mick00/dml, ``src/daeclust/state/start_training.py``) builds a fresh model per
    trainer in round 0, and their cluster-count plots start at 38 models for 38
    trainers. ``"shared"``: everybody trains the root and runs Algorithm 2 on it.
``aggregate_on``
    ``"best"`` (default): aggregate only on the best-ranked model trained this round;
    the other updates are proposed for the peers who aggregate there. Algorithm 2 has a
    single ``myUpdate``, thesis §3.1 "publie **sa** sélection", and the authors'
    ``WDUpdateSelector`` aggregates on ``get_current_cluster`` only. Popularity is then
    the number of trainers whose aggregation produced a model. ``"all"``: aggregate on
    every trained model (paper §4.3, "contribute to multiple models simultaneously").
``selection``
    How many ranked models to train: ``"percentile"`` (default, the authors'
    ``select_cluster.py``), ``"ceil"`` (⌈√n⌉) or ``"floor"`` (the pseudo-code's
    ``ranked[0:sqrt(n)]``); see :mod:`mcfl_chain.algorithms.model_selection`.

Two options go the other way: their defaults are the paper as printed (the runs already
published), their other values the authors' code, for ablation:

``divergence``
    ``"l2"`` (default): Eq. 2 read as ``‖w_peer − w_own‖₂ / ‖w_own‖₂``, as its source
    [25] defines it. ``"elementwise"``: the authors' ``Σᵢ |w_peer,i − w_own,i| / w_own,i``
    (:func:`~mcfl_chain.algorithms.divergence.elementwise_divergence`). ``"cosine"``:
    the cosine distance of the update deltas (thesis §7.3), an extension.
``filter_statistics``
    ``"paper"`` (default): Algorithm 2's median and std over the peers' divergences.
    ``"authors"``: over the peers' and the own (0), every update kept when there are
    at most 2, ``<=`` the threshold (:mod:`mcfl_chain.algorithms.update_selection`).

**A defence** (``--defence``, e.g. Multi-Krum) runs on the updates Algorithm 2 kept,
not instead of it (an aggregation-rule defence, e.g. the median, aggregates them
instead of FedAvg). Algorithm 2 is what lets the network fork by data: it drops the
updates far from the trainer's own, honest ones of another data group included. Krum
and its kin assume the honest updates they see are alike; over every update on a parent
they would take a minority group's honest updates for outliers and drop them, pulling
every trainer back to the majority's model, which MCFL exists to avoid. After Algorithm
2 they look only at updates near the trainer's own, where that assumption holds, and
catch what Algorithm 2 lets through: an attacker's update inflates the spread of the
divergences, so the ``median + tolerance·std`` threshold rises, and with one peer on a
parent Algorithm 2 keeps it whatever it is. The price: a rule needs enough updates left
(Krum: ``2f + 3``) or it keeps the own update alone. In the first round of the ``own``
start every trainer keeps its own update only, so there is nothing to defend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

import numpy as np

from mcfl_chain.algorithms.divergence import DIVERGENCE_MEASURES
from mcfl_chain.algorithms.model_selection import COUNT_RULES, CountRule, select_best_models
from mcfl_chain.algorithms.update_selection import STATISTICS, Statistics, select_updates
from mcfl_chain.strategies.base import (
    Candidate,
    K,
    Strategy,
    StrategyOption,
    own_branch_seed,
    register_strategy,
)

StartName = Literal["own", "shared"]
AggregateOn = Literal["best", "all"]
DIVERGENCES = tuple(DIVERGENCE_MEASURES)
STARTS: tuple[StartName, ...] = ("own", "shared")
AGGREGATE_ON: tuple[AggregateOn, ...] = ("best", "all")
MIXED_TOLERANCES = (1.0, 2.0, 3.0)
"""The tolerances of a simulation's "mixed" network, handed out in turn (paper §5.3)."""


@register_strategy("mcfl")
class MCFLStrategy(Strategy):
    """MultiConfederated Learning's rules (its options: module docstring)."""

    tolerance = StrategyOption(
        float,
        1.0,
        "MCFL update selection: keep peers with divergence < median + tolerance·std "
        "(the paper: 1 to 3).",
        minimum=0,
        mixed=MIXED_TOLERANCES,
    )
    divergence = StrategyOption(
        str,
        "l2",
        "MCFL: relative L2 weight divergence between the updates (paper Eq. 2), cosine "
        "distance between the update deltas (thesis §7.3), or the authors' element-wise "
        "sum of |difference| / own weight.",
        choices=DIVERGENCES,
    )
    filter_statistics = StrategyOption(
        str,
        "paper",
        "MCFL Algorithm 2: median and std over the peers' divergences (paper), or over "
        "them and the own (0), keeping every update when there are at most 2 (the "
        "authors' code).",
        choices=STATISTICS,
    )
    start = StrategyOption(
        str,
        "own",
        "MCFL's first round: own (each trainer its own initialisation, a branch each; the "
        "authors' code) or shared (everybody trains the root and runs Algorithm 2).",
        choices=STARTS,
    )
    aggregate_on_rule = StrategyOption(
        str,
        "best",
        "MCFL: aggregate only on the best-ranked trained model (the authors' code) or on "
        "all trained models.",
        choices=AGGREGATE_ON,
        name="aggregate_on",  # the attribute: Strategy.aggregate_on is a method
    )
    selection = StrategyOption(
        str,
        "percentile",
        "MCFL Algorithm 1: how many ranked models to train: percentile (the authors' "
        "code), ceil (⌈√n⌉) or floor (⌊√n⌋).",
        choices=COUNT_RULES,
    )

    def starting_weights(self) -> Any | None:
        if self.start == "shared":
            return None
        context = self._context()
        return context.initial_weights(own_branch_seed(context.seed, context.trainer_id))

    def aggregate_on(self, trained: Sequence[K], updates: Mapping[K, int] | None = None) -> list[K]:
        return list(trained[:1]) if self.aggregate_on_rule == "best" else list(trained)

    def choose_models(self, candidates: Sequence[Candidate[K]]) -> list[K]:
        return select_best_models(
            {c.key: c.metric for c in candidates},
            {c.key: c.popularity for c in candidates},
            rule=cast(CountRule, self.selection),
        )

    def choose_updates(
        self,
        own: K,
        vectors: Mapping[K, np.ndarray],
        parent: np.ndarray | None = None,
        *,
        first_round: bool = False,
    ) -> list[K]:
        if first_round and self.start == "own":
            # Every update on the root started from its trainer's own weights: a branch each.
            if own not in vectors:
                raise KeyError(f"the own update {own!r} is not among the updates to select from")
            return [own]
        measure, compared = self._compared(vectors, parent)
        statistics = cast(Statistics, self.filter_statistics)
        return select_updates(own, compared, self.tolerance, measure, statistics)

    def _compared(
        self, vectors: Mapping[K, np.ndarray], parent: np.ndarray | None
    ) -> tuple[Callable[[np.ndarray, np.ndarray], float], Mapping[K, np.ndarray]]:
        """Algorithm 2's divergence (the ``divergence`` option) and what it compares:
        the vectors, or their deltas from ``parent`` for a measure of deltas."""
        measure = DIVERGENCE_MEASURES[self.divergence]
        if measure.on_deltas and parent is not None:
            vectors = {key: vector - parent for key, vector in vectors.items()}
        return measure.measure, vectors
