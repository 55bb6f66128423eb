"""FedAvg properties (hypothesis): order invariance and recomputation are bit-exact, the
weights are the sample counts, and identical updates average to themselves.

:func:`~mcfl_chain.algorithms.fedavg.fedavg` sorts the updates by id and accumulates in a
fixed sequence of float64 operations, so the strongest true statements are exact: any
order of the same updates, and any recomputation from copies of them, give the very same
bytes. Proportionality to the sample counts is checked against an independent float64
reference (``numpy.average``) to a few ulps, and exactly where IEEE arithmetic makes it so.
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction
from typing import Literal

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mcfl_chain.algorithms.fedavg import fedavg

PROPERTY = settings(max_examples=40, derandomize=True, database=None)

# bfloat16 values are drawn as float32 ones and rounded to bfloat16 by torch.
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# Sample counts of real trainers; a sum stays far below 2**29 (see the exactness test).
COUNTS = st.integers(min_value=1, max_value=100_000)


def _values(dtype: torch.dtype, size: int) -> st.SearchStrategy[list[float]]:
    """``size`` finite values representable in ``dtype``, of very different magnitudes so
    that a change in the order of the float64 additions changes the rounding."""
    width: Literal[16, 32, 64] = (
        16 if dtype == torch.float16 else 64 if dtype == torch.float64 else 32
    )
    bound = 60_000.0 if dtype == torch.float16 else 2.0**100
    element = st.floats(-bound, bound, width=width, allow_nan=False, allow_infinity=False)
    return st.lists(element, min_size=size, max_size=size)


@st.composite
def update_sets(draw: st.DrawFn, min_size: int = 1, max_size: int = 6) -> list:
    """Updates ``(id, num_samples, state)`` sharing keys, shapes and dtypes: one floating
    tensor of a drawn dtype and shape, and an integer counter (BatchNorm's kind)."""
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    shape = draw(st.sampled_from([(1,), (5,), (2, 3)]))
    count = draw(st.integers(min_size, max_size))
    ids = draw(st.lists(st.integers(0, 2**64 - 1), min_size=count, max_size=count, unique=True))
    updates = []
    for update_id in ids:
        values = draw(_values(dtype, math.prod(shape)))
        weights = torch.tensor(values, dtype=torch.float64).to(dtype).reshape(shape)
        steps = torch.tensor(draw(st.integers(0, 10**6)))
        updates.append((update_id, draw(COUNTS), {"w": weights, "steps": steps}))
    return updates


def _bytes(state: dict[str, torch.Tensor]) -> list[tuple[str, str, tuple[int, ...], bytes]]:
    """A state dict as comparable bytes: key order, dtypes, shapes and raw contents."""
    return [
        (key, str(t.dtype), tuple(t.shape), t.view(torch.uint8).numpy().tobytes())
        if t.dtype == torch.bfloat16
        else (key, str(t.dtype), tuple(t.shape), t.numpy().tobytes())
        for key, t in state.items()
    ]


@PROPERTY
@given(updates=update_sets(min_size=2), data=st.data())
def test_any_order_of_the_updates_gives_the_same_bytes(updates: list, data: st.DataObject) -> None:
    # Prepare
    permuted = data.draw(st.permutations(updates))

    # Execute / Assert: bit-identical, not merely close.
    assert _bytes(fedavg(permuted)) == _bytes(fedavg(updates))


@PROPERTY
@given(updates=update_sets())
def test_recomputing_from_copies_gives_the_same_bytes_and_leaves_the_inputs(updates: list) -> None:
    # Prepare: deep copies, with the state dicts' keys in another insertion order.
    before = [(i, n, _bytes(s)) for i, n, s in updates]
    copies = [(i, n, dict(reversed(copy.deepcopy(s).items()))) for i, n, s in updates]

    # Execute
    first, second = fedavg(updates), fedavg(copies)

    # Assert
    assert _bytes(first) == _bytes(second)
    assert list(first) == sorted(first)
    assert [(i, n, _bytes(s)) for i, n, s in updates] == before


def _rounding(dtype: torch.dtype, values: np.ndarray) -> np.ndarray:
    """Largest error of the cast of float64 ``values`` to ``dtype``: half an ulp, relative,
    or half the smallest subnormal near zero."""
    relative, absolute = {
        torch.float16: (2**-11, 2**-25),
        torch.bfloat16: (2**-8, 2**-134),
        torch.float32: (2**-24, 2**-150),
    }.get(dtype, (0.0, 0.0))
    return relative * np.abs(values) + absolute


@PROPERTY
@given(updates=update_sets())
def test_the_weights_are_the_sample_counts(updates: list) -> None:
    # Prepare: the reference Σ nᵢ·wᵢ / Σ nᵢ computed another way, in float64.
    values = np.stack([s["w"].to(torch.float64).numpy() for _, _, s in updates])
    counts = np.array([n for _, n, _ in updates], dtype=np.float64)
    reference = np.average(values, axis=0, weights=counts)
    dtype = updates[0][2]["w"].dtype

    # Execute
    result = fedavg(updates)

    # Assert: within the rounding of two k-term float64 sums (relative to the largest
    # value), plus the final cast to the tensor's dtype.
    summing = (len(updates) + 2) * 2**-52 * np.abs(values).max(axis=0)
    assert result["w"].dtype == dtype
    error = np.abs(result["w"].to(torch.float64).numpy() - reference)
    assert np.all(error <= summing + _rounding(dtype, reference))
    # Integer counters are not averaged: the element-wise maximum.
    assert result["steps"].item() == max(s["steps"].item() for _, _, s in updates)


@st.composite
def integer_update_sets(draw: st.DrawFn) -> list:
    """Updates whose weights are whole numbers, small enough for their dtype to hold them."""
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    bound = {torch.float16: 2**11, torch.bfloat16: 2**8}.get(dtype, 2**20)
    count = draw(st.integers(1, 6))
    ids = draw(st.lists(st.integers(0, 1000), min_size=count, max_size=count, unique=True))
    element = st.integers(-bound, bound)
    return [
        (
            i,
            draw(COUNTS),
            {"w": torch.tensor(draw(st.lists(element, min_size=4, max_size=4))).to(dtype)},
        )
        for i in ids
    ]


@PROPERTY
@given(updates=integer_update_sets())
def test_an_exact_weighted_sum_gives_the_correctly_rounded_mean(updates: list) -> None:
    # Prepare: whole weights below 2**20 and counts below 2**17 keep every product
    # nᵢ·wᵢ and partial sum an integer below 2**53, exact in float64; the result must then
    # be the float64 nearest to the exact Σ nᵢ·wᵢ / Σ nᵢ (one correctly rounded division,
    # not a multiplication by a rounded 1/Σ nᵢ), cast to the dtype (SPEC §3, steps 2-3).
    total = sum(n for _, n, _ in updates)
    dtype = updates[0][2]["w"].dtype
    expected = []
    for position in range(4):
        weighted = sum(n * int(s["w"][position].item()) for _, n, s in updates)
        expected.append(float(Fraction(weighted, total)))  # correctly rounded to float64

    # Execute
    result = fedavg(updates)["w"]

    # Assert
    assert torch.equal(result, torch.tensor(expected, dtype=torch.float64).to(dtype))


@PROPERTY
@given(updates=update_sets(), shift=st.integers(1, 10))
def test_scaling_every_count_by_a_power_of_two_changes_no_bit(updates: list, shift: int) -> None:
    # nᵢ·2ᵏ·wᵢ and Σ nᵢ·2ᵏ are the unscaled values times 2ᵏ exactly, so only the
    # proportions of the counts matter, to the last bit.
    scaled = [(i, n << shift, s) for i, n, s in updates]
    assert _bytes(fedavg(scaled)) == _bytes(fedavg(updates))


@PROPERTY
@given(updates=update_sets(max_size=4), extra=st.integers(1, 10**9))
def test_a_dominant_count_pulls_the_average_onto_its_update(updates: list, extra: int) -> None:
    # Prepare: the first update gets ``extra`` more samples; the others keep theirs.
    (first_id, first_n, first_state), *rest = updates
    heavy = [(first_id, first_n + extra, first_state), *rest]
    own = first_state["w"].to(torch.float64).numpy()
    others = sum(n for _, n, _ in rest)
    spread = np.zeros_like(own)
    for _, _, state in rest:
        spread = np.maximum(spread, np.abs(state["w"].to(torch.float64).numpy() - own))
    total = first_n + extra + others

    # Execute
    result = fedavg(heavy)["w"].to(torch.float64).numpy()

    # Assert: |avg − w₁| = |Σ_{j≠1} nⱼ(wⱼ − w₁)| / N <= (Σ_{j≠1} nⱼ / N)·spread, up to
    # the rounding of the float64 sums and of the final cast.
    magnitude = np.abs(own) + spread
    summing = (len(heavy) + 2) * 2**-52 * magnitude
    bound = others / total * spread + summing + _rounding(first_state["w"].dtype, magnitude)
    assert np.all(np.abs(result - own) <= bound)


@PROPERTY
@given(updates=update_sets())
def test_identical_updates_average_to_that_update(updates: list) -> None:
    # Prepare: every update carries the first one's tensors, with its own count (one
    # update alone is the case k = 1).
    _, _, state = updates[0]
    same = [(i, n, {k: t.clone() for k, t in state.items()}) for i, n, _ in updates]
    dtype = state["w"].dtype

    # Execute
    result = fedavg(same)

    # Assert: for float16/bfloat16/float32 weights (<= 24-bit significands) each nᵢ·w,
    # their sum N·w and N·w / N are exact in float64 while N < 2**29, so the update comes
    # back exactly (every value equal; a -0.0 comes back +0.0, as the accumulator starts
    # at +0.0 and -0.0 + +0.0 = +0.0 in IEEE arithmetic). Float64 weights are not exact
    # (one update of 3 samples, w = 0.1: 0.1·3 / 3 ≠ 0.1): they come back within the
    # rounding of the sum.
    assert sum(n for _, n, _ in same) < 2**29
    if dtype == torch.float64:
        expected = state["w"].numpy()
        assert np.allclose(result["w"].numpy(), expected, rtol=(len(same) + 2) * 2**-52, atol=0)
    else:
        assert result["w"].dtype == dtype and torch.equal(result["w"], state["w"])
    assert torch.equal(result["steps"], state["steps"])
