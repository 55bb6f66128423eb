"""What every adaptive attack shares: the round's updates read through the publication,
the honest update when there is nothing to read, distinct CIDs within a coalition."""

from __future__ import annotations

import numpy as np
import pytest

from mcfl_chain.adversaries import ADVERSARIES, adversary_parameters, make_adversary
from mcfl_chain.adversaries.round_reader import RoundReader
from mcfl_chain.algorithms.divergence import flatten_state, unflatten_state
from mcfl_chain.learning.codec import decode_weights, encode_weights
from mcfl_chain.learning.models import create_model

ARCH = "lenet5"
ADAPTIVE = ["alie", "ipm", "min-max", "min-sum", "filter-aware"]


def test_the_adaptive_attacks_are_registered_as_colluders() -> None:
    for name in ADAPTIVE:
        assert issubclass(ADVERSARIES[name], RoundReader)
        # a coalition parameter: the simulator tells each member its colluders
        assert adversary_parameters(name)[0] == "coalition"


@pytest.mark.parametrize("name", ADAPTIVE)
def test_with_nothing_to_read_the_honest_update_is_published(publish, name) -> None:
    trained = create_model(ARCH, seed=1).state_dict()
    publication, store = publish(trained, create_model(ARCH, seed=0).state_dict())
    cid = make_adversary(name).publish_update(publication)
    assert store[cid] == encode_weights(ARCH, trained)


@pytest.mark.parametrize("name", ADAPTIVE)
def test_coalition_members_publish_nearly_the_same_update_under_distinct_cids(
    publish, name
) -> None:
    # Prepare
    parent = create_model(ARCH, seed=0).state_dict()
    honest = {uid: create_model(ARCH, seed=uid).state_dict() for uid in (1, 2, 3)}
    members = ["0xA1", "0xA2"]
    cids, vectors = [], []

    # Execute
    for member in members:
        publication, store = publish(parent, parent, trainer=member, round_peers=honest)
        cid = make_adversary(name, coalition="+".join(members)).publish_update(publication)
        cids.append(cid)
        vectors.append(flatten_state(decode_weights(store[cid], ARCH)))

    # Assert: the same crafted vector but for one weight's last bit each
    assert cids[0] != cids[1]
    assert np.count_nonzero(vectors[0] != vectors[1]) <= 2
    assert np.allclose(vectors[0], vectors[1], atol=1e-6)


def test_unflatten_is_the_inverse_of_flatten() -> None:
    state = create_model(ARCH, seed=3).state_dict()
    vector = flatten_state(state)
    rebuilt = unflatten_state(vector, state)
    assert list(rebuilt) == list(state)
    assert all(rebuilt[k].dtype == state[k].dtype for k in state)
    assert all(bool((rebuilt[k] == state[k]).all()) for k in state)
    with pytest.raises(ValueError, match="holds"):
        unflatten_state(vector[:-1], state)
    with pytest.raises(ValueError, match="holds"):
        unflatten_state(np.concatenate([vector, [0.0]]), state)
