"""LocalCompute's copies of data on its device (the meta device stands for a GPU: it
moves and shapes tensors without computing)."""

from __future__ import annotations

import torch

from mcfl_chain.compute.local import LocalCompute
from mcfl_chain.learning.masks import Partition
from mcfl_chain.learning.scenario import SharedImages, TrainerDataSpec, build_trainer_data


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
