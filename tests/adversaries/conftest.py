"""Small hand-made trainer data and publications for the adversary tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pytest
import torch

from mcfl_chain.adversaries import Publication
from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.scenario import TrainerData, TrainerDataSpec
from mcfl_chain.storage.cid import cid_for_bytes

ARCH = "lenet5"


def make_trainer_data(n_train: int = 20, num_classes: int = 10) -> TrainerData:
    """``n_train`` grey images (value 0.5) labelled 0, 1, 2, … cyclically; 5 test images."""
    labels = torch.arange(n_train) % num_classes
    return TrainerData(
        spec=TrainerDataSpec("digits", seed=1),
        num_classes=num_classes,
        train_images=torch.full((n_train, 1, 28, 28), 0.5),
        train_y=labels,
        val_images=torch.zeros(2, 1, 28, 28),
        val_y=torch.tensor([0, 1]),
        test_images=torch.zeros(5, 1, 28, 28),
        test_y=torch.tensor([0, 1, 2, 3, 4]),
        indices=np.arange(n_train + 7),
    )


@pytest.fixture
def trainer_data() -> TrainerData:
    return make_trainer_data()


Store = dict[str, bytes]


@pytest.fixture
def publish() -> Callable[..., tuple[Publication, Store]]:
    """``publish(weights, parent, peers=None, trainer="0xabc", round_peers=None)`` ->
    (publication, store); ``peers`` are the previous round's updates, ``round_peers``
    this round's on the same parent."""

    def build(
        weights: dict[str, torch.Tensor],
        parent: dict[str, torch.Tensor],
        peers: Mapping[int, dict[str, torch.Tensor]] | None = None,
        trainer: str = "0xabc",
        round_peers: Mapping[int, dict[str, torch.Tensor]] | None = None,
    ) -> tuple[Publication, Store]:
        store: Store = {}

        def put(blob: bytes) -> str:
            cid = cid_for_bytes(blob)
            store[cid] = blob
            return cid

        publication = Publication(
            weights=weights,
            parent_weights=parent,
            trainer=trainer,
            encode=lambda state: encode_weights(ARCH, state),
            put=put,
            peer_updates=lambda: dict(peers or {}),
            round_updates=lambda: dict(round_peers or {}),
        )
        return publication, store

    return build
