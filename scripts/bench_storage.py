"""Put/get latency of the storage backends for update-sized and large blobs.

Runs against a temporary local store and an IPFS node (a temporary js-ipfs daemon
started for the run unless --ipfs names a running node). Each repetition stores a fresh
random blob, so no put is a no-op for an already stored blob. Prints a table; nothing is
asserted.

    .venv/bin/python scripts/bench_storage.py
    .venv/bin/python scripts/bench_storage.py --sizes 250000,20000000 --repeat 10
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from mcfl_chain.storage import Storage, open_storage
from mcfl_chain.storage.daemon import running_ipfs


@contextmanager
def ipfs_spec(address: str | None, workdir: Path) -> Iterator[str]:
    """The --storage spec of the node to measure: the given one or a temporary one."""
    if address is not None:
        yield address
        return
    with running_ipfs(workdir / "ipfs") as spec:
        yield spec


def measure(
    store: Storage, size: int, repeat: int, progress: Progress, label: str
) -> dict[str, list[float]]:
    """Put then get ``repeat`` fresh random blobs of ``size`` bytes; seconds per call."""
    puts, gets = [], []
    task = progress.add_task(f"{label} {size:,} B", total=repeat)
    for _ in range(repeat):
        data = os.urandom(size)
        start = time.perf_counter()
        cid = store.put(data)
        puts.append(time.perf_counter() - start)
        start = time.perf_counter()
        back = store.get(cid)
        gets.append(time.perf_counter() - start)
        if back != data:
            raise SystemExit(f"{label}: read back different bytes for {cid}")
        progress.advance(task)
    return {"put": puts, "get": gets}


def parse_sizes(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    try:
        sizes = [int(part) for part in value.split(",") if part.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of byte counts") from exc
    if not sizes or min(sizes) < 0:
        raise click.BadParameter("give at least one size, none negative")
    return sizes


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--sizes",
    default="250000,20000000",
    show_default=True,
    callback=parse_sizes,
    help="Blob sizes in bytes, comma-separated (an update of LeNet is ~250 KB).",
)
@click.option(
    "--repeat",
    type=click.IntRange(1),
    default=5,
    show_default=True,
    help="Fresh blobs put and read back per size and backend.",
)
@click.option(
    "--ipfs",
    "ipfs_address",
    default=None,
    metavar="SPEC",
    help="Measure this running node (e.g. ipfs:/ip4/127.0.0.1/tcp/5001) instead of "
    "starting a temporary js-ipfs daemon.",
)
@click.option(
    "--local-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory of the local store to measure (default: a temporary one).",
)
def main(sizes: list[int], repeat: int, ipfs_address: str | None, local_dir: Path | None) -> None:
    """Print put/get latency (median and min over --repeat) of the local and IPFS stores."""
    console = Console()
    rows = []
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-storage-")))
        with console.status("starting a temporary js-ipfs daemon"):
            ipfs = stack.enter_context(ipfs_spec(ipfs_address, workdir))
        backends = {"local": f"local:{local_dir or workdir / 'blobs'}", "ipfs": ipfs}
        with Progress(console=console, transient=True) as progress:
            for label, spec in backends.items():
                with open_storage(spec) as store:
                    for size in sizes:
                        rows.append((label, size, measure(store, size, repeat, progress, label)))

    table = Table(
        title=f"Storage latency in ms ({repeat} fresh blobs per row; get includes verification)"
    )
    for column in (
        "backend",
        "size (B)",
        "put median",
        "put min",
        "get median",
        "get min",
        "get MB/s",
    ):
        table.add_column(column, justify="left" if column == "backend" else "right")
    for label, size, times in rows:
        get_median = statistics.median(times["get"])
        table.add_row(
            label,
            f"{size:,}",
            f"{statistics.median(times['put']) * 1e3:.1f}",
            f"{min(times['put']) * 1e3:.1f}",
            f"{get_median * 1e3:.1f}",
            f"{min(times['get']) * 1e3:.1f}",
            f"{size / get_median / 1e6:.0f}" if get_median > 0 else "-",
        )
    for label, spec in backends.items():
        table.caption = (table.caption + "; " if table.caption else "") + f"{label} = {spec}"
    console.print(table)


if __name__ == "__main__":
    main()
