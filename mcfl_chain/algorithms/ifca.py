"""IFCA's clusters on a DAG (Ghosh et al. 2020): which model is each cluster's newest.

Server-side IFCA keeps k models; a model nobody chose in a round keeps its weights and
is offered again the next round. On the DAG a cluster is a lineage: a model trained
from the root (the first round) starts one, and every model aggregated on a parent
continues its parent's. The newest model of each lineage is that cluster's model now.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def cluster_heads(models: Iterable[tuple[K, K | None]]) -> list[K]:
    """The newest model of each lineage.

    Parameters
    ----------
    models : Iterable[tuple[K, K | None]]
        ``(model, parent)`` of every model, in the order they were appended (rounds
        ascending, creation order within a round); ``parent`` is the model's first
        parent (None for none). A model whose parent is not an earlier one of
        ``models`` (the root) starts a lineage.

    Returns
    -------
    list[K]
        One model per lineage, the last appended of it, in the order the lineages
        started. Should one parent have two children (aggregators that saw different
        update sets), the later one is the lineage's newest.
    """
    lineage_of: dict[K, K] = {}
    newest: dict[K, K] = {}
    for model, parent in models:
        start = lineage_of.get(parent, model) if parent is not None else model
        lineage_of[model] = start
        newest[start] = model
    return list(newest.values())
