"""Sybils that carry an attack: the popularity of :mod:`.sybil` with the poison of
:mod:`.backdoor` or :mod:`.sign_flip`.

A coalition of ``k`` identities trains one model and aggregates only its own updates,
so that model's popularity is ``k`` and Algorithm 1's ``sqrt(popularity)`` bonus draws
honest trainers onto it (:class:`~.sybil.Sybil`); its updates are those of the payload:

- ``sybil-backdoor``: trained on data carrying the backdoor's trigger
  (:class:`~.backdoor.Backdoor`), so the popular model stays accurate on clean images
  while it classifies triggered ones as ``target``;
- ``sybil-sign-flip``: the honest step reversed and scaled (:class:`~.sign_flip.SignFlip`).

**Knows**: what the chain shows every trainer (each candidate's proposers and
popularity), its coalition. **Controls**: its identities' model and update choices,
and their proposals (through the payload's data or publication). The payload's
parameters are this adversary's, besides ``coalition``.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcfl_chain.adversaries.backdoor import TRIGGER_SIZE, TRIGGER_VALUE, Backdoor
from mcfl_chain.adversaries.base import register_adversary
from mcfl_chain.adversaries.sign_flip import SignFlip
from mcfl_chain.adversaries.sybil import Sybil


@register_adversary("sybil-backdoor")
class SybilBackdoor(Sybil):
    """A Sybil identity whose updates carry a backdoor.

    Parameters
    ----------
    coalition : Iterable[str] or str, default ()
        The coalition's addresses (:class:`~.sybil.Sybil`).
    target, fraction, size, value
        The backdoor's (:class:`~.backdoor.Backdoor`).
    """

    def __init__(
        self,
        coalition: Iterable[str] | str = (),
        target: int = 0,
        fraction: float = 0.2,
        size: int = TRIGGER_SIZE,
        value: float = TRIGGER_VALUE,
    ) -> None:
        super().__init__(coalition, payload=Backdoor(target, fraction, size, value))


@register_adversary("sybil-sign-flip")
class SybilSignFlip(Sybil):
    """A Sybil identity whose updates are sign-flipped.

    Parameters
    ----------
    coalition : Iterable[str] or str, default ()
        The coalition's addresses (:class:`~.sybil.Sybil`).
    scale : float, default 1.0
        The sign flip's ``λ`` (:class:`~.sign_flip.SignFlip`).
    """

    def __init__(self, coalition: Iterable[str] | str = (), scale: float = 1.0) -> None:
        super().__init__(coalition, payload=SignFlip(scale))
