"""Every option of one worker, declared once: its type, default, help and flag.

Each field of :class:`WorkerConfig` is an option of ``mcfl-chain worker``; the field's
``metadata`` holds its help text and how it is offered (flag, choices, lower bound).
The strategies' options are fields too, made from their declarations
(:func:`~mcfl_chain.strategies.base.strategy_options`, placed after ``strategy``): a
strategy's module adds its options here without a line written in this one.
Everything else is built from these fields: the command line (``mcfl_chain.cli.worker``
makes one click option per :data:`OPTIONS` entry), configuration files
(:meth:`WorkerConfig.load_file`, which refuses unknown keys) and the simulator's worker
processes (:meth:`WorkerConfig.to_args`). Adding an option means adding a field here.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar, get_args, get_origin, get_type_hints

from mcfl_chain._utils.config_files import ConfigError, FileConfig, match_keys
from mcfl_chain._utils.options import KINDS, OptionSpec
from mcfl_chain.adversaries import ADVERSARIES, parse_adversary_spec
from mcfl_chain.algorithms.robust import defence_names, parse_defence
from mcfl_chain.chain.devnet import DEFAULT_DEPLOYMENT
from mcfl_chain.chain.events import DEFAULT_MAX_LOG_RANGE
from mcfl_chain.compute.device import DEVICES
from mcfl_chain.learning.optimisers import OPTIMISER_NAMES, OPTIMISERS
from mcfl_chain.learning.scenario import SCENARIOS
from mcfl_chain.learning.training import SAMPLINGS
from mcfl_chain.storage import DEFAULT_STORAGE
from mcfl_chain.strategies import STRATEGIES
from mcfl_chain.strategies.base import strategy_options

__all__ = ["OPTIONS", "ConfigError", "Option", "WorkerConfig"]

_KINDS = {**KINDS, Path: "a path", dict: "a table"}


def _option(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    choices: Iterable[str] = (),
    minimum: float | None = None,
    directory: bool | None = False,
    secret: bool = False,
    check: Callable[[str], object] | None = None,
) -> Any:
    """A :class:`WorkerConfig` field; the keywords are those of :class:`Option`."""
    metadata = {
        "help": help,
        "flag": flag,
        "choices": tuple(choices),
        "minimum": minimum,
        "directory": directory,
        "secret": secret,
        "check": check,
    }
    if isinstance(default, dict):
        # Tables are compared but not hashed: the frozen config stays hashable.
        return field(default_factory=lambda: dict(default), hash=False, metadata=metadata)
    return field(default=default, metadata=metadata)


C = TypeVar("C", bound=type)


def with_strategy_options(*, mixed: bool = False) -> Callable[[C], C]:
    """A class decorator, applied before ``@dataclass``: a field per strategy option
    (:func:`~mcfl_chain.strategies.base.strategy_options`) after the class's field
    ``strategy``, as files and command lines spell it (a bool: ``on`` or ``off``).

    With ``mixed``, an option declaring ``mixed`` values also takes the text
    ``"mixed"`` (a simulation then hands those values to its trainers in turn).
    """

    def decorate(cls: C) -> C:
        annotations: dict[str, Any] = {}
        for name, hint in cls.__annotations__.items():
            annotations[name] = hint
            if name != "strategy":
                continue
            for option in strategy_options():
                spec = option.spec.spelled()
                annotations[spec.name] = spec.kind | str if mixed and option.mixed else spec.kind
                field_ = _option(
                    spec.default, spec.help, choices=spec.choices, minimum=spec.minimum
                )
                setattr(cls, spec.name, field_)
        cls.__annotations__ = annotations
        return cls

    return decorate


@dataclass(frozen=True)
@with_strategy_options()
class WorkerConfig(FileConfig):
    """What one trainer runs with: its chain, storage, data share and learning rules.

    Instances are checked on creation (types, choices, lower bounds) and raise
    :class:`ConfigError` naming the option. Checks that need the network (the task's
    architecture, the chain, the storage) are :func:`~mcfl_chain.worker.launch.build_worker`'s.
    """

    rpc: str | None = _option(
        None,
        "JSON-RPC URL of the chain node. Default: the deployment file's (refused when it "
        "was written without its API key: give yours).",
    )
    keystore: Path | None = _option(
        None,
        "Encrypted JSON keystore of this trainer's account (`mcfl-chain account new` writes "
        "one). Without --keystore, --account or --account-index the key is read from "
        "MCFL_PRIVATE_KEY (CI only; never on the command line).",
    )
    account: str | None = _option(
        None, "An ape account alias (`ape accounts generate ALIAS`), read from ape's key file."
    )
    password_file: Path | None = _option(
        None,
        "File whose first line is the password of --keystore or --account (else "
        "MCFL_KEYSTORE_PASSWORD, else a prompt on a terminal).",
    )
    account_index: int | None = _option(
        None, "Use Anvil's dev account N (local devnets only).", minimum=0
    )
    deployment: str = _option(
        str(DEFAULT_DEPLOYMENT),
        "The network's deployment file (written by `mcfl-chain deploy` or `devnet up`), or "
        "ipfs://CID of one published in --storage (then checked against the chain).",
    )
    storage: str = _option(
        DEFAULT_STORAGE, "Blob store: local:DIR or ipfs:/ip4/127.0.0.1/tcp/PORT."
    )
    task: str | None = _option(
        None,
        "A task of one's own (model, data, training): module:attribute, "
        "path/to/file.py:attribute or an entry point of mcfl_chain.tasks (see examples/). "
        "Replaces the scenario's share; --data PATH goes to the task's data(path).",
    )
    data: Path | None = _option(
        None,
        "This trainer's own data for a built-in architecture: FILE.npz (x_train, y_train, "
        "x_test, y_test, optionally x_val, y_val) or DIR with a sub-folder of images per "
        "class; with --task, the file or folder its data(path) reads. Replaces the "
        "scenario's share.",
        directory=None,
    )
    dataset: str | None = _option(
        None, "fashion-mnist, mnist or digits. Default: the network task's dataset."
    )
    scenario: str = _option(
        "iid",
        "How the dataset is shared among the network's trainers (non-IID kinds).",
        choices=SCENARIOS,
    )
    scenario_params: dict[str, Any] = _option(
        {}, "JSON object of scenario parameters, e.g. '{\"n_groups\": 3}' or '{\"std\": 1.0}'."
    )
    n_trainers: int = _option(
        1, "Number of trainers the scenario splits the data among.", minimum=1
    )
    trainer_index: int = _option(
        0, "This trainer's share of the scenario (0 .. n-trainers-1).", minimum=0
    )
    samples: int | None = _option(
        None, "Cap on this trainer's samples (train+validation+test).", minimum=10
    )
    seed: int = _option(0, "Scenario seed (data split) and training seed.")
    arch: str | None = _option(
        None, "Architecture (lenet5, lenet-light, lenet-cae). Default: the task's.", flag="--model"
    )
    strategy: str = _option(
        "mcfl",
        "mcfl: Algorithms 1 and 2 of the paper as its authors ran them; mcfl-plus: ours, "
        "MCFL whose trainers trust their own validation and history; fedavg: the "
        "decentralized FedAvg baseline (most popular model, accept every update); local: "
        "local training alone; ifca: IFCA's k models, each trainer its lowest-loss one; "
        "facade: FACADE's core and k heads (a <base>-heads<k> network), each trainer its "
        "lowest-loss head; fedfmc: FedFMC's fork into groups, then merges into one model "
        "with EWC; fedprox: FedAvg with FedProx's proximal term; ditto: FedAvg's global "
        "model and Ditto's personal one per trainer, reported; fedavg-ft: FedAvg, its "
        "model fine-tuned locally before it is reported.",
        choices=sorted(STRATEGIES),
    )
    epochs: int = _option(2, "Local epochs per trained model per round.", minimum=1)
    batch_size: int = _option(32, "Mini-batch size of local training.", minimum=1)
    lr: float = _option(0.05, "SGD learning rate.")
    optimiser: str = _option(
        "sgd",
        "Optimiser preset of local training, restarted every round: "
        + "; ".join(f"{o.name}: {o.help}" for o in OPTIMISERS.values())
        + ".",
        choices=OPTIMISER_NAMES,
    )
    sampling: str = _option(
        "shuffle",
        "How an epoch draws the training samples: "
        + "; ".join(f"{name}: {text}" for name, text in SAMPLINGS.items())
        + ".",
        choices=tuple(SAMPLINGS),
    )
    rounds: int | None = _option(
        None,
        "Stop after this many rounds, counted from the first round this trainer took part "
        "in according to the chain (default: run until interrupted).",
        minimum=1,
    )
    last_round: int | None = _option(
        None, "Stop once the network is past this round, whenever the worker joined.", minimum=0
    )
    give_up_after: float = _option(
        120.0,
        "Seconds to keep retrying an unreachable chain node or IPFS node before exiting.",
        minimum=0,
    )
    wait_log_interval: float = _option(
        10.0,
        "Seconds between two 'waiting for trainers ...' lines while waiting (0: never).",
        minimum=0,
    )
    state_dir: Path | None = _option(
        None,
        "Where the worker keeps its position (default .mcfl/workers/<chain id>-<Models "
        "address>/<address>: one folder per network and trainer).",
        directory=True,
    )
    metrics: Path | None = _option(
        None, "Append one JSON line per round here (default <state-dir>/metrics.jsonl)."
    )
    threads: int = _option(1, "Torch CPU threads for this worker.", minimum=1)
    device: str = _option(
        "cpu",
        "Where this worker trains and scores models: cpu, cuda (a GPU; refused where "
        "torch sees none) or auto (cuda where available, else cpu). Weights are the same "
        "to float rounding on either.",
        choices=DEVICES,
    )
    training: str = _option(
        "real",
        "real: train with SGD. stand-in: replace training by a deterministic step drawn "
        "from the trainer's data, the parent and the round, to check that two engines "
        "build the same DAG; such a run learns nothing.",
        choices=("real", "stand-in"),
    )
    poll_interval: float = _option(0.1, "Seconds between two looks at the chain.")
    max_log_range: int = _option(
        DEFAULT_MAX_LOG_RANGE,
        "Most blocks one eth_getLogs request spans (providers cap it); longer histories are "
        "read in several requests.",
        minimum=1,
    )
    confirmations: int = _option(
        0,
        "Act on chain events only once they are this many blocks deep, so that a shorter "
        "reorg never makes the worker act on what vanished (on a public chain e.g. 2-12). "
        "Needs a chain that keeps making blocks: keep 0 on a devnet mining per transaction.",
        minimum=0,
    )
    max_fee_gwei: float | None = _option(
        None,
        "Cap on the fee per gas (EIP-1559 maxFeePerGas), in gwei: while the network's base "
        "fee is above it, transactions are refused with an error. Default: no cap (twice "
        "the base fee plus the tip).",
        minimum=0,
    )
    priority_fee_gwei: float | None = _option(
        None,
        "Tip per gas for the block producer, in gwei. Default: 1 wei, enough where blocks "
        "are not full (devnets); raise it on a congested chain.",
        minimum=0,
    )
    adversary: str | None = _option(
        None,
        "Play a misbehaving trainer (tests and benchmarks): NAME[:KEY=VALUE...], e.g. "
        "sign-flip:scale=4; NAME one of " + ", ".join(sorted(ADVERSARIES)) + ".",
        check=parse_adversary_spec,
    )
    defence: str | None = _option(
        None,
        "Defence over the updates the strategy keeps, NAME[:KEY=VALUE...]: a robust "
        "selection (krum, multi-krum:f=1) or aggregation rule (median, "
        "trimmed-mean:beta=0.2, norm-clipping), whose code the model id commits to; "
        "NAME one of " + ", ".join(defence_names()) + ".",
        check=parse_defence,
    )

    if TYPE_CHECKING:
        # The strategies' options are fields too (with_strategy_options): mypy sees none.
        def __getattr__(self, name: str) -> Any: ...

    def __post_init__(self) -> None:
        for option in OPTIONS:
            object.__setattr__(self, option.name, option.convert(getattr(self, option.name)))

    def strategy_options(self) -> dict[str, Any]:
        """The value of every strategy's option, by name, as
        :func:`~mcfl_chain.strategies.base.make_strategy` takes them."""
        return {option.name: getattr(self, option.name) for option in strategy_options()}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "worker options") -> Self:
        """A configuration from keys and values, as a TOML or JSON file holds them.

        Keys are option names in dash-case or snake_case (``n-trainers``, ``n_trainers``);
        an option's flag name is accepted too (``model`` for ``arch``). Missing keys
        take their defaults.

        Raises
        ------
        ConfigError
            Starting with ``source``: an unknown key (with the closest valid one), an
            option given twice, or a value of the wrong type or range.
        """
        values = match_keys(data, [o.name for o in OPTIONS], source, _ALIASES)
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    def to_args(self) -> list[str]:
        """Command-line arguments of ``mcfl-chain worker`` that rebuild this configuration.

        Every option that is set is written, so that the command line alone decides (no
        ``MCFL_*`` variable can change an option it names). No option holds a secret: a
        raw private key is only ever read from ``MCFL_PRIVATE_KEY``, since command lines
        are visible to every user of the machine; options marked secret would not be
        written.
        """
        args: list[str] = []
        for option in OPTIONS:
            value = getattr(self, option.name)
            if value is not None and not option.secret:
                args += [option.flag, option.format(value)]
        return args


@dataclass(frozen=True)
class Option(OptionSpec):
    """One :class:`WorkerConfig` field, as a person sets it: an
    :class:`~mcfl_chain._utils.options.OptionSpec` whose kind may also be ``Path`` or
    ``dict`` (its ``alias``: the flag declared, ``--model`` for ``arch``), and besides

    Attributes
    ----------
    optional : bool
        Whether ``None`` is a valid value (the option may stay unset).
    directory : bool or None
        For a path: it names a directory (True), a file (False) or either (None).
    secret : bool
        Never written on a command line (:meth:`WorkerConfig.to_args`).
    check : Callable[[str], object] or None
        For a text whose form choices cannot list (``NAME[:KEY=VALUE...]``): parses
        it, raising ``ValueError`` with the reason when it is refused.
    """

    optional: bool = False
    directory: bool | None = False
    secret: bool = False
    check: Callable[[str], object] | None = None

    def convert(self, value: Any) -> Any:
        """``value`` checked for this option, with a number, path or JSON text converted.

        Raises
        ------
        ConfigError
            Naming the option, what it accepts and the value it got.
        """
        if value is None:
            if self.optional:
                return None
            raise ConfigError(f"{self.name} must be {_KINDS[self.kind]}; it cannot be unset")
        if self.kind is Path and isinstance(value, str):
            value = Path(value)
        elif self.kind is str and isinstance(value, Path):
            value = str(value)
        elif self.kind is dict and isinstance(value, str):
            value = self._json_object(value)
        if self.kind not in (Path, dict):
            value = super().convert(value)
        elif not isinstance(value, self.kind):
            raise ConfigError(f"{self.name} must be {_KINDS[self.kind]}, not {value!r}")
        if self.check is not None and isinstance(value, str):
            try:
                self.check(value)
            except ValueError as exc:
                raise ConfigError(f"{self.name}: {exc}") from None
        return dict(value) if isinstance(value, dict) else value

    def format(self, value: Any) -> str:
        """``value`` as written after the flag: JSON for a table, else its ``str``."""
        return json.dumps(value) if isinstance(value, dict) else str(value)

    def _json_object(self, text: str) -> dict[str, Any]:
        try:
            value = json.loads(text)
            if not isinstance(value, dict):
                raise ValueError(f"{text!r} is not an object")
        except ValueError as exc:
            raise ConfigError(f"{self.name} must be a JSON object: {exc}") from None
        return value


def _options() -> tuple[Option, ...]:
    """One :class:`Option` per :class:`WorkerConfig` field, in declaration order."""
    hints = get_type_hints(WorkerConfig)
    options = []
    for f in fields(WorkerConfig):
        kind, optional = hints[f.name], False
        if isinstance(kind, types.UnionType):
            (kind,) = (arg for arg in get_args(kind) if arg is not type(None))
            optional = True
        kind = get_origin(kind) or kind
        if kind not in _KINDS:
            raise TypeError(f"WorkerConfig.{f.name}: no command-line form for {kind!r}")
        meta = f.metadata
        options.append(
            Option(
                name=f.name,
                alias=(meta["flag"] or "").removeprefix("--"),
                help=meta["help"],
                kind=kind,
                default=f.default_factory() if callable(f.default_factory) else f.default,
                optional=optional,
                choices=meta["choices"],
                minimum=meta["minimum"],
                directory=meta["directory"],
                secret=meta["secret"],
                check=meta["check"],
            )
        )
    return tuple(options)


OPTIONS: tuple[Option, ...] = _options()
"""Every worker option, in the order ``--help`` shows them."""

_ALIASES = {
    option.flag.removeprefix("--").replace("-", "_"): option.name
    for option in OPTIONS
    if option.flag != "--" + option.name.replace("_", "-")
}
"""Keys accepted in files besides the field names: flag names that differ (``model``)."""
