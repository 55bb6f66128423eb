"""Defences against Byzantine trainers: robust update selection and aggregation rules.

Selection rules (the model stays the network's aggregate of the kept ids, rule 0):

- ``krum``         Krum (Blanchard et al. 2017) + the own update
- ``multi-krum``   Multi-Krum + the own update

Aggregation rules (the aggregator submits the rule's code and parameter word with the
ids, and the model id commits to them: ``keccak256(abi.encode(baseId, code,
parameter))``, where rule 0 keeps ``baseId = keccak256(abi.encode(parent, ids))``):

====  ================  ==========================================  ====================
code  name              weights                                     parameter word
====  ================  ==========================================  ====================
0     ``fedavg``        sample-weighted mean (the default)          0
1     ``median``        coordinate-wise median                      0
2     ``trimmed-mean``  coordinate-wise β-trimmed mean              β in basis points
3     ``norm-clipping`` deltas clipped to τ, then FedAvg            0 (median τ) or τ's bits
4     per-head-fedavg   FACADE: core over all, head j over those    0
                        that chose it (:mod:`..facade`)
====  ================  ==========================================  ====================

``fedavg`` and ``per-head-fedavg`` are no defences: they are a network's rule 0, FedAvg
or the rule a multi-head architecture names; a model aggregated with rule 0 is rebuilt
with the network's.

See :mod:`.base` for the interfaces and how anyone recomputes a model bit-identically.
A trainer selects a defence by text, ``parse_defence("multi-krum:f=1")`` or
``parse_defence("trimmed-mean:beta=0.2")`` (:mod:`.spec`): a selection rule or an
aggregation rule.
"""

# Importing each rule's module registers it.
from mcfl_chain.algorithms import facade  # noqa: F401 (registers per-head-fedavg)
from mcfl_chain.algorithms.robust import clipping, krum, median, sample_weighted, trimmed_mean
from mcfl_chain.algorithms.robust.base import (
    AGGREGATION_CODES,
    AGGREGATION_RULES,
    SELECTION_RULES,
    AggregationRule,
    SelectionRule,
    make_aggregation_rule,
    make_selection_rule,
    register_aggregation_rule,
    register_selection_rule,
    rule_from_chain,
)
from mcfl_chain.algorithms.robust.clipping import NormClipping
from mcfl_chain.algorithms.robust.krum import KrumSelection, MultiKrumSelection
from mcfl_chain.algorithms.robust.median import CoordinateMedian
from mcfl_chain.algorithms.robust.sample_weighted import FedAvgRule
from mcfl_chain.algorithms.robust.spec import Defence, defence_names, parse_defence
from mcfl_chain.algorithms.robust.trimmed_mean import TrimmedMean

__all__ = [
    "AGGREGATION_CODES",
    "AGGREGATION_RULES",
    "SELECTION_RULES",
    "AggregationRule",
    "CoordinateMedian",
    "Defence",
    "FedAvgRule",
    "KrumSelection",
    "MultiKrumSelection",
    "NormClipping",
    "SelectionRule",
    "TrimmedMean",
    "clipping",
    "defence_names",
    "sample_weighted",
    "krum",
    "make_aggregation_rule",
    "make_selection_rule",
    "median",
    "parse_defence",
    "register_aggregation_rule",
    "register_selection_rule",
    "rule_from_chain",
    "trimmed_mean",
]
