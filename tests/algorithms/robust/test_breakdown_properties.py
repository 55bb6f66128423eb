"""Each robust rule's guarantee below its breakdown point (hypothesis), and a control at
the breakdown point showing the bound is not loose.

- coordinate-wise median: with fewer than half the updates arbitrary, every coordinate
  stays within the honest values' range (:mod:`~mcfl_chain.algorithms.robust.median`);
- trimmed mean: with at most ``k = ⌊β·n⌋`` arbitrary updates (the ``k`` cut on each side,
  :mod:`~mcfl_chain.algorithms.robust.trimmed_mean`), likewise;
- Krum / Multi-Krum with ``n >= 2f + 3`` and at most ``f`` arbitrary updates: a chosen
  update is honest or lies within ``D·√((n − f − 2) / (n − 2f − 1))`` of an honest one,
  ``D`` the honest updates' diameter (it scores no more than some honest update, whose
  ``n − f − 2`` nearest can all be honest, while at least ``n − 2f − 1`` of its own
  nearest are honest): an update farther away is never chosen
  (:mod:`~mcfl_chain.algorithms.robust.krum`);
- norm clipping: every clipped delta has norm ``<= τ``, so the aggregate lies within
  ``τ`` of the parent whatever the updates; with the median bound and fewer than half
  the updates arbitrary, within the largest honest delta's norm, and at least half the
  updates are not scaled (:mod:`~mcfl_chain.algorithms.robust.clipping`).

The adversaries choose any finite values (up to float32's largest), their ids and their
sample counts (up to 10¹²); non-finite values are refused by the rules (tested in their
own modules).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mcfl_chain.algorithms.robust.clipping import clip_factors, delta_norms, norm_clipped_fedavg
from mcfl_chain.algorithms.robust.krum import KrumSelection, MultiKrumSelection, krum, multi_krum
from mcfl_chain.algorithms.robust.median import coordinate_median
from mcfl_chain.algorithms.robust.trimmed_mean import trimmed_count, trimmed_mean

PROPERTY = settings(max_examples=25, derandomize=True, database=None)
EDGE = settings(max_examples=6, derandomize=True, database=None)

SHAPES = {"w": (3,), "b": (1,)}
SIZE = sum(math.prod(shape) for shape in SHAPES.values())
FLOAT32_MAX = float(np.finfo(np.float32).max)

HONEST32 = st.floats(-1e6, 1e6, width=32)
# Far away, near the honest values, or exactly on them: all an adversary may try.
HOSTILE32 = st.one_of(
    st.sampled_from([FLOAT32_MAX, -FLOAT32_MAX, 1e30, -1e30, 0.0]),
    st.floats(-100.0, 100.0, width=32),
    st.floats(width=32, allow_nan=False, allow_infinity=False),
)
# A whole update: one extreme value everywhere (the strongest pull), or any values.
HOSTILE_UPDATE = st.one_of(
    st.sampled_from([FLOAT32_MAX, -FLOAT32_MAX, 1e30]).map(lambda v: [v] * SIZE),
    st.lists(HOSTILE32, min_size=SIZE, max_size=SIZE),
)
GRID = st.integers(-64, 64).map(lambda i: i / 16)
HOSTILE64 = st.one_of(st.sampled_from([1e150, -1e150, 1e12, -1e12]), GRID)


def _up_to(most: int) -> st.SearchStrategy[int]:
    """A number of hostile updates in ``0 … most``, often ``most`` itself: the guarantee's
    edge, where a rule that tolerated one fewer would fail."""
    return st.one_of(st.just(most), st.integers(0, most))


def _state(values: list[float], dtype: torch.dtype, steps: int = 0) -> dict[str, torch.Tensor]:
    """A state dict of ``SHAPES`` filled with ``values`` in order, plus a counter."""
    state, start = {}, 0
    for key, shape in SHAPES.items():
        size = math.prod(shape)
        state[key] = torch.tensor(values[start : start + size], dtype=dtype).reshape(shape)
        start += size
    return state | {"steps": torch.tensor(steps)}


def _flat(state: dict[str, torch.Tensor]) -> np.ndarray:
    return np.concatenate([state[key].to(torch.float64).numpy().ravel() for key in sorted(SHAPES)])


@st.composite
def attacked(
    draw: st.DrawFn, honest: int, hostile: int, element: st.SearchStrategy, dtype: torch.dtype
) -> tuple[list, set[int]]:
    """``honest + hostile`` updates in a drawn order, and the hostile ones' ids."""
    total = honest + hostile
    ids = draw(st.lists(st.integers(0, 10**9), min_size=total, max_size=total, unique=True))
    updates = []
    for position, update_id in enumerate(ids):
        is_honest = position < honest
        values = draw(
            st.lists(element, min_size=SIZE, max_size=SIZE) if is_honest else HOSTILE_UPDATE
        )
        count = draw(st.integers(1, 1000) if is_honest else st.integers(1, 10**12))
        updates.append((update_id, count, _state(values, dtype, draw(st.integers(0, 99)))))
    return draw(st.permutations(updates)), set(ids[honest:])


def _honest_range(updates: list, hostile: set[int]) -> tuple[np.ndarray, np.ndarray]:
    values = np.stack([_flat(state) for i, _, state in updates if i not in hostile])
    return values.min(axis=0), values.max(axis=0)


# Each guarantee is tested at its edge: the most hostile updates it allows. That covers
# fewer too, as a hostile update may copy an honest one (and the range it must stay in
# is then that of fewer honest updates). Sizes are enumerated so that every parity and
# edge is run; hypothesis draws the values.
HALF = list(range(1, 10))


@pytest.mark.parametrize("n", HALF)
@EDGE
@given(data=st.data())
def test_median_stays_in_the_honest_range_with_fewer_than_half_hostile(
    n: int, data: st.DataObject
) -> None:
    # Prepare: (n − 1) // 2 hostile updates, the most below half of n.
    hostile = (n - 1) // 2
    updates, ids = data.draw(attacked(n - hostile, hostile, HONEST32, torch.float32))
    low, high = _honest_range(updates, ids)

    # Execute
    result = coordinate_median(updates)

    # Assert: every coordinate between the honest extremes; counters take the maximum.
    flat = _flat(result)
    assert np.all((low <= flat) & (flat <= high))
    assert result["steps"].item() == max(state["steps"].item() for _, _, state in updates)


@pytest.mark.parametrize(
    ("n", "points"),
    # (n, β in basis points): k = 0, 1, 1, 2, 1, 3, 4, 2, 3 hostile updates.
    [
        (3, 0),
        (4, 2500),
        (5, 2000),
        (5, 4999),
        (6, 1700),
        (8, 3750),
        (10, 4999),
        (7, 3000),
        (9, 4000),
    ],
)
@EDGE
@given(data=st.data())
def test_trimmed_mean_stays_in_the_honest_range_with_at_most_k_hostile(
    n: int, points: int, data: st.DataObject
) -> None:
    # Prepare: k = ⌊β·n⌋ hostile updates, as many as are cut on each side.
    hostile = trimmed_count(n, points)
    updates, ids = data.draw(attacked(n - hostile, hostile, HONEST32, torch.float32))
    low, high = _honest_range(updates, ids)

    # Execute
    flat = _flat(trimmed_mean(updates, points / 10_000))

    # Assert: each kept value lies between the honest extremes, so does their mean (float
    # rounding of the float64 mean stays far inside a float32 ulp).
    assert np.all((low <= flat) & (flat <= high))


@st.composite
def krum_cases(draw: st.DrawFn) -> tuple[dict[int, np.ndarray], set[int], int, int | None]:
    """Flattened updates, the hostile keys, Krum's f (n >= 2f + 3) and Multi-Krum's m."""
    f = draw(st.integers(0, 3))
    n = draw(st.integers(2 * f + 3, 2 * f + 6))
    hostile = draw(_up_to(f))
    keys = draw(st.permutations(range(n)))
    vector = st.lists(GRID, min_size=3, max_size=3).map(np.array)
    far = st.lists(HOSTILE64, min_size=3, max_size=3).map(np.array)
    vectors = {key: draw(vector if i >= hostile else far) for i, key in enumerate(keys)}
    m = draw(st.one_of(st.none(), st.integers(1, n - f)))
    return vectors, set(keys[:hostile]), f, m


def _within_krum_bound(
    chosen: list[int], vectors: dict[int, np.ndarray], hostile: set[int], f: int
) -> bool:
    honest = [v for key, v in vectors.items() if key not in hostile]
    diameter2 = max(float(np.sum((a - b) ** 2)) for a in honest for b in honest)
    n = len(vectors)
    bound2 = diameter2 * (n - f - 2) / (n - 2 * f - 1)
    for key in chosen:
        nearest2 = min(float(np.sum((vectors[key] - h) ** 2)) for h in honest)
        if nearest2 > bound2 * (1 + 1e-9):
            return False
    return True


@PROPERTY
@given(case=krum_cases())
def test_krum_and_multi_krum_choose_only_updates_near_the_honest_ones(
    case: tuple[dict[int, np.ndarray], set[int], int, int | None],
) -> None:
    # Prepare
    vectors, hostile, f, m = case

    # Execute
    chosen = krum(vectors, f)
    several = multi_krum(vectors, f, m)

    # Assert
    assert _within_krum_bound([chosen], vectors, hostile, f)
    assert several == sorted(set(several)) and len(several) == (
        len(vectors) - f if m is None else m
    )
    assert _within_krum_bound(several, vectors, hostile, f)


@PROPERTY
@given(case=krum_cases(), data=st.data())
def test_krum_selection_rules_add_the_own_update_to_what_krum_keeps(
    case: tuple[dict[int, np.ndarray], set[int], int, int | None], data: st.DataObject
) -> None:
    # Prepare: any trainer, hostile or not, selects.
    vectors, hostile, f, m = case
    own = data.draw(st.sampled_from(sorted(vectors)))

    # Execute
    single = KrumSelection(f).select(own, vectors)
    several = MultiKrumSelection(f, m).select(own, vectors)

    # Assert
    assert single == sorted({own, krum(vectors, f)})
    assert several == sorted({own, *multi_krum(vectors, f, m)})


def _clipping_case(
    draw: Callable[[st.SearchStrategy[Any]], Any], hostile: int, honest: int
) -> tuple:
    parent_values = draw(st.lists(GRID, min_size=SIZE, max_size=SIZE))
    parent = _state(parent_values, torch.float64)
    updates, ids = draw(attacked(honest, hostile, GRID, torch.float64))
    # Honest deltas are grid values (an honest update is parent + delta); hostile ones
    # keep their arbitrary weights.
    shifted = []
    for update_id, count, state in updates:
        if update_id not in ids:
            state = {k: (t + parent[k] if t.is_floating_point() else t) for k, t in state.items()}
        shifted.append((update_id, count, state))
    return shifted, ids, parent


def _distance(state: dict[str, torch.Tensor], parent: dict[str, torch.Tensor]) -> float:
    return float(np.linalg.norm(_flat(state) - _flat(parent)))


def _slack(parent: dict[str, torch.Tensor], bound: float, count: int) -> float:
    """Float rounding of the float64 accumulation and of ``parent + mean``."""
    return 8 * count * 2**-52 * (bound + float(np.abs(_flat(parent)).max())) * math.sqrt(SIZE)


@pytest.mark.parametrize("n", HALF)
@EDGE
@given(data=st.data())
def test_median_clipping_stays_within_the_largest_honest_step(n: int, data: st.DataObject) -> None:
    # Prepare: (n − 1) // 2 hostile updates, the most below half of n.
    hostile = (n - 1) // 2
    updates, ids, parent = _clipping_case(data.draw, hostile, n - hostile)
    honest_steps = [_distance(s, parent) for i, _, s in updates if i not in ids]

    # Execute
    result = norm_clipped_fedavg(updates, parent)
    factors = clip_factors(delta_norms(updates, parent))

    # Assert: the median norm τ is at most the largest honest one, and every clipped
    # delta, so their weighted mean too, is at most τ long; half the updates are unscaled.
    bound = max(honest_steps)
    assert _distance(result, parent) <= bound + _slack(parent, bound, len(updates))
    assert sum(factor == 1.0 for factor in factors.values()) >= math.ceil(len(updates) / 2)


@st.composite
def clipping_any(draw: st.DrawFn) -> tuple:
    return _clipping_case(draw, draw(st.integers(0, 4)), 1)


@PROPERTY
@given(case=clipping_any(), bound=st.sampled_from([1e-3, 0.5, 1.0, 7.0]))
def test_a_fixed_clipping_bound_holds_whatever_the_updates(case: tuple, bound: float) -> None:
    # Prepare: one honest update, up to four hostile ones: no breakdown point.
    updates, _, parent = case

    # Execute
    result = norm_clipped_fedavg(updates, parent, bound=bound)

    # Assert
    assert _distance(result, parent) <= bound + _slack(parent, bound, len(updates))


# Controls: one more hostile update than each guarantee allows, all at float32's largest
# value, drags the aggregate outside the honest range. The properties above are tight.
def _honest(n: int) -> list:
    return [(i, 1, _state([float(i)] * SIZE, torch.float32)) for i in range(n)]


def _hostile(n: int, start: int = 100) -> list:
    return [(start + i, 10**12, _state([FLOAT32_MAX] * SIZE, torch.float32)) for i in range(n)]


@pytest.mark.parametrize("honest", [1, 2, 5])
def test_median_breaks_down_at_half_hostile(honest: int) -> None:
    # n = 2·honest: the two middle values are the largest honest one and the hostile one.
    result = _flat(coordinate_median(_honest(honest) + _hostile(honest)))
    assert np.all(result > honest - 1)


@pytest.mark.parametrize(("n", "beta"), [(5, 0.2), (10, 0.1), (10, 0.3), (3, 0.0)])
def test_trimmed_mean_breaks_down_at_k_plus_one_hostile(n: int, beta: float) -> None:
    k = trimmed_count(n, round(beta * 10_000))
    updates = _honest(n - k - 1) + _hostile(k + 1)
    assert np.all(_flat(trimmed_mean(updates, beta)) > n - k - 2)


@pytest.mark.parametrize("honest", [1, 2, 4])
def test_median_clipping_breaks_down_at_half_hostile(honest: int) -> None:
    parent = _state([0.0] * SIZE, torch.float32)
    updates = _honest(honest) + _hostile(honest)
    largest_honest_step = (honest - 1) * math.sqrt(SIZE)
    assert _distance(norm_clipped_fedavg(updates, parent), parent) > 10 * largest_honest_step + 1
