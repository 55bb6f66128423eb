"""LocalCompute's copies of data on its device (the meta device stands for a GPU: it
moves and shapes tensors without computing), and its scoring models' layout."""

from __future__ import annotations

import pytest
import torch

from mcfl_chain.compute.local import LocalCompute
from mcfl_chain.learning.masks import Partition
from mcfl_chain.learning.models import create_model, scores_faster_channels_last
from mcfl_chain.learning.scenario import SharedImages, TrainerDataSpec, build_trainer_data
from mcfl_chain.learning.training import evaluate


def test_a_tensor_is_moved_once_and_its_copy_leaves_with_it() -> None:
    compute = LocalCompute("meta")
    kept = torch.ones(3)
    moved = compute.placed(kept)
    assert moved.device.type == "meta" and compute.placed(kept) is moved
    passing = torch.zeros(2)
    compute.placed(passing)
    assert len(compute._on_device) == 2
    del passing  # floats read anew from shared bytes, once: no copy stays behind
    assert len(compute._on_device) == 1


def test_a_hosts_shared_bytes_go_to_the_device_once_for_every_trainer() -> None:
    compute = LocalCompute("meta")
    specs = [
        TrainerDataSpec("fashion-mnist", (Partition(i, 40),), seed=i, n_samples=20)
        for i in range(2)
    ]
    built = [build_trainer_data(spec, shared=True) for spec in specs]  # a host's trainers
    placed = [compute._data(data) for data in built]
    images = [data.train_images for data in placed]
    assert all(isinstance(share, SharedImages) for share in images)
    first, second = images  # type: ignore[misc]
    assert first.pixels is second.pixels and first.pixels.device.type == "meta"
    assert first.rows.device.type == "meta"
    assert placed[0].train_x.shape == (14, 1, 28, 28) and placed[0].train_x.device.type == "meta"


def test_the_packages_lenets_are_scored_with_channels_last_weights_on_the_cpu() -> None:
    compute = LocalCompute("cpu")
    generator = torch.Generator().manual_seed(0)
    x, y = torch.rand(50, 1, 28, 28, generator=generator), torch.randint(0, 10, (50,))
    for arch in ("lenet5", "lenet-cae"):
        model = create_model(arch, seed=1)
        scored = compute.evaluate(arch, model.state_dict(), x, y, model.kind)
        conv = compute._scorers.models[arch].get_submodule(
            "features.3" if arch == "lenet5" else "encoder.3"
        )
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
        plain = evaluate(model, x, y)  # the default layout: the same score to float rounding
        assert scored.accuracy == plain.accuracy
        assert scored.loss == pytest.approx(plain.loss, rel=1e-6)
    assert not scores_faster_channels_last(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3)))
