"""The two small interfaces of a defence, and their registries.

A defence is one of two kinds, told apart by what the on-chain model id commits to:

- a **selection rule** (:class:`SelectionRule`) only chooses which updates to keep, as
  paper Algorithm 2 does; the model is still the network's FedAvg of the kept ids, so
  ``modelId = keccak256(abi.encode(parent, sortedUpdateIds))`` and recomputation hold
  unchanged. Its signature is :meth:`Strategy.choose_updates
  <mcfl_chain.strategies.base.Strategy.choose_updates>`'s, so a strategy can delegate
  to it.
- an **aggregation rule** (:class:`AggregationRule`) computes weights that are *not*
  the FedAvg of the ids, so the model id also commits to the rule: each rule has a
  stable small integer ``code`` and a ``parameter`` word (a uint256 that fixes its
  parameters exactly), which the aggregator submits with the ids
  (``submitAggregations``) and the contract hashes into the id:
  ``keccak256(abi.encode(baseId, code, parameter))``, where ``baseId`` is the id above
  (:func:`mcfl_chain.dag.model_id.model_id`). Rule 0 is the network's default (FedAvg,
  or the rule the architecture names) and keeps ``baseId`` itself.

Anyone recomputes an aggregation-rule model from the chain alone: its ``ModelCreated``
event (or ``Models.ruleOf``) gives the code and parameter; fetch each update's weights
(by its CID) and sample count, recompute the parent's weights the same way, then
``rule_from_chain(code, parameter).aggregate([(id, num_samples, state), ...], parent)``
(:meth:`mcfl_chain.dag.weights.WeightsBook.rebuild`).
Every rule is deterministic in the *set* of updates (sorted by ascending id first),
computes in float64 with one IEEE-754 operation per NumPy ufunc call (no fused
multiply-add, no reduction whose order depends on threads or SIMD width), and casts back
to each tensor's dtype, so every machine gets the same bytes.

Adding a defence means adding a module that subclasses one of the two interfaces and
decorates it with :func:`register_selection_rule` or :func:`register_aggregation_rule`.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch

from mcfl_chain.algorithms.fedavg import Update

K = TypeVar("K", bound=Hashable)
StateDict = dict[str, torch.Tensor]


class SelectionRule(ABC):
    """Chooses the updates to aggregate; the aggregate stays FedAvg of their ids."""

    name: ClassVar[str] = ""

    @abstractmethod
    def select(
        self, own: K, vectors: Mapping[K, np.ndarray], parent: np.ndarray | None = None
    ) -> list[K]:
        """Keys of the updates to aggregate, sorted ascending, ``own`` always among them
        (the contract requires the aggregator to own one of the ids).

        Parameters
        ----------
        own : K
            The trainer's own update.
        vectors : Mapping[K, numpy.ndarray]
            Every usable update on the parent, own included, flattened the same way
            (:func:`~mcfl_chain.algorithms.divergence.flatten_state`).
        parent : numpy.ndarray, optional
            The parent's flattened weights, for rules that look at update deltas.
        """


class AggregationRule(ABC):
    """Computes a model's weights from a set of updates, bit-identically on any machine."""

    name: ClassVar[str] = ""
    code: ClassVar[int] = -1
    """Stable small integer the model id commits to; never reuse or renumber one."""
    defence: ClassVar[bool] = True
    """Whether a trainer may select it as a defence (FedAvg, the default, and a rule an
    architecture names, such as FACADE's, are not)."""

    @property
    def parameter(self) -> int:
        """The uint256 word that fixes this rule's parameters exactly (0: none)."""
        return 0

    @classmethod
    def from_parameter(cls, word: int) -> AggregationRule:
        """The rule whose :attr:`parameter` is ``word`` (inverse of :attr:`parameter`).

        Raises
        ------
        ValueError
            If no instance of this rule has that word.
        """
        if word != 0:
            raise ValueError(f"aggregation rule {cls.name!r} has no parameter; got word {word}")
        return cls()

    @abstractmethod
    def aggregate(
        self, updates: Sequence[Update], parent: Mapping[str, torch.Tensor] | None = None
    ) -> StateDict:
        """The aggregated state dict of ``updates`` (any order), bit-identical everywhere.

        Parameters
        ----------
        updates : Sequence[tuple[int, int, Mapping[str, torch.Tensor]]]
            ``(update id, num_samples, state dict)``; same keys, shapes and dtypes.
        parent : Mapping[str, torch.Tensor], optional
            The parent model's weights, for rules that work on deltas.

        Returns
        -------
        dict[str, torch.Tensor]
            New CPU tensors, keys sorted, original dtypes.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}(parameter={self.parameter})"


SELECTION_RULES: dict[str, type[SelectionRule]] = {}
"""Registry: selection rule name → class."""

AGGREGATION_RULES: dict[str, type[AggregationRule]] = {}
"""Registry: aggregation rule name → class."""

AGGREGATION_CODES: dict[int, type[AggregationRule]] = {}
"""Registry: aggregation rule code → class (what the chain records)."""

S = TypeVar("S", bound=type[SelectionRule])
R = TypeVar("R", bound=type[AggregationRule])


def register_selection_rule(name: str) -> Callable[[S], S]:
    """Class decorator registering a selection rule under ``name``."""

    def decorate(cls: S) -> S:
        if name in SELECTION_RULES:
            raise ValueError(f"selection rule {name!r} is registered twice")
        cls.name = name
        SELECTION_RULES[name] = cls
        return cls

    return decorate


def register_aggregation_rule(name: str, code: int) -> Callable[[R], R]:
    """Class decorator registering an aggregation rule under ``name`` and ``code``.

    Raises
    ------
    ValueError
        If the name or the code is already taken (a code names one rule forever).
    """

    def decorate(cls: R) -> R:
        if name in AGGREGATION_RULES:
            raise ValueError(f"aggregation rule {name!r} is registered twice")
        if code in AGGREGATION_CODES:
            taken = AGGREGATION_CODES[code].name
            raise ValueError(f"aggregation rule code {code} is already {taken!r}")
        if not 0 <= code <= 255:
            raise ValueError(f"aggregation rule code must fit a uint8, got {code}")
        cls.name, cls.code = name, code
        AGGREGATION_RULES[name] = cls
        AGGREGATION_CODES[code] = cls
        return cls

    return decorate


def _build(kind: str, registry: Mapping[str, type[Any]], name: str, options: dict[str, Any]) -> Any:
    if name not in registry:
        raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(sorted(registry))}")
    cls = registry[name]
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"{kind} {name!r}: unknown options {unknown}; it accepts {accepted}")
    return cls(**options)


def make_selection_rule(name: str, **options: Any) -> SelectionRule:
    """Instantiate a registered selection rule, e.g. ``make_selection_rule("krum", f=1)``.

    Raises
    ------
    ValueError
        If the name or an option is unknown, or a value is refused.
    """
    rule: SelectionRule = _build("selection rule", SELECTION_RULES, name, options)
    return rule


def make_aggregation_rule(name: str, **options: Any) -> AggregationRule:
    """Instantiate a registered aggregation rule, e.g. ``make_aggregation_rule("trimmed-mean",
    beta=0.1)``.

    Raises
    ------
    ValueError
        If the name or an option is unknown, or a value is refused.
    """
    rule: AggregationRule = _build("aggregation rule", AGGREGATION_RULES, name, options)
    return rule


def rule_from_chain(code: int, parameter: int = 0) -> AggregationRule:
    """The aggregation rule a model id commits to, from its ``code`` and ``parameter`` word.

    Raises
    ------
    ValueError
        If no rule has that code, or the rule has no instance with that parameter word.
    """
    if code not in AGGREGATION_CODES:
        known = ", ".join(f"{c} ({r.name})" for c, r in sorted(AGGREGATION_CODES.items()))
        raise ValueError(f"unknown aggregation rule code {code}; known: {known}")
    return AGGREGATION_CODES[code].from_parameter(parameter)
