"""examples/breast_cancer_mlp.py: a task that is not built in, found by module:attribute."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcfl_chain.learning.descriptor import parse_task
from mcfl_chain.learning.tasks import LearningTask, TrainConfig, load_task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> LearningTask:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.delenv("MCFL_EXAMPLE_PART", raising=False)
    return load_task("breast_cancer_mlp:task")


def test_one_local_round_trains_and_evaluates(example: LearningTask) -> None:
    # Prepare
    data = example.load_data()
    example.check_data(data)
    model = example.create_model(seed=0)
    before = example.evaluate(model, data.test_x, data.test_y)

    # Execute: one round as a worker plays it: train, publish, fetch, score.
    report = example.train(model, data, TrainConfig(epochs=2, batch_size=32, lr=0.01, seed=1))
    blob = example.encode_weights(model.state_dict())
    fetched = example.create_model(seed=9)
    fetched.load_state_dict(example.decode_weights(blob))
    after = example.evaluate(fetched, data.test_x, data.test_y)

    # Assert
    assert example.arch == "breast-cancer-mlp" and example.kind == "classifier"
    assert data.train_x.shape == (398, 30) and data.num_classes == 2
    assert report.num_samples == 398 and report.validation is not None
    assert after.accuracy is not None and after.accuracy >= 0.9
    assert after.loss < before.loss
    assert example.score(fetched, data) == after.accuracy


def test_its_descriptor_carries_its_fingerprint(example: LearningTask) -> None:
    # Execute
    text = str(example.descriptor())

    # Assert
    assert text == f"breast-cancer-mlp:breast-cancer#fp={example.fingerprint()}"
    assert example.check_descriptor(text) == parse_task(text, registered_only=False)


def test_trainers_get_disjoint_shares(example: LearningTask, monkeypatch) -> None:
    # Prepare
    import breast_cancer_mlp

    # Execute
    shares = [breast_cancer_mlp.share(i, 3, 569) for i in range(3)]
    monkeypatch.setenv("MCFL_EXAMPLE_PART", "1/3")
    second = example.load_data()

    # Assert: 569 patients, none held by two trainers; trainer 1 holds its share.
    assert sorted(int(p) for s in shares for p in s) == list(range(569))
    assert len(second.train_y) + len(second.val_y) + len(second.test_y) == len(shares[1])


def test_its_file_path_form_loads_too() -> None:
    # Execute
    task = load_task(f"{EXAMPLES / 'breast_cancer_mlp.py'}:task")

    # Assert
    assert task.arch == "breast-cancer-mlp"
