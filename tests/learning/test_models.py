"""Model registry, output shapes and the seeded initialisation rule."""

from __future__ import annotations

import math

import pytest
import torch

from mcfl_chain.learning.models import ARCHITECTURES, MaxPool2x2, create_model, model_kind


def test_registry_and_kinds() -> None:
    assert {name: arch.kind for name, arch in ARCHITECTURES.items()} == {
        "lenet5": "classifier",
        "lenet-light": "classifier",
        "lenet-cae": "autoencoder",
    }


@pytest.mark.parametrize(
    ("arch", "output", "conv_channels"),
    [
        ("lenet5", (5, 10), (6, 16)),
        ("lenet-light", (5, 10), (3, 9)),
        ("lenet-cae", (5, 1, 28, 28), (6, 16)),
    ],
)
def test_shapes(arch: str, output: tuple[int, ...], conv_channels: tuple[int, int]) -> None:
    model = create_model(arch, seed=0)
    out = model(torch.rand(5, 1, 28, 28))
    assert tuple(out.shape) == output
    convs = [m.out_channels for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert tuple(convs[:2]) == conv_channels
    assert model_kind(model) == ARCHITECTURES[arch].kind


@pytest.mark.parametrize("arch", ["lenet5", "lenet-cae"])
def test_pooling_before_relu_trains_bit_for_bit_as_the_textbook_order(arch: str) -> None:
    # The blocks pool before their ReLU (faster); the textbook LeNet applies ReLU first.
    fast, textbook = create_model(arch, seed=3), create_model(arch, seed=3)
    blocks = getattr(textbook, "encoder", None) or textbook.features
    for conv in (0, 3):
        assert isinstance(blocks[conv + 1], torch.nn.MaxPool2d)
        blocks[conv + 1], blocks[conv + 2] = blocks[conv + 2], blocks[conv + 1]
    assert isinstance(blocks[1], torch.nn.ReLU) and isinstance(blocks[2], torch.nn.MaxPool2d)
    x = torch.randn(16, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    x[:4] = 0.0  # all-zero pooling windows: ties, where the two orders could route apart
    for model in (fast, textbook):
        optimiser = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(3):
            optimiser.zero_grad()
            model(x).square().mean().backward()
            optimiser.step()
    with torch.no_grad():
        assert torch.equal(fast(x), textbook(x))
    for (name, a), b in zip(fast.state_dict().items(), textbook.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
def test_scoring_pool_equals_max_pool2d(layout: torch.memory_format) -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-2, 3, (4, 3, 8, 8), generator=g).float()  # many ties
    x[0] = torch.randn(3, 8, 8, generator=g)
    x[1, 0, :2, :2] = torch.tensor([[-0.0, 0.0], [0.0, 0.0]])  # ties of signed zeros: equal
    x[1, 1, :2, :2] = torch.tensor([[0.0, -0.0], [-0.0, -0.0]])
    x[2, 0, 0, 1] = x[2, 1, 3, 3] = float("nan")
    x[2, 2, 4, 4], x[3, 0] = float("inf"), -float("inf")
    x = x.contiguous(memory_format=layout)
    expected = torch.nn.functional.max_pool2d(x, 2)
    with torch.no_grad():
        got = MaxPool2x2()(x)
    assert torch.equal(got.isnan(), expected.isnan()) and int(got.isnan().sum()) == 2
    assert torch.equal(got.nan_to_num(7.0), expected.nan_to_num(7.0))
    odd = torch.randn(1, 1, 5, 6, generator=g)  # falls back to max_pool2d (floor of 5/2)
    with torch.no_grad():
        assert torch.equal(MaxPool2x2()(odd), torch.nn.functional.max_pool2d(odd, 2))


@pytest.mark.parametrize("arch", ["lenet5", "lenet-cae"])
def test_models_score_as_with_max_pool2d(arch: str) -> None:
    fast, plain = create_model(arch, seed=4), create_model(arch, seed=4)
    pools = [name for name, module in plain.named_modules() if isinstance(module, MaxPool2x2)]
    assert len(pools) == 2  # both of LeNet's blocks
    for name in pools:
        parent, _, index = name.rpartition(".")
        plain.get_submodule(parent)[int(index)] = torch.nn.MaxPool2d(2)
    assert not any(isinstance(m, MaxPool2x2) for m in plain.modules())
    x = torch.rand(64, 1, 28, 28, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        assert torch.equal(fast(x), plain(x))


def test_autoencoder_output_is_in_unit_range() -> None:
    out = create_model("lenet-cae", seed=1)(torch.rand(3, 1, 28, 28))
    assert 0.0 <= float(out.min()) and float(out.max()) <= 1.0


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_same_seed_same_weights_other_seed_other_weights(arch: str) -> None:
    a, b, c = (create_model(arch, s).state_dict() for s in (7, 7, 8))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_initialisation_does_not_touch_torch_global_random_state() -> None:
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    create_model("lenet5", 3)
    assert torch.equal(torch.rand(3), expected)


def test_initialisation_bounds_follow_fan_in() -> None:
    state = create_model("lenet5", 0).state_dict()
    # conv1: fan_in 1·5·5 → bound 0.2; fc1: fan_in 400 → bound 0.05.
    conv1 = state["features.0.weight"]
    fc1 = state["classifier.1.weight"]
    assert float(conv1.abs().max()) <= 0.2 and float(conv1.abs().max()) > 0.19
    assert float(fc1.abs().max()) <= 0.05 and float(fc1.abs().max()) > 0.049
    assert math.isclose(float(fc1.std()), 0.05 / math.sqrt(3), rel_tol=0.02)


def test_unknown_architecture_is_reported() -> None:
    with pytest.raises(ValueError, match="known: lenet-cae, lenet-light, lenet5"):
        create_model("resnet", 0)


def test_a_foreign_module_has_no_kind() -> None:
    with pytest.raises(ValueError, match="has no kind"):
        model_kind(torch.nn.Linear(2, 2))
