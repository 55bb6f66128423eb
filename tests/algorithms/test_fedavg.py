"""FedAvg: hand-computed means, validation, and bit-identity across processes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap

import pytest
import torch

from mcfl_chain.algorithms.fedavg import fedavg


def test_sample_weighted_mean_hand_computed() -> None:
    # (1·10 + 4·30) / 40 = 3.25 ; (−2·10 + 2·30) / 40 = 1.0
    updates = [
        (5, 10, {"w": torch.tensor([1.0, -2.0])}),
        (2, 30, {"w": torch.tensor([4.0, 2.0])}),
    ]
    assert torch.equal(fedavg(updates)["w"], torch.tensor([3.25, 1.0]))


def test_single_update_is_returned_unchanged() -> None:
    w = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(fedavg([(1, 7, {"w": w})])["w"], w)


def test_result_does_not_depend_on_the_input_order() -> None:
    g = torch.Generator().manual_seed(1)
    updates = [(i, 10 + i, {"w": torch.randn(100, generator=g)}) for i in range(6)]
    assert torch.equal(fedavg(updates)["w"], fedavg(list(reversed(updates)))["w"])


def _accumulated_in(dtype: torch.dtype, values: list[float]) -> float:
    """The equal-weight mean of ``values`` summed in ``dtype``, then cast to float32."""
    acc = torch.zeros(1, dtype=dtype)
    for v in values:
        acc = acc + torch.tensor([v], dtype=torch.float32).to(dtype)
    return (acc / len(values)).to(torch.float32).item()


def test_accumulates_in_float64_and_casts_back() -> None:
    # Prepare: 1 + 2⁻²⁴ rounds back to 1 in float32, so a float32 accumulator drops each
    # small term; float64 keeps all three. The two references differ: the test can tell.
    values = [1.0, 2**-24, 2**-24, 2**-24]
    in_float64 = _accumulated_in(torch.float64, values)
    in_float32 = _accumulated_in(torch.float32, values)
    assert in_float64 != in_float32
    updates = [(i, 1, {"w": torch.tensor([v], dtype=torch.float32)}) for i, v in enumerate(values)]

    # Execute
    result = fedavg(updates)["w"]

    # Assert
    assert result.dtype == torch.float32
    assert result.item() == in_float64
    half = fedavg([(1, 1, {"h": torch.tensor([1.0], dtype=torch.float16)})])["h"]
    assert half.dtype == torch.float16


def test_integer_buffers_take_the_maximum() -> None:
    updates = [
        (1, 5, {"w": torch.tensor([0.0]), "steps": torch.tensor(40)}),
        (2, 5, {"w": torch.tensor([2.0]), "steps": torch.tensor(95)}),
    ]
    result = fedavg(updates)
    assert result["steps"].item() == 95 and result["steps"].dtype == torch.int64
    assert list(result) == ["steps", "w"]


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        ([], "at least one update"),
        ([(1, 1, {"w": torch.zeros(1)}), (1, 2, {"w": torch.zeros(1)})], "same update id twice"),
        ([(1, 0, {"w": torch.zeros(1)})], "0 samples"),
        ([(1, 1, {"w": torch.zeros(1)}), (2, 1, {"v": torch.zeros(1)})], "lack or have"),
        ([(1, 1, {"w": torch.zeros(1)}), (2, 1, {"w": torch.zeros(2)})], "tensor 'w'"),
        ([(1, 1, {"w": torch.zeros(1)}), (2, 1, {"w": torch.zeros(1).double()})], "float64"),
    ],
)
def test_invalid_updates_are_refused(updates: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fedavg(updates)


# The same 12 LeNet-5 updates are rebuilt in each process from seeds, aggregated, and the
# aggregate's bytes hashed. The processes differ in thread count and input order.
_AGGREGATE_SCRIPT = textwrap.dedent(
    """
    import hashlib, sys
    import torch
    from mcfl_chain.algorithms.fedavg import fedavg
    from mcfl_chain.learning.models import create_model

    torch.set_num_threads(int(sys.argv[1]))
    updates = []
    for i in range(12):
        state = create_model("lenet5", seed=100 + i).state_dict()
        updates.append((1000 - 7 * i, 50 + 13 * i, state))
    if sys.argv[2] == "reversed":
        updates.reverse()
    aggregate = fedavg(updates)
    digest = hashlib.sha256()
    for key in sorted(aggregate):
        digest.update(key.encode())
        digest.update(aggregate[key].numpy().tobytes())
    print(digest.hexdigest())
    """
)


def _digest_in_subprocess(threads: int, order: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", _AGGREGATE_SCRIPT, str(threads), order],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return completed.stdout.strip()


def test_fedavg_is_bit_identical_across_processes() -> None:
    # Execute
    first = _digest_in_subprocess(1, "forward")
    second = _digest_in_subprocess(2, "reversed")
    # Assert: identical hashes, and not a degenerate output.
    assert len(first) == 64 and first == second
    empty = hashlib.sha256().hexdigest()
    assert first != empty
