"""Bring your own task: the model, the data and (optionally) the training a trainer runs.

A :class:`LearningTask` is what a trainer brings to a network, in the spirit of Flower's
``ClientApp``: a model factory, a function returning the trainer's own train /
validation / test data (:class:`~mcfl_chain.learning.scenario.TrainerData`), and
optionally its own train and evaluate functions. Everything else — selecting models,
publishing updates, choosing peers' updates, FedAvg — stays the network's, so every
trainer of a network must build the same model: the task's fingerprint
(:mod:`mcfl_chain.learning.fingerprint`) goes into the network's descriptor and
:meth:`LearningTask.check_descriptor` refuses a network whose model differs.

Write one in a module and name it ``module:attribute`` (``my_task:task``, or a file,
``path/to/my_task.py:task``), or publish it as an entry point of the group
:data:`ENTRY_POINT_GROUP`; :func:`load_task` finds it either way. ``examples/`` holds a
complete one. The built-in LeNet tasks are instances too (:func:`builtin_task`).

A minimal task::

    from torch import nn
    from mcfl_chain.learning.local_data import trainer_data_from_arrays
    from mcfl_chain.learning.tasks import LearningTask

    def model() -> nn.Module:
        return nn.Sequential(nn.Linear(30, 16), nn.ReLU(), nn.Linear(16, 2))

    def data():
        x_train, y_train, x_test, y_test = ...  # the organisation's own data
        return trainer_data_from_arrays(x_train, y_train, x_test, y_test, name="clinic")

    task = LearningTask(arch="clinic-mlp", model=model, data=data, datasets=("clinic",))
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

from mcfl_chain.learning.codec import (
    DEFAULT_MAX_BYTES,
    Layout,
    decode_weights,
    encode_weights,
    expected_layout,
    read_layout,
)
from mcfl_chain.learning.descriptor import Task, TaskError, canonical_arch, format_task, parse_task
from mcfl_chain.learning.fingerprint import compare_layouts, layout_fingerprint, model_layout
from mcfl_chain.learning.local_data import load_trainer_data
from mcfl_chain.learning.models import (
    BUILTIN_ARCHITECTURES,
    Architecture,
    ModelKind,
    get_architecture,
    initialise,
    register_architecture,
)
from mcfl_chain.learning.scenario import (
    DEFAULT_SPLIT,
    TrainerData,
    TrainerDataSpec,
    build_trainer_data,
)
from mcfl_chain.learning.training import (
    Evaluation,
    TrainReport,
    evaluate,
    selection_metric,
    task_code,
)
from mcfl_chain.learning.training import train as sgd_train

ENTRY_POINT_GROUP = "mcfl_chain.tasks"
"""Entry-point group under which installed packages publish their tasks."""

_ARCH_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


@dataclass(frozen=True)
class TrainConfig:
    """The local training hyper-parameters a worker passes to a task each round.

    A task's own train function may ignore any of them but ``seed`` should make its
    run reproducible. Defaults are the worker's.
    """

    epochs: int = 1
    batch_size: int = 32
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 0.0
    seed: int = 0


TrainFn = Callable[[nn.Module, TrainerData, TrainConfig], TrainReport]
"""``train_fn(model, data, config) -> TrainReport``: train ``model`` in place."""

EvaluateFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], Evaluation]
"""``evaluate_fn(model, x, y) -> Evaluation``: score ``model`` without changing it."""


def _give_kind(model: nn.Module, kind: ModelKind) -> None:
    """Tag a model built by a task with its kind, as the built-in models are tagged."""
    if getattr(model, "kind", None) is None:
        model.__dict__["kind"] = kind


@dataclass(frozen=True)
class LearningTask:
    """What a trainer brings: a model factory, its own data, optionally its own training.

    Attributes
    ----------
    arch : str
        Name of the model, recorded in the network's descriptor: 1-64 lower-case
        letters, digits, ``.``, ``_``, ``-`` (e.g. ``"clinic-mlp"``).
    model : callable
        ``model() -> torch.nn.Module``; every call builds the same architecture.
    data : callable
        ``data() -> TrainerData``: the trainer's train / validation / test split
        (:func:`~mcfl_chain.learning.local_data.trainer_data_from_arrays` builds one).
        A task that reads a file or folder the trainer names takes it as one argument,
        ``data(path: pathlib.Path)``: the worker passes its ``--data PATH`` there.
        The worker chooses models (paper Algorithm 1) on the validation split and
        reports on the test split; the validation split may be empty (the test split
        then does both).
    kind : {"classifier", "autoencoder"}
        Chooses the default loss (cross-entropy or MSE) and the selection metric
        (accuracy or 1/MSE).
    train_fn : callable, optional
        Own training, ``train_fn(model, data, config) -> TrainReport``; by default
        mini-batch SGD (:func:`~mcfl_chain.learning.training.train`).
    evaluate_fn : callable, optional
        Own scoring, ``evaluate_fn(model, x, y) -> Evaluation``; by default
        :func:`~mcfl_chain.learning.training.evaluate`. A classifier's evaluation must
        carry an accuracy.
    initialise : callable, optional
        ``initialise(model, seed) -> model``, a seeded initialisation applied after
        ``model()``; by default ``model()`` runs under ``torch.manual_seed(seed)``.
    datasets : tuple of str
        Dataset names for the descriptor.
    description : str
        One line for people.
    """

    arch: str
    model: Callable[[], nn.Module]
    data: Callable[..., TrainerData]
    kind: ModelKind = "classifier"
    train_fn: TrainFn | None = None
    evaluate_fn: EvaluateFn | None = None
    initialise: Callable[[nn.Module, int], nn.Module] | None = None
    datasets: tuple[str, ...] = ("own-data",)
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "datasets", tuple(self.datasets))
        if not _ARCH_NAME.fullmatch(self.arch):
            raise TaskError(
                f"task architecture name {self.arch!r}: use 1 to 64 lower-case letters, "
                f"digits, '.', '_' or '-'"
            )
        if self.kind not in ("classifier", "autoencoder"):
            raise TaskError(f"task {self.arch!r}: kind must be 'classifier' or 'autoencoder'")
        format_task(self.arch, self.datasets)  # names valid and short enough

    def create_model(self, seed: int) -> nn.Module:
        """Build the model with its seeded initialisation (the same weights for a seed).

        The caller's random state is left untouched. The model gets a ``kind``
        attribute if it has none.
        """
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = self.model()
        if not isinstance(model, nn.Module):
            raise TaskError(
                f"task {self.arch!r}: model() returned {type(model).__name__}, "
                f"not a torch.nn.Module"
            )
        if self.initialise is not None:
            model = self.initialise(model, seed)
        _give_kind(model, self.kind)
        return model

    def load_data(self, path: str | os.PathLike[str] | None = None) -> TrainerData:
        """Call ``data()``, or ``data(path)`` for the trainer's ``--data PATH``, and check
        what it returned.

        Raises
        ------
        TaskError
            A path for a ``data()`` that takes none, none for one that needs it; not a
            :class:`TrainerData`, or an empty train or test split.
        """
        args = () if path is None else (Path(path),)
        try:
            inspect.signature(self.data).bind(*args)
        except ValueError:
            pass  # no signature to read (a builtin): let the call tell
        except TypeError:
            raise TaskError(
                f"task {self.arch!r}: its data() takes no path, so --data cannot reach "
                f"it: drop --data, or give the task a data(path) that reads it"
                if args
                else f"task {self.arch!r}: its data(path) reads this trainer's records "
                f"from a file or folder: give it with --data PATH"
            ) from None
        data = self.data(*args)
        if not isinstance(data, TrainerData):
            raise TaskError(
                f"task {self.arch!r}: data() returned {type(data).__name__}, not TrainerData "
                f"(build it with mcfl_chain.learning.local_data.trainer_data_from_arrays)"
            )
        if data.train_y.shape[0] == 0 or data.test_y.shape[0] == 0:
            raise TaskError(
                f"task {self.arch!r}: the train and test splits need samples (train "
                f"{data.train_y.shape[0]}, test {data.test_y.shape[0]})"
            )
        return data

    def train(
        self, model: nn.Module, data: TrainerData, config: TrainConfig | None = None
    ) -> TrainReport:
        """Train ``model`` in place on ``data``'s train split (own ``train_fn`` or SGD)."""
        config = config or TrainConfig()
        if self.train_fn is not None:
            with task_code():
                report = self.train_fn(model, data, config)
            if not isinstance(report, TrainReport):
                raise TaskError(
                    f"task {self.arch!r}: train_fn returned {type(report).__name__}, "
                    f"not TrainReport"
                )
            return report
        _give_kind(model, self.kind)
        return sgd_train(
            model,
            data,
            config.epochs,
            batch_size=config.batch_size,
            lr=config.lr,
            momentum=config.momentum,
            weight_decay=config.weight_decay,
            seed=config.seed,
        )

    def evaluate(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Evaluation:
        """Score ``model`` on samples ``x`` with labels ``y`` (own ``evaluate_fn`` or default)."""
        if self.evaluate_fn is None:
            return evaluate(model, x, y, self.kind)
        with task_code():
            result = self.evaluate_fn(model, x, y)
        if not isinstance(result, Evaluation):
            raise TaskError(
                f"task {self.arch!r}: evaluate_fn returned {type(result).__name__}, not Evaluation"
            )
        return result

    def score(self, model: nn.Module, data: TrainerData) -> float:
        """The model-selection metric (Algorithm 1) on the test split: higher is better."""
        return selection_metric(self.evaluate(model, data.test_x, data.test_y), self.kind)

    def register(self) -> None:
        """Make this task's model one the whole package knows by its name.

        After this, :func:`~mcfl_chain.learning.models.create_model` builds it (seeded
        as :meth:`create_model` does), the weights codec encodes and checks it, and
        :func:`~mcfl_chain.learning.training.train` and
        :func:`~mcfl_chain.learning.training.evaluate` run its own ``train_fn`` and
        ``evaluate_fn`` on such models: the worker runs the task without knowing of it.
        A built-in task (:func:`builtin_task`) registers nothing; registering another
        task under the same name replaces it.

        Raises
        ------
        TaskError
            The task takes a built-in architecture's name with another model.
        """
        if self.arch in BUILTIN_ARCHITECTURES:
            if self.layout != expected_layout(self.arch):
                raise TaskError(
                    f"task {self.arch!r}: {self.arch!r} names a built-in architecture and "
                    f"this task's model differs from it; give the model a name of its own"
                )
            return
        train = None
        if self.train_fn is not None:
            train_fn = self.train_fn

            def train(model: nn.Module, data: TrainerData, **options: Any) -> TrainReport:
                return train_fn(model, data, TrainConfig(**options))

        register_architecture(
            Architecture(
                name=self.arch,
                kind=self.kind,
                build=self.model,
                description=self.description or f"task {self.arch}",
                create=self.create_model,
                train=train,
                evaluate=self.evaluate_fn,
            )
        )
        expected_layout.cache_clear()

    @cached_property
    def layout(self) -> Layout:
        """The model's state-dict layout (names, shapes, dtypes)."""
        return model_layout(self.create_model(0))

    def fingerprint(self) -> str:
        """The model fingerprint (see :mod:`mcfl_chain.learning.fingerprint`)."""
        return layout_fingerprint(self.layout)

    def descriptor(self) -> Task:
        """The network descriptor for this task, fingerprint included.

        ``str()`` of it is what ``devnet up --task`` records, e.g.
        ``"clinic-mlp:clinic#fp=3f9c2a4be01d7c55"``.
        """
        return Task(self.arch, self.datasets, self.fingerprint())

    def check_descriptor(self, descriptor: str | Task) -> Task:
        """Refuse a network whose model this task cannot build.

        Parameters
        ----------
        descriptor
            The network's descriptor (as recorded on chain) or a parsed :class:`Task`.

        Returns
        -------
        Task
            The parsed descriptor. Its datasets are not compared: each trainer holds
            its own data.

        Raises
        ------
        TaskError
            Another architecture name, or another fingerprint.
        """
        task = (
            descriptor
            if isinstance(descriptor, Task)
            else parse_task(descriptor, registered_only=False)
        )
        if task.arch != self.arch:
            raise TaskError(
                f"the network trains {task.arch!r} ({task}), this trainer's task is "
                f"{self.arch!r}: run a task for {task.arch!r}"
            )
        if not task.fingerprint_matches(self.fingerprint()):
            raise TaskError(
                f"the network's model {task.arch!r} has fingerprint {task.fingerprint}, this "
                f"trainer's has {self.fingerprint()}: the model definitions differ (compare "
                f"with check_weights on the network's genesis weights to see how)"
            )
        return task

    def check_weights(self, blob: bytes, what: str = "the network's model") -> None:
        """Refuse weights this task's model cannot load, saying exactly what differs.

        Raises
        ------
        TaskError
            The blob is not a weights file, or its tensors differ in name, shape or dtype
            (one line listing every difference).
        """
        try:
            found = read_layout(blob)
        except ValueError as exc:
            raise TaskError(f"{what}: {exc}") from exc
        difference = compare_layouts(found, self.layout)
        if difference:
            raise TaskError(difference.message(what, f"this trainer's {self.arch!r} model"))

    def encode_weights(self, state_dict: Mapping[str, torch.Tensor]) -> bytes:
        """Weights as the deterministic safetensors blob that goes to storage."""
        return encode_weights(self.arch, state_dict, registered=False)

    def decode_weights(
        self, blob: bytes, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> dict[str, torch.Tensor]:
        """Validate an untrusted weights blob against this task's model and load it.

        Raises
        ------
        mcfl_chain.learning.codec.WeightsError
            See :func:`~mcfl_chain.learning.codec.decode_weights`.
        """
        return decode_weights(blob, self.arch, max_bytes, layout=self.layout)

    def check_data(self, data: TrainerData, samples: int = 4) -> None:
        """Run the model on a few training samples: fail early, with a readable reason.

        Raises
        ------
        TaskError
            The model cannot take the data's features, a classifier's output is not
            N×classes with enough classes for the labels, or an autoencoder's output
            does not have the input's shape.
        """
        model = self.create_model(0)
        x = data.train_x[:samples]
        try:
            with torch.inference_mode():
                output = model.eval()(x)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise TaskError(
                f"task {self.arch!r}: the model cannot take this data's features "
                f"{tuple(x.shape[1:])}: {str(exc).splitlines()[0]}"
            ) from exc
        if self.kind == "autoencoder":
            if output.shape != x.shape:
                raise TaskError(
                    f"task {self.arch!r}: the autoencoder returns {tuple(output.shape)} for "
                    f"inputs {tuple(x.shape)}; it must reconstruct the input's shape"
                )
            return
        if output.ndim != 2 or output.shape[0] != x.shape[0]:
            raise TaskError(
                f"task {self.arch!r}: the classifier returns {tuple(output.shape)} for "
                f"{x.shape[0]} samples; expected N×classes logits"
            )
        if output.shape[1] < data.num_classes:
            raise TaskError(
                f"task {self.arch!r}: the model has {output.shape[1]} outputs, the data "
                f"{data.num_classes} classes; use a model with at least {data.num_classes}"
            )


def builtin_task(
    arch: str,
    data: TrainerDataSpec | str | os.PathLike[str],
    *,
    root: str | os.PathLike[str] | None = None,
    classes: tuple[str, ...] | None = None,
    split: tuple[float, float, float] = DEFAULT_SPLIT,
    seed: int = 0,
) -> LearningTask:
    """A built-in LeNet architecture as a :class:`LearningTask`.

    The model, its seeded initialisation, the training and the evaluation are the
    package's own (:func:`~mcfl_chain.learning.models.create_model`,
    :func:`~mcfl_chain.learning.training.train`, :func:`~mcfl_chain.learning.training.evaluate`),
    unchanged.

    Parameters
    ----------
    arch
        ``"lenet5"`` (or ``"lenet"``), ``"lenet-light"`` or ``"lenet-cae"``.
    data
        A :class:`TrainerDataSpec` (a registered dataset, masks, seed: the scenarios),
        or the path of the trainer's own data, an ``.npz`` file or an image folder
        (:func:`~mcfl_chain.learning.local_data.load_trainer_data`).
    root
        Data directory for registered datasets.
    classes, split, seed
        For own data: class names in label order, and the train / validation / test
        fractions and shuffle seed of a single image folder.

    Raises
    ------
    TaskError
        Unknown architecture.
    """
    name = canonical_arch(arch)
    architecture = get_architecture(name)
    if isinstance(data, TrainerDataSpec):
        loader: Callable[[], TrainerData] = partial(
            build_trainer_data, data, Path(root) if root is not None else None
        )
        datasets: tuple[str, ...] = (data.dataset,)
    else:
        path = Path(data)
        loader = partial(load_trainer_data, path, classes=classes, split=split, seed=seed)
        datasets = (re.sub(r"[^A-Za-z0-9._-]", "-", path.stem)[:64] or "own-data",)
    return LearningTask(
        arch=name,
        model=architecture.build,
        data=loader,
        kind=architecture.kind,
        initialise=initialise,
        datasets=datasets,
        description=architecture.description,
    )


def _import_file(path: Path) -> Any:
    module_name = f"mcfl_chain_task_{re.sub(r'[^0-9a-zA-Z_]', '_', path.stem)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise _import_failed(str(path), exc) from exc
    return module


def _import_failed(module: str, exc: Exception) -> TaskError:
    return TaskError(
        f"the task module {module!r} failed to import: {type(exc).__name__}: {exc} "
        f"(import it in Python to see the traceback)"
    )


def _resolve(obj: Any, attribute: str, where: str) -> Any:
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TaskError(f"{where} has no attribute {attribute!r}") from None
    return obj


def _as_task(obj: Any, where: str) -> LearningTask:
    if isinstance(obj, LearningTask):
        return obj
    if callable(obj) and not isinstance(obj, type):
        made = obj()
        if isinstance(made, LearningTask):
            return made
        raise TaskError(f"{where}() returned {type(made).__name__}, not a LearningTask")
    raise TaskError(
        f"{where} is a {type(obj).__name__}, not a LearningTask (or a function returning one)"
    )


def entry_point_tasks() -> list[str]:
    """Names of the tasks installed packages publish under :data:`ENTRY_POINT_GROUP`."""
    return sorted(ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def load_task(reference: str) -> LearningTask:
    """Find a task by reference.

    Parameters
    ----------
    reference
        ``"module:attribute"`` (the module importable, e.g. on ``PYTHONPATH``),
        ``"path/to/file.py:attribute"``, or the name of an entry point of the group
        :data:`ENTRY_POINT_GROUP`. The attribute is a :class:`LearningTask` or a
        function without arguments returning one.

    Returns
    -------
    LearningTask
        The task (its data is not loaded yet).

    Raises
    ------
    TaskError
        The module, file, attribute or entry point does not exist, or is not a task.
    """
    text = reference.strip()
    module_part, sep, attribute = text.rpartition(":")
    if not sep:
        found = [
            ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == text
        ]
        if not found:
            known = ", ".join(entry_point_tasks()) or "none installed"
            raise TaskError(
                f"no task {text!r}: give module:attribute (e.g. my_task:task), "
                f"path/to/file.py:attribute, or an entry point of {ENTRY_POINT_GROUP!r} "
                f"(installed: {known})"
            )
        try:
            obj = found[0].load()
        except (ImportError, AttributeError) as exc:
            raise TaskError(f"the task entry point {text!r} cannot be loaded: {exc}") from exc
        return _as_task(obj, f"entry point {text!r} ({found[0].value})")
    if not module_part or not attribute:
        raise TaskError(f"cannot read the task {text!r}: expected module:attribute")
    if module_part.endswith(".py"):
        path = Path(module_part).expanduser()
        if not path.is_file():
            raise TaskError(f"the task file {path} does not exist")
        module = _import_file(path)
    else:
        try:
            module = importlib.import_module(module_part)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_part.startswith(exc.name):
                raise TaskError(
                    f"no module {module_part!r} for the task {text!r}: install it, add its "
                    f"folder to PYTHONPATH, or give the file (path/to/{module_part}.py:"
                    f"{attribute})"
                ) from exc
            raise _import_failed(module_part, exc) from exc
        except Exception as exc:
            raise _import_failed(module_part, exc) from exc
    return _as_task(_resolve(module, attribute, f"{module_part}"), text)
