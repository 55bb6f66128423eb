"""The task descriptor: parse and format, with and without a model fingerprint."""

from __future__ import annotations

import pytest

from mcfl_chain.learning.descriptor import (
    MAX_DESCRIPTOR_LENGTH,
    Task,
    TaskError,
    format_task,
    parse_task,
)
from mcfl_chain.learning.fingerprint import model_fingerprint
from mcfl_chain.learning.models import create_model


@pytest.mark.parametrize(
    "text, arch, datasets",
    [
        ("lenet5:fashion-mnist", "lenet5", ("fashion-mnist",)),
        ("lenet:mnist", "lenet5", ("mnist",)),
        ("LeNet-5:digits", "lenet5", ("digits",)),
        ("lenet-light:fashion-mnist+mnist", "lenet-light", ("fashion-mnist", "mnist")),
    ],
)
def test_descriptors_without_fingerprint_parse_as_before(text, arch, datasets) -> None:
    # Execute
    task = Task.parse(text)

    # Assert
    assert (task.arch, task.datasets, task.fingerprint) == (arch, datasets, None)
    assert task.registered


def test_fingerprint_round_trips() -> None:
    # Prepare
    fp = model_fingerprint(create_model("lenet5", seed=0))

    # Execute
    text = format_task("lenet5", ["fashion-mnist"], fp)
    task = parse_task(text)

    # Assert
    assert text == f"lenet5:fashion-mnist#fp={fp}"
    assert task == Task("lenet5", ("fashion-mnist",), fp)
    assert task.format() == str(task) == text
    assert task.fingerprint_matches(fp)
    assert not task.fingerprint_matches("0" * 16)


def test_fingerprint_is_read_in_lower_case_and_may_be_a_longer_prefix() -> None:
    # Execute
    task = parse_task("lenet5:mnist#fp=3F9C2A4BE01D7C55AA")

    # Assert
    assert task.fingerprint == "3f9c2a4be01d7c55aa"
    assert task.fingerprint_matches("3f9c2a4be01d7c55")


def test_custom_architecture_needs_registered_only_false() -> None:
    # Prepare
    text = "Breast-Cancer-MLP:clinic_a#fp=0123456789abcdef"

    # Execute
    task = parse_task(text, registered_only=False)

    # Assert
    assert task == Task("breast-cancer-mlp", ("clinic_a",), "0123456789abcdef")
    assert not task.registered
    with pytest.raises(TaskError, match="cannot run: unknown architecture"):
        parse_task(text)


def test_with_fingerprint_adds_and_removes() -> None:
    # Prepare
    task = parse_task("lenet5:digits")

    # Execute
    with_fp = task.with_fingerprint("ABCDEF0123456789")

    # Assert
    assert str(with_fp) == "lenet5:digits#fp=abcdef0123456789"
    assert with_fp.with_fingerprint(None) == task


@pytest.mark.parametrize(
    "text, match",
    [
        ("lenet5", "is not '<architecture>:<dataset>"),
        ("lenet5:", "is not '<architecture>:<dataset>"),
        ("lenet5:mnist+", "is not '<architecture>:<dataset>"),
        ("lenet5:mn ist", "dataset name 'mn ist'"),
        ("lenet5:mnist#fp=zz", "hex digits"),
        ("lenet5:mnist#fp=", "the only one understood is '#fp=<hex>'"),
        ("lenet5:mnist#fp=0123456789abcdef&v=2", "the only one understood"),
        ("lenet5:mnist#0123456789abcdef", "the only one understood"),
        ("lenet5:" + "m" * 130, f"at most {MAX_DESCRIPTOR_LENGTH} printable"),
        ("lenet5:mnist\n", "printable ASCII"),
        ("resnet:mnist", "cannot run: unknown architecture 'resnet'"),
    ],
)
def test_malformed_descriptors_say_what_is_wrong(text: str, match: str) -> None:
    with pytest.raises(TaskError, match=match):
        parse_task(text)


@pytest.mark.parametrize(
    "arch, datasets, fp, match",
    [
        ("lenet5", [], None, "names no dataset"),
        ("lenet 5", ["mnist"], None, "architecture name 'lenet 5'"),
        ("lenet5", ["a+b"], None, "dataset name 'a\\+b'"),
        ("lenet5", ["mnist"], "nothex!!", "hex digits"),
        ("lenet5", ["d" * 60, "e" * 60], "0" * 16, "more than the 128 allowed"),
    ],
)
def test_format_refuses_what_parse_could_not_read(arch, datasets, fp, match) -> None:
    with pytest.raises(TaskError, match=match):
        format_task(arch, datasets, fp)
