"""What the adaptive attacks share: the honest updates of the round, read from the chain.

ALIE, inner-product manipulation, min-max, min-sum and the filter-aware attack
(:mod:`.alie`, :mod:`.ipm`, :mod:`.min_max`, :mod:`.filter_aware`) craft their update
from the updates the honest trainers proposed *in the same round on the same parent*:
the papers' omniscient attacker, who sees the benign updates before the aggregation.

**Timing.** On chain an update is visible only once its trainer proposed it, and every
trainer proposes in the same PROPOSE phase. So such an attacker proposes last: the worker
trains it honestly like any trainer, then, when :meth:`RoundReader.publish_update` asks
for :attr:`~.base.Publication.round_updates`, waits until every member of the phase
outside the coalition has voted (a vote and its trainer's proposals are one
transaction, so their updates are then on chain), or until shortly before the phase
deadline if some never vote. It then reads those updates the way a worker reads its
peers' updates to aggregate them: their CIDs from the chain's events, their weights from
the blob store. The phase, which would have ended with the last honest vote, now ends
with the attackers' votes; a deadline only binds if an honest trainer is silent.

**What the attacker knows**: the honest updates proposed on its parent this round, the
parent's weights (the honest steps are measured from the weights it started from: the
parent's, or on the root its strategy's starting weights, which under MCFL's own-branch
start are its own, so that round is no reading of anyone's step; nor does it matter
there, each trainer keeping its own update only), its own coalition (the identities it
controls, from :func:`~mcfl_chain.adversaries.spec.with_coalitions`: its ``m``, the
number of attackers in the formulas; alone, ``m = 1``), and what each attack's docstring
adds.
**What it controls**: the weights of its own proposals. Its sample count stays the
honest one, and the models it trains are its strategy's choice (Algorithm 1 on its own
validation data: it trains where the trainers of its data group train); it aggregates
as an honest trainer does.

With no honest update on its parent to read (a model only the coalition trains), it
publishes its honestly trained update: there is nobody on that parent to deceive. The
members of a coalition craft the same vector from the same updates; each nudges one
weight by one unit in the last place (:func:`~.free_rider.disguised_copy`) so that their
CIDs differ rather than betray them on chain.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from mcfl_chain.adversaries.base import Adversary, Publication
from mcfl_chain.adversaries.free_rider import disguised_copy
from mcfl_chain.algorithms.divergence import flatten_state, unflatten_state


def parse_coalition(coalition: Iterable[str] | str) -> frozenset[str]:
    """Lower-case addresses from an iterable or from one text joined by ``+``."""
    if isinstance(coalition, str):
        coalition = [address.strip() for address in coalition.split("+") if address.strip()]
    return frozenset(address.lower() for address in coalition)


class RoundReader(Adversary):
    """An adversary that publishes an update crafted from the round's honest updates.

    Subclasses implement :meth:`craft`.

    Parameters
    ----------
    coalition : Iterable[str] or str, default ()
        Addresses of every identity of the coalition (this one's included), or one text
        of them joined by ``+``; the simulator fills it.
    """

    def __init__(self, coalition: Iterable[str] | str = ()) -> None:
        self.coalition = parse_coalition(coalition)

    @property
    def attackers(self) -> int:
        """``m``: the identities the attacker controls (1 when it acts alone)."""
        return max(1, len(self.coalition))

    def craft(self, honest: np.ndarray, parent: np.ndarray) -> np.ndarray:
        """The malicious update's flat weights.

        Parameters
        ----------
        honest : numpy.ndarray
            ``k × d``: the honest updates' weights, one row each (ascending update id),
            flattened by :func:`~mcfl_chain.algorithms.divergence.flatten_state`.
        parent : numpy.ndarray
            ``d``: the parent's weights the same way (the honest steps are
            ``honest − parent``).
        """
        raise NotImplementedError

    def publish_update(self, publication: Publication) -> str:
        peers = publication.round_updates()
        if not peers:
            return super().publish_update(publication)
        honest = np.stack([flatten_state(peers[key]) for key in sorted(peers)])
        crafted = self.craft(honest, flatten_state(publication.parent_weights))
        state = unflatten_state(crafted, publication.weights)
        if len(self.coalition) > 1:
            state = disguised_copy(state, publication.trainer)
        return publication.put(publication.encode(state))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(attackers={self.attackers})"
