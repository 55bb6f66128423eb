"""The host's shared compute (mcfl_chain.host.compute): hosted trainers' training
requests of a phase become one batched computation, with each trainer's own result."""

from __future__ import annotations

import threading

import pytest
import torch

from mcfl_chain.algorithms.proximal import proximal_penalty
from mcfl_chain.compute.batched import TrainJob, train_batched
from mcfl_chain.compute.local import LocalCompute
from mcfl_chain.host.compute import BatchingCompute
from mcfl_chain.learning.models import create_model
from mcfl_chain.learning.scenario import build_trainer_data, scenario_specs
from mcfl_chain.learning.training import evaluate

ARCH = "lenet-light"
OPTIONS = dict(epochs=1, batch_size=16, lr=0.05, momentum=0.9, seed=3)


@pytest.fixture(scope="module")
def shares():
    specs = scenario_specs("iid", 3, 0, dataset="digits", samples_per_trainer=90)
    return [build_trainer_data(spec) for spec in specs]


def _start(i: int) -> dict[str, torch.Tensor]:
    return create_model(ARCH, seed=i).state_dict()


def _train_in_threads(compute, shares, penalty=None):
    results: dict[int, dict[str, torch.Tensor]] = {}

    def trainer(i: int) -> None:
        (results[i],) = compute.train_many(
            ARCH, [_start(i)], shares[i], penalties=[penalty], **OPTIONS
        )

    threads = [threading.Thread(target=trainer, args=(i,)) for i in range(len(shares))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_concurrent_requests_train_as_one_batch_with_each_trainers_own_result(
    shares, compute_device
):
    # Prepare
    compute = BatchingCompute(compute_device, expected=lambda: 3, linger=5.0, kernel="vmap")

    # Execute
    results = _train_in_threads(compute, shares)

    # Assert: one computation of three models, each result the batched one bit for bit
    assert compute.batches == [3]
    jobs = [TrainJob(start=_start(i), data=shares[i], **OPTIONS) for i in range(3)]
    expected = train_batched(ARCH, jobs, compute_device)
    for i in range(3):
        assert _same(results[i], expected[i][0])
        alone = LocalCompute().train(ARCH, _start(i), shares[i], **OPTIONS)
        assert all(torch.allclose(results[i][k], alone[k], atol=1e-4) for k in alone)


def test_a_lone_request_gets_the_bits_it_gets_in_a_batch(shares, compute_device):
    # Prepare: nobody else will come (expected 1)
    compute = BatchingCompute(compute_device, expected=lambda: 1, kernel="vmap")

    # Execute
    (lone,) = compute.train_many(ARCH, [_start(0)], shares[0], penalties=[None], **OPTIONS)

    # Assert: a run does not depend on who else trained in the same phase
    jobs = [TrainJob(start=_start(i), data=shares[i], **OPTIONS) for i in range(3)]
    assert _same(lone, train_batched(ARCH, jobs, compute_device)[0][0])


def test_a_request_with_a_penalty_is_trained_alone_with_it(shares):
    # Prepare: a penalty pulling every weight to zero
    compute = BatchingCompute("cpu", expected=lambda: 2, linger=5.0, kernel="vmap")

    def penalty(model: torch.nn.Module) -> torch.Tensor:
        return sum(p.pow(2).sum() for p in model.parameters())

    # Execute
    results = _train_in_threads(compute, shares[:2], penalty=penalty)

    # Assert: no batch ran, and the result is the penalised per-model training's
    assert compute.batches == []
    local = LocalCompute().train(ARCH, _start(1), shares[1], penalty=penalty, **OPTIONS)
    assert _same(results[1], local)


def test_a_quadratic_penalty_and_the_adam_preset_are_batched(shares, compute_device):
    # Prepare: FedProx's term towards another model, with the authors' Adam
    compute = BatchingCompute(compute_device, expected=lambda: 2, linger=5.0, kernel="vmap")
    penalty = proximal_penalty(_start(9), mu=1.0)
    options = {**OPTIONS, "optimiser": "adam-steplr"}
    results: dict[int, dict[str, torch.Tensor]] = {}

    def trainer(i: int) -> None:
        (results[i],) = compute.train_many(
            ARCH, [_start(i)], shares[i], penalties=[penalty], **options
        )

    threads = [threading.Thread(target=trainer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    # Assert: one computation of both, each what per-model training with the penalty gives
    assert compute.batches == [2]
    for i in range(2):
        alone = LocalCompute().train(ARCH, _start(i), shares[i], penalty=penalty, **options)
        atol = 1e-5 if compute_device.type == "cpu" else 1e-4
        assert all(torch.allclose(results[i][k], alone[k], atol=atol) for k in alone)


def test_a_failed_batch_is_every_waiting_trainers_error(shares):
    # Prepare: one request whose weights do not fit the architecture
    compute = BatchingCompute("cpu", expected=lambda: 2, linger=5.0, kernel="vmap")
    errors: list[BaseException] = []

    def trainer(start: dict[str, torch.Tensor], i: int) -> None:
        try:
            compute.train_many(ARCH, [start], shares[i], penalties=[None], **OPTIONS)
        except Exception as exc:
            errors.append(exc)

    broken = {name: value[..., :1] for name, value in _start(1).items()}
    threads = [
        threading.Thread(target=trainer, args=(_start(0), 0)),
        threading.Thread(target=trainer, args=(broken, 1)),
    ]

    # Execute
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    # Assert: both trainers hear of it, none hangs
    assert len(errors) == 2 and not any(t.is_alive() for t in threads)


def test_a_trainers_several_updates_go_in_one_request(shares, compute_device):
    # Prepare: one trainer training three parents in a phase, nobody else hosted
    compute = BatchingCompute(compute_device, expected=lambda: 1, kernel="vmap")
    starts = [_start(i) for i in range(3)]

    # Execute
    results = compute.train_many(ARCH, starts, shares[0], penalties=[None, None, None], **OPTIONS)

    # Assert: one computation of three models, in the order asked
    assert compute.batches == [3]
    jobs = [TrainJob(start=start, data=shares[0], **OPTIONS) for start in starts]
    expected = train_batched(ARCH, jobs, compute_device)
    assert all(_same(r, e[0]) for r, e in zip(results, expected, strict=True))


def test_a_trainers_candidates_are_scored_in_one_request_as_evaluate_scores_them(
    shares, compute_device
):
    # Prepare: three candidates, scored on one trainer's validation split
    local = LocalCompute("cpu")
    batching = BatchingCompute(compute_device, expected=lambda: 1, kernel="vmap")
    candidates = [_start(i) for i in range(3)]
    x, y = shares[0].val_x, shares[0].val_y
    kind = create_model(ARCH, seed=0).kind

    # Execute: one by one with fresh models, then many at once on each compute
    alone = [evaluate(create_model(ARCH, seed=i), x, y, kind) for i in range(3)]
    looped = local.evaluate_many(ARCH, candidates, x, y, kind)
    again = local.evaluate_many(ARCH, candidates[::-1], x, y, kind)[::-1]
    batched = batching.evaluate_many(ARCH, candidates, x, y, kind)

    # Assert: the local loop (one model reloaded per thread) is evaluate to the bit, in
    # any order; the batched scores agree to float rounding
    assert looped == alone == again
    assert [e.accuracy for e in batched] == [e.accuracy for e in alone]
    assert [e.loss for e in batched] == pytest.approx([e.loss for e in alone], rel=1e-5)
    assert batching.batches == []  # scoring is no training batch


def test_the_loop_kernel_gives_each_trainer_a_lone_workers_bits_a_slot_at_a_time(shares):
    # Prepare: the CPU's default kernel, one slot, three trainers asking at once
    compute = BatchingCompute("cpu", expected=lambda: 3, linger=5.0, parallel=1)
    busy: list[int] = []
    peak: list[int] = []
    train = compute._local.train_many

    def counting(*args, **kwargs):
        busy.append(1)
        peak.append(len(busy))
        try:
            return train(*args, **kwargs)
        finally:
            busy.pop()

    compute._local.train_many = counting  # type: ignore[method-assign]

    # Execute
    results = _train_in_threads(compute, shares)

    # Assert: no rendezvous and no batch, one trainer at a time, and each result is
    # per-model training's to the bit (what a worker process computes)
    assert compute.kernel == "loop" and compute.batches == [] and max(peak) == 1
    for i in range(3):
        assert _same(results[i], LocalCompute().train(ARCH, _start(i), shares[i], **OPTIONS))
    x, y = shares[0].val_x, shares[0].val_y
    kind = create_model(ARCH, seed=0).kind
    candidates = [_start(i) for i in range(3)]
    assert compute.evaluate_many(ARCH, candidates, x, y, kind) == [
        evaluate(create_model(ARCH, seed=i), x, y, kind) for i in range(3)
    ]
    with pytest.raises(ValueError, match="kernel must be one of vmap, loop"):
        BatchingCompute("cpu", expected=lambda: 1, kernel="grouped")  # type: ignore[arg-type]
