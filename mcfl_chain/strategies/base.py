"""The small interface every trainer strategy implements, and the strategy registry.

A strategy is a trainer's rules for one round: which candidate models to train (step 1
of a round), on which of them to aggregate, and which proposed updates to aggregate with
its own (step 3); for the network's first round, where training starts (the shared
root, or weights of the trainer's own); and, for a model that several clusters share,
which part of it is this trainer's (:meth:`Strategy.personalise`: FACADE's head); and
which model it deploys, the one its reported figures are of (:meth:`Strategy.deployed`:
Ditto's personal model, FedAvg-FT's fine-tuned one).
Adding a strategy means adding a module that subclasses :class:`Strategy` and decorates
it with :func:`register_strategy`. Its options are class attributes of type
:class:`StrategyOption`, declared there once (name, type, default, help): the worker's
options and configuration files, the simulator's scenarios and the command lines are
made from :func:`strategy_options`, the options of every registered strategy.

Strategies see weights only as opaque state dicts and flattened vectors: they build
nothing themselves, the worker hands them what they need in a :class:`StrategyContext`.
A strategy whose rules depend on the history may also read what the chain recorded
through the context's read-only views (:class:`ModelInfo`, :class:`UpdateInfo`), and
optional hooks let a strategy go beyond "one parent, plain SGD":
:meth:`Strategy.begin_round` (the round being played), :meth:`Strategy.merges` (several
trained parents aggregated into one model, a merge on chain),
:meth:`Strategy.regulariser` (a penalty added to the training loss; a quadratic one,
:mod:`mcfl_chain.algorithms.proximal`, is batched by the batched compute) and
:meth:`Strategy.deployed` (what the trainer reports, which may be trained further off
chain through the context's ``train`` view). Their defaults change nothing.

A trainer may add a **defence** to any strategy (:mod:`mcfl_chain.algorithms.robust`):
a robust selection rule (e.g. Multi-Krum) that :meth:`Strategy.select_updates` applies to
the updates the strategy's own rule kept, or a robust aggregation rule (median, trimmed
mean, norm clipping; :attr:`Strategy.aggregation_rule`) with which the worker aggregates
the updates the strategy kept, submitting the rule's code and parameter word so that the
model id commits to it. Each strategy's module says what that means for it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar, overload

import numpy as np

from mcfl_chain._utils.options import OptionSpec
from mcfl_chain.algorithms.robust.base import AggregationRule, SelectionRule
from mcfl_chain.algorithms.robust.spec import Defence

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class StrategyOption(Generic[T]):
    """An option of a strategy, declared once, as a class attribute of the strategy.

    ``tolerance = StrategyOption(float, 1.0, "MCFL: ...", minimum=0)`` gives the strategy
    an option ``tolerance``: the constructor takes ``tolerance=`` (checked by
    :meth:`OptionSpec.convert <mcfl_chain._utils.options.OptionSpec.convert>`, so a
    refused value raises ``ValueError`` naming the option), ``self.tolerance`` is its
    value, and ``--tolerance`` exists wherever strategies are chosen.

    Parameters
    ----------
    kind : type
        ``int``, ``float``, ``str`` or ``bool`` (on the command line and in files a
        bool is ``on`` or ``off``).
    default
        The value when nobody sets it.
    help : str
        One or two sentences for ``--help``, starting with the strategy's name
        (``"IFCA: ..."``), without the default (shown apart).
    choices, minimum
        The accepted names, or the smallest accepted number.
    name : str, optional
        The option's name when the attribute cannot bear it (MCFL's ``aggregate_on``
        is a method of every strategy).
    mixed : Sequence, optional
        Values a simulation may hand its trainers in turn when told ``"mixed"``
        (MCFL's tolerances 1, 2, 3: paper §5.3). Empty: one value for all.
    """

    def __init__(
        self,
        kind: type[T],
        default: T,
        help: str,
        *,
        choices: Sequence[str] = (),
        minimum: float | None = None,
        name: str = "",
        mixed: Sequence[T] = (),
    ) -> None:
        self.spec = OptionSpec(name, kind, default, help, tuple(choices), minimum)
        self.attribute = name
        self.mixed: tuple[T, ...] = tuple(mixed)

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.attribute = attribute
        if not self.spec.name:
            self.spec = replace(self.spec, name=attribute)

    @property
    def name(self) -> str:
        return self.spec.name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> StrategyOption[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> Any:
        # Only reached when the constructor was not given the option: the instance's own
        # value (its __dict__) comes before a non-data descriptor.
        return self if instance is None else self.spec.default

    def same_as(self, other: StrategyOption[Any]) -> bool:
        """Whether ``other`` declares the same values (its help may differ)."""
        return replace(self.spec, help="") == replace(other.spec, help="") and (
            self.mixed == other.mixed
        )


@dataclass(frozen=True)
class Candidate(Generic[K]):
    """A model a trainer may train this round.

    Attributes
    ----------
    key : K
        The model's id.
    metric : float
        Its selection metric on the trainer's selection (validation) split (higher is
        better).
    popularity : int
        How many trainers' aggregations produced it.
    loss : float
        Its loss on the same split (lower is better; NaN when not measured).
    mine : bool
        Whether this trainer's own aggregation produced it.
    """

    key: K
    metric: float
    popularity: int
    loss: float = float("nan")
    mine: bool = False


@dataclass(frozen=True)
class UpdateInfo:
    """What the chain records of one update (a read-only view).

    Attributes
    ----------
    update_id : int
        Its id.
    trainer_id : int
        The trainer that proposed it.
    parent : Hashable
        The model it was trained from.
    round : int
        The round it was proposed in.
    """

    update_id: int
    trainer_id: int
    parent: Hashable
    round: int


@dataclass(frozen=True)
class ModelInfo:
    """What the chain records of one model (a read-only view).

    Attributes
    ----------
    key : Hashable
        Its id.
    parents : tuple
        The models its updates were trained from: none for the root, several for a merge.
    round : int or None
        The round it was created in (None for the root).
    update_ids : tuple[int, ...]
        The updates aggregated into it, ascending.
    popularity : int
        How many aggregations produced it.
    aggregator_ids : tuple[int, ...]
        The trainers whose aggregations produced it, in submission order (empty where
        whoever built the view did not say).
    """

    key: Hashable
    parents: tuple[Hashable, ...]
    round: int | None
    update_ids: tuple[int, ...]
    popularity: int
    aggregator_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class StrategyContext:
    """What the worker tells its strategy once, before the first round.

    Attributes
    ----------
    trainer_id : int
        The trainer's id on chain.
    seed : int
        A seed common to the network (derived from the root's CID), from which every
        strategy-specific initialisation is derived, so that anybody can rebuild it.
    initial_weights : Callable[[int], Any]
        ``seed → state dict`` of a freshly initialised model of the network's
        architecture (deterministic: the same seed gives the same bits everywhere).
    validation_loss : Callable[[Any], float]
        ``state dict → loss`` on the trainer's selection split.
    validation_metric : Callable[[Any], float], optional
        ``state dict → selection metric`` on the same split (higher is better: what
        Algorithm 1 scores candidates by).
    model_info, update_info : Callable, optional
        ``key → ModelInfo`` and ``update id → UpdateInfo``: what the chain recorded
        (``KeyError`` for what it did not).
    models_of_round : Callable[[int], list], optional
        ``round → keys`` of the models created in that round, in creation order.
    model_weights : Callable[[Any], Any], optional
        ``key → state dict`` of a model, recomputed from its updates.
    update_vector : Callable[[int], numpy.ndarray], optional
        ``update id → flattened weights`` (``LookupError`` when they cannot be had).
    fisher_diagonal : Callable[[Any], dict], optional
        ``state dict → {parameter name: tensor}``, the diagonal of the Fisher
        information of those weights on (at most 256 of) the trainer's training samples
        (:mod:`mcfl_chain.algorithms.ewc`: a classifier's over its own prediction).
    train : Callable, optional
        ``(state dict, penalty or None, epochs or None) → state dict``: those weights
        trained on the trainer's training split with the network's optimiser settings
        (epochs None: the network's epochs per round), on the trainer's compute, for
        models that stay off chain (a personal model, a fine-tuned one).
    calibrate : Callable, optional
        ``(state dict, solver) → state dict``: a classifier's weights with the output
        bias shifted to the trainer's own label mix, fitted on its training split by
        that solver (:mod:`mcfl_chain.algorithms.calibration`); an autoencoder's
        unchanged.

    The optional views are None where nobody provides them (unit tests); a strategy
    that needs one says so through :meth:`need`.
    """

    trainer_id: int
    seed: int
    initial_weights: Callable[[int], Any]
    validation_loss: Callable[[Any], float]
    validation_metric: Callable[[Any], float] | None = None
    model_info: Callable[[Any], ModelInfo] | None = None
    update_info: Callable[[int], UpdateInfo] | None = None
    models_of_round: Callable[[int], list[Any]] | None = None
    model_weights: Callable[[Any], Any] | None = None
    update_vector: Callable[[int], np.ndarray] | None = None
    fisher_diagonal: Callable[[Any], dict[str, Any]] | None = None
    train: Callable[[Any, Any, int | None], Any] | None = None
    calibrate: Callable[[Any, str], Any] | None = None
    chance_metric: float | None = None

    def need(self, view: str) -> Callable[..., Any]:
        """The optional view named ``view``.

        Raises
        ------
        RuntimeError
            If the worker (or the test) building this context did not provide it.
        """
        value = getattr(self, view)
        if value is None:
            raise RuntimeError(
                f"this strategy needs the context's {view!r} view, which whoever built the "
                f"StrategyContext did not provide"
            )
        return value  # type: ignore[no-any-return]


def own_branch_seed(seed: int, trainer_id: int) -> int:
    """The initialisation seed of trainer ``trainer_id``'s own branch in a network
    seeded ``seed`` (:attr:`StrategyContext.seed`)."""
    return (seed * 1_000_003 + 2 * trainer_id + 1) % 2**63


class Strategy(ABC):
    """A trainer's rules for choosing models to train and updates to aggregate.

    The constructor takes the strategy's options (:meth:`declared_options`) by name.
    """

    name: str = ""
    context: StrategyContext | None = None
    defence: Defence | None = None
    """A robust selection rule applied to the updates :meth:`choose_updates` keeps, or an
    aggregation rule aggregating them (None: none); :func:`make_strategy` sets it."""

    @property
    def aggregation_rule(self) -> AggregationRule | None:
        """The defence when it is an aggregation rule (None: the network's default)."""
        return self.defence if isinstance(self.defence, AggregationRule) else None

    round: int | None = None
    """The round being played, as :meth:`begin_round` last said (None before)."""

    own_lineage_only: bool = False
    """True when :meth:`choose_models` takes the trainer's own model whenever one is a
    candidate (local training): the worker then offers it only those, and neither
    fetches nor scores peers' models it has no use for."""

    def __init__(self, **options: Any) -> None:
        """Set the options given; the others keep their declared defaults.

        Raises
        ------
        ValueError
            For an option this strategy does not declare, or a value it refuses.
        """
        declared = {option.name: option for option in self.declared_options()}
        unknown = sorted(set(options) - set(declared))
        if unknown:
            raise ValueError(
                f"{type(self).__name__} has no option {', '.join(unknown)}; its options: "
                f"{', '.join(declared) or 'none'}"
            )
        for key, value in options.items():
            option = declared[key]
            self.__dict__[option.attribute] = option.spec.convert(value)

    @classmethod
    def declared_options(cls) -> tuple[StrategyOption[Any], ...]:
        """The options of this strategy, inherited ones first, in declaration order."""
        found: dict[str, StrategyOption[Any]] = {}
        for klass in reversed(cls.__mro__):
            for value in vars(klass).values():
                if isinstance(value, StrategyOption):
                    found[value.attribute] = value
        return tuple(found.values())

    def __repr__(self) -> str:
        values = (f"{o.name}={getattr(self, o.attribute)!r}" for o in self.declared_options())
        return f"{type(self).__name__}({', '.join(values)})"

    def bind(self, context: StrategyContext) -> None:
        """Receive the trainer's context (the worker calls this once, before any round)."""
        self.context = context

    def _context(self) -> StrategyContext:
        if self.context is None:
            raise RuntimeError(f"{type(self).__name__}: bind() a StrategyContext first")
        return self.context

    def begin_round(self, round_: int) -> None:
        """The worker is about to play round ``round_`` (called at the start of each
        phase, before any other call for it). Default: remembered in :attr:`round`."""
        self.round = round_

    def merges(self, parents: Sequence[K]) -> list[tuple[K, ...]]:
        """How the parents returned by :meth:`aggregate_on` are aggregated: each tuple
        is one aggregation, a merge when it holds several parents (the updates of all of
        them averaged into one model). Default: one aggregation per parent."""
        return [(parent,) for parent in parents]

    def regulariser(self, parent: K) -> Callable[[Any], Any] | None:
        """A penalty ``model → scalar tensor`` added to the training loss of this round's
        update on ``parent``, or None (default) for plain training."""
        return None

    def carried_models(self, round_: int) -> list[Any]:
        """Models appended before the previous round that this strategy offers as
        candidates in ``round_`` besides the round's own (the previous round's models):
        IFCA's clusters nobody chose lately. The contracts accept a proposal on any
        model that exists. Default: none."""
        return []

    def starting_weights(self) -> Any | None:
        """Weights to train from when the candidate is the root (the network's first
        round): None trains the root's own weights, the shared start."""
        return None

    def aggregate_on(self, trained: Sequence[K], updates: Mapping[K, int] | None = None) -> list[K]:
        """Of the parents trained this round (best-ranked first), those to aggregate
        on. ``updates`` gives this trainer's update id on each of them, for a strategy
        that weighs what training gave (None where nobody knows them: unit tests).
        Default: every one."""
        return list(trained)

    def personalise(self, weights: Any) -> Any:
        """This trainer's version of a model's weights: what it trains from and what it
        is scored by (candidates, its aggregations). Default: the weights themselves;
        FACADE: with the head of lowest loss on the trainer's selection split."""
        return weights

    def scored(self, weights: Any) -> Any:
        """The version of ``weights`` whose figure on the selection split stands for them
        (every candidate's score, the context's ``validation_metric`` and
        ``validation_loss``), without changing what is trained or aggregated. Default:
        the weights themselves; MCFL-plus with ``plus_calibrate``: with the output bias
        fitted to the trainer's label mix."""
        return weights

    def deployed(self, weights: Any) -> Any:
        """The model this trainer deploys for one of its aggregations (``weights``, its
        own version of it: :meth:`personalise`): what its selection and test figures
        are of. Called once per aggregation a round, after it. Default: the weights
        themselves; Ditto: the trainer's personal model, FedAvg-FT: the weights
        fine-tuned (off chain both, through the context's ``train`` view)."""
        return weights

    def personal_labels(self, weights: Any) -> dict[str, Any]:
        """What the metrics say of this trainer's version of a model (the output of
        :meth:`personalise`), e.g. FACADE's ``{"head": 1}``. Default: nothing."""
        return {}

    def model_heads(self) -> int | None:
        """The heads the network's model must have for this strategy (FACADE: k, an
        ``<arch>-heads<k>`` architecture); None: any model."""
        return None

    @abstractmethod
    def choose_models(self, candidates: Sequence[Candidate[K]]) -> list[K]:
        """Keys of the candidate models to train this round, in training order."""

    @abstractmethod
    def choose_updates(
        self,
        own: K,
        vectors: Mapping[K, np.ndarray],
        parent: np.ndarray | None = None,
        *,
        first_round: bool = False,
    ) -> list[K]:
        """Keys of the updates to aggregate (own included), sorted ascending.

        Parameters
        ----------
        own : K
            The trainer's own update.
        vectors : Mapping[K, numpy.ndarray]
            Every update on the parent, own included, as flattened weights
            (:func:`~mcfl_chain.algorithms.divergence.flatten_state`).
        parent : numpy.ndarray, optional
            The parent model's flattened weights, for rules that compare update deltas.
        first_round : bool
            Whether the parent is the root (updates may then start from other weights
            than the parent's: :meth:`starting_weights`).
        """

    def select_updates(
        self,
        own: K,
        vectors: Mapping[K, np.ndarray],
        parent: np.ndarray | None = None,
        *,
        first_round: bool = False,
    ) -> list[K]:
        """The updates this trainer aggregates: :meth:`choose_updates`, then the
        :attr:`defence` (if it is a selection rule) over the updates it kept; sorted
        ascending, ``own`` among them. The worker calls this one."""
        kept = self.choose_updates(own, vectors, parent, first_round=first_round)
        if not isinstance(self.defence, SelectionRule) or len(kept) <= 1:
            return kept
        return self.defence.select(own, {key: vectors[key] for key in kept}, parent)


STRATEGIES: dict[str, type[Strategy]] = {}
"""Registry: strategy name → class."""

S = TypeVar("S", bound=type[Strategy])


def register_strategy(name: str) -> Callable[[S], S]:
    """Class decorator registering a strategy under ``name``."""

    def decorate(cls: S) -> S:
        cls.name = name
        STRATEGIES[name] = cls
        return cls

    return decorate


def _accepted_options(cls: type[Strategy]) -> set[str]:
    return {option.name for option in cls.declared_options()}


def strategy_options() -> tuple[StrategyOption[Any], ...]:
    """The options of every registered strategy, by strategy name then declaration.

    Strategies that declare an option of the same name share it (IFCA's and FACADE's
    ``clusters``, k): one option, whose help joins theirs.

    Raises
    ------
    TypeError
        If two strategies declare one name with different types, defaults or checks.
    """
    merged: dict[str, StrategyOption[Any]] = {}
    owners: dict[str, str] = {}
    for name in sorted(STRATEGIES):
        for option in STRATEGIES[name].declared_options():
            known = merged.get(option.name)
            if known is None:
                merged[option.name], owners[option.name] = option, name
                continue
            if not known.same_as(option):
                raise TypeError(
                    f"strategies {owners[option.name]!r} and {name!r} both declare the "
                    f"option {option.name!r}, differently: give one of them another name"
                )
            if option.spec.help not in known.spec.help:
                spec = known.spec
                shared = StrategyOption(
                    spec.kind,
                    spec.default,
                    f"{spec.help} {option.spec.help}",
                    choices=spec.choices,
                    minimum=spec.minimum,
                    name=spec.name,
                    mixed=known.mixed,
                )
                merged[option.name] = shared
    return tuple(merged.values())


def make_strategy(name: str, defence: Defence | None = None, **options: Any) -> Strategy:
    """Instantiate a registered strategy by name, with a defence if given.

    Options that another registered strategy declares but this one does not (e.g.
    ``tolerance`` for ``"fedavg"``) are dropped, so a command line can pass its strategy
    options whatever the strategy chosen; an option no strategy accepts is an error.

    Parameters
    ----------
    name : str
        ``"mcfl"`` or ``"fedavg"`` (or any registered name).
    defence : SelectionRule or AggregationRule, optional
        A robust selection rule over the updates the strategy keeps
        (:meth:`Strategy.select_updates`), e.g. ``parse_defence("multi-krum")``, or an
        aggregation rule for them (:attr:`Strategy.aggregation_rule`), e.g.
        ``parse_defence("median")``.
    **options
        Constructor options, e.g. ``tolerance=2.0, divergence="cosine"`` for MCFL.

    Raises
    ------
    ValueError
        If the name is unknown, an option is unknown to every strategy, or a value is
        refused by the strategy.
    """
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}")
    known = set().union(*(_accepted_options(cls) for cls in STRATEGIES.values()))
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(
            f"strategy {name!r}: unknown options {unknown}; strategies accept {sorted(known)}"
        )
    cls = STRATEGIES[name]
    accepted = _accepted_options(cls)
    strategy = cls(**{key: value for key, value in options.items() if key in accepted})
    strategy.defence = defence
    return strategy
