"""Many models trained or scored as one batched computation (pure functions, no chain).

Why: the simulator hosts many trainers per process, and each trains several models a
round. Looping over them with :func:`~mcfl_chain.learning.training.train` runs one small
LeNet at a time, so every SGD step pays PyTorch's per-operator overhead and keeps a GPU
mostly idle. Here the models of one call are stacked along a new leading dimension and
every step is a single :func:`torch.func.vmap` of :func:`torch.func.grad_and_value` over
:func:`torch.func.functional_call`: one forward and backward pass for all of them.

What is equal to the per-model path: for each :class:`TrainJob` the math is exactly that
of :func:`~mcfl_chain.learning.training.train` on a model loaded with ``job.start``:

- the same batches: a ``torch.Generator().manual_seed(seed)``, one
  :func:`~mcfl_chain.learning.training.epoch_order` of ``n`` indices per epoch (a
  permutation, or draws with replacement), slices of ``batch_size`` with a smaller
  last one. Models of one computation differ in sample counts, so each step's batch is
  padded to ``batch_size`` with a per-sample weight of 0 (loss ``sum(w·l) / sum(w)``, the
  plain batch mean when nothing is padded), and a model whose epoch is over takes no step
  (its parameters and momentum buffers are kept by ``torch.where``);
- the same loss: cross-entropy for classifiers, the MSE of the input's reconstruction for
  autoencoders, each the mean over the batch;
- the same update as the job's optimiser preset (:mod:`mcfl_chain.learning.optimisers`:
  ``torch.optim.SGD``, or the authors' Adam with its per-epoch StepLR), in its functional
  form, each model with its own step count; a parameter the forward pass never reaches
  (the heads a multi-head model does not use) gets no gradient there and is left as it
  was, here too;
- the same penalty: a job's quadratic penalty (a strategy's regulariser:
  :mod:`mcfl_chain.algorithms.proximal`, any object with ``anchor`` and ``coefficients``)
  adds its gradient ``2c(θ − a)`` to the loss's, as backpropagating it would, and the
  parameters it names are updated even where the forward pass does not reach them;
- the same report: sample count, epochs, mean loss of the last epoch, and the validation
  score as :func:`~mcfl_chain.learning.training.evaluate` computes it; ``seconds`` is the
  wall time of the whole call's batched loops, the same for all its jobs.

The results agree with the per-model path to float rounding, not bit for bit: the batched
kernels (a grouped convolution for the stacked weights, for one) sum in another order,
and the differences grow a little with every step (see the tests for the tolerances).
Repeated calls with the same jobs on the same device and thread count are bit-identical,
which is what reproducible runs need; on CUDA that holds as far as the kernels PyTorch
picks are deterministic (``torch.use_deterministic_algorithms`` is the caller's choice).

Which architectures: all built-in ones (none has dropout or batch normalisation, whose
behaviour depends on the training mode and which would need per-model random state or
running statistics). :func:`can_batch` is False for a task's model that brings its own
training or scoring, or that contains such layers; those go through
:func:`~mcfl_chain.learning.training.train` one at a time. A model's buffers (the
``head_choice`` of ``-heads<k>`` models) are not trained: jobs are grouped by their
buffers' values, which are passed unbatched and come back unchanged.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast, runtime_checkable

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from mcfl_chain.compute.device import DEVICES, resolve_device
from mcfl_chain.learning.models import (
    Architecture,
    ModelKind,
    create_model,
    get_architecture,
    model_kind,
)
from mcfl_chain.learning.optimisers import Settings, get_optimiser
from mcfl_chain.learning.scenario import Images, SharedImages, TrainerData, decode
from mcfl_chain.learning.training import SAMPLINGS, Evaluation, TrainReport, epoch_order

StateDict = dict[str, torch.Tensor]
_T = TypeVar("_T")

_MODE_DEPENDENT = (
    nn.modules.batchnorm._BatchNorm,
    nn.modules.instancenorm._InstanceNorm,
    nn.modules.dropout._DropoutNd,
)
"""Layers that act differently in training and evaluation mode or draw random numbers."""

EVAL_ROWS = 4096
"""Samples per batched forward pass when scoring, over all the models together (memory
bound only, like ``evaluate``'s ``batch_size``)."""


@runtime_checkable
class Quadratic(Protocol):
    """A loss penalty ``Σₙ Σᵢ cₙ,ᵢ (θₙ,ᵢ − aₙ,ᵢ)²`` over the parameters ``coefficients``
    names (:class:`~mcfl_chain.algorithms.proximal.QuadraticPenalty`), which the batched
    compute applies itself; called on a model, the penalty as a differentiable scalar."""

    @property
    def anchor(self) -> Mapping[str, torch.Tensor]: ...

    @property
    def coefficients(self) -> Mapping[str, torch.Tensor | float]: ...

    def __call__(self, model: nn.Module) -> torch.Tensor: ...


@dataclass(frozen=True)
class TrainJob:
    """One model to train: what :func:`~mcfl_chain.learning.training.train` would be given.

    Attributes
    ----------
    start : Mapping of str to torch.Tensor
        The state dict to start from (CPU tensors), with the architecture's keys.
    data : TrainerData
        Trains on ``train_x``/``train_y``; scored afterwards on ``val_x``/``val_y``.
    epochs, batch_size, lr, momentum, weight_decay, seed, optimiser, sampling
        As for :func:`~mcfl_chain.learning.training.train`.
    penalty : Quadratic, optional
        A quadratic penalty added to the loss (a strategy's regulariser), or None.
    """

    start: Mapping[str, torch.Tensor]
    data: TrainerData
    epochs: int
    batch_size: int = 32
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 0.0
    seed: int = 0
    optimiser: str = "sgd"
    sampling: str = "shuffle"
    penalty: Quadratic | None = None


def can_batch(arch: str) -> bool:
    """Whether models of ``arch`` can be trained and scored here.

    False for a task's architecture that brings its own training or scoring (its code
    must run, as :func:`~mcfl_chain.learning.training.train` would run it) and for one
    with dropout or normalisation layers; True for all the built-in ones.

    Raises
    ------
    ValueError
        If ``arch`` names no architecture.
    """
    return _batchable(get_architecture(arch))


@functools.lru_cache(maxsize=64)
def _batchable(architecture: Architecture) -> bool:
    # Asked for every request of every trainer: built once per architecture.
    if architecture.train is not None or architecture.evaluate is not None:
        return False
    return _mode_free(architecture.build())


def _mode_free(model: nn.Module) -> bool:
    return not any(isinstance(module, _MODE_DEPENDENT) for module in model.modules())


def train_batched(
    arch: str,
    jobs: Sequence[TrainJob],
    device: torch.device | str = "cpu",
    *,
    max_models: int = 256,
    validate: bool = True,
) -> list[tuple[StateDict, TrainReport]]:
    """Train one model of ``arch`` per job, all together, as ``train`` would one by one.

    Parameters
    ----------
    arch : str
        The architecture of every job's model (one for which :func:`can_batch` is True).
    jobs : sequence of TrainJob
        Start weights, data, optimiser settings and penalties; they may all differ. Jobs
        with the same ``epochs``, ``batch_size``, buffers, optimiser preset and penalised
        parameters run as one computation (in chunks of at most ``max_models``).
    device : torch.device or str, default "cpu"
        Where the computation runs (``"auto"`` as for
        :func:`~mcfl_chain.compute.device.resolve_device`); data and weights are copied
        there.
    max_models : int, default 256
        Most models in one computation (memory grows with it).
    validate : bool, default True
        Score each trained model on its validation split for its report, as ``train``
        does (False leaves ``validation`` None and saves the forward passes).

    Returns
    -------
    list of (dict, TrainReport)
        Per job, in the order given: the trained state dict (contiguous CPU tensors with
        the keys, shapes and dtypes of ``job.start``) and the report ``train`` gives.

    Raises
    ------
    ValueError
        If ``arch`` cannot be batched, a job has no training sample, ``epochs`` or
        ``batch_size`` is below one, its optimiser preset is unknown, or a start state
        dict or penalty does not fit ``arch``.
    """
    if max_models < 1:
        raise ValueError(f"max_models must be >= 1, got {max_models}")
    for job in jobs:
        get_optimiser(job.optimiser)
        if job.sampling not in SAMPLINGS:
            raise ValueError(
                f"unknown sampling {job.sampling!r}; choose one of {', '.join(SAMPLINGS)}"
            )
        if job.epochs < 1 or job.batch_size < 1:
            raise ValueError(
                f"epochs and batch_size must be >= 1, got {job.epochs} and {job.batch_size}"
            )
        if job.data.num_samples == 0:
            raise ValueError("cannot train on an empty set: a job's train split has no sample")
    if not jobs:
        return []
    device = _device(device)
    module, kind = _template(arch, device)
    _check_keys(module, [job.start for job in jobs])
    _check_penalties(module, jobs)
    results: list[tuple[StateDict, _Trained] | None] = [None] * len(jobs)
    loop_seconds = 0.0
    groups = _groups(
        jobs,
        lambda job: (
            job.epochs,
            job.batch_size,
            _buffer_key(module, job.start),
            job.optimiser,
            None if job.penalty is None else tuple(job.penalty.coefficients),
        ),
    )
    for positions in groups:
        for chunk in _chunks(positions, max_models):
            chunk_jobs = [jobs[i] for i in chunk]
            # A lone model runs through other kernels than a batch of two or more, and
            # rounds differently: padded, every job's bits are independent of the others
            # that share the call (a simulation repeats whatever its batches were).
            padded = chunk_jobs * 2 if len(chunk_jobs) == 1 else chunk_jobs
            states, trained, seconds = _train_chunk(module, kind, padded, device, validate)
            states, trained = states[: len(chunk)], trained[: len(chunk)]
            loop_seconds += seconds
            for i, state, outcome in zip(chunk, states, trained, strict=True):
                results[i] = (state, outcome)
    out: list[tuple[StateDict, TrainReport]] = []
    for job, result in zip(jobs, results, strict=True):
        assert result is not None
        state, outcome = result
        report = TrainReport(
            num_samples=job.data.num_samples,
            epochs=job.epochs,
            loss=outcome.loss,
            seconds=loop_seconds,
            validation=outcome.validation,
        )
        out.append((state, report))
    return out


def evaluate_batched(
    arch: str,
    states: Sequence[Mapping[str, torch.Tensor]],
    xs: Sequence[torch.Tensor],
    ys: Sequence[torch.Tensor],
    device: torch.device | str = "cpu",
    *,
    max_models: int = 256,
) -> list[Evaluation]:
    """Score model ``i`` (weights ``states[i]``) on ``(xs[i], ys[i])``, all together.

    Parameters
    ----------
    arch : str
        The architecture of every model (one for which :func:`can_batch` is True).
    states : sequence of state dicts
        The models' weights.
    xs, ys : sequences of torch.Tensor
        Per model, images N×1×28×28 and int64 labels N (unused for autoencoders); the N
        may differ.
    device : torch.device or str, default "cpu"
        Where the computation runs (``"auto"`` as for
        :func:`~mcfl_chain.compute.device.resolve_device`).
    max_models : int, default 256
        Most models in one computation.

    Returns
    -------
    list of Evaluation
        Per model, what :func:`~mcfl_chain.learning.training.evaluate` gives.

    Raises
    ------
    ValueError
        If ``arch`` cannot be batched, the sequences differ in length, a set is empty or
        a state dict does not fit ``arch``.
    """
    if max_models < 1:
        raise ValueError(f"max_models must be >= 1, got {max_models}")
    if not len(states) == len(xs) == len(ys):
        raise ValueError(
            f"one x and one y per model: got {len(states)} models, {len(xs)} xs, {len(ys)} ys"
        )
    if any(x.shape[0] == 0 for x in xs):
        raise ValueError("cannot evaluate on an empty set: the trainer's split has no sample")
    if not states:
        return []
    device = _device(device)
    module, kind = _template(arch, device)
    _check_keys(module, states)
    results: list[Evaluation | None] = [None] * len(states)
    for positions in _groups(states, lambda state: _buffer_key(module, state)):
        for chunk in _chunks(positions, max_models):
            first = states[chunk[0]]
            params = {
                name: _stack([states[i][name] for i in chunk], device)
                for name, _ in module.named_parameters()
            }
            buffers = {name: first[name].to(device) for name, _ in module.named_buffers()}
            scores = _score(
                module, kind, params, buffers, [xs[i] for i in chunk], [ys[i] for i in chunk]
            )
            for i, score in zip(chunk, scores, strict=True):
                results[i] = score
    assert all(score is not None for score in results)
    return results  # type: ignore[return-value]


@dataclass(frozen=True)
class _Trained:
    loss: float
    validation: Evaluation | None


def _device(device: torch.device | str) -> torch.device:
    """``device`` itself, or what a name of :data:`~mcfl_chain.compute.device.DEVICES`
    (``"auto"`` among them) stands for."""
    if isinstance(device, str) and device in DEVICES:
        return resolve_device(device)
    return torch.device(device)


def _template(arch: str, device: torch.device) -> tuple[nn.Module, ModelKind]:
    """The module :func:`functional_call` runs (its own weights are never used)."""
    architecture = get_architecture(arch)
    model = create_model(arch, seed=0)
    if architecture.train is not None or architecture.evaluate is not None or not _mode_free(model):
        raise ValueError(
            f"architecture {arch!r} cannot be trained or scored in batches (its task brings "
            f"its own training or scoring, or it has dropout or normalisation layers): use "
            f"mcfl_chain.learning.training.train and evaluate one model at a time"
        )
    model = model.to(device)
    return model, model_kind(model)


def _check_keys(module: nn.Module, states: Sequence[Mapping[str, torch.Tensor]]) -> None:
    expected = set(module.state_dict())
    for state in states:
        if set(state) != expected:
            missing = sorted(expected - set(state))
            unexpected = sorted(set(state) - expected)
            raise ValueError(
                f"a state dict does not fit the architecture: missing {missing}, "
                f"unexpected {unexpected}"
            )


def _check_penalties(module: nn.Module, jobs: Sequence[TrainJob]) -> None:
    params = dict(module.named_parameters())
    for job in jobs:
        if job.penalty is None:
            continue
        for name in job.penalty.coefficients:
            if name not in params or name not in job.penalty.anchor:
                raise ValueError(
                    f"a penalty names {name!r}, which is not a parameter of the "
                    f"architecture or is missing from its anchor weights"
                )


def _buffer_key(module: nn.Module, state: Mapping[str, torch.Tensor]) -> Hashable:
    """The values of a state's buffers: models batched together must share them, as they
    are passed unbatched (a multi-head model reads ``head_choice`` as a Python int)."""
    return tuple(
        (
            name,
            str(state[name].dtype),
            tuple(state[name].shape),
            state[name].cpu().numpy().tobytes(),
        )
        for name, _ in module.named_buffers()
    )


def _groups(items: Sequence[_T], key: Callable[[_T], Hashable]) -> list[list[int]]:
    """Positions of ``items`` grouped by ``key``, groups and members in first-seen order."""
    groups: dict[Hashable, list[int]] = {}
    for position, item in enumerate(items):
        groups.setdefault(key(item), []).append(position)
    return list(groups.values())


def _chunks(positions: list[int], size: int) -> list[list[int]]:
    """``positions`` cut into near-equal chunks of at most ``size`` (never a remainder of
    one beside larger chunks: see the padding of lone models)."""
    count = -(-len(positions) // size)
    bounds = [len(positions) * k // count for k in range(count + 1)]
    return [positions[bounds[k] : bounds[k + 1]] for k in range(count)]


def _stack(tensors: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    return torch.stack([tensor.detach() for tensor in tensors]).to(device)


def _flat(
    tensors: Sequence[torch.Tensor], device: torch.device, keys: Sequence[Hashable]
) -> tuple[torch.Tensor, list[int]]:
    """The tensors concatenated once on ``device``, each distinct key's once (models of
    one trainer share its data), and each one's row offset there. Samples and their
    labels are flattened with the same keys (the pair's identities), so that their
    offsets agree."""
    where: dict[Hashable, int] = {}
    distinct: list[torch.Tensor] = []
    offsets: list[int] = []
    rows = 0
    for tensor, key in zip(tensors, keys, strict=True):
        if key not in where:
            where[key] = rows
            distinct.append(tensor)
            rows += tensor.shape[0]
        offsets.append(where[key])
    flat = distinct[0] if len(distinct) == 1 else torch.cat(distinct)
    return flat.to(device), offsets


def _training_images(
    shares: Sequence[Images], device: torch.device, keys: Sequence[Hashable]
) -> tuple[Callable[[torch.Tensor], torch.Tensor], list[int]]:
    """The jobs' training images as one function from row positions (any shape) to
    float32 images on ``device``, and each job's first row there.

    Shares of one dataset's bytes (a host's trainers) are read from those bytes a batch
    at a time: no float copy of anyone's share exists beyond the current batch (on the
    CPU, not even a copy of the bytes). Otherwise each distinct share's floats are
    concatenated once, as the float path always did; both give the same bits.
    """
    first = shares[0]
    if isinstance(first, SharedImages) and all(
        isinstance(share, SharedImages) and share.shares_pixels(first) for share in shares
    ):
        rows, offsets = _flat([cast(SharedImages, share).rows for share in shares], device, keys)
        pixels, values = first.pixels, first.values.to(device)
        if pixels.device != device:
            # Only the rows these jobs read travel, once, as bytes.
            pixels = pixels[rows.cpu()].to(device)
            rows = torch.arange(rows.shape[0], device=device)
        return (lambda index: decode(pixels, values, rows[index])), offsets
    floats = {id(share): _as_floats(share) for share in shares}
    x_all, offsets = _flat([floats[id(share)] for share in shares], device, keys)
    return (lambda index: x_all[index]), offsets


def _as_floats(images: Images) -> torch.Tensor:
    return images.floats() if isinstance(images, SharedImages) else images


def _used_parameters(
    module: nn.Module, buffers: Mapping[str, torch.Tensor], sample: torch.Tensor
) -> list[str]:
    """The parameters the forward pass reaches with these buffers: those SGD updates
    (``torch.optim.SGD`` skips a parameter whose gradient is None, weight decay included)."""
    params = {name: p.detach().requires_grad_() for name, p in module.named_parameters()}
    with torch.enable_grad():
        output = functional_call(module, (params, dict(buffers)), (sample,))
        grads = torch.autograd.grad(output.sum(), list(params.values()), allow_unused=True)
    return [name for name, grad in zip(params, grads, strict=True) if grad is not None]


def _per_sample_loss(kind: ModelKind, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per sample: cross-entropy, or the mean squared error over the sample's pixels (whose
    mean over a batch is ``mse_loss``'s mean, all samples having the same size)."""
    if kind == "classifier":
        return nn.functional.cross_entropy(output, target, reduction="none")
    return (output - target).square().flatten(1).mean(1)


def _train_chunk(
    module: nn.Module,
    kind: ModelKind,
    jobs: Sequence[TrainJob],
    device: torch.device,
    validate: bool = True,
) -> tuple[list[StateDict], list[_Trained], float]:
    """Train jobs of one ``epochs``, ``batch_size`` and buffers as one computation."""
    epochs, batch_size, count = jobs[0].epochs, jobs[0].batch_size, len(jobs)
    buffers = {name: jobs[0].start[name].to(device) for name, _ in module.named_buffers()}
    keys = [(id(job.data.train_images), id(job.data.train_y)) for job in jobs]
    images, offsets = _training_images([job.data.train_images for job in jobs], device, keys)
    y_all = (
        _flat([job.data.train_y for job in jobs], device, keys)[0] if kind == "classifier" else None
    )
    trained = _used_parameters(module, buffers, images(torch.zeros(1, dtype=torch.int64)))
    # Grouped by penalised names: all of this chunk's jobs have the same ones (or none),
    # and the penalty's gradient reaches them whether the forward pass does or not.
    penalties = [job.penalty for job in jobs if job.penalty is not None]
    penalised = list(penalties[0].coefficients) if penalties else []
    trained += [name for name in penalised if name not in trained]
    params = {name: _stack([job.start[name] for job in jobs], device) for name in trained}
    optimiser = get_optimiser(jobs[0].optimiser)
    slots = {name: optimiser.init(p) for name, p in params.items()}
    settings = torch.tensor(
        [[job.lr, job.momentum, job.weight_decay] for job in jobs], dtype=torch.float32
    ).to(device)
    columns = settings.unbind(1)
    # Per parameter, (lr, momentum, weight decay) shaped to broadcast over its models.
    shaped = {
        name: Settings(*(column.view(_row_shape(count, p)) for column in columns))
        for name, p in params.items()
    }
    # Per penalised parameter, the stacked anchors and 2c, the gradient's factor.
    anchors: dict[str, torch.Tensor] = {}
    factors: dict[str, torch.Tensor] = {}
    for name in penalised:
        dtype, shape = params[name].dtype, params[name].shape[1:]
        anchors[name] = _stack([q.anchor[name].to(dtype) for q in penalties], device)
        factors[name] = _stack(
            [
                2 * torch.as_tensor(q.coefficients[name], dtype=dtype).expand(shape)
                for q in penalties
            ],
            device,
        )
    steps_taken = torch.zeros(count, dtype=torch.int64, device=device)

    # The batch layout is the same every epoch (only the order changes): step s of model j
    # holds samples [s·B, (s+1)·B) of its permutation, padded with weight 0 past n_j.
    sizes = [job.data.num_samples for job in jobs]
    steps = max(math.ceil(n / batch_size) for n in sizes)
    weights_cpu = torch.zeros(count, steps * batch_size)
    for j, n in enumerate(sizes):
        weights_cpu[j, :n] = 1.0
    weights_cpu = weights_cpu.view(count, steps, batch_size).transpose(0, 1).contiguous()
    step_counts_cpu = weights_cpu.sum(2)  # (steps, models): the real batch sizes
    takes_step = (step_counts_cpu > 0).to(device)
    everyone_steps = [bool(row.all()) for row in step_counts_cpu > 0]
    weights = weights_cpu.to(device)
    step_counts = step_counts_cpu.to(device=device, dtype=torch.float64)
    generators = [torch.Generator().manual_seed(job.seed) for job in jobs]

    def batch_loss(
        p: dict[str, torch.Tensor], x: torch.Tensor, target: torch.Tensor, w: torch.Tensor
    ) -> torch.Tensor:
        output = functional_call(module, (p, buffers), (x,))
        return (w * _per_sample_loss(kind, output, target)).sum() / w.sum().clamp(min=1.0)

    step = vmap(grad_and_value(batch_loss))
    started = time.perf_counter()
    epoch_total = torch.zeros(count, dtype=torch.float64, device=device)
    for epoch in range(epochs):
        # One order per model and epoch from its own generator, as train draws it (n
        # samples either way, so the batch layout does not depend on the sampling).
        index_cpu = torch.empty(count, steps * batch_size, dtype=torch.int64)
        for j, (n, generator) in enumerate(zip(sizes, generators, strict=True)):
            index_cpu[j, :n] = epoch_order(n, generator, jobs[j].sampling) + offsets[j]
            index_cpu[j, n:] = offsets[j]  # any real row: its weight is 0
        index = index_cpu.view(count, steps, batch_size).transpose(0, 1).to(device)
        epoch_total.zero_()
        for s in range(steps):
            x = images(index[s])
            target = x if y_all is None else y_all[index[s]]
            grads, losses = step(params, x, target, weights[s])
            epoch_total += losses.to(torch.float64) * step_counts[s]
            with torch.no_grad():
                steps_taken += takes_step[s]
                for name, grad in grads.items():
                    p = params[name]
                    if name in factors:
                        grad = grad + factors[name] * (p - anchors[name])
                    new_p, new_slots = optimiser.step(
                        p,
                        grad,
                        slots[name],
                        shaped[name],
                        steps_taken.view(_row_shape(count, p)),
                        epoch,
                    )
                    if everyone_steps[s]:
                        params[name], slots[name] = new_p, new_slots
                    else:
                        # A model whose epoch is over takes no step.
                        keep = takes_step[s].view(_row_shape(count, p))
                        params[name] = torch.where(keep, new_p, p)
                        slots[name] = {
                            key: torch.where(keep, value, slots[name][key])
                            for key, value in new_slots.items()
                        }
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - started
    losses_cpu = (epoch_total.cpu() / torch.tensor(sizes, dtype=torch.float64)).tolist()

    validations: list[Evaluation | None] = [None] * count
    scored = [j for j, job in enumerate(jobs) if validate and job.data.val_y.shape[0]]
    if scored:
        # Floats made once per share (a shared one's are new on every read).
        val_x = {id(jobs[j].data.val_images): jobs[j].data.val_x for j in scored}
        index_of = torch.tensor(scored, device=device)
        picked = {name: p.index_select(0, index_of) for name, p in params.items()}
        scores = _score(
            module,
            kind,
            picked,
            buffers,
            [val_x[id(jobs[j].data.val_images)] for j in scored],
            [jobs[j].data.val_y for j in scored],
        )
        for j, score in zip(scored, scores, strict=True):
            validations[j] = score

    on_cpu = {name: p.cpu() for name, p in params.items()}
    states: list[StateDict] = []
    for j, job in enumerate(jobs):
        state: StateDict = {}
        for name, start in job.start.items():
            value = on_cpu[name][j] if name in on_cpu else start.detach().cpu()
            state[name] = value.to(start.dtype).clone(memory_format=torch.contiguous_format)
        states.append(state)
    outcomes = [
        _Trained(loss=loss, validation=validation)
        for loss, validation in zip(losses_cpu, validations, strict=True)
    ]
    return states, outcomes, seconds


def _row_shape(count: int, stacked: torch.Tensor) -> tuple[int, ...]:
    """The shape of one value per model that broadcasts over ``stacked``."""
    return (count,) + (1,) * (stacked.dim() - 1)


def _score(
    module: nn.Module,
    kind: ModelKind,
    params: Mapping[str, torch.Tensor],
    buffers: Mapping[str, torch.Tensor],
    xs: Sequence[torch.Tensor],
    ys: Sequence[torch.Tensor],
) -> list[Evaluation]:
    """:func:`~mcfl_chain.learning.training.evaluate` of stacked models, model ``i`` on
    ``(xs[i], ys[i])``: samples at the same position of every set go through together."""
    device = next(iter(params.values())).device
    count = len(xs)
    keys = [(id(x), id(y)) for x, y in zip(xs, ys, strict=True)]
    x_all, offsets = _flat(xs, device, keys)
    y_all = _flat(ys, device, keys)[0] if kind == "classifier" else None
    sizes = torch.tensor([x.shape[0] for x in xs], device=device)
    starts = torch.tensor(offsets, device=device)
    longest = max(int(x.shape[0]) for x in xs)
    rows = max(1, EVAL_ROWS // count)
    loss_sum = torch.zeros(count, dtype=torch.float64, device=device)
    correct = torch.zeros(count, dtype=torch.int64, device=device)

    def forward(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(module, (p, dict(buffers)), (x,))  # type: ignore[no-any-return]

    batched = vmap(forward)
    with torch.no_grad():
        for start in range(0, longest, rows):
            position = torch.arange(start, min(start + rows, longest), device=device)
            valid = position.unsqueeze(0) < sizes.unsqueeze(1)  # (models, rows)
            index = starts.unsqueeze(1) + torch.where(valid, position, 0)
            x = x_all[index]
            output = batched(dict(params), x)
            if y_all is None:
                per_sample = (output - x).square().flatten(2).sum(2)
            else:
                y = y_all[index]
                per_sample = nn.functional.cross_entropy(
                    output.flatten(0, 1), y.flatten(), reduction="none"
                ).view(y.shape)
                correct += ((output.argmax(dim=2) == y) & valid).sum(1)
            loss_sum += torch.where(valid, per_sample, 0.0).to(torch.float64).sum(1)
    losses = loss_sum.cpu().tolist()
    hits = correct.cpu().tolist()
    scores = []
    for i, x in enumerate(xs):
        n = int(x.shape[0])
        if kind == "classifier":
            scores.append(Evaluation(accuracy=hits[i] / n, loss=losses[i] / n, num_samples=n))
        else:
            scores.append(Evaluation(accuracy=None, loss=losses[i] / x.numel(), num_samples=n))
    return scores
