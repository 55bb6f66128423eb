"""The small interface a misbehaving trainer implements, and the adversary registry.

The worker plays the honest protocol; an adversary replaces only the steps it corrupts,
through hooks whose defaults are honest, so an adversary overrides just the ones it
needs. Where the worker calls each hook:

=====================  ==========================================================
hook                   when the worker calls it, and with what
=====================  ==========================================================
``training_data``      once, before the first round:
                       ``data = adversary.training_data(data, rng)`` with
                       ``rng = numpy.random.default_rng(data.spec.seed)``; the
                       result is trained on; models are still scored and
                       reported on the honest validation and test splits.
``trains``             before training a parent: when False, skip the training
                       and pass the parent's weights (the strategy's starting
                       weights on the root) as ``Publication.weights``.
``publish_update``     after training, instead of storing the weights: returns the
                       CID to ``propose`` (:class:`Publication`). An adversary
                       that calls ``Publication.round_updates`` makes the worker
                       wait, right there, for the round's other proposals
                       (:class:`Publication`).
``declared_samples``   before ``propose``:
                       ``num_samples = adversary.declared_samples(honest, cap)``
                       with ``cap`` the network's bound (``Updates.maxSamples``,
                       set at deployment); the result is cut to ``1 … cap``.
``choose_models``      after the strategy's Algorithm 1:
                       ``chosen = adversary.choose_models(views, chosen)``, one
                       :class:`CandidateView` per scored candidate.
``choose_updates``     after the strategy's Algorithm 2 (and its defence):
                       ``selected = adversary.choose_updates(own, selected,
                       proposers)`` with ``proposers`` = {usable update id →
                       proposer address}; the worker submits the result, cut
                       to usable ids with ``own`` added if left out.
=====================  ==========================================================

Adding an adversary means adding a module that subclasses :class:`Adversary` and
decorates it with :func:`register_adversary`; the worker and the CLI pick it up by name,
with its constructor's keyword arguments as parameters (:func:`make_adversary`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from mcfl_chain.learning.scenario import TrainerData

StateDict = dict[str, torch.Tensor]
K = TypeVar("K", bound=Hashable)


def _no_peer_updates() -> Mapping[int, StateDict]:
    return {}


def _no_round_updates() -> Mapping[int, StateDict]:
    return {}


@dataclass(frozen=True)
class Publication:
    """What an honest trainer would publish for one trained update, and how to publish.

    Attributes
    ----------
    weights
        The honestly trained weights (the parent's when the adversary does not train).
    parent_weights
        The weights of the model they were trained from.
    trainer
        The trainer's address (adversaries make their fakes unique with it).
    encode
        ``state -> blob``: the network's weights codec for the task's architecture.
    put
        ``blob -> CID``: stores a blob in the trainer's storage.
    peer_updates
        ``() -> {update id: weights}``: the usable updates other trainers proposed in
        the previous round (empty in round 0). Called only by adversaries that copy a
        peer, so an honest worker never fetches them.
    round_updates
        ``() -> {update id: weights}``: the usable updates proposed *in this round* on
        the same parent by every trainer but this one and its :attr:`Adversary.coalition`.
        On chain an update is seen only once proposed, so the first call waits until
        every member of the PROPOSE phase outside the coalition has voted (their
        proposals are then on chain), or until shortly before the phase deadline,
        whichever comes first; the updates proposed by then are returned. Called only
        by the adaptive attacks (:mod:`~mcfl_chain.adversaries.round_reader`): an
        honest worker never waits.
    """

    weights: StateDict
    parent_weights: StateDict
    trainer: str
    encode: Callable[[StateDict], bytes]
    put: Callable[[bytes], str]
    peer_updates: Callable[[], Mapping[int, StateDict]] = _no_peer_updates
    round_updates: Callable[[], Mapping[int, StateDict]] = _no_round_updates


@dataclass(frozen=True)
class CandidateView(Generic[K]):
    """What the chain tells of one candidate model, for colluding model choices.

    Attributes
    ----------
    key : K
        The model's id.
    metric : float
        Its selection metric on the trainer's selection (validation) split.
    popularity : int
        How many times aggregators submitted it.
    proposers : frozenset[str]
        Lower-case addresses of the proposers of its updates (empty for the root).
    """

    key: K
    metric: float
    popularity: int
    proposers: frozenset[str] = frozenset()


class Adversary:
    """A trainer that follows the protocol's calls but corrupts some of its steps.

    Every hook defaults to the honest behaviour.
    """

    name: str = ""
    trains: bool = True
    """Whether the worker should train at all (a free rider does not)."""
    coalition: frozenset[str] = frozenset()
    """Lower-case addresses of the identities it colludes with, itself included (empty:
    it acts alone); the worker leaves them out of :attr:`Publication.round_updates`."""

    def training_data(self, data: TrainerData, rng: np.random.Generator) -> TrainerData:
        """The data the trainer trains on (honest: ``data`` itself)."""
        return data

    def publish_update(self, publication: Publication) -> str:
        """Store this adversary's version of an update; return the CID to propose
        (honest: the trained weights)."""
        return publication.put(publication.encode(publication.weights))

    def declared_samples(self, honest: int, cap: int) -> int:
        """The sample count to ``propose`` (honest: the real training-set size)."""
        return honest

    def choose_models(self, candidates: Sequence[CandidateView[K]], honest: Sequence[K]) -> list[K]:
        """The models to train, given the strategy's choice ``honest`` (honest: it)."""
        return list(honest)

    def choose_updates(self, own: K, honest: Sequence[K], proposers: Mapping[K, str]) -> list[K]:
        """The update ids to aggregate, ascending with ``own`` among them, given the
        strategy's choice ``honest`` and every usable update's proposer (honest: it)."""
        return sorted(honest)  # type: ignore[type-var]

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


ADVERSARIES: dict[str, type[Adversary]] = {}
"""Registry: adversary name → class."""

A = TypeVar("A", bound=type[Adversary])


def register_adversary(name: str) -> Callable[[A], A]:
    """Class decorator registering an adversary under ``name``."""

    def decorate(cls: A) -> A:
        cls.name = name
        ADVERSARIES[name] = cls
        return cls

    return decorate


def adversary_parameters(name: str) -> list[str]:
    """The parameters a registered adversary accepts (its constructor's keywords)."""
    signature = inspect.signature(ADVERSARIES[name].__init__)
    return [p for p in signature.parameters if p not in ("self", "args", "kwargs")]


def make_adversary(name: str, **params: Any) -> Adversary:
    """Instantiate a registered adversary by name, e.g. ``make_adversary("sign-flip",
    scale=4.0)``.

    Raises
    ------
    ValueError
        If no adversary has that name, it has no such parameter, or it refuses a value.
    """
    if name not in ADVERSARIES:
        raise ValueError(f"unknown adversary {name!r}; known: {', '.join(sorted(ADVERSARIES))}")
    accepted = adversary_parameters(name)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(
            f"adversary {name!r} has no parameter {', '.join(unknown)}; "
            f"it accepts: {', '.join(accepted) or 'none'}"
        )
    return ADVERSARIES[name](**params)
