"""FACADE's model: ``<base>-heads<k>``, a LeNet core with k heads and a head choice."""

from __future__ import annotations

import pytest
import torch

from mcfl_chain.algorithms import facade
from mcfl_chain.learning.codec import RefusedValuesError, decode_weights, encode_weights
from mcfl_chain.learning.descriptor import Task, TaskError
from mcfl_chain.learning.fingerprint import model_fingerprint
from mcfl_chain.learning.models import (
    ARCHITECTURES,
    HEAD_CHOICE,
    create_model,
    get_architecture,
    is_architecture,
    multi_head_arch,
)
from mcfl_chain.learning.scenario import TrainerData, TrainerDataSpec
from mcfl_chain.learning.training import train


def test_the_name_says_the_base_and_the_number_of_heads() -> None:
    # Execute
    architecture = get_architecture(multi_head_arch("lenet5", 3))

    # Assert
    assert architecture.name == "lenet5-heads3" and architecture.heads == 3
    assert architecture.aggregation == "per-head-fedavg" and architecture.kind == "classifier"
    assert is_architecture("lenet-light-heads2") and not is_architecture("lenet-cae-heads2")
    assert not is_architecture("lenet5-heads0") and not is_architecture("lenet5-heads17")
    assert "lenet5-heads3" not in ARCHITECTURES  # built on demand, not registered
    with pytest.raises(ValueError, match="'lenet-cae' has no multi-head version"):
        multi_head_arch("lenet-cae", 2)
    with pytest.raises(ValueError, match="1 to 16 heads, not 0"):
        multi_head_arch("lenet5", 0)


def test_layout_core_heads_and_choice_under_the_names_facade_reads() -> None:
    # Prepare
    model = create_model("lenet5-heads2", seed=4)

    # Execute
    state = model.state_dict()

    # Assert: the core is LeNet's up to the 84-unit layer; each head a Linear 84→10
    assert facade.HEAD_CHOICE == HEAD_CHOICE
    assert facade.head_count(state) == 2 and facade.head_choice(state) == 0
    assert state["heads.0.weight"].shape == (10, 84) and state["heads.1.bias"].shape == (10,)
    assert "classifier.3.weight" in state and "classifier.5.weight" not in state
    assert not torch.equal(state["heads.0.weight"], state["heads.1.weight"])
    assert model(torch.zeros(3, 1, 28, 28)).shape == (3, 10)
    # the same seed gives the same heads, and the fingerprint tells k apart
    again = create_model("lenet5-heads2", seed=4).state_dict()
    assert all(torch.equal(state[name], again[name]) for name in state)
    assert model_fingerprint(model) != model_fingerprint(create_model("lenet5-heads3", 4))


def _data(n: int = 64) -> TrainerData:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(n, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (n,), generator=generator)
    empty_x, empty_y = x[:0], y[:0]
    return TrainerData(
        spec=TrainerDataSpec("digits"),
        num_classes=10,
        train_images=x,
        train_y=y,
        val_images=empty_x,
        val_y=empty_y,
        test_images=empty_x,
        test_y=empty_y,
        indices=torch.arange(n).numpy(),
    )


def test_training_moves_the_core_and_the_chosen_head_only() -> None:
    # Prepare: predict (and so train) with head 1
    model = create_model("lenet5-heads3", seed=1)
    model.load_state_dict(facade.with_head(model.state_dict(), 1))
    before = {name: t.clone() for name, t in model.state_dict().items()}

    # Execute
    train(model, _data(), epochs=1, batch_size=16, lr=0.05)

    # Assert
    after = model.state_dict()
    for name in before:
        moved = not torch.equal(before[name], after[name])
        expected = name.startswith(("features.", "classifier.", "heads.1."))
        assert moved == expected, name


def test_a_blob_whose_choice_names_no_head_is_refused() -> None:
    # Prepare
    state = create_model("lenet5-heads2", seed=0).state_dict()
    state[HEAD_CHOICE] = torch.tensor(2, dtype=torch.int64)
    blob = encode_weights("lenet5-heads2", state)

    # Execute / Assert
    with pytest.raises(
        RefusedValuesError, match="head_choice is 2, but the model's heads are 0 to 1"
    ):
        decode_weights(blob, "lenet5-heads2")
    state[HEAD_CHOICE] = torch.tensor(1, dtype=torch.int64)
    decoded = decode_weights(encode_weights("lenet5-heads2", state), "lenet5-heads2")
    assert int(decoded[HEAD_CHOICE]) == 1


def test_task_descriptors_name_multi_head_architectures() -> None:
    assert Task.parse("lenet5-heads2:fashion-mnist").arch == "lenet5-heads2"
    assert Task.parse("lenet5-heads2:fashion-mnist").registered
    with pytest.raises(TaskError, match="<base>-heads<k> for base lenet-light or lenet5"):
        Task.parse("lenet5-heads99:fashion-mnist")
