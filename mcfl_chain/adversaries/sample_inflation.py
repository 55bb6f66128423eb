"""Sample inflation: the trainer trains honestly but declares the network's maximum sample
count, so that sample-weighted FedAvg gives its update almost all the weight."""

from __future__ import annotations

from mcfl_chain.adversaries.base import Adversary, register_adversary


@register_adversary("sample-inflation")
class SampleInflation(Adversary):
    """Declares ``cap`` samples, the most the contract accepts, for every update."""

    def declared_samples(self, honest: int, cap: int) -> int:
        return cap
