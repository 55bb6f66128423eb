"""Local baseline (paper Table 1): one model trained alone on a whole dataset for 10 epochs.

Trains on the dataset's official training set, evaluates on its official test set, and
prints accuracy, loss and time next to the paper's figures (thesis Table 5.1):

    .venv/bin/python scripts/bench_local.py                     # LeNet-5, Fashion-MNIST
    .venv/bin/python scripts/bench_local.py --arch lenet-cae --epochs 10

Exits with status 1 when ``--check`` is given and the result is worse than the paper's.
"""

from __future__ import annotations

import sys
import time

import click
import torch
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mcfl_chain.learning.datasets import available_datasets, load_dataset
from mcfl_chain.learning.models import ARCHITECTURES, create_model
from mcfl_chain.learning.scenario import TrainerData, TrainerDataSpec
from mcfl_chain.learning.training import evaluate, train

# Thesis Table 5.1 / paper Table 1: (accuracy, loss) after 10 local epochs on all samples.
PAPER = {
    ("lenet5", "mnist"): (0.97, 0.089),
    ("lenet5", "fashion-mnist"): (0.83, 0.46),
    ("lenet-light", "mnist"): (0.96, 0.16),
    ("lenet-light", "fashion-mnist"): (0.77, 0.57),
    ("lenet-cae", "mnist"): (None, 0.006),
    ("lenet-cae", "fashion-mnist"): (None, 0.015),
}


def official_split(dataset_name: str, data_dir: str | None) -> TrainerData:
    """The dataset's official train / test sets as one trainer's data (no validation)."""
    dataset = load_dataset(dataset_name, data_dir)
    if dataset.official_train_size is None:
        raise click.BadParameter(
            f"{dataset_name!r} has no official train/test split", param_hint="--dataset"
        )
    cut = dataset.official_train_size
    x = torch.from_numpy(dataset.images.copy())
    y = torch.from_numpy(dataset.labels.copy())
    return TrainerData(
        spec=TrainerDataSpec(dataset_name, group="official split"),
        num_classes=dataset.num_classes,
        train_images=x[:cut],
        train_y=y[:cut],
        val_images=x[:0],
        val_y=y[:0],
        test_images=x[cut:],
        test_y=y[cut:],
        indices=torch.arange(len(dataset)).numpy(),
    )


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--arch",
    type=click.Choice(sorted(ARCHITECTURES)),
    default="lenet5",
    show_default=True,
    help="Model architecture to train.",
)
@click.option(
    "--dataset",
    type=click.Choice([n for n in available_datasets() if n != "digits"]),
    default="fashion-mnist",
    show_default=True,
    help="Dataset; trained on its official training set, scored on its official test set.",
)
@click.option(
    "--epochs",
    type=click.IntRange(1),
    default=10,
    show_default=True,
    help="Passes over the training set (the paper's baseline uses 10).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1),
    default=64,
    show_default=True,
    help="Samples per SGD step.",
)
@click.option("--lr", type=float, default=0.05, show_default=True, help="SGD learning rate.")
@click.option("--momentum", type=float, default=0.9, show_default=True, help="SGD momentum.")
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the initial weights and of the batch order.",
)
@click.option(
    "--threads",
    type=click.IntRange(1),
    default=None,
    help="torch CPU threads (default: torch's own choice).",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory with the IDX files (default: $MCFL_DATA_DIR, then system paths).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Exit with status 1 if the result is worse than the paper's figure.",
)
def main(
    arch: str,
    dataset: str,
    epochs: int,
    batch_size: int,
    lr: float,
    momentum: float,
    seed: int,
    threads: int | None,
    data_dir: str | None,
    check: bool,
) -> None:
    """Train one model locally on a whole dataset and compare with the paper's Table 1."""
    console = Console()
    if threads is not None:
        torch.set_num_threads(threads)
    data = official_split(dataset, data_dir)
    model = create_model(arch, seed)
    kind = ARCHITECTURES[arch].kind
    console.print(
        f"{arch} on {dataset}: {data.num_samples} training samples, {data.test_y.shape[0]} test "
        f"samples, {epochs} epochs, batch {batch_size}, SGD lr {lr} momentum {momentum}, "
        f"{torch.get_num_threads()} threads"
    )
    with Progress(
        TextColumn("[bold]training"),
        BarColumn(),
        TextColumn("epoch {task.completed}/{task.total}"),
        TextColumn("loss {task.fields[loss]}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("train", total=epochs, loss="-")

        def on_epoch(epoch: int, loss: float) -> None:
            progress.update(task, completed=epoch, loss=f"{loss:.4f}")

        report = train(
            model,
            data,
            epochs,
            batch_size=batch_size,
            lr=lr,
            momentum=momentum,
            seed=seed,
            on_epoch=on_epoch,
        )
    started = time.perf_counter()
    result = evaluate(model, data.test_x, data.test_y, kind)
    eval_seconds = time.perf_counter() - started
    paper_accuracy, paper_loss = PAPER.get((arch, dataset), (None, None))

    table = Table(title=f"Local baseline: {arch} on {dataset}, {epochs} epochs")
    table.add_column("figure")
    table.add_column("this run", justify="right")
    table.add_column("paper (Table 1)", justify="right")
    if result.accuracy is not None:
        table.add_row(
            "test accuracy",
            f"{result.accuracy:.2%}",
            "-" if paper_accuracy is None else f"{paper_accuracy:.0%}",
        )
    table.add_row(
        "test loss" + (" (MSE)" if kind == "autoencoder" else " (cross-entropy)"),
        f"{result.loss:.4f}",
        "-" if paper_loss is None else f"{paper_loss}",
    )
    table.add_row("final training loss", f"{report.loss:.4f}", "-")
    table.add_row("training time", f"{report.seconds:.1f} s", "-")
    table.add_row(
        "training speed", f"{epochs * report.num_samples / report.seconds:,.0f} samples/s", "-"
    )
    table.add_row("evaluation time", f"{eval_seconds:.2f} s", "-")
    console.print(table)

    if check:
        worse = (
            paper_accuracy is not None
            and result.accuracy is not None
            and result.accuracy < paper_accuracy
        ) or (paper_accuracy is None and paper_loss is not None and result.loss > paper_loss)
        if worse:
            console.print("[red]worse than the paper's figure[/red]")
            sys.exit(1)
        console.print("[green]at least as good as the paper's figure[/green]")


if __name__ == "__main__":
    main()
