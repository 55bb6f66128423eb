"""``mcfl-chain simulate`` and ``mcfl-chain demo``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from mcfl_chain._utils.config_files import ConfigError
from mcfl_chain.adversaries import ADVERSARIES, PLACEMENTS
from mcfl_chain.algorithms.robust import defence_names
from mcfl_chain.cli import _network_options as network_options
from mcfl_chain.cli._options import declared_option
from mcfl_chain.compute.device import DEVICES
from mcfl_chain.learning.optimisers import OPTIMISER_NAMES, OPTIMISERS
from mcfl_chain.learning.scenario import SCENARIOS
from mcfl_chain.learning.training import SAMPLINGS
from mcfl_chain.simulation.engines import ENGINES
from mcfl_chain.simulation.registration import POLICIES
from mcfl_chain.simulation.runner import SimulationConfig, SimulationError, run_simulation
from mcfl_chain.strategies import STRATEGIES
from mcfl_chain.strategies.base import strategy_options

F = TypeVar("F", bound=Callable[..., Any])


def load_config(path: Path, overrides: dict[str, Any]) -> SimulationConfig:
    """A scenario file (TOML or JSON, keys = SimulationConfig fields) plus overrides.

    Raises
    ------
    click.BadParameter
        If the file cannot be read or holds an unknown key (named with the closest
        valid one).
    """
    try:
        config = SimulationConfig.load_file(path)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="'--config'") from exc
    return replace(config, **{k: v for k, v in overrides.items() if v is not None})


def _strategy_options(command: F) -> F:
    """One option per strategy option (:func:`~mcfl_chain.strategies.base.strategy_options`),
    without a default, so that a scenario file's value stands unless the option is given."""
    for option in reversed(strategy_options()):
        spec = option.spec.spelled()
        command = declared_option(spec, unset=True, mixed=option.mixed)(command)
    return command


def _run(config: SimulationConfig, out: Path | None, keep_running: bool) -> None:
    console = Console()
    run_dir = out or Path("runs") / f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        summary = run_simulation(config, run_dir, console, keep_running=keep_running)
    except SimulationError as exc:
        raise click.ClickException(f"{exc}\n(run directory kept: {run_dir})") from exc
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (unwind_on_termination)
        console.print(
            f"{exc or 'interrupted'}: workers and chain stopped; run directory kept: {run_dir}"
        )
        raise SystemExit(130) from None
    console.print(
        f"[bold]done in {summary['seconds']:.0f} s[/]. Results in {run_dir}/: "
        "metrics.jsonl (per trainer per round), rounds.csv, summary.json, "
        "dag.json, accuracy.png, models.png; worker logs in trainers/*/worker.log"
    )
    if summary["grouping"]:
        console.print("trainers' data groups sharing each final model:")
        for model, groups in summary["grouping"].items():
            console.print(f"  {model[:10]}: {', '.join(map(str, groups))}")


@click.command("simulate")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Scenario file (TOML/JSON, keys as below with underscores); options "
    "given on the command line override it.",
)
@click.option("--name", help="Run name (prefix of the run directory).  [default: demo]")
@click.option("--dataset", help="fashion-mnist, mnist or digits.  [default: fashion-mnist]")
@click.option(
    "--scenario",
    type=click.Choice(SCENARIOS),
    help="Data partition: iid, groups (disjoint classes), gaussian, dirichlet, "
    "two-datasets, rotations.  [default: groups]",
)
@click.option(
    "--scenario-params",
    help="JSON object, e.g. '{\"n_groups\": 3}', '{\"std\": 1}', '{\"alpha\": 0.3}', "
    "'{\"group_sizes\": [12, 4]}' (rotations: a majority and a minority cluster).",
)
@click.option(
    "-n",
    "--trainers",
    "n_trainers",
    type=click.IntRange(min=1),
    help="Number of trainers.  [default: 6]",
)
@click.option("--rounds", type=click.IntRange(min=1), help="Rounds.  [default: 5]")
@click.option("--epochs", type=click.IntRange(min=1), help="Local epochs per round.  [default: 2]")
@click.option(
    "--optimiser",
    type=click.Choice(OPTIMISER_NAMES),
    help="Optimiser preset of local training, restarted every round: "
    + "; ".join(f"{o.name}: {o.help}" for o in OPTIMISERS.values())
    + ".  [default: sgd]",
)
@click.option(
    "--sampling",
    type=click.Choice(tuple(SAMPLINGS)),
    help="How an epoch draws the training samples: "
    + "; ".join(f"{name}: {text}" for name, text in SAMPLINGS.items())
    + ".  [default: shuffle]",
)
@click.option(
    "--samples",
    type=click.IntRange(min=10),
    help="Samples per trainer (train+val+test).  [default: 1200]",
)
@click.option("--model", "arch", help="lenet5, lenet-light or lenet-cae.  [default: lenet5]")
@click.option(
    "--strategy",
    type=click.Choice(sorted(STRATEGIES)),
    help="mcfl (the paper, as its authors ran it), mcfl-plus (ours: MCFL whose trainers "
    "trust their own validation and history; the --plus-* options), fedavg (the "
    "decentralized baseline), "
    "local (no collaboration), ifca (k models, lowest loss), facade (one core and k "
    "heads, each trainer its lowest-loss head; the network trains --model's "
    "-heads<k> version), fedfmc (fork into groups, then merge them into one model "
    "with EWC), fedprox (FedAvg with a proximal term), ditto (FedAvg's global model "
    "and a personal model per trainer, reported) or fedavg-ft (FedAvg fine-tuned "
    "locally before it is reported).  [default: mcfl]",
)
@_strategy_options
@click.option(
    "--adversaries",
    help="Misbehaving trainers as shares of the network, NAME:SHARE[:KEY=VALUE...] "
    "separated by commas, e.g. 'label-flip:0.2' or 'sign-flip:0.25:scale=10'; which "
    "trainers is drawn from --seed. Adversaries: " + ", ".join(sorted(ADVERSARIES)) + ".",
)
@click.option(
    "--placement",
    type=click.Choice(PLACEMENTS),
    help="Where the adversaries sit: drawn at random over all trainers, or concentrated "
    "in the scenario's largest data group (leaving it one honest trainer, then the next "
    "group): the worst case for that group. Among groups of one size, concentrated takes "
    "the group of trainer 0, concentrated-drawn the one --seed draws first.  "
    "[default: random]",
)
@click.option(
    "--defence",
    help="The honest trainers' defence over the updates their strategy keeps, "
    "NAME[:KEY=VALUE...]: a robust selection rule (e.g. 'multi-krum:f=1') or a robust "
    "aggregation rule (e.g. 'median', 'trimmed-mean:beta=0.2', 'norm-clipping'; the model "
    "id commits to the rule's code and parameter). One of " + ", ".join(defence_names()) + ".",
)
@click.option(
    "--registration",
    type=click.Choice(POLICIES),
    help="Who may register: anyone (open); those the admin admits (allowlist: every "
    "trainer, but one identity per Sybil coalition; the others are refused on chain); or "
    "anyone paying --deposit (deposit).  [default: open]",
)
@click.option(
    "--deposit",
    type=click.IntRange(min=0),
    help="Wei a registration takes under --registration deposit.  [default: 10**18, 1 ETH]",
)
@network_options.setting("max_samples", unset=True)
@network_options.setting("cohort", unset=True)
@click.option(
    "--storage",
    type=click.Choice(["local", "ipfs"]),
    help="Embedded local store or a js-ipfs daemon.  [default: local]",
)
@network_options.setting("phase_duration", default=SimulationConfig.phase_duration, unset=True)
@click.option("--seed", type=int, help="Data split, initial weights and training seed.")
@click.option(
    "--engine",
    type=click.Choice(list(ENGINES)),
    help="process: one worker process per trainer (each as it would run on its own "
    "machine); batched: trainers as threads of host processes (one per core on the CPU, "
    "one per 4 cores on a GPU), sharing chain reads and data; on a GPU a phase's training "
    "runs as one batched (vmap) computation, on the CPU each trainer's models one by "
    "one, the faster kernels there; ray: those hosts as actors on a Ray cluster "
    "(--ray-address), one a CPU (or GPU) of it. The chain cannot tell them apart.  "
    "[default: process]",
)
@click.option(
    "--ray-address",
    help="The ray engine's cluster: HOST:PORT of a running Ray head, or 'auto'. Its nodes "
    "need this package and the run directory (--out) at the same path, on a shared "
    "filesystem; hosts on other nodes reach the chain and storage through a relay over "
    "Ray.  [default: a local cluster on 127.0.0.1, started and stopped by the run]",
)
@click.option(
    "--device",
    type=click.Choice(list(DEVICES)),
    help="Where trainers train and score models: cpu, cuda, or auto (cuda where torch "
    "sees a GPU).  [default: cpu]",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    help="CPU cores the batched engine uses: on the CPU, one host process each; on a "
    "GPU, the hosts' threads together; the ray engine's hosts, at most (one CPU each).  "
    "[default: every core; ray: every CPU of the cluster]",
)
@click.option(
    "--hosts",
    type=click.IntRange(min=1),
    help="The batched engine's host processes (its trainers cut into this many shares). "
    "On a GPU, several hosts share the device and split --threads between them, so that "
    "the per-trainer Python work of a large network runs on more than one core.  "
    "[default: one per core on the CPU, one per 4 cores on a GPU]",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory (default runs/<name>-<time>).",
)
@click.option("--keep-running", is_flag=True, help="Leave the devnet and storage up at the end.")
@click.option(
    "--published-size",
    is_flag=True,
    help="The paper's size instead: 38 trainers, 102 rounds, 2 epochs, all samples "
    "(hours on 2 cores).",
)
def simulate(
    config_path: str | None,
    out: Path | None,
    keep_running: bool,
    published_size: bool,
    **options: Any,
) -> None:
    """Run a network of N trainers on a local devnet and report how it learned.

    Each trainer is its own `mcfl-chain worker` process with its own account, state and
    data share, over the real chain and storage. Prints a per-round table (accuracy
    min/avg/max over trainers, number of models, round time) and writes a run directory
    with per-trainer per-round metrics, the DAG as JSON and PNG plots.
    """
    if options.get("scenario_params") is not None:
        try:
            options["scenario_params"] = json.loads(options["scenario_params"])
        except ValueError as exc:
            raise click.BadParameter(f"--scenario-params is not JSON: {exc}") from exc
    if config_path:
        config = load_config(Path(config_path), options)
    else:
        config = SimulationConfig(**{k: v for k, v in options.items() if v is not None})
    if published_size:
        # The paper's size, except where an option says otherwise (--rounds 4).
        given = {k: options[k] for k in ("n_trainers", "rounds", "epochs") if options.get(k)}
        config = replace(config.published_size(), **given)
    _run(config, out, keep_running)


@click.command("demo")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory (default runs/demo-<time>).",
)
@network_options.setting("phase_duration", default=SimulationConfig.phase_duration)
def demo(out: Path | None, phase_duration: int) -> None:
    """A small network end to end: 6 trainers in 3 disjoint class groups, 5 rounds.

    Uses Fashion-MNIST when installed (Debian's dataset-fashion-mnist), else
    scikit-learn's digits, and the embedded local store. Every phase ends when its six
    trainers voted, at the latest after --phase-duration seconds.
    """
    from mcfl_chain.learning.datasets import DatasetError, load_dataset

    dataset = "fashion-mnist"
    try:
        load_dataset(dataset)
    except DatasetError as exc:
        click.echo(f"{exc}\nFalling back to scikit-learn's digits.", err=True)
        dataset = "digits"
    _run(
        SimulationConfig(
            name="demo",
            dataset=dataset,
            scenario="groups",
            n_trainers=6,
            rounds=5,
            samples=1200 if dataset == "fashion-mnist" else 290,
            phase_duration=phase_duration,
        ),
        out,
        keep_running=False,
    )
