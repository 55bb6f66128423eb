"""What a worker trains and signs with, checked before it joins: each mistake one line.

No chain here: the task and data checks, the model-against-network check (with the
genesis weights in a local store) and the signing account are exercised directly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import fake_cid
from eth_account import Account

from mcfl_chain.chain.accounts import PASSWORD_ENV, PRIVATE_KEY_ENV, create_keystore
from mcfl_chain.chain.deployment import Deployment
from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.descriptor import Task
from mcfl_chain.learning.models import create_model
from mcfl_chain.learning.tasks import load_task
from mcfl_chain.storage import LocalStorage
from mcfl_chain.strategies import make_strategy
from mcfl_chain.worker.config import WorkerConfig
from mcfl_chain.worker.launch import (
    _trainer_task_and_data,
    check_heads,
    check_model,
    signing_account,
)
from mcfl_chain.worker.preflight import WorkerSetupError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "breast_cancer_mlp.py"
PASSWORD = "a keystore password"

WIDE_TASK = """
from torch import nn
from breast_cancer_mlp import load_data
from mcfl_chain.learning.tasks import LearningTask

def model():
    return nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Linear(64, 16), nn.ReLU(),
                         nn.Linear(16, 2))

task = LearningTask(arch="breast-cancer-mlp", model=model, data=load_data,
                    datasets=("breast-cancer",))
"""


@pytest.fixture(autouse=True)
def clean(monkeypatch, restore_architectures):
    for name in (PASSWORD_ENV, PRIVATE_KEY_ENV, "MCFL_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("MCFL_EXAMPLE_PART", raising=False)
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))


def _deployment(task: str, genesis_cid: str = fake_cid("genesis")) -> Deployment:
    return Deployment(
        chain_id=31337,
        rpc_url="http://127.0.0.1:1",
        addresses={},
        abis={},
        deployment_block=1,
        genesis_cid=genesis_cid,
        task=task,
        min_trainers=2,
        phase_duration=30,
    )


def _network_of_example(tmp_path: Path, *, fingerprint: bool = True):
    """The example task's network: descriptor and genesis weights in a local store."""
    example = load_task(f"{EXAMPLE}:task")
    store = LocalStorage(tmp_path / "blobs")
    genesis = store.put(example.encode_weights(example.create_model(0).state_dict()))
    descriptor = str(example.descriptor() if fingerprint else Task(example.arch, example.datasets))
    return _deployment(descriptor, genesis), store


# -- the model ------------------------------------------------------------------------


def test_a_task_whose_model_differs_is_refused_naming_each_difference(tmp_path):
    # Prepare: the network runs the example; this trainer's task has wider layers.
    dep, store = _network_of_example(tmp_path)
    (tmp_path / "wide.py").write_text(WIDE_TASK)
    config = WorkerConfig(task=f"{tmp_path / 'wide.py'}:task")
    network = Task.parse(dep.task, registered_only=False)
    own, _, _ = _trainer_task_and_data(config, dep, network)

    # Execute
    with pytest.raises(WorkerSetupError) as refused:
        check_model(network, own.arch, dep, store, custom=True)

    # Assert: one line, every tensor that differs, and which is whose.
    message = str(refused.value)
    assert "\n" not in message and message.startswith("refusing to join")
    assert "0.weight has shape 64×30 instead of 32×30" in message
    assert "2.weight has shape 16×64 instead of 16×32" in message
    assert "genesis weights" in message and dep.genesis_cid in message


def test_the_same_model_joins_with_or_without_a_fingerprint_in_the_descriptor(tmp_path):
    for fingerprint in (True, False):
        dep, store = _network_of_example(tmp_path, fingerprint=fingerprint)
        network = Task.parse(dep.task, registered_only=False)
        own, data, group = _trainer_task_and_data(
            WorkerConfig(task=f"{EXAMPLE}:task"), dep, network
        )
        check_model(network, own.arch, dep, store, custom=True)
        assert group == "own data" and data.train_x.shape[1:] == (30,)


def test_a_fingerprint_that_is_not_the_builtin_models_is_refused(tmp_path):
    # Prepare: the genesis weights are LeNet-5's, the descriptor's fingerprint is not.
    store = LocalStorage(tmp_path / "blobs")
    genesis = store.put(encode_weights("lenet5", create_model("lenet5", 0).state_dict()))
    dep = _deployment("lenet5:digits#fp=0123456789abcdef", genesis)

    # Execute / Assert
    with pytest.raises(WorkerSetupError, match="the descriptor was written for another model"):
        check_model(Task.parse(dep.task), "lenet5", dep, store, custom=False)
    dep = _deployment("lenet5:digits#fp=0123456789abcdef", fake_cid("not stored"))
    with pytest.raises(WorkerSetupError, match="fingerprint .* 0123456789abcdef: the model"):
        check_model(Task.parse(dep.task), "lenet5", dep, store, custom=False)


# -- the data -------------------------------------------------------------------------


def _npz(path: Path, labels_up_to: int = 9, samples: int = 40) -> Path:
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in (("train", samples), ("test", samples // 4)):
        arrays[f"x_{split}"] = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        arrays[f"y_{split}"] = np.arange(n) % (labels_up_to + 1)
    np.savez(path, **arrays)
    return path


def test_own_npz_data_feeds_the_builtin_architecture(tmp_path):
    # Execute
    own, data, group = _trainer_task_and_data(
        WorkerConfig(data=_npz(tmp_path / "clinic.npz")),
        _deployment("lenet5:digits"),
        Task.parse("lenet5:digits"),
    )

    # Assert
    assert own is None and group == "own data"
    assert tuple(data.train_x.shape) == (40, 1, 28, 28) and data.num_classes == 10


@pytest.mark.parametrize(
    "config, task, expected",
    [
        (
            lambda tmp: WorkerConfig(data=tmp / "missing.npz"),
            "lenet5:digits",
            r"^--data .*missing.npz: the data file .* does not exist",
        ),
        (
            lambda tmp: WorkerConfig(data=_npz(tmp / "wide.npz", labels_up_to=11)),
            "lenet5:digits",
            "the model has 10 outputs, the data 12 classes",
        ),
        (
            lambda tmp: WorkerConfig(task=_task_file(tmp, "data=lambda: load_data()"), data=tmp),
            "breast-cancer-mlp:breast-cancer",
            r"its data\(\) takes no path, so --data cannot reach it: drop --data",
        ),
        (
            lambda tmp: WorkerConfig(task=_task_file(tmp, "data=lambda path: load_data(path)")),
            "breast-cancer-mlp:breast-cancer",
            r"its data\(path\) reads this trainer's records .*: give it with --data PATH$",
        ),
        (
            lambda tmp: WorkerConfig(task=f"{EXAMPLE}:task", data=tmp / "x.npz"),
            "breast-cancer-mlp:breast-cancer",
            "^--data .*x.npz: no such file or folder$",
        ),
        (
            lambda tmp: WorkerConfig(data=tmp / "x.npz"),
            "breast-cancer-mlp:breast-cancer",
            "trains a model of its own .* run its task with --task",
        ),
        (
            lambda tmp: WorkerConfig(task=f"{EXAMPLE}:task"),
            "other-mlp:records",
            "the network trains 'other-mlp' .* is 'breast-cancer-mlp'",
        ),
        (
            lambda tmp: WorkerConfig(task=f"{tmp / 'nowhere.py'}:task"),
            "other-mlp:records",
            "the task file .*nowhere.py does not exist",
        ),
    ],
    ids=[
        "missing file",
        "labels out of range",
        "task without a path",
        "task needing a path",
        "task and no file",
        "no task",
        "other",
        "no file",
    ],
)
def test_data_and_task_mistakes_are_one_line(tmp_path, config, task, expected):
    with pytest.raises(WorkerSetupError, match=expected) as refused:
        _trainer_task_and_data(
            config(tmp_path), _deployment(task), Task.parse(task, registered_only=False)
        )
    assert "\n" not in str(refused.value)


def _task_file(folder: Path, data: str) -> str:
    """A task like the example's whose ``data=`` is ``data``; its reference."""
    (folder / "plain.py").write_text(WIDE_TASK.replace("data=load_data", data))
    return f"{folder / 'plain.py'}:task"


@pytest.mark.parametrize("suffix", [".csv", ".npz"])
def test_data_goes_to_the_tasks_own_data_function(tmp_path, suffix):
    # Prepare: a hospital's 120 records, as a CSV with a header or as arrays.
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    path = tmp_path / f"records{suffix}"
    if suffix == ".csv":
        header = ",".join([f"f{i}" for i in range(30)] + ["label"])
        np.savetxt(path, np.column_stack([x[:120], y[:120]]), delimiter=",", header=header)
    else:
        np.savez(path, x=x[:120], y=y[:120])
    dep = _deployment("breast-cancer-mlp:breast-cancer")

    # Execute
    _, data, group = _trainer_task_and_data(
        WorkerConfig(task=f"{EXAMPLE}:task", data=path),
        dep,
        Task.parse(dep.task, registered_only=False),
    )

    # Assert: the task read the file --data names, not its bundled patients.
    assert len(data.train_y) + len(data.val_y) + len(data.test_y) == 120
    assert group == "own data"


def test_a_task_whose_data_function_fails_is_one_line(tmp_path):
    # Prepare
    (tmp_path / "broken.py").write_text(WIDE_TASK.replace("data=load_data", "data=lambda: 1 / 0"))
    dep = _deployment("breast-cancer-mlp:breast-cancer")

    # Execute / Assert
    with pytest.raises(WorkerSetupError, match="loading its data failed: ZeroDivisionError"):
        _trainer_task_and_data(
            WorkerConfig(task=f"{tmp_path / 'broken.py'}:task"),
            dep,
            Task.parse(dep.task, registered_only=False),
        )


# -- the account ----------------------------------------------------------------------


def test_no_signing_account_lists_the_sources_and_names_the_renamed_variable(monkeypatch):
    # Prepare: the variable older versions read holds a key.
    key = "0x" + "42" * 32
    monkeypatch.setenv("MCFL_KEY", key)

    # Execute / Assert
    with pytest.raises(WorkerSetupError) as refused:
        signing_account(WorkerConfig())
    message = str(refused.value)
    for source in ("--keystore", "--account ALIAS", "--account-index", PRIVATE_KEY_ENV):
        assert source in message
    assert "MCFL_KEY is no longer read" in message and "42" * 32 not in message


def test_one_signing_source_at_a_time(tmp_path):
    with pytest.raises(WorkerSetupError, match="not --keystore and --account-index"):
        signing_account(WorkerConfig(keystore=tmp_path / "k.json", account_index=1))
    with pytest.raises(WorkerSetupError, match="--password-file goes with --keystore"):
        signing_account(WorkerConfig(account_index=1, password_file=tmp_path / "p"))


def test_the_key_from_the_environment_signs_and_a_malformed_one_is_not_echoed(monkeypatch):
    # Prepare
    account = Account.create()
    monkeypatch.setenv(PRIVATE_KEY_ENV, account.key.hex())

    # Execute / Assert
    assert signing_account(WorkerConfig()).address == account.address
    monkeypatch.setenv(PRIVATE_KEY_ENV, "0x1234abcd")
    with pytest.raises(WorkerSetupError, match="is not a private key") as refused:
        signing_account(WorkerConfig())
    assert "1234abcd" not in str(refused.value)


def test_a_keystore_with_its_password_from_env_file_or_prompt(tmp_path, monkeypatch):
    # Prepare
    address, keystore = create_keystore(PASSWORD, tmp_path / "k.json", kdf="pbkdf2", iterations=10)
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    asked: list[str] = []

    def prompt(question: str) -> str:
        asked.append(question)
        return PASSWORD

    # Execute
    from_file = signing_account(WorkerConfig(keystore=keystore, password_file=password_file))
    from_prompt = signing_account(WorkerConfig(keystore=keystore), prompt)
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    from_env = signing_account(WorkerConfig(keystore=keystore))

    # Assert
    assert from_file.address == from_prompt.address == from_env.address == address
    assert len(asked) == 1 and str(keystore) in asked[0]


def test_a_wrong_keystore_password_is_one_line_without_the_password(tmp_path, monkeypatch):
    # Prepare
    _, keystore = create_keystore(PASSWORD, tmp_path / "k.json", kdf="pbkdf2", iterations=10)
    monkeypatch.setenv(PASSWORD_ENV, "not the password at all")

    # Execute / Assert
    with pytest.raises(WorkerSetupError, match="wrong password for the keystore") as refused:
        signing_account(WorkerConfig(keystore=keystore))
    message = str(refused.value)
    assert "not the password" not in message and PASSWORD not in message
    assert refused.value.__cause__ is None


def test_facade_needs_a_network_model_with_its_number_of_heads():
    # Prepare
    facade = make_strategy("facade", clusters=2)

    # Execute / Assert: the right model passes, a plain one or another k is refused
    check_heads(facade, "lenet5-heads2", "lenet5-heads2:digits")
    check_heads(make_strategy("fedavg"), "lenet5", "lenet5:digits")
    with pytest.raises(WorkerSetupError, match="has none: deploy a network for <base>-heads2"):
        check_heads(facade, "lenet5", "lenet5:digits")
    with pytest.raises(WorkerSetupError, match="has 3: give --clusters 3"):
        check_heads(facade, "lenet5-heads3", "lenet5-heads3:digits")
