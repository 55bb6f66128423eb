"""``mcfl-chain worker``: run one sovereign trainer."""

from __future__ import annotations

import json
import logging
import signal
import sys
import tomllib
from pathlib import Path
from typing import Any

import click

from mcfl_chain.adversaries import ADVERSARIES
from mcfl_chain.chain.devnet import DEFAULT_DEPLOYMENT
from mcfl_chain.learning.scenario import SCENARIOS
from mcfl_chain.storage import DEFAULT_STORAGE


def _load_config(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """Option values from a TOML or JSON file; command-line flags still win."""
    if not value:
        return
    path = Path(value)
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, ValueError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}") from exc
    ctx.default_map = {k.replace("-", "_"): v for k, v in data.items()}


@click.command("worker", context_settings={"auto_envvar_prefix": "MCFL"})
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    is_eager=True,
    expose_value=False,
    callback=_load_config,
    help="TOML or JSON file of option values (keys are option names); flags and "
    "MCFL_* environment variables override it.",
)
@click.option(
    "--rpc",
    default="http://127.0.0.1:8545",
    show_default=True,
    help="JSON-RPC URL of the chain node.",
)
@click.option(
    "--key", default=None, help="Hex private key of this trainer's account (or MCFL_KEY)."
)
@click.option(
    "--account-index",
    type=click.IntRange(min=0),
    default=None,
    help="Use Anvil's dev account N instead of --key (local devnets only).",
)
@click.option(
    "--deployment",
    type=click.Path(dir_okay=False),
    default=DEFAULT_DEPLOYMENT,
    show_default=True,
    help="Deployment file written by `mcfl-chain devnet up`.",
)
@click.option(
    "--storage",
    default=DEFAULT_STORAGE,
    show_default=True,
    help="Blob store: local:DIR or ipfs:/ip4/127.0.0.1/tcp/PORT.",
)
@click.option(
    "--dataset",
    default=None,
    help="fashion-mnist, mnist or digits. Default: the network task's dataset.",
)
@click.option(
    "--scenario",
    type=click.Choice(SCENARIOS),
    default="iid",
    show_default=True,
    help="How the dataset is shared among the network's trainers (non-IID kinds).",
)
@click.option(
    "--scenario-params",
    default="{}",
    show_default=True,
    help="JSON object of scenario parameters, e.g. '{\"n_groups\": 3}' or '{\"std\": 1.0}'.",
)
@click.option(
    "--n-trainers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Number of trainers the scenario splits the data among.",
)
@click.option(
    "--trainer-index",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="This trainer's share of the scenario (0 .. n-trainers-1).",
)
@click.option(
    "--samples",
    type=click.IntRange(min=10),
    default=None,
    help="Cap on this trainer's samples (train+validation+test).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Scenario seed (data split) and training seed.",
)
@click.option(
    "--model",
    "arch",
    default=None,
    help="Architecture (lenet5, lenet-light, lenet-cae). Default: the task's.",
)
@click.option(
    "--strategy",
    type=click.Choice(["mcfl", "fedavg"]),
    default="mcfl",
    show_default=True,
    help="mcfl: Algorithms 1 and 2 of the paper; fedavg: the decentralized FedAvg "
    "baseline (most popular model, accept every update).",
)
@click.option(
    "--tolerance",
    type=float,
    default=1.0,
    show_default=True,
    help="MCFL update selection: keep peers with divergence < median + tolerance·std.",
)
@click.option(
    "--divergence",
    type=click.Choice(["l2", "cosine"]),
    default="l2",
    show_default=True,
    help="Relative L2 weight divergence (paper Eq. 2) or cosine distance (thesis §7.3).",
)
@click.option(
    "--epochs",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Local epochs per trained model per round.",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--lr", type=float, default=0.05, show_default=True, help="SGD learning rate.")
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=None,
    help="Stop after this many rounds, counted from the first round this trainer took part "
    "in according to the chain (default: run until interrupted).",
)
@click.option(
    "--last-round",
    type=click.IntRange(min=0),
    default=None,
    help="Stop once the network is past this round, whenever the worker joined.",
)
@click.option(
    "--give-up-after",
    type=click.FloatRange(min=0),
    default=120.0,
    show_default=True,
    help="Seconds to keep retrying an unreachable chain node or IPFS node before exiting.",
)
@click.option(
    "--wait-log-interval",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds between log lines naming the trainers a waiting worker waits for (0: never).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where the worker keeps its position (default .mcfl/workers/<address>).",
)
@click.option(
    "--metrics",
    type=click.Path(dir_okay=False),
    default=None,
    help="Append one JSON line per round here (default <state-dir>/metrics.jsonl).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Torch CPU threads for this worker.",
)
@click.option(
    "--poll-interval",
    type=float,
    default=0.1,
    show_default=True,
    help="Seconds between two looks at the chain.",
)
@click.option(
    "--adversary",
    type=click.Choice(sorted(ADVERSARIES)),
    default=None,
    help="Play a misbehaving trainer (tests and benchmarks): corrupt what it publishes.",
)
@click.option(
    "-v", "--verbose", count=True, help="-v: the worker's debug lines; -vv: also every RPC request."
)
def worker(**opts: Any) -> None:
    """Run one sovereign MCFL trainer against a deployed network.

    The worker registers its account if needed, checks that the network's task names
    its model, then plays rounds as the contracts dictate: score the candidate models on
    its own test split and train the best (paper Algorithm 1), publish the updates,
    keep the peers' updates that diverge little from its own (Algorithm 2), FedAvg them
    and publish its selection. It follows contract events, persists its position in
    --state-dir, and after a crash or restart resumes without proposing or aggregating
    twice. Peers' data is untrusted: unreachable or malformed updates are excluded
    with a logged reason.
    """
    from mcfl_chain.worker.launch import WorkerSetupError, build_worker
    from mcfl_chain.worker.rounds import WorkerHalted

    verbose = opts.pop("verbose")
    logging.basicConfig(
        level=logging.DEBUG if verbose >= 2 else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    # -v: this worker's debug lines; -vv: also every JSON-RPC and HTTP request.
    logging.getLogger("mcfl_chain").setLevel(logging.DEBUG if verbose else logging.INFO)
    try:
        node = build_worker(**opts)
    except WorkerSetupError as exc:
        raise click.ClickException(str(exc)) from exc
    signal.signal(signal.SIGTERM, lambda *_: node.stop())
    try:
        played = node.run()
    except KeyboardInterrupt:
        node.stop()
        played = node.rounds_done
    except WorkerHalted as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        node.storage.close()
    click.echo(f"played {played} round(s); state in {node.state.path.parent}", err=True)
