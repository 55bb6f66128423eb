"""Run a whole MCFL network on this machine: a devnet, storage and N worker processes.

Every trainer is a separate ``mcfl-chain worker`` process with its own account, state
directory and data share, talking to the real chain and the real storage exactly as a
trainer on another machine would. The runner only starts things, shows progress,
and turns the run directory into tables, a DAG and plots at the end.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from web3 import Web3

from mcfl_chain._utils.config_files import ConfigError, FileConfig, match_keys
from mcfl_chain._utils.forked import ChildProcess, start_module
from mcfl_chain._utils.process import free_port, unwind_on_termination
from mcfl_chain.adversaries import (
    GROUPED_PLACEMENTS,
    PLACEMENTS,
    AdversarySpec,
    assign_adversaries,
    with_coalitions,
)
from mcfl_chain.chain._tx import dev_account
from mcfl_chain.chain.client import ChainClient
from mcfl_chain.chain.deployment import (
    ALL_TRAINERS_BPS,
    DEFAULT_MAX_SAMPLES,
    MIN_COHORT_BPS,
    Deployment,
    cohort_bps,
)
from mcfl_chain.chain.devnet import start_devnet, stop_devnet
from mcfl_chain.chain.errors import ChainError
from mcfl_chain.compute.device import platform_record, resolve_device
from mcfl_chain.dag.events import apply_events, event_record
from mcfl_chain.dag.graph import ModelDAG
from mcfl_chain.learning.models import get_architecture, multi_head_arch
from mcfl_chain.learning.scenario import TrainerDataSpec, scenario_specs
from mcfl_chain.simulation import report
from mcfl_chain.simulation.engines import ENGINES
from mcfl_chain.simulation.engines.ray import parse_ray_address
from mcfl_chain.simulation.registration import (
    DEFAULT_DEPOSIT,
    DEV_ACCOUNT_BALANCE,
    ETHER,
    POLICIES,
    REGISTER_GAS,
    Refusal,
    admitted_trainers,
    coalitions,
)
from mcfl_chain.storage import open_storage
from mcfl_chain.storage.daemon import start_ipfs, stop_ipfs
from mcfl_chain.strategies import make_strategy
from mcfl_chain.strategies.base import strategy_options
from mcfl_chain.worker.config import WorkerConfig, with_strategy_options
from mcfl_chain.worker.genesis import publish_genesis

WORKER_PRELOAD = (
    "torch",
    "torch._dynamo",
    "sklearn.datasets",
    "mcfl_chain.cli",
    "mcfl_chain.cli.worker",
    "mcfl_chain.worker.launch",
    "mcfl_chain._utils.freeze_heap",
)
"""What the workers' forkserver imports once, instead of every worker: ~4 s of CPU for
the worker's own modules; ~1.7 s for ``torch._dynamo``, which the first optimiser a
worker builds imports; ~1.4 s for scikit-learn, which the digits dataset needs. Then the
heap is frozen (:mod:`mcfl_chain._utils.freeze_heap`), last."""


class SimulationError(RuntimeError):
    """The network could not run to the end; the run directory says why."""


@dataclass
@with_strategy_options(mixed=True)
class SimulationConfig(FileConfig):
    """A scenario: who trains what, on which data, with which rules.

    The strategies' options are fields too, after :attr:`strategy`, with the worker's
    defaults (:func:`~mcfl_chain.worker.config.with_strategy_options`); one whose
    declaration has ``mixed`` values (MCFL's ``tolerance``) may be ``"mixed"``: the
    trainers take those values in turn (tolerances 1, 2, 3: paper §5.3).
    """

    name: str = "demo"
    dataset: str = "fashion-mnist"
    scenario: str = "groups"
    """iid | groups | gaussian | dirichlet | two-datasets (see learning.scenario)."""
    scenario_params: dict[str, Any] = field(default_factory=dict)
    n_trainers: int = 6
    trainers: list[int] | None = None
    """Run only these trainer indices of the scenario (None: all ``n_trainers``). Their
    data shares are those of the whole scenario, since it still has ``n_trainers``;
    round 0 opens when these have registered. For the oracle baseline (FedAvg inside
    each true data group) and other partial networks."""
    rounds: int = 5
    epochs: int = 2
    batch_size: int = 32
    lr: float = 0.05
    optimiser: str = "sgd"
    """The optimiser preset of local training (:mod:`mcfl_chain.learning.optimisers`):
    ``sgd`` with :attr:`lr`, or ``adam-steplr``, the MCFL authors' Adam with StepLR."""
    sampling: str = "shuffle"
    """How an epoch draws the training samples: ``shuffle`` (each once) or
    ``replacement`` (the MCFL authors' draws with replacement;
    :data:`~mcfl_chain.learning.training.SAMPLINGS`)."""
    samples: int | None = 1200
    """Samples per trainer (None: the whole share)."""
    arch: str = "lenet5"
    strategy: str = "mcfl"
    seed: int = 0
    storage: str = "local"
    """local (embedded store in the run directory) or ipfs (a js-ipfs daemon)."""
    phase_duration: int = 600
    """Seconds before a phase may end without its silent members (deadlines are
    mandatory). A phase ends as soon as every member voted, so the deadline only costs
    time when a trainer is silent; it must exceed the slowest honest trainer's phase
    (training, storage, one transaction), or that trainer misses rounds."""
    round_timeout: float | None = None
    """Give up when no trainer finishes a round for this long (a worker is stuck).
    None: two phase deadlines and 5 minutes, the longest a round can take while one
    trainer is alive (docs/PROTOCOL.md §4)."""
    adversaries: str | None = None
    """Shares of misbehaving trainers, ``NAME:SHARE[:KEY=VALUE...]`` separated by commas
    (``"label-flip:0.2,sign-flip:0.1:scale=4"``): which trainers play which is drawn
    from the scenario's seed (:func:`~mcfl_chain.adversaries.assign_adversaries`).
    None: every trainer is honest."""
    placement: str = "random"
    """Where the adversaries sit: ``random`` (drawn from the seed over all trainers) or
    ``concentrated`` (the scenario's largest data group first, leaving it one honest
    trainer, then the next; :func:`~mcfl_chain.adversaries.spec.placement_order`), or
    ``concentrated-drawn`` (the same, equal groups ranked by the seed)."""
    defence: str | None = None
    """The honest trainers' robust update selection, ``NAME[:KEY=VALUE...]`` (``krum``,
    ``multi-krum``); adversaries play without it. None: none."""
    registration: str = "open"
    """Who may register (docs/PROTOCOL.md §3): open (anyone), allowlist (the admin, dev
    account 0, admits every trainer but one identity per Sybil coalition; the others
    are refused on chain and run no worker) or deposit (everyone pays :attr:`deposit`)."""
    deposit: int | None = None
    """Wei a registration takes under ``registration = "deposit"`` (None: 10**18, one
    ETH); only for that policy."""
    engine: str = "process"
    """How the trainers run: ``process`` (one worker process each), ``batched`` (in host
    processes, their training batched) or ``ray`` (those hosts as actors on a Ray
    cluster; :mod:`mcfl_chain.simulation.engines`)."""
    ray_address: str | None = None
    """The ray engine's cluster: ``HOST:PORT`` of a running Ray head, or ``auto``. None: a
    local one on 127.0.0.1 that the run starts and stops."""
    device: str = "cpu"
    """Where trainers train and score: cpu, cuda or auto (cuda where available)."""
    threads: int | None = None
    """CPU cores the batched engine's host uses: a phase's batch runs in this many parts
    side by side, one core each (None: every core). The ray engine: at most this many
    hosts, one CPU each (None: one per CPU of the cluster)."""
    hosts: int | None = None
    """The batched engine's host processes, the trainers cut into this many near-equal
    shares (None: one per core on the CPU, one per 4 cores on a GPU). On a GPU the hosts
    share the device, each with ``threads / hosts`` cores: a host's per-trainer work
    between kernels (chain reads, aggregation, encoding) runs under one interpreter
    lock."""
    training: str = "real"
    """real, or stand-in: a deterministic step instead of SGD, to check that engines
    build the same DAG (:mod:`mcfl_chain.compute.stand_in`; such a run learns nothing)."""
    max_samples: int | None = None
    """The network's cap on the sample count one update may declare (the contracts'
    ``maxSamples``; None: theirs by default, 1,000,000). A cap near the honest trainers'
    counts bounds what a sample inflator gains."""
    cohort: float = 1.0
    """Share of the trainers drawn for each round (the contracts' ``cohortBps`` / 10,000):
    1, every trainer takes part in every round; 0.01 to 0.9999 draws a cohort a round,
    which networks larger than an aggregation need (docs/PROTOCOL.md §4, "Cohorts")."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "scenario") -> Self:
        """A scenario from keys and values (dash-case or snake_case field names).

        Raises
        ------
        ConfigError
            Naming an unknown key and the closest valid one, or a key given twice.
        """
        return cls(**match_keys(data, [f.name for f in fields(cls)], source))

    @property
    def stall_timeout(self) -> float:
        """Seconds without a finished trainer-round after which the run is given up."""
        if self.round_timeout is not None:
            return self.round_timeout
        return 2 * self.phase_duration + 300.0

    def trainer_indices(self) -> list[int]:
        """The scenario's trainers this run starts, in order (see :attr:`trainers`)."""
        return list(range(self.n_trainers)) if self.trainers is None else list(self.trainers)

    if TYPE_CHECKING:
        # The strategies' options are fields too (with_strategy_options): mypy sees none.
        def __getattr__(self, name: str) -> Any: ...

    def strategy_options(self, index: int) -> dict[str, Any]:
        """Trainer ``index``'s strategy options: a ``"mixed"`` value replaced by the
        option's mixed values, in turn."""
        values = {}
        for option in strategy_options():
            value = getattr(self, option.name)
            if option.mixed and value == "mixed":
                value = option.mixed[index % len(option.mixed)]
            values[option.name] = value
        return values

    def adversary_assignment(self) -> dict[int, AdversarySpec]:
        """Trainer index → the adversary it plays (honest trainers are absent), drawn
        from :attr:`seed` over all ``n_trainers`` of the scenario, placed as
        :attr:`placement` says.

        Raises
        ------
        ValueError
            If :attr:`adversaries` is refused or needs more trainers than there are, or
            :attr:`placement` is refused.
        """
        if not self.adversaries:
            return {}
        groups = None
        if self.placement in GROUPED_PLACEMENTS:
            groups = [spec.group for spec in self.data_specs()]
        return assign_adversaries(
            self.adversaries, self.n_trainers, self.seed, self.placement, groups
        )

    def data_specs(self) -> list[TrainerDataSpec]:
        """Every trainer's data spec in this scenario (no data is loaded)."""
        return scenario_specs(
            self.scenario,
            self.n_trainers,
            self.seed,
            dataset=self.dataset,
            samples_per_trainer=self.samples,
            **self.scenario_params,
        )

    def trainer_config(self, index: int, adversary: AdversarySpec | None = None) -> WorkerConfig:
        """Trainer ``index``'s worker options in this scenario: its data share and rules,
        and its adversary (``adversary``, else the one :meth:`adversary_assignment`
        gives it) or, if honest, the network's defence.

        Where the chain and storage are is the running network's to add
        (:meth:`Network.worker_config`).

        Raises
        ------
        ConfigError
            If a value is not one a worker accepts.
        """
        if adversary is None:
            adversary = self.adversary_assignment().get(index)
        return WorkerConfig(
            dataset=self.dataset,
            scenario=self.scenario,
            scenario_params=self.scenario_params,
            n_trainers=self.n_trainers,
            trainer_index=index,
            samples=self.samples,
            seed=self.seed,
            arch=self.network_arch,
            strategy=self.strategy,
            **self.strategy_options(index),
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            optimiser=self.optimiser,
            sampling=self.sampling,
            rounds=self.rounds,
            adversary=None if adversary is None else str(adversary),
            defence=None if adversary is not None else self.defence,
        )

    @property
    def network_arch(self) -> str:
        """The architecture the network trains: :attr:`arch`, or its ``-heads<k>``
        version when the strategy needs heads (FACADE: k = :attr:`clusters`).

        Raises
        ------
        ValueError
            If the strategy is unknown, or :attr:`arch` has no version with that many heads.
        """
        heads = make_strategy(self.strategy, **self.strategy_options(0)).model_heads()
        return self.arch if heads is None else multi_head_arch(self.arch, heads)

    @property
    def task(self) -> str:
        """The task descriptor recorded on chain: architecture and the datasets used."""
        datasets = [self.dataset]
        if self.scenario == "two-datasets":
            datasets.append(self.scenario_params.get("other_dataset", "mnist"))
        return f"{self.network_arch}:{'+'.join(datasets)}"

    def published_size(self) -> SimulationConfig:
        """The paper's setup (§5.1): 38 trainers, 102 rounds, 2 epochs, all samples."""
        return replace(
            self, n_trainers=38, rounds=102, epochs=2, samples=None, name=f"{self.name}-published"
        )

    def validate(self) -> None:
        """Check the scenario, and every trainer's worker options, before starting anything.

        Raises
        ------
        SimulationError
            Naming the value to change.
        """
        if not 1 <= self.phase_duration < 2**32:
            raise SimulationError(
                f"phase_duration must be between 1 and 2**32 - 1 seconds, not "
                f"{self.phase_duration}: deadlines are mandatory (a silent trainer would "
                f"otherwise stall the network)"
            )
        if self.n_trainers < 1:
            raise SimulationError("n_trainers must be at least 1")
        if self.rounds < 1:
            raise SimulationError("rounds must be at least 1")
        if self.engine not in ENGINES:
            raise SimulationError(
                f"engine must be one of {', '.join(ENGINES)}, not {self.engine!r}"
            )
        if self.ray_address is not None:
            if self.engine != "ray":
                raise SimulationError(
                    f"ray_address only applies to engine 'ray', not {self.engine!r}"
                )
            try:
                parse_ray_address(self.ray_address)
            except ValueError as exc:
                raise SimulationError(str(exc)) from exc
        if self.hosts is not None:
            if self.engine != "batched":
                raise SimulationError(
                    f"hosts only applies to engine 'batched', not {self.engine!r}"
                )
            if isinstance(self.hosts, bool) or not isinstance(self.hosts, int) or self.hosts < 1:
                raise SimulationError(f"hosts must be a whole number >= 1, not {self.hosts!r}")
        if self.engine == "ray" and importlib.util.find_spec("ray") is None:
            raise SimulationError("engine 'ray' needs the ray package: run `make setup`")
        try:
            resolve_device(self.device)  # before a devnet starts: cuda where torch sees none
        except ValueError as exc:
            raise SimulationError(f"device: {exc}") from exc
        self._validate_trainers()
        try:
            self.network_arch  # noqa: B018 (the property checks arch against the strategy)
        except ConfigError as exc:  # a strategy option's value
            raise SimulationError(f"scenario {self.name!r}: {exc}") from exc
        except ValueError as exc:
            raise SimulationError(
                f"scenario {self.name!r}: strategy {self.strategy!r}: {exc}"
            ) from exc
        if self.storage not in ("local", "ipfs"):
            raise SimulationError(f"storage must be 'local' or 'ipfs', not {self.storage!r}")
        if self.placement not in PLACEMENTS:
            raise SimulationError(
                f"scenario {self.name!r}: placement must be one of {', '.join(PLACEMENTS)}, "
                f"not {self.placement!r}"
            )
        try:
            self.adversary_assignment()
        except ValueError as exc:
            raise SimulationError(f"scenario {self.name!r}: adversaries: {exc}") from exc
        self._validate_registration()
        share = self.cohort
        if (
            isinstance(share, bool)
            or not isinstance(share, (int, float))
            or not (MIN_COHORT_BPS <= cohort_bps(share) <= ALL_TRAINERS_BPS)
        ):
            raise ValueError(
                f"scenario {self.name!r}: cohort must be a share of the trainers between "
                f"0.01 and 1 (1: every trainer in every round), not {self.cohort!r}"
            )
        if self.max_samples is not None and (
            isinstance(self.max_samples, bool)
            or not isinstance(self.max_samples, int)
            or self.max_samples < 1
        ):
            raise SimulationError(
                f"scenario {self.name!r}: max_samples must be a whole number >= 1 (the "
                f"largest sample count an update may declare), not {self.max_samples!r}"
            )
        try:
            for index in self.trainer_indices():
                self.trainer_config(index)
        except ConfigError as exc:
            raise SimulationError(f"scenario {self.name!r}: {exc}") from exc

    def _validate_registration(self) -> None:
        where = f"scenario {self.name!r}"
        if self.registration not in POLICIES:
            raise SimulationError(
                f"{where}: registration must be one of {', '.join(map(repr, POLICIES))}, "
                f"not {self.registration!r}"
            )
        if self.deposit is None:
            return
        if self.registration != "deposit":
            raise SimulationError(
                f"{where}: deposit only applies to registration 'deposit', not "
                f"{self.registration!r}: remove it, or set registration = 'deposit'"
            )
        if isinstance(self.deposit, bool) or not isinstance(self.deposit, int):
            raise SimulationError(
                f"{where}: deposit must be a whole number of wei (1 ETH = 10**18), "
                f"not {self.deposit!r}"
            )
        if not 0 < self.deposit < DEV_ACCOUNT_BALANCE:
            raise SimulationError(
                f"{where}: deposit must be above 0 and below the "
                f"{DEV_ACCOUNT_BALANCE // ETHER:,} ETH each dev account holds (gas must "
                f"remain), not {self.deposit} wei"
            )

    @property
    def deposit_wei(self) -> int:
        """Wei one registration takes in this scenario (0 but under ``deposit``)."""
        if self.registration != "deposit":
            return 0
        return DEFAULT_DEPOSIT if self.deposit is None else self.deposit

    def admitted_trainers(self) -> list[int]:
        """The run's trainers that may register, hence run a worker: all of
        :meth:`trainer_indices` but under ``allowlist``, where each Sybil coalition
        keeps one identity (:func:`~mcfl_chain.simulation.registration.admitted_trainers`).
        """
        if self.registration != "allowlist":
            return self.trainer_indices()
        return admitted_trainers(self.trainer_indices(), self.adversary_assignment())

    def refused_trainers(self) -> list[int]:
        """The run's trainers the allowlist leaves out (none but under ``allowlist``)."""
        admitted = set(self.admitted_trainers())
        return [index for index in self.trainer_indices() if index not in admitted]

    def _validate_trainers(self) -> None:
        if self.trainers is None:
            return
        where = f"scenario {self.name!r}: trainers"
        if not isinstance(self.trainers, list | tuple) or not self.trainers:
            raise SimulationError(
                f"{where} must be a non-empty list of trainer indices (or absent for all "
                f"{self.n_trainers}), not {self.trainers!r}"
            )
        wrong = [i for i in self.trainers if isinstance(i, bool) or not isinstance(i, int)]
        if wrong:
            raise SimulationError(f"{where}: {wrong[0]!r} is not a trainer index (an integer)")
        outside = [i for i in self.trainers if not 0 <= i < self.n_trainers]
        if outside:
            raise SimulationError(
                f"{where}: {', '.join(map(str, outside))} outside 0..{self.n_trainers - 1} "
                f"(the scenario has n_trainers = {self.n_trainers})"
            )
        twice = sorted(i for i, count in Counter(self.trainers).items() if count > 1)
        if twice:
            raise SimulationError(f"{where}: {', '.join(map(str, twice))} given more than once")


class Network:
    """The services of one run: chain, storage, and the worker processes."""

    def __init__(self, config: SimulationConfig, run_dir: Path, console: Console) -> None:
        self.config = config
        self.run_dir = run_dir
        self.console = console
        self.procs: list[ChildProcess] = []
        self.engine = ENGINES[config.engine]()
        """Runs the trainers (:attr:`SimulationConfig.engine`)."""
        self.storage_spec = ""
        self.deployment: Deployment | None = None
        self.deployment_path = run_dir / "devnet" / "deployment.json"
        self.trainers = config.admitted_trainers()
        """The trainers that register and run a worker, in order (see
        :meth:`SimulationConfig.admitted_trainers`)."""
        self.refusals: list[Refusal] = []
        """The registrations the contract refused (:meth:`start` tries them)."""

    # -- services ----------------------------------------------------------------------

    def start(self, min_trainers: int | None = None) -> None:
        """Storage, genesis weights, devnet; round 0 opens at ``min_trainers``
        registrations (default: every trainer this run starts). Under ``allowlist``, the
        identities the admin left out then try to register (:attr:`refusals`)."""
        cfg = self.config
        if cfg.storage == "ipfs":
            port = free_port()
            start_ipfs(self.run_dir / "ipfs", port)
            self.storage_spec = f"ipfs:/ip4/127.0.0.1/tcp/{port}"
        else:
            self.storage_spec = f"local:{self.run_dir / 'blobs'}"
        with open_storage(self.storage_spec) as storage:
            genesis_cid = publish_genesis(cfg.network_arch, cfg.seed, storage)
        _, self.deployment = start_devnet(
            self.run_dir / "devnet",
            port=free_port(),
            genesis_cid=genesis_cid,
            task=cfg.task,
            min_trainers=min_trainers or len(self.trainers),
            phase_duration=cfg.phase_duration,
            accounts=cfg.n_trainers + 2,
            registration=cfg.registration,
            allowed=(
                [self.account_index(i) for i in self.trainers]
                if cfg.registration == "allowlist"
                else None
            ),
            deposit=cfg.deposit_wei,
            max_samples=cfg.max_samples or DEFAULT_MAX_SAMPLES,
            cohort=cfg.cohort,
        )
        # The devnet's own file goes when it stops; the run keeps a copy for the record.
        self.deployment.save(self.run_dir / "deployment.json")
        self.refusals = [self.try_to_register(i) for i in cfg.refused_trainers()]

    def try_to_register(self, index: int) -> Refusal:
        """Send the registration of trainer ``index``, which the allowlist leaves out,
        and return the contract's refusal. The transaction is really sent, and mined: it
        reverts on chain, for everyone to see.

        Raises
        ------
        SimulationError
            If the contract registered it after all.
        """
        assert self.deployment is not None
        client = ChainClient(self.deployment, account_index=self.account_index(index))
        try:
            trainer_id = client.register(gas=REGISTER_GAS)
        except ChainError as exc:
            return Refusal(index, client.address, exc.reason or str(exc))
        raise SimulationError(
            f"trainer {index} ({client.address}) registered as trainer {trainer_id} although "
            f"the allowlist leaves it out: the contracts do not enforce the policy"
        )

    def account_index(self, index: int) -> int:
        """The devnet account trainer ``index`` signs with."""
        return index + 1

    def adversaries(self) -> dict[int, AdversarySpec]:
        """Trainer index → its adversary as its worker is told it: colluders (Sybils)
        learn their coalition's addresses (the devnet accounts they sign with), only
        the identities that may register (under ``allowlist``, one per coalition)."""
        refused = set(self.config.refused_trainers())
        assignment = {
            index: spec
            for index, spec in self.config.adversary_assignment().items()
            if index not in refused
        }
        addresses = {
            index: str(dev_account(self.account_index(index)).address) for index in assignment
        }
        return with_coalitions(assignment, addresses)

    def worker_config(self, index: int) -> WorkerConfig:
        """Trainer ``index``'s scenario share, plus where this run's services are."""
        assert self.deployment is not None
        trainer_dir = self.run_dir / "trainers" / f"{index:03d}"
        return replace(
            self.config.trainer_config(index, self.adversaries().get(index)),
            device=self.config.device,
            training=self.config.training,
            rpc=self.deployment.rpc_url,
            account_index=self.account_index(index),
            deployment=str(self.deployment_path),
            storage=self.storage_spec,
            state_dir=trainer_dir / "state",
            metrics=trainer_dir / "metrics.jsonl",
        )

    def worker_command(self, index: int) -> list[str]:
        """The ``mcfl-chain worker`` process of trainer ``index``."""
        return [sys.executable, "-m", "mcfl_chain", *self.worker_args(index)]

    def worker_args(self, index: int) -> list[str]:
        """The ``mcfl-chain`` arguments of trainer ``index``'s worker."""
        return ["worker", *self.worker_config(index).to_args()]

    def register_in_order(self) -> None:
        """Register the run's trainers one after the other, in index order, before any
        worker starts (each worker then finds itself registered).

        Trainer ids follow registration order, and strategies break ties by id; left to
        the workers, which race to register, the ids and so the run would change from
        one run of the same seed to the next.
        """
        assert self.deployment is not None
        accounts = [dev_account(self.account_index(index)) for index in self.trainers]
        ChainClient.read_only(self.deployment).register_in_order(accounts)

    def trainer_dir(self, index: int) -> Path:
        """Trainer ``index``'s folder in the run: its state, log and metrics."""
        return self.run_dir / "trainers" / f"{index:03d}"

    def spawn_workers(self, extra_args: dict[int, list[str]] | None = None) -> None:
        """Start every trainer that may register (:attr:`trainers`, in that order) with
        the configured engine; ``extra_args`` adds options to some of them, by trainer
        index (process engine)."""
        self.procs += self.engine.start(self, extra_args or {})

    def spawn(self, index: int, extra_args: list[str] | None = None) -> ChildProcess:
        """Start (or restart) trainer ``index`` (:meth:`worker_command`, forked from a warm
        interpreter: :mod:`mcfl_chain._utils.forked`); its log is appended to, never lost."""
        trainer_dir = self.run_dir / "trainers" / f"{index:03d}"
        trainer_dir.mkdir(parents=True, exist_ok=True)
        return start_module(
            "mcfl_chain",
            [*self.worker_args(index), *(extra_args or [])],
            log=trainer_dir / "worker.log",
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
            preload=WORKER_PRELOAD,
        )

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        try:
            self.engine.stop(self)
        finally:
            stop_devnet(self.run_dir / "devnet")
            if self.config.storage == "ipfs":
                stop_ipfs(self.run_dir / "ipfs")

    # -- progress ------------------------------------------------------------------------

    def metrics_files(self) -> list[Path]:
        return sorted((self.run_dir / "trainers").glob("*/metrics.jsonl"))

    def wait(self) -> None:
        """Show progress until every worker has played its rounds; fail loudly if one dies."""
        cfg = self.config
        assert self.deployment is not None
        observer = ChainClient.read_only(self.deployment)
        total = cfg.rounds * len(self.trainers)
        last_progress, done = time.monotonic(), 0
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} trainer-rounds"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        ) as bar:
            task = bar.add_task("starting", total=total)
            while True:
                now_done = sum(len(p.read_text().splitlines()) for p in self.metrics_files())
                if now_done != done:
                    done, last_progress = now_done, time.monotonic()
                status = observer.status()
                where = (
                    (
                        f"round {status.round} {status.phase.name.lower()} "
                        f"({status.votes}/{status.quorum} votes)"
                    )
                    if status.started
                    else "waiting for trainers to register"
                )
                bar.update(task, completed=min(done, total), description=where)
                codes = [p.poll() for p in self.procs]
                failed = [i for i, c in enumerate(codes) if c not in (None, 0)]
                if failed:
                    raise SimulationError(self._failure(failed[0], codes[failed[0]]))
                if all(c == 0 for c in codes):
                    return
                if time.monotonic() - last_progress > cfg.stall_timeout:
                    raise SimulationError(
                        f"no trainer finished a round for "
                        f"{cfg.stall_timeout:.0f} s; see the worker logs "
                        f"in {self.run_dir / 'trainers'}"
                    )
                time.sleep(0.5)

    def _failure(self, position: int, code: int | None) -> str:
        index, log = self.engine.log_of(self, position)
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        who = "the host of every trainer" if index is None else f"worker {index}"
        return f"{who} exited with code {code}; last lines of {log}:\n{tail}"

    # -- results -----------------------------------------------------------------------

    def registration(self) -> dict[str, Any]:
        """What the registration policy did, as the chain records it (``summary.json``'s
        ``registration``): ``policy``; ``deposit_wei``, per registration; ``trainers``,
        the tokens live; ``refused``, one record per refusal (:class:`Refusal`);
        ``sybils``, the trainer indices of the run's colluding identities, and
        ``sybils_registered``, those holding a trainer token; ``deposit_locked_wei``, the
        wei those locked (the contract takes exactly the deposit per registration);
        ``deposits_held_wei``, the Trainers contract's balance (every deposit paid)."""
        assert self.deployment is not None
        observer = ChainClient.read_only(self.deployment)
        deposit = observer.deposit()
        sybils = [
            index
            for members in coalitions(
                self.config.trainer_indices(), self.config.adversary_assignment()
            )
            for index in members
        ]
        registered = [
            index
            for index in sybils
            if observer.is_registered(str(dev_account(self.account_index(index)).address))
        ]
        held = observer.w3.eth.get_balance(
            Web3.to_checksum_address(self.deployment.addresses["Trainers"])
        )
        return {
            "policy": self.deployment.registration,
            "deposit_wei": deposit,
            "trainers": observer.trainer_count(),
            "refused": [refusal.to_json() for refusal in self.refusals],
            "sybils": sorted(sybils),
            "sybils_registered": sorted(registered),
            "deposit_locked_wei": len(registered) * deposit,
            "deposits_held_wei": int(held),
        }

    def dag(self) -> ModelDAG:
        assert self.deployment is not None
        observer = ChainClient.read_only(self.deployment)
        dag = ModelDAG(genesis_cid=self.deployment.genesis_cid)
        events = observer.events(self.deployment.deployment_block, observer.block_number())
        apply_events(dag, [event_record(e) for e in events])
        return dag


def run_simulation(
    config: SimulationConfig,
    run_dir: Path,
    console: Console | None = None,
    keep_running: bool = False,
) -> dict[str, Any]:
    """Run the scenario to the end and write the run directory; returns the summary."""
    console = console or Console()
    config.validate()
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=1))
    network = Network(config, run_dir, console)
    started = time.monotonic()
    with unwind_on_termination():
        try:
            with console.status("starting the devnet and storage"):
                network.start()
            console.print(
                f"devnet at {network.deployment.rpc_url if network.deployment else '?'}, "
                f"storage {network.storage_spec}, {len(network.trainers)} trainers"
                + (
                    f" (indices {', '.join(map(str, network.trainers))} of {config.n_trainers})"
                    if network.trainers != list(range(config.n_trainers))
                    else ""
                )
                + _policy_note(config)
            )
            for refusal in network.refusals:
                console.print(
                    f"trainer {refusal.trainer_index} ({refusal.address}) was refused "
                    f"registration: {refusal.reason}"
                )
            for index, spec in sorted(config.adversary_assignment().items()):
                if index in network.trainers:
                    console.print(f"trainer {index} plays the adversary {spec}")
            network.register_in_order()
            network.spawn_workers()
            network.wait()
            dag = network.dag()
            registration = network.registration()
        finally:
            if keep_running:
                network.engine.stop(network)  # a Ray cluster goes; the devnet and storage stay
            else:
                network.stop()
        return finish_run(
            run_dir, config, dag, time.monotonic() - started, console, registration=registration
        )


def _policy_note(config: SimulationConfig) -> str:
    """How the run's trainers register, for the console ("" when anyone may)."""
    if config.registration == "deposit":
        return f", registration by deposit ({config.deposit_wei / ETHER:g} ETH each)"
    if config.registration == "allowlist":
        return ", registration by allowlist (one identity per Sybil coalition)"
    return ""


def finish_run(
    run_dir: Path,
    config: SimulationConfig,
    dag: ModelDAG,
    seconds: float,
    console: Console,
    registration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge the workers' metrics, write the DAG, tables, plots and print the table;
    ``registration`` (:meth:`Network.registration`) goes into the summary as it is, and
    ``platform`` says what this machine computed on (:func:`platform_record`: trainers on
    other hosts or a Ray cluster computed elsewhere, which ``config`` names)."""
    (run_dir / "dag.json").write_text(json.dumps(dag.to_json(), indent=1))
    lines = report.read_metrics(sorted((run_dir / "trainers").glob("*/metrics.jsonl")))
    with open(run_dir / "metrics.jsonl", "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    models_per_round = {r: len(dag.models_of_round(r)) for r in {line["round"] for line in lines}}
    summaries = report.summarize(lines, models_per_round)
    report.write_csv(summaries, run_dir / "rounds.csv")
    metric_name = "accuracy" if get_architecture(config.arch).kind == "classifier" else "MSE"
    summary = report.write_summary(
        run_dir,
        lines,
        summaries,
        {
            "config": asdict(config),
            "seconds": round(seconds, 2),
            "metric": metric_name,
            "models_total": len(dag.models) - 1,
            "updates_total": len(dag.updates),
            "registration": registration,
            "platform": platform_record(resolve_device(config.device)),
        },
    )
    report.plot(run_dir, lines, summaries, metric_name)
    console.print(round_table(summaries, metric_name))
    split = summary["time_split"]
    console.print("time split: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in split.items()))
    return summary


def round_table(summaries: list[report.RoundSummary], metric_name: str) -> Table:
    table = Table(title=f"{metric_name} of each trainer's aggregated model (local test split)")
    for col in ("round", "min", "avg", "max", "models", "round time"):
        table.add_column(col, justify="right")

    def fmt(v: float | None) -> str:
        if v is None:
            return "-"
        return f"{v:.3f}" if metric_name == "accuracy" else f"{v:.5f}"

    for s in summaries:
        table.add_row(
            str(s.round),
            fmt(s.metric_min),
            fmt(s.metric_avg),
            fmt(s.metric_max),
            str(s.models),
            f"{s.seconds:.1f} s",
        )
    return table
