"""The task interface: built-in adapters, tasks of one's own, and finding them by name."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from mcfl_chain.learning.codec import WeightsError, encode_weights
from mcfl_chain.learning.descriptor import TaskError, parse_task
from mcfl_chain.learning.fingerprint import model_fingerprint
from mcfl_chain.learning.local_data import trainer_data_from_arrays
from mcfl_chain.learning.models import create_model
from mcfl_chain.learning.scenario import TrainerDataSpec, build_trainer_data
from mcfl_chain.learning.tasks import (
    ENTRY_POINT_GROUP,
    LearningTask,
    TrainConfig,
    builtin_task,
    entry_point_tasks,
    load_task,
)
from mcfl_chain.learning.training import TrainReport, evaluate, train

SPEC = TrainerDataSpec(dataset="digits", seed=5, n_samples=120)


def _tabular(n: int = 40, features: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    return trainer_data_from_arrays(x[:30], y[:30], x[30:], y[30:], name="toy")


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))


def _toy_task(**changes) -> LearningTask:
    fields = {"arch": "toy-mlp", "model": _mlp, "data": _tabular, "datasets": ("toy",)}
    return LearningTask(**{**fields, **changes})


@pytest.mark.parametrize("arch", ["lenet5", "lenet-light", "lenet-cae"])
def test_builtin_task_builds_the_same_weights_as_create_model(arch: str) -> None:
    # Prepare
    task = builtin_task(arch, SPEC)

    # Execute
    model = task.create_model(seed=11)

    # Assert
    reference = create_model(arch, seed=11).state_dict()
    assert model.state_dict().keys() == reference.keys()
    assert all(torch.equal(model.state_dict()[k], reference[k]) for k in reference)
    assert model.kind == task.kind == reference_kind(arch)
    assert task.fingerprint() == model_fingerprint(create_model(arch, seed=0))


def reference_kind(arch: str) -> str:
    return "autoencoder" if arch == "lenet-cae" else "classifier"


def test_builtin_task_data_training_and_weights_are_the_packages_own() -> None:
    # Prepare
    task = builtin_task("lenet", SPEC)
    config = TrainConfig(epochs=1, batch_size=16, lr=0.05, seed=3)

    # Execute
    data = task.load_data()
    ours, theirs = task.create_model(1), create_model("lenet5", 1)
    report = task.train(ours, data, config)
    expected = train(theirs, build_trainer_data(SPEC), 1, batch_size=16, lr=0.05, seed=3)

    # Assert: same tensors, same trained weights, same blob bytes as the worker writes.
    assert torch.equal(data.train_x, build_trainer_data(SPEC).train_x)
    assert report.loss == expected.loss
    assert all(torch.equal(ours.state_dict()[k], v) for k, v in theirs.state_dict().items())
    assert task.encode_weights(ours.state_dict()) == encode_weights("lenet5", theirs.state_dict())
    assert task.evaluate(ours, data.test_x, data.test_y) == evaluate(
        theirs, data.test_x, data.test_y
    )
    assert str(task.descriptor()) == f"lenet5:digits#fp={task.fingerprint()}"


def test_builtin_task_on_own_npz_data_trains(tmp_path: Path) -> None:
    # Prepare
    rng = np.random.default_rng(0)
    file = tmp_path / "my images.npz"
    np.savez(
        file,
        x_train=rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
        y_train=rng.integers(0, 10, 20),
        x_test=rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
        y_test=rng.integers(0, 10, 5),
    )
    task = builtin_task("lenet-light", file)

    # Execute
    data = task.load_data()
    task.check_data(data)
    report = task.train(task.create_model(0), data, TrainConfig(epochs=1))

    # Assert
    assert task.datasets == ("my-images",)
    assert report.num_samples == 20 and report.validation is None


def test_own_task_is_seeded_and_leaves_the_callers_random_state_alone() -> None:
    # Prepare
    task = _toy_task()
    torch.manual_seed(123)
    expected_draw = torch.rand(1)
    torch.manual_seed(123)

    # Execute
    a, b, c = task.create_model(4), task.create_model(4), task.create_model(5)
    draw = torch.rand(1)

    # Assert
    assert torch.equal(draw, expected_draw)
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    assert not torch.equal(a.state_dict()["0.weight"], c.state_dict()["0.weight"])
    assert a.kind == "classifier"


def test_own_task_trains_evaluates_and_round_trips_its_weights() -> None:
    # Prepare
    task = _toy_task()
    data = task.load_data()
    model = task.create_model(0)

    # Execute
    report = task.train(model, data, TrainConfig(epochs=30, lr=0.1, batch_size=8))
    blob = task.encode_weights(model.state_dict())
    decoded = task.decode_weights(blob)

    # Assert
    assert report.num_samples == 30
    assert task.score(model, data) >= 0.8
    assert all(torch.equal(decoded[k], v) for k, v in model.state_dict().items())
    wider = _toy_task(model=lambda: nn.Sequential(nn.Linear(6, 9), nn.ReLU(), nn.Linear(9, 2)))
    with pytest.raises(WeightsError, match="wrong shapes or dtypes"):
        wider.decode_weights(blob)


def test_own_train_and_evaluate_functions_are_called() -> None:
    # Prepare
    calls: list[str] = []

    def my_train(model, data, config):
        calls.append(f"train epochs={config.epochs}")
        return TrainReport(len(data.train_y), config.epochs, 0.5, 0.0, None)

    def my_evaluate(model, x, y):
        calls.append(f"evaluate {len(y)}")
        return evaluate(model, x, y, "classifier")

    task = _toy_task(train_fn=my_train, evaluate_fn=my_evaluate)
    data = task.load_data()

    # Execute
    task.train(task.create_model(0), data, TrainConfig(epochs=3))
    task.score(task.create_model(0), data)

    # Assert
    assert calls == ["train epochs=3", "evaluate 10"]


def test_a_train_function_returning_something_else_is_reported() -> None:
    # Prepare
    task = _toy_task(train_fn=lambda model, data, config: 0.5)

    # Execute / Assert
    with pytest.raises(TaskError, match="train_fn returned float, not TrainReport"):
        task.train(task.create_model(0), task.load_data())


def test_descriptor_check_refuses_another_model_and_says_what_differs() -> None:
    # Prepare
    ours = _toy_task()
    theirs = _toy_task(model=lambda: nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)))
    network = str(theirs.descriptor())
    genesis = theirs.encode_weights(theirs.create_model(0).state_dict())

    # Execute / Assert
    assert ours.check_descriptor(str(ours.descriptor())) == ours.descriptor()
    assert ours.check_descriptor("toy-mlp:somebody-else") == parse_task(
        "toy-mlp:somebody-else", registered_only=False
    )
    with pytest.raises(TaskError, match="has fingerprint .*the model definitions differ"):
        ours.check_descriptor(network)
    with pytest.raises(TaskError, match="the network trains 'lenet5'"):
        ours.check_descriptor("lenet5:mnist")
    with pytest.raises(TaskError) as raised:
        ours.check_weights(genesis)
    assert str(raised.value) == (
        "this trainer's 'toy-mlp' model does not match the network's model: 2.bias has "
        "shape 2 instead of 3; 2.weight has shape 2×8 instead of 3×8"
    )


@pytest.mark.parametrize(
    "model, match",
    [
        (lambda: nn.Linear(5, 2), "cannot take this data's features \\(6,\\)"),
        (lambda: nn.Linear(6, 1), "has 1 outputs, the data 2 classes"),
        (lambda: nn.Sequential(nn.Linear(6, 2), nn.Flatten(0)), "returns \\(8,\\) for 4 samples"),
    ],
)
def test_check_data_says_why_model_and_data_do_not_fit(model, match: str) -> None:
    # Prepare
    task = _toy_task(model=model)

    # Execute / Assert
    with pytest.raises(TaskError, match=match):
        task.check_data(task.load_data())


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"arch": "Toy MLP"}, "task architecture name 'Toy MLP'"),
        ({"kind": "regressor"}, "kind must be"),
        ({"datasets": ()}, "names no dataset"),
        ({"model": lambda: "not a module"}, "model\\(\\) returned str"),
        ({"data": lambda: {"x": 1}}, "data\\(\\) returned dict, not TrainerData"),
    ],
)
def test_malformed_tasks_are_reported(changes: dict, match: str) -> None:
    with pytest.raises(TaskError, match=match):
        task = _toy_task(**changes)
        task.create_model(0)
        task.load_data()


def _write_module(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return path


TASK_MODULE = """
    import numpy as np
    from torch import nn
    from mcfl_chain.learning.local_data import trainer_data_from_arrays
    from mcfl_chain.learning.tasks import LearningTask

    def _tabular():
        x = np.arange(24, dtype=np.float32).reshape(4, 6)
        return trainer_data_from_arrays(x[:3], [0, 1, 0], x[3:], [1])

    def _model():
        return nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))

    class Holder:
        task = LearningTask(arch="file-task", model=_model, data=_tabular)

    task = Holder.task

    def make_task():
        return Holder.task

    not_a_task = 42
"""


def test_load_task_by_module_attribute_file_function_and_dotted_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prepare
    path = _write_module(tmp_path / "mods", "org_task_a", TASK_MODULE)
    monkeypatch.syspath_prepend(str(path.parent))

    # Execute
    found = [
        load_task("org_task_a:task"),
        load_task("org_task_a:make_task"),
        load_task("org_task_a:Holder.task"),
        load_task(f"{path}:task"),
    ]

    # Assert
    assert all(t.arch == "file-task" for t in found)
    assert found[0] is found[1] is found[2]


@pytest.mark.parametrize(
    "reference, match",
    [
        ("org_task_b:nothing", "has no attribute 'nothing'"),
        ("org_task_b:not_a_task", "is a int, not a LearningTask"),
        ("no_such_module_xyz:task", "no module 'no_such_module_xyz'.*PYTHONPATH"),
        ("{tmp}/absent.py:task", "the task file .*absent.py does not exist"),
        ("org_task_b:", "expected module:attribute"),
        ("org_task_broken:task", "the task module 'org_task_broken' failed to import: "),
        ("unknown-task-name", f"an entry point of '{ENTRY_POINT_GROUP}'"),
    ],
)
def test_load_task_errors_say_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: str, match: str
) -> None:
    # Prepare
    path = _write_module(tmp_path / "mods", "org_task_b", TASK_MODULE)
    _write_module(tmp_path / "mods", "org_task_broken", "import not_installed_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(path.parent))

    # Execute / Assert
    with pytest.raises(TaskError, match=match):
        load_task(reference.format(tmp=tmp_path))


def test_load_task_by_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Prepare: an installed distribution publishing a task (a dist-info on sys.path).
    site = tmp_path / "site"
    _write_module(site, "org_task_c", TASK_MODULE)
    info = site / "org_tasks-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: org-tasks\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\norg-mlp = org_task_c:task\nbroken = org_task_c:missing\n"
    )
    monkeypatch.syspath_prepend(str(site))

    # Execute
    task = load_task("org-mlp")

    # Assert
    assert task.arch == "file-task"
    assert {"org-mlp", "broken"} <= set(entry_point_tasks())
    with pytest.raises(TaskError, match="entry point 'broken' cannot be loaded"):
        load_task("broken")


# -- registering a task: the package runs it by name ---------------------------------


def test_a_registered_task_is_built_trained_scored_and_encoded_by_its_name(
    restore_architectures,
) -> None:
    # Prepare: a task whose own training calls the package's SGD inside (no recursion).
    calls: list[str] = []

    def my_train(model, data, config):
        calls.append(f"train lr={config.lr} seed={config.seed}")
        return train(model, data, config.epochs, lr=config.lr, seed=config.seed)

    def my_evaluate(model, x, y):
        calls.append("evaluate")
        return evaluate(model, x, y, "classifier")

    task = _toy_task(train_fn=my_train, evaluate_fn=my_evaluate)
    data = task.load_data()

    # Execute: what the worker does, knowing only the name.
    task.register()
    model = create_model("toy-mlp", seed=3)
    report = train(model, data, 2, batch_size=8, lr=0.1, seed=7)
    result = evaluate(model, data.test_x, data.test_y)
    blob = encode_weights("toy-mlp", model.state_dict())

    # Assert
    assert calls == ["train lr=0.1 seed=7", "evaluate"]
    assert report.epochs == 2 and result.accuracy is not None
    assert not torch.equal(model[0].weight, task.create_model(3)[0].weight)  # trained
    assert model_fingerprint(create_model("toy-mlp", 0)) == task.fingerprint()
    assert blob and model.kind == "classifier"


def test_a_task_may_not_take_a_builtin_name_with_another_model(restore_architectures) -> None:
    # Execute / Assert
    with pytest.raises(TaskError, match="names a built-in architecture"):
        _toy_task(arch="lenet5").register()
    builtin_task("lenet5", SPEC).register()  # the built-in itself: nothing to register
    assert (
        model_fingerprint(create_model("lenet5", 0)) == builtin_task("lenet5", SPEC).fingerprint()
    )
