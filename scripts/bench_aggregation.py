"""Aggregation cost: update selection (divergence filtering) and FedAvg for K LeNet updates.

For each K, builds K LeNet-5 updates around one parent (the parent plus Gaussian noise,
a few of them far away), then times, per trainer's step 3 of a round:

- flattening the K state dicts into vectors (:func:`flatten_state`),
- Algorithm 2 with the L2 weight divergence and with the cosine distance,
- FedAvg of the kept updates (float64, ascending ids),
- decoding the K weight blobs (validation included), as fetched from storage.

Each figure is the median of ``--repeats`` runs. Prints a table; nothing is asserted.

    .venv/bin/python scripts/bench_aggregation.py --sizes 10,38,100
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import click
import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from mcfl_chain.algorithms.divergence import cosine_distance, flatten_state, weight_divergence
from mcfl_chain.algorithms.fedavg import fedavg
from mcfl_chain.algorithms.update_selection import select_updates
from mcfl_chain.learning.codec import decode_weights, encode_weights
from mcfl_chain.learning.models import create_model


def _median_ms(function: Callable[[], object], repeats: int) -> float:
    function()  # warm-up: the first call pays one-time allocations and library set-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return 1000.0 * statistics.median(times)


def make_updates(
    k: int, arch: str, seed: int, outliers: float
) -> tuple[dict[str, torch.Tensor], list[tuple[int, int, dict[str, torch.Tensor]]]]:
    """A parent state and ``k`` updates around it; a fraction ``outliers`` diverges 10×."""
    parent = create_model(arch, seed).state_dict()
    generator = torch.Generator().manual_seed(seed)
    n_outliers = round(outliers * k)
    updates = []
    for i in range(k):
        scale = 0.1 if i >= k - n_outliers else 0.01
        state = {
            name: tensor + scale * torch.randn(tensor.shape, generator=generator)
            for name, tensor in parent.items()
        }
        updates.append((i + 1, 1000 + 10 * i, state))
    return parent, updates


def measure(
    k: int, arch: str, tolerance: float, outliers: float, repeats: int, seed: int
) -> list[str]:
    """One table row: the figures for ``k`` updates."""
    parent, updates = make_updates(k, arch, seed, outliers)
    blobs = [encode_weights(arch, state) for _, _, state in updates]

    def flatten() -> dict[int, np.ndarray]:
        return {uid: flatten_state(state) for uid, _, state in updates}

    vectors = flatten()
    parent_vector = flatten_state(parent)
    deltas = {uid: vector - parent_vector for uid, vector in vectors.items()}
    own = updates[0][0]
    kept = set(select_updates(own, vectors, tolerance, weight_divergence))
    chosen = [update for update in updates if update[0] in kept]
    flatten_ms = _median_ms(flatten, repeats)
    l2_ms = _median_ms(lambda: select_updates(own, vectors, tolerance, weight_divergence), repeats)
    cosine_ms = _median_ms(lambda: select_updates(own, deltas, tolerance, cosine_distance), repeats)
    fedavg_kept_ms = _median_ms(lambda: fedavg(chosen), repeats)
    fedavg_all_ms = _median_ms(lambda: fedavg(updates), repeats)
    decode_ms = _median_ms(lambda: [decode_weights(blob, arch) for blob in blobs], repeats)
    return [
        str(k),
        f"{len(kept)}/{k}",
        f"{decode_ms:.1f}",
        f"{flatten_ms:.1f}",
        f"{l2_ms:.1f}",
        f"{cosine_ms:.1f}",
        f"{fedavg_kept_ms:.1f}",
        f"{fedavg_all_ms:.1f}",
        f"{flatten_ms + l2_ms + fedavg_kept_ms:.1f}",
    ]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--sizes",
    default="10,38,100",
    show_default=True,
    help="Comma-separated numbers K of updates on one parent.",
)
@click.option("--arch", default="lenet5", show_default=True, help="Architecture of the updates.")
@click.option(
    "--tolerance",
    type=float,
    default=2.0,
    show_default=True,
    help="Algorithm 2 tolerance, in standard deviations.",
)
@click.option(
    "--outliers",
    type=click.FloatRange(0, 1),
    default=0.1,
    show_default=True,
    help="Fraction of updates made 10× more divergent than the others.",
)
@click.option(
    "--repeats",
    type=click.IntRange(1),
    default=5,
    show_default=True,
    help="Runs per figure; the median is printed.",
)
@click.option(
    "--threads",
    type=click.IntRange(1),
    default=None,
    help="torch CPU threads (default: torch's own choice).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the updates.")
def main(
    sizes: str,
    arch: str,
    tolerance: float,
    outliers: float,
    repeats: int,
    threads: int | None,
    seed: int,
) -> None:
    """Print the time of divergence filtering and FedAvg for K updates."""
    console = Console(width=max(120, Console().width))
    if threads is not None:
        torch.set_num_threads(threads)
    table = Table(title=f"Aggregation of K {arch} updates (median of {repeats}, milliseconds)")
    for column in (
        "K",
        "kept (L2)",
        "decode K blobs",
        "flatten",
        "select L2",
        "select cosine",
        "FedAvg kept",
        "FedAvg all K",
        "flatten+select+FedAvg",
    ):
        table.add_column(column, justify="right")
    for k in (int(size) for size in sizes.split(",")):
        table.add_row(*measure(k, arch, tolerance, outliers, repeats, seed))
    console.print(table)
    console.print(
        f"{torch.get_num_threads()} torch threads; tolerance {tolerance}; "
        f"{outliers:.0%} of the updates are outliers (10× the noise)."
    )


if __name__ == "__main__":
    main()
