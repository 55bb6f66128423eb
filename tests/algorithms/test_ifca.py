"""IFCA's clusters on the DAG: each lineage's newest model (a cluster nobody chose lately
is still offered)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mcfl_chain.algorithms.ifca import cluster_heads

ROOT = "root"


def test_a_cluster_nobody_chose_keeps_its_last_model() -> None:
    # Round 0: clusters a and b on the root. Round 1: both continue. Round 2: only a's
    # members aggregate (b chosen by nobody); round 3: a again.
    appended = [
        ("a0", ROOT), ("b0", ROOT),
        ("a1", "a0"), ("b1", "b0"),
        ("a2", "a1"),
        ("a3", "a2"),
    ]  # fmt: skip

    # Execute / Assert: b1 is b's model still, in the order the clusters started
    assert cluster_heads(appended) == ["a3", "b1"]
    # b's members come back in round 4, on b1: the newest of b is then b4
    assert cluster_heads([*appended, ("b4", "b1")]) == ["a3", "b4"]
    assert cluster_heads([]) == []


def test_a_parent_with_two_children_has_the_later_one_as_its_head() -> None:
    # Aggregators of a0 that saw different update sets: two children in one round.
    assert cluster_heads([("a0", ROOT), ("x", "a0"), ("y", "a0")]) == ["y"]
    # A first parent None starts a lineage too.
    assert cluster_heads([("a0", None), ("a1", "a0")]) == ["a1"]


@settings(max_examples=30, derandomize=True, database=None)
@given(st.lists(st.integers(-1, 30), max_size=30))
def test_one_head_per_lineage_and_each_the_newest_of_it(parents: list[int]) -> None:
    # Prepare: model i's parent is an earlier model (parents[i] mod i), or the root (-1).
    appended = [(i, p % i if p >= 0 and i > 0 else None) for i, p in enumerate(parents)]
    start = {}
    for model, parent in appended:
        start[model] = model if parent is None else start[parent]

    # Execute
    heads = cluster_heads(appended)

    # Assert: one head per lineage started, the highest-numbered (latest) model of it.
    starts = [m for m, p in appended if p is None]
    assert heads == [max(m for m in start if start[m] == s) for s in starts]
