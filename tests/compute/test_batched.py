"""Batched training and scoring against the per-model ``train`` and ``evaluate``; devices."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import replace

import pytest
import torch
from torch import nn

from mcfl_chain.algorithms.proximal import proximal_penalty
from mcfl_chain.compute import batched
from mcfl_chain.compute.batched import TrainJob, can_batch, evaluate_batched, train_batched
from mcfl_chain.compute.device import DEVICES, platform_record, resolve_device
from mcfl_chain.learning.masks import Partition
from mcfl_chain.learning.models import (
    Architecture,
    create_model,
    register_architecture,
)
from mcfl_chain.learning.scenario import (
    SharedImages,
    TrainerData,
    TrainerDataSpec,
    build_trainer_data,
)
from mcfl_chain.learning.training import Evaluation, TrainReport, evaluate, train

# Parameters agree to ~1e-7 here (the batched kernels only sum in another order); 1e-5
# leaves room for other CPUs' kernels and is still far below one SGD step's size
# (lr × gradient ≈ 1e-3). A GPU's float32 kernels (TF32 off: prepare_device) against the
# CPU's reference get 1e-4, still a tenth of a step.
ATOL = 1e-5
GPU_ATOL = 1e-4


def _atol(device: torch.device) -> float:
    return ATOL if device.type == "cpu" else GPU_ATOL


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    # The machine is shared: two threads fighting other processes are slower than one.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _data(n_train: int, n_val: int, seed: int) -> TrainerData:
    """Random images and labels (the comparison needs no real data, only its shapes)."""
    generator = torch.Generator().manual_seed(seed)
    n = n_train + n_val
    x = torch.rand(n, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (n,), generator=generator)
    return TrainerData(
        spec=TrainerDataSpec("digits"),
        num_classes=10,
        train_images=x[:n_train],
        train_y=y[:n_train],
        val_images=x[n_train:],
        val_y=y[n_train:],
        test_images=x[:0],
        test_y=y[:0],
        indices=torch.arange(n).numpy(),
    )


def _sequential(arch: str, job: TrainJob) -> tuple[dict[str, torch.Tensor], TrainReport]:
    model = create_model(arch, seed=0)
    model.load_state_dict(job.start)
    report = train(
        model,
        job.data,
        job.epochs,
        batch_size=job.batch_size,
        lr=job.lr,
        momentum=job.momentum,
        weight_decay=job.weight_decay,
        seed=job.seed,
        optimiser=job.optimiser,
        sampling=job.sampling,
        penalty=job.penalty,
    )
    return model.state_dict(), report


def _assert_close_evaluations(got: Evaluation | None, expected: Evaluation | None) -> None:
    if expected is None:
        assert got is None
        return
    assert got is not None and got.num_samples == expected.num_samples
    assert got.loss == pytest.approx(expected.loss, rel=1e-5)
    if expected.accuracy is None:
        assert got.accuracy is None
    else:
        # One prediction may flip where two logits tie to float rounding.
        assert got.accuracy == pytest.approx(expected.accuracy, abs=1.0 / expected.num_samples)


def _assert_matches_train(
    arch: str, jobs: list[TrainJob], device: torch.device
) -> list[dict[str, torch.Tensor]]:
    results = train_batched(arch, jobs, device)
    assert len(results) == len(jobs)
    for job, (state, report) in zip(jobs, results, strict=True):
        expected_state, expected = _sequential(arch, job)
        assert list(state) == list(job.start)
        for name, value in state.items():
            start = job.start[name]
            assert value.device.type == "cpu" and value.is_contiguous()
            assert value.dtype == start.dtype and value.shape == start.shape
            torch.testing.assert_close(value, expected_state[name], atol=_atol(device), rtol=0)
        assert report.num_samples == expected.num_samples and report.epochs == expected.epochs
        assert report.loss == pytest.approx(expected.loss, rel=1e-5)
        assert report.seconds == results[0][1].seconds > 0
        _assert_close_evaluations(report.validation, expected.validation)
    return [state for state, _ in results]


@pytest.mark.parametrize("arch", ["lenet-light", "lenet5", "lenet-cae"])
def test_batched_training_matches_train(arch: str, compute_device: torch.device) -> None:
    # Prepare: different sample counts (so steps and last batches differ), SGD settings and
    # seeds in one computation; one job without a validation split.
    jobs = [
        TrainJob(create_model(arch, 1).state_dict(), _data(40, 10, 1), epochs=2, batch_size=16),
        TrainJob(
            create_model(arch, 2).state_dict(),
            _data(57, 0, 2),
            epochs=2,
            batch_size=16,
            lr=0.05,
            momentum=0.0,
            seed=7,
        ),
        TrainJob(
            create_model(arch, 3).state_dict(),
            _data(64, 23, 3),
            epochs=2,
            batch_size=16,
            lr=0.02,
            weight_decay=0.01,
            seed=3,
        ),
    ]
    # Execute / Assert
    _assert_matches_train(arch, jobs, compute_device)


def test_adam_preset_and_proximal_penalties_match_train(compute_device: torch.device) -> None:
    # Prepare: the authors' Adam over two epochs (its StepLR decays in between), with and
    # without FedProx's term, beside SGD with it: three groups of one call, sizes differ.
    arch = "lenet-light"
    anchor = create_model(arch, 9).state_dict()
    prox = proximal_penalty(anchor, mu=0.5)
    settings = [("adam-steplr", None), ("adam-steplr", prox), ("sgd", prox), ("adam-steplr", None)]
    jobs = [
        TrainJob(
            create_model(arch, i).state_dict(),
            _data(30 + 11 * i, 5, i),
            epochs=2,
            batch_size=16,
            seed=i,
            optimiser=optimiser,
            penalty=penalty,
        )
        for i, (optimiser, penalty) in enumerate(settings)
    ]
    # Execute / Assert: the batched Adam and penalty are the per-model ones.
    states = _assert_matches_train(arch, jobs, compute_device)
    # ... and they matter: without the penalty the model ends elsewhere.
    plain = train_batched(arch, [replace(jobs[1], penalty=None)], compute_device)[0][0]
    assert (
        plain["classifier.1.weight"] - states[1]["classifier.1.weight"]
    ).abs().max() > 100 * ATOL


def test_sampling_with_replacement_matches_train_beside_shuffled_jobs(
    compute_device: torch.device,
) -> None:
    # Prepare: the authors' draws with replacement and the default shuffle in one
    # computation (the batch layout is the same: n samples an epoch either way).
    jobs = [
        TrainJob(
            create_model("lenet-light", i).state_dict(),
            _data(30 + 9 * i, 5, i),
            epochs=2,
            batch_size=16,
            lr=0.1,
            seed=i,
            sampling=sampling,
        )
        for i, sampling in enumerate(["replacement", "shuffle", "replacement"])
    ]
    # Execute / Assert: each is what per-model training with its sampling gives ...
    states = _assert_matches_train("lenet-light", jobs, compute_device)
    # ... and the sampling matters: shuffled, the first model ends elsewhere.
    shuffled = train_batched("lenet-light", [replace(jobs[0], sampling="shuffle")], compute_device)
    moved = max((shuffled[0][0][k] - v).abs().max().item() for k, v in states[0].items())
    assert moved > 100 * ATOL
    with pytest.raises(ValueError, match="unknown sampling 'bootstrap'"):
        train_batched("lenet-light", [replace(jobs[0], sampling="bootstrap")], compute_device)


def test_jobs_of_different_epochs_and_batch_sizes_keep_their_order(
    compute_device: torch.device,
) -> None:
    # Prepare: three groups (by epochs and batch size), interleaved; chunks of two models.
    data = _data(30, 5, 0)  # one trainer's data shared by several models
    settings = [(1, 16), (2, 8), (1, 16), (1, 7)]
    jobs = [
        TrainJob(create_model("lenet-light", i).state_dict(), data, epochs=e, batch_size=b)
        for i, (e, b) in enumerate(settings)
    ]
    # Execute
    results = train_batched("lenet-light", jobs, compute_device, max_models=2)
    # Assert
    for job, (state, report) in zip(jobs, results, strict=True):
        expected_state, expected = _sequential("lenet-light", job)
        assert report.epochs == job.epochs
        assert report.loss == pytest.approx(expected.loss, rel=1e-5)
        for name in state:
            torch.testing.assert_close(
                state[name], expected_state[name], atol=_atol(compute_device), rtol=0
            )


def test_multi_head_models_keep_their_buffer_and_unused_heads(compute_device: torch.device) -> None:
    # Prepare: models predicting with head 0 and head 1 (two groups); weight decay, which
    # SGD must not apply to a head that gets no gradient.
    arch = "lenet-light-heads2"
    starts = [create_model(arch, seed).state_dict() for seed in range(3)]
    starts[1]["head_choice"] = torch.tensor(1)
    jobs = [
        TrainJob(start, _data(20 + 9 * i, 6, i), epochs=2, batch_size=8, weight_decay=0.05)
        for i, start in enumerate(starts)
    ]
    # Execute
    states = _assert_matches_train(arch, jobs, compute_device)
    # Assert
    for start, state in zip(starts, states, strict=True):
        choice = int(start["head_choice"])
        assert state["head_choice"].dtype == torch.int64 and int(state["head_choice"]) == choice
        kept = (f"heads.{1 - choice}.", "head_choice")
        for name in state:
            assert torch.equal(state[name], start[name]) == name.startswith(kept), name


def test_repeat_calls_are_bit_identical(compute_device: torch.device) -> None:
    jobs = [
        TrainJob(create_model("lenet-light", i).state_dict(), _data(n, 4, i), epochs=2, seed=i)
        for i, n in enumerate((33, 50))
    ]
    first = train_batched("lenet-light", jobs, compute_device)
    second = train_batched("lenet-light", jobs, compute_device)
    for (state_1, report_1), (state_2, report_2) in zip(first, second, strict=True):
        assert all(torch.equal(state_1[name], state_2[name]) for name in state_1)
        assert report_1.loss == report_2.loss and report_1.validation == report_2.validation


def test_training_from_shared_bytes_is_bit_identical_to_training_from_floats(
    compute_device: torch.device,
) -> None:
    # Prepare: a host's trainers (rows of the dataset's bytes) and the same trainers
    # built alone (float32 shares), on real images; different sizes pad the batches.
    specs = [
        TrainerDataSpec("fashion-mnist", (Partition(i, 40),), seed=i, n_samples=n)
        for i, n in enumerate((40, 57))
    ]

    def jobs(shared: bool) -> list[TrainJob]:
        return [
            TrainJob(create_model("lenet5", 0).state_dict(), data, epochs=1, seed=i)
            for i, data in enumerate(build_trainer_data(spec, shared=shared) for spec in specs)
            for _ in range(2)  # a trainer's updates read its one share
        ]

    shared = jobs(True)
    assert all(isinstance(job.data.train_images, SharedImages) for job in shared)
    # Execute
    from_bytes = train_batched("lenet5", shared, compute_device)
    from_floats = train_batched("lenet5", jobs(False), compute_device)
    # Assert
    for (state, report), (expected, report_f) in zip(from_bytes, from_floats, strict=True):
        assert all(torch.equal(state[name], expected[name]) for name in expected)
        assert report.loss == report_f.loss and report.validation == report_f.validation
    # one model alone through train, from the shared share and from the floats
    singles = []
    for shared in (True, False):
        model = create_model("lenet5", 0)
        train(model, build_trainer_data(specs[1], shared=shared), 1, seed=3, validate=False)
        singles.append(model.state_dict())
    assert all(torch.equal(singles[0][name], singles[1][name]) for name in singles[1])


@pytest.mark.parametrize("arch", ["lenet-light", "lenet-cae"])
def test_batched_evaluation_matches_evaluate(
    arch: str, monkeypatch: pytest.MonkeyPatch, compute_device: torch.device
) -> None:
    # Prepare: sets of different sizes, scored in several passes of 16 rows.
    monkeypatch.setattr(batched, "EVAL_ROWS", 16)
    models = [create_model(arch, seed) for seed in range(3)]
    sets = [_data(0, n, seed) for seed, n in enumerate((5, 23, 70))]
    xs, ys = [d.val_x for d in sets], [d.val_y for d in sets]
    # Execute
    scores = evaluate_batched(arch, [m.state_dict() for m in models], xs, ys, compute_device)
    # Assert
    for model, x, y, score in zip(models, xs, ys, scores, strict=True):
        _assert_close_evaluations(score, evaluate(model, x, y))


def test_what_cannot_be_batched_is_refused(restore_architectures: None) -> None:
    # Prepare: a task's model that trains with its own code, and one with dropout.
    def build() -> nn.Module:
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 10))

    register_architecture(
        Architecture("toy-own", "classifier", build, "own training", train=lambda *a, **k: None)
    )
    register_architecture(
        Architecture(
            "toy-dropout",
            "classifier",
            lambda: nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(784, 10)),
            "dropout",
        )
    )
    # Execute / Assert
    assert all(can_batch(arch) for arch in ("lenet5", "lenet-light", "lenet-cae"))
    assert can_batch("lenet5-heads3")
    assert not can_batch("toy-own") and not can_batch("toy-dropout")
    job = TrainJob(build().state_dict(), _data(8, 0, 0), epochs=1)
    with pytest.raises(ValueError, match="one model at a time"):
        train_batched("toy-own", [job])


def test_bad_jobs_are_refused() -> None:
    start: Mapping[str, torch.Tensor] = create_model("lenet-light", 0).state_dict()
    with pytest.raises(ValueError, match="no sample"):
        train_batched("lenet-light", [TrainJob(start, _data(0, 3, 0), epochs=1)])
    with pytest.raises(ValueError, match="missing"):
        train_batched("lenet-light", [TrainJob(dict(list(start.items())[1:]), _data(4, 0, 0), 1)])
    with pytest.raises(ValueError, match="epochs and batch_size"):
        train_batched("lenet-light", [TrainJob(start, _data(4, 0, 0), epochs=0)])
    assert train_batched("lenet-light", []) == []


def test_resolve_device() -> None:
    assert DEVICES == ("auto", "cpu", "cuda")
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto") == torch.device(expected)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no GPU"):
            resolve_device("cuda")
    with pytest.raises(ValueError, match="auto, cpu, cuda"):
        resolve_device("gpu")


def test_platform_record_names_the_cpu_kernels_and_the_gpu_only_on_cuda(
    compute_device: torch.device,
) -> None:
    record = platform_record(compute_device)
    assert record["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert record["torch"] == torch.__version__ and record["cores"] >= 1
    assert record["cpu"] and record["machine"]
    assert ("gpu" in record) == (compute_device.type == "cuda")
    json.dumps(record)  # it goes into summary.json as it is
