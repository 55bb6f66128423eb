"""The experiment campaign: every scenario × method × seed (``scripts/run_experiments.py``).

Built on the experiment framework (:mod:`~mcfl_chain.simulation.experiment`). Each method
is a :class:`Method` registered in :data:`CAMPAIGN_METHODS` (adding one is one
:func:`register_method` call: the plan, ``--methods`` and the report read the registry).
The methods, on the same data, chain code and seeds:

- ``mcfl``: the scenario file as written (MCFL as its authors ran it, by default);
- ``fedavg``: decentralized FedAvg, one global model (the paper's baseline);
- ``local``: every trainer alone;
- ``ifca``: IFCA with k = the scenario's ``n_groups`` (3 if it has none);
- ``facade``, on request only (``--methods facade``): FACADE with k heads, k as for IFCA;
- ``fedfmc``, on request only: FedFMC with its schedule fitted to the scenario's rounds
  (:func:`fedfmc_schedule`: merges of 5 rounds for k − 1 groups, k as for IFCA, the
  fork stage before them);
- ``fedprox``, ``ditto`` and ``fedavg-ft``, on request only: the personalised-FL
  baselines (FedProx, Ditto, FedAvg with local fine-tuning) with their default options;
- ``mcfl-plus``, on request only: MCFL-plus (:mod:`mcfl_chain.strategies.mcfl_plus`) with
  the scenario's MCFL options and its own defaults;
- ``oracle``: FedAvg run separately inside each true data group (one network per group,
  of that group's trainers only, with the data shares of the whole scenario), the parts
  merged into one run directory; only where the scenario has several groups and some
  group has more than one trainer (with one trainer per group it is ``local``);
- ablations, on ``groups`` and the two ``autoencoders`` scenarios: MCFL with one of its
  three readings of the paper switched to the earlier one (``mcfl-shared``: everybody
  starts on the root, ``mcfl-all``: aggregate on every trained parent, ``mcfl-ceil``:
  train ⌈√n⌉ parents), and all three together (``mcfl-v1``, this repository's first MCFL);
  on request, the deviations from the authors' code that remain (:data:`FIDELITY_ABLATIONS`:
  ``mcfl-elementwise``, ``mcfl-authors-statistics``, ``mcfl-resampled``,
  ``fedavg-first-one``), each against its own method's runs.

Scenario files that differ only in MCFL options (``gaussian-tol1`` … ``-tolmixed``,
``autoencoders`` and ``autoencoders-tol1``) share their baselines, named after the part
of the name before ``-tol``. A run's directory is ``<scenario>-<method>-s<seed>``; the
runs are ordered seed by seed, so a partial campaign has every (scenario, method) at
seed 0 before any at seed 1. Each finished run's record (:func:`records`) is kept in
``results/experiments/`` (``results/experiments-published/`` at the paper's size).
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from mcfl_chain._utils.config_files import ConfigError
from mcfl_chain.learning.models import MULTI_HEAD_BASES
from mcfl_chain.learning.scenario import declared_group_count, scenario_specs
from mcfl_chain.simulation import experiment, report
from mcfl_chain.simulation.experiment import (
    RESULTS,
    ExperimentError,
    RunCopies,
    config_differences,
    parse_seeds,
    recorded_seconds,
    state_of,
)
from mcfl_chain.simulation.runner import SimulationConfig, SimulationError, run_simulation
from mcfl_chain.strategies import STRATEGIES
from mcfl_chain.strategies.base import strategy_options
from mcfl_chain.strategies.fedfmc import FORK_END, FORK_START

__all__ = ["config_differences", "parse_seeds", "recorded_seconds", "state_of"]

COMPARISON_SCENARIOS = (
    "groups",
    "gaussian-tol1",
    "rotation-16-16",
    "rotation-24-8",
    "rotation-30-2",
)
COMPARISON_METHODS = ("mcfl", "fedfmc", "facade", "ifca", "fedavg", "local", "oracle")
"""``run_experiments.py --comparison``: the clustered methods side by side (issue 14)."""
FEDFMC_MERGE_ROUNDS = 5
"""FedFMC's M in the campaign: the least its paper's early stop allows (5-round windows),
so that the fork stage keeps most of a 25-round run."""
ABLATIONS: dict[str, dict[str, Any]] = {
    "mcfl-shared": {"start": "shared"},
    "mcfl-all": {"aggregate_on": "all"},
    "mcfl-ceil": {"selection": "ceil"},
    "mcfl-v1": {"start": "shared", "aggregate_on": "all", "selection": "ceil"},
}
"""MCFL with one deviation from the authors' code toggled alone, and all of them (v1)."""
ABLATION_LABELS = {
    "mcfl-shared": "shared start (root)",
    "mcfl-all": "aggregate on every parent",
    "mcfl-ceil": "⌈√n⌉ parents",
    "mcfl-v1": "v1: all three",
}
FIDELITY_ABLATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "mcfl-elementwise": ("mcfl", {"divergence": "elementwise"}),
    "mcfl-authors-statistics": ("mcfl", {"filter_statistics": "authors"}),
    "mcfl-resampled": ("mcfl", {"sampling": "replacement"}),
    "fedavg-first-one": ("fedavg", {"fedavg_start": "one"}),
}
"""Issue 36, item 5: the remaining deviations from the authors' code, each switched to
the authors' way alone, on request (``--methods``): name → (the method it changes, its
options). Each is compared with that method's own runs."""
FIDELITY_LABELS = {
    "mcfl-elementwise": "authors' element-wise divergence",
    "mcfl-authors-statistics": "authors' Algorithm 2 statistics",
    "mcfl-resampled": "training data drawn with replacement",
    "fedavg-first-one": "FedAvg, authors' first round (one trainer)",
}
ABLATION_SCENARIOS = ("groups", "autoencoders", "autoencoders-epochs6")
FIDELITY_SCENARIOS = ("groups",)
"""Where ``run_experiments.py --fidelity`` runs the :data:`FIDELITY_ABLATIONS`."""
FIDELITY_METHODS = ("mcfl", "fedavg", *FIDELITY_ABLATIONS)
"""The ``--fidelity`` campaign: each deviation, and the methods they change, rerun beside
them by the same code and engine so that every pair differs by the deviation alone."""
DEFAULT_SEEDS = (0, 1, 2)
PUBLISHED_MAX_ROUNDS = 30
"""Rounds of a ``--published-size`` campaign unless ``--max-rounds`` says otherwise."""
RECORDS = RESULTS / "experiments"
"""Where each finished run's record is kept (``--records``)."""
PUBLISHED_RECORDS = RESULTS / "experiments-published"
"""The same for ``--published-size`` runs."""
FIDELITY_RECORDS = RESULTS / "fidelity"
"""The same for ``--fidelity`` runs."""


class CampaignError(ExperimentError):
    """The campaign cannot be planned or resumed as asked; the message says what to change."""


class NotApplicable(CampaignError):
    """A method has no run on a scenario; the message says why (a note of the plan)."""


Parts = tuple[tuple[str, tuple[int, ...]], ...]
"""The oracle's groups: ``(group label, trainer indices)``, one network each."""


@dataclass(frozen=True)
class Method:
    """One method of the campaign: how its run is configured from a scenario's.

    Adding a method is one :func:`register_method` call; the plan, ``--methods``, the
    report's rows and labels all read :data:`CAMPAIGN_METHODS`.
    """

    name: str
    label: str
    """Its row in docs/RESULTS.md, and its name in the plan's notes."""
    configure: Callable[[SimulationConfig], SimulationConfig]
    """The run's configuration from the scenario's (same data, seed and name); raises
    :class:`NotApplicable` where the method has no run on that scenario."""
    shared: bool = True
    """A baseline, filed under the scenario's :func:`baseline_stem` and shared by the
    scenario files that differ only in MCFL options (False: one run per file)."""
    default: bool = True
    """Run unless ``--methods`` names others (False: only when named)."""
    split: Callable[[SimulationConfig], Parts] | None = None
    """One network per group of trainers, merged into one run (the oracle); raises
    :class:`NotApplicable` where there are no groups to split into."""
    scenarios: tuple[str, ...] | None = None
    """Only on these scenario files, planned after the other methods (the ablations)."""


CAMPAIGN_METHODS: dict[str, Method] = {}
"""Method name → :class:`Method`, in the order the plan and the report list them."""


def register_method(method: Method) -> Method:
    """Add ``method`` to :data:`CAMPAIGN_METHODS` (a name once only)."""
    if method.name in CAMPAIGN_METHODS:
        raise ValueError(f"campaign method {method.name!r} is registered twice")
    CAMPAIGN_METHODS[method.name] = method
    return method


@dataclass(frozen=True)
class PlannedRun:
    """One run of the campaign.

    Attributes
    ----------
    name : str
        Its directory name, ``<scenario>-<method>-s<seed>``.
    scenario : str
        The scenario file's name (MCFL and ablations) or the shared baselines' stem.
    method : str
        One of :data:`ALL_METHODS`.
    seed : int
    config : SimulationConfig
        What is run (for the oracle, the FedAvg configuration of the whole scenario).
    parts : tuple
        Oracle only: ``(group label, trainer indices)`` of each group, one network each.
    """

    name: str
    scenario: str
    method: str
    seed: int
    config: SimulationConfig
    parts: Parts = ()

    @property
    def ablation(self) -> bool:
        return self.method in ABLATIONS

    def part_configs(self) -> list[tuple[str, SimulationConfig]]:
        """Oracle: each group's sub-directory name and the configuration of its network."""
        return [
            (
                slug(label),
                replace(self.config, trainers=list(indices), name=f"{self.name}-{slug(label)}"),
            )
            for label, indices in self.parts
        ]


Plan = experiment.Plan[PlannedRun]


def slug(text: str) -> str:
    """A directory-name form of a group label: ``"classes 0-3"`` → ``"classes-0-3"``."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower() or "group"


def baseline_stem(config: SimulationConfig) -> str:
    """The name the scenario's baselines are filed under: its name before ``-tol``."""
    return config.name.split("-tol")[0]


def method_config(config: SimulationConfig, method: str) -> SimulationConfig:
    """The configuration of ``method`` on ``config``'s scenario (same data and seed).

    Raises
    ------
    CampaignError
        For an unknown method, or one that has no run on the scenario
        (:class:`NotApplicable`).
    """
    if method not in CAMPAIGN_METHODS:
        raise CampaignError(f"unknown method {method!r}; known: {', '.join(ALL_METHODS)}")
    return CAMPAIGN_METHODS[method].configure(config)


def baseline(config: SimulationConfig, strategy: str, **options: Any) -> SimulationConfig:
    """``config`` with ``strategy`` and its ``options``, every strategy option that
    ``strategy`` does not declare reset to its default: scenarios that differ only in
    other strategies' options (MCFL's tolerance variants) share one baseline run."""
    own = {option.name for option in STRATEGIES[strategy].declared_options()}
    defaults = {o.name: o.spec.spelled().default for o in strategy_options() if o.name not in own}
    return replace(config, strategy=strategy, **{**defaults, **options})


def clustered(config: SimulationConfig, strategy: str) -> SimulationConfig:
    """A baseline of k models, k the scenario's true groups (:func:`true_group_count`)."""
    return baseline(config, strategy, clusters=true_group_count(config))


def facade(config: SimulationConfig) -> SimulationConfig:
    """FACADE with k heads, on an architecture that has heads."""
    if config.arch not in MULTI_HEAD_BASES:
        raise NotApplicable(f"{config.arch} has no heads (a classifier's last layer)")
    return clustered(config, "facade")


def fedfmc(config: SimulationConfig) -> SimulationConfig:
    """FedFMC with its schedule fitted to the scenario's rounds (:func:`fedfmc_schedule`)."""
    fork_rounds, merge_rounds = fedfmc_schedule(config)
    return baseline(config, "fedfmc", fork_rounds=fork_rounds, merge_rounds=merge_rounds)


def oracle_split(config: SimulationConfig) -> Parts:
    """The oracle's groups (:func:`oracle_parts`), where it has some."""
    parts, why = oracle_parts(config)
    if not parts:
        raise NotApplicable(why)
    return parts


register_method(Method("mcfl", "MCFL", lambda config: config, shared=False))
register_method(Method("fedavg", "FedAvg", partial(baseline, strategy="fedavg")))
register_method(Method("local", "local", partial(baseline, strategy="local")))
register_method(Method("ifca", "IFCA", partial(clustered, strategy="ifca")))
register_method(
    Method("oracle", "oracle", partial(baseline, strategy="fedavg"), split=oracle_split)
)
register_method(Method("facade", "FACADE", facade, default=False))
register_method(Method("fedfmc", "FedFMC", fedfmc, default=False))
register_method(Method("fedprox", "FedProx", partial(baseline, strategy="fedprox"), default=False))
register_method(Method("ditto", "Ditto", partial(baseline, strategy="ditto"), default=False))
register_method(
    Method("fedavg-ft", "FedAvg-FT", partial(baseline, strategy="fedavg-ft"), default=False)
)
register_method(
    Method(
        "mcfl-plus",
        "MCFL-plus",
        partial(replace, strategy="mcfl-plus"),
        shared=False,
        default=False,
    )
)
for _name, _options in ABLATIONS.items():
    register_method(
        Method(
            _name,
            ABLATION_LABELS[_name],
            partial(replace, **_options),
            shared=False,
            scenarios=ABLATION_SCENARIOS,
        )
    )

for _name, (_base, _options) in FIDELITY_ABLATIONS.items():
    register_method(
        Method(
            _name,
            FIDELITY_LABELS[_name],
            partial(replace, **_options)
            if _base == "mcfl"
            else partial(baseline, strategy=_base, **_options),
            shared=False,
            default=False,
            scenarios=ABLATION_SCENARIOS,
        )
    )

# The registry's lists as this module registers them (``--methods``' choices, the report's
# rows); the plan reads the registry itself.
ALL_METHODS = tuple(CAMPAIGN_METHODS)
METHODS = tuple(m.name for m in CAMPAIGN_METHODS.values() if m.default and not m.scenarios)
"""The methods every scenario is run with (``oracle`` where it applies)."""
ON_REQUEST = tuple(m.name for m in CAMPAIGN_METHODS.values() if not m.default)
"""Baselines run only when named (``--methods``): not part of the paper's comparison."""
BASELINES = tuple(m.name for m in CAMPAIGN_METHODS.values() if m.shared)
LABELS = {m.name: m.label for m in CAMPAIGN_METHODS.values()}


def fedfmc_schedule(config: SimulationConfig) -> tuple[int, int]:
    """FedFMC's (T, M) for ``config``'s rounds: merges of :data:`FEDFMC_MERGE_ROUNDS`
    rounds folding k − 1 groups into the first (k as for IFCA) end with the run, the fork
    stage takes the rounds before them. Should the trainers form more groups than k, the
    last ones are still unmerged when the run ends, as a budget of rounds would leave them.

    Raises
    ------
    CampaignError
        When the fork stage would have no fork-eligible round.
    """
    merges = (true_group_count(config) - 1) * FEDFMC_MERGE_ROUNDS
    fork_rounds = config.rounds - merges
    if fork_rounds <= FORK_START + FORK_END:
        raise NotApplicable(
            f"{config.name}: FedFMC needs more than {FORK_START + FORK_END + merges} rounds "
            f"(a fork stage with a fork-eligible round, then {merges} merge rounds); the "
            f"scenario has {config.rounds}"
        )
    return fork_rounds, FEDFMC_MERGE_ROUNDS


UNDECLARED_GROUPS = 3
"""IFCA's and FACADE's k on a scenario that declares no groups (gaussian, Dirichlet)."""


def true_group_count(config: SimulationConfig) -> int:
    """IFCA's and FACADE's k for a scenario: the number of data groups it declares
    (:func:`~mcfl_chain.learning.scenario.declared_group_count`: ``n_groups`` or the
    length of ``group_sizes``, 2 for two datasets, 1 for IID), else
    :data:`UNDECLARED_GROUPS`. The run's ``config.json`` records it (``clusters``).

    Raises
    ------
    CampaignError
        For an unknown scenario kind.
    """
    params = config.scenario_params
    try:
        declared = declared_group_count(
            config.scenario,
            n_trainers=config.n_trainers,
            n_groups=params.get("n_groups"),
            group_sizes=params.get("group_sizes"),
        )
    except ValueError as exc:
        raise CampaignError(f"scenario {config.name!r}: {exc}") from exc
    return UNDECLARED_GROUPS if declared is None else declared


def true_groups(config: SimulationConfig) -> dict[str, list[int]]:
    """Each data group of the scenario (its label in the metrics) and its trainer indices.

    Raises
    ------
    CampaignError
        If the scenario's data specs cannot be made (unknown kind or parameter).
    """
    try:
        specs = scenario_specs(
            config.scenario,
            config.n_trainers,
            config.seed,
            dataset=config.dataset,
            samples_per_trainer=config.samples,
            **config.scenario_params,
        )
    except (ValueError, TypeError) as exc:
        raise CampaignError(f"scenario {config.name!r}: {exc}") from exc
    groups: dict[str, list[int]] = defaultdict(list)
    for index, spec in enumerate(specs):
        groups[spec.group].append(index)
    return dict(groups)


def oracle_parts(config: SimulationConfig) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], str]:
    """The oracle's groups, or ``()`` and the reason there is no oracle for ``config``."""
    groups = true_groups(config)
    if len(groups) < 2:
        return (), "a single data group (the oracle is FedAvg)"
    if all(len(members) == 1 for members in groups.values()):
        return (), "one trainer per data group (the oracle is local training)"
    return tuple((label, tuple(members)) for label, members in groups.items()), ""


def load_scenarios(folder: Path) -> list[SimulationConfig]:
    """The scenario files of ``folder`` (``*.toml``), by file name.

    Raises
    ------
    CampaignError
        If there is none, one cannot be read, or two have the same name.
    """
    paths = sorted(folder.glob("*.toml"))
    if not paths:
        raise CampaignError(f"no scenario file (*.toml) in {folder}")
    configs: dict[str, SimulationConfig] = {}
    for path in paths:
        try:
            config = SimulationConfig.load_file(path)
        except ConfigError as exc:
            raise CampaignError(str(exc)) from exc
        if config.name in configs:
            raise CampaignError(f"two scenario files in {folder} are named {config.name!r}")
        configs[config.name] = config
    return list(configs.values())


def sized(config: SimulationConfig, published: bool, max_rounds: int | None) -> SimulationConfig:
    """``config`` at the paper's size (38 trainers, all samples, 2 epochs) if
    ``published``, its rounds capped at ``max_rounds`` (30 by default at that size)."""
    if published:
        config = replace(config.published_size(), name=config.name)
        max_rounds = max_rounds or PUBLISHED_MAX_ROUNDS
    if max_rounds is not None:
        config = replace(config, rounds=min(config.rounds, max_rounds))
    return config


def plan(
    scenarios: Sequence[SimulationConfig],
    seeds: Sequence[int] = DEFAULT_SEEDS,
    methods: Iterable[str] = (),
    only: Iterable[str] = (),
    ablation: bool = True,
    published: bool = False,
    max_rounds: int | None = None,
    check: bool = True,
) -> Plan:
    """Every run to make, seed by seed: per scenario MCFL then its baselines, then the
    ablations; a baseline shared by several scenario files appears once.

    ``methods`` (empty: every method of :data:`CAMPAIGN_METHODS` run by default, the
    ablations only if ``ablation``) and ``only`` (scenario names, or a baseline stem such
    as ``gaussian``; empty: all) filter. ``check=False`` leaves out the check that each
    run can start (its trainers' configurations), for a plan only counted.

    Raises
    ------
    CampaignError
        For an unknown method or scenario name, a bad seed or round cap, two scenario
        files giving different runs one name, or a run whose configuration is invalid.
    """
    methods, only = tuple(methods), tuple(only)
    unknown = [m for m in methods if m not in CAMPAIGN_METHODS]
    if unknown:
        known = ", ".join(CAMPAIGN_METHODS)
        raise CampaignError(f"unknown method {unknown[0]!r}; known: {known}")
    names = {c.name for c in scenarios} | {baseline_stem(c) for c in scenarios}
    unknown = [n for n in only if n not in names]
    if unknown:
        raise CampaignError(f"no scenario named {unknown[0]!r}; known: {', '.join(sorted(names))}")
    if not seeds:
        raise CampaignError("give at least one seed")
    twice = [s for s, count in Counter(seeds).items() if count > 1]
    if twice or any(s < 0 for s in seeds):
        raise CampaignError(f"seeds must be distinct and >= 0, got {list(seeds)}")
    if max_rounds is not None and max_rounds < 1:
        raise CampaignError(f"--max-rounds must be at least 1, got {max_rounds}")
    wanted = set(methods) or {m.name for m in CAMPAIGN_METHODS.values() if m.default}
    if not ablation:
        wanted -= {m.name for m in CAMPAIGN_METHODS.values() if m.scenarios}
    chosen = [
        sized(c, published, max_rounds)
        for c in sorted(scenarios, key=lambda c: (baseline_stem(c), c.name != baseline_stem(c)))
        if not only or c.name in only or baseline_stem(c) in only
    ]
    # Every method on every scenario file, then those limited to some files (ablations).
    everywhere = [m for m in CAMPAIGN_METHODS.values() if m.name in wanted and not m.scenarios]
    limited = [m for m in CAMPAIGN_METHODS.values() if m.name in wanted and m.scenarios]

    runs: dict[str, PlannedRun] = {}
    notes: dict[str, str] = {}

    def add(method: Method, config: SimulationConfig) -> None:
        scenario = baseline_stem(config) if method.shared else config.name
        name = f"{scenario}-{method.name}-s{config.seed}"
        try:
            run_config = replace(method.configure(config), name=name)
            parts = method.split(run_config) if method.split else ()
        except NotApplicable as exc:
            notes[f"{scenario}-{method.name}"] = f"{scenario}: no {method.label} run, {exc}"
            return
        run = PlannedRun(name, scenario, method.name, config.seed, run_config, parts)
        previous = runs.get(run.name)
        if previous is not None and (
            asdict(previous.config) != asdict(run.config) or previous.parts != run.parts
        ):
            raise CampaignError(f"two scenario files define different runs named {run.name!r}")
        runs[run.name] = run

    for seed in seeds:
        for config in chosen:
            for method in everywhere:
                add(method, replace(config, seed=seed))
        for config in chosen:
            for method in limited:
                if config.name in (method.scenarios or ()):
                    add(method, replace(config, seed=seed))
    out = Plan(list(runs.values()), list(notes.values()))
    for run in out.runs if check else ():
        try:
            for config in [run.config] + [c for _, c in run.part_configs()]:
                config.validate()
        except SimulationError as exc:
            raise CampaignError(f"run {run.name}: {exc}") from exc
    return out


# -- the run directories ----------------------------------------------------------------


def plan_json(runs: Sequence[PlannedRun]) -> str:
    """``runs`` as JSON, each with its whole configuration: what :func:`plan_from_json`
    reads on a machine that cannot plan them (one without the records a declared plan
    is chosen from, such as the device machine)."""
    return json.dumps(
        [
            {
                "name": run.name,
                "scenario": run.scenario,
                "method": run.method,
                "seed": run.seed,
                "config": asdict(run.config),
                "parts": [[label, list(indices)] for label, indices in run.parts],
            }
            for run in runs
        ],
        indent=1,
    )


def plan_from_json(text: str, source: str = "plan") -> list[PlannedRun]:
    """The runs :func:`plan_json` wrote.

    Raises
    ------
    CampaignError
        For text that is not such a list of runs (the message names the run and key).
    """
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CampaignError(f"{source}: not JSON ({exc}); write it with --export") from exc
    if not isinstance(items, list):
        raise CampaignError(f"{source}: a list of runs is expected, got {type(items).__name__}")
    runs = []
    for index, item in enumerate(items, 1):
        try:
            config = SimulationConfig.from_mapping(item["config"], f"{source}, run {index}")
            runs.append(
                PlannedRun(
                    name=str(item["name"]),
                    scenario=str(item["scenario"]),
                    method=str(item["method"]),
                    seed=int(item["seed"]),
                    config=config,
                    parts=tuple((str(g), tuple(int(i) for i in ids)) for g, ids in item["parts"]),
                )
            )
        except (KeyError, TypeError, ValueError, ConfigError) as exc:
            raise CampaignError(f"{source}, run {index}: {exc!r} (write it with --export)") from exc
    return runs


def kinds(run: PlannedRun) -> tuple[tuple[str, str], str]:
    """What a run's duration is estimated from: the same scenario and method at other
    seeds, else the same method (:func:`experiment.estimate_seconds`)."""
    return (run.scenario, run.method), run.method


def estimate_seconds(
    pending: Sequence[PlannedRun], finished: Sequence[tuple[PlannedRun, float]]
) -> float | None:
    """Time the ``pending`` runs should take, from the ``finished`` runs' durations (in
    seconds): each like the same scenario and method at other seeds, else the same
    method, else any run. None before any run finished."""
    return experiment.estimate_seconds(pending, finished, kinds)


def clear_unfinished(run: PlannedRun, run_dir: Path) -> None:
    """Remove what an interrupted run left (its trainers' metrics would mix with the new
    ones); an oracle keeps the groups' networks that finished."""
    if not run_dir.exists():
        return
    if not run.parts:
        shutil.rmtree(run_dir)
        return
    parts = run_dir / "parts"
    for entry in run_dir.iterdir():
        if entry != parts:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    if parts.exists():
        for part in parts.iterdir():
            if not (part / "summary.json").exists():
                shutil.rmtree(part)


RECORD_KEYS = ("round", "trainer", "trainer_id", "trainer_index", "group", "strategy",
               "tolerance", "samples", "accuracy", "loss", "model", "personal", "seconds",
               "traffic", "gas")  # fmt: skip
"""What a record keeps of the final round's metrics lines: every figure the report's
tables are computed from, and what the strategy says of the deployed model (``personal``:
e.g. FACADE's head, MCFL-plus's totals of what its chance floor set aside)."""
COST_KEYS = ("round", "trainer", "trainer_index", "traffic", "gas")
"""What a record keeps of the earlier rounds: the costs averaged over every round."""


def record_lines(
    lines: list[dict[str, Any]], keys: Sequence[str] = RECORD_KEYS
) -> list[dict[str, Any]]:
    """The metrics lines a record keeps: the final round's (``keys``, by default
    :data:`RECORD_KEYS`) and the earlier rounds' costs (:data:`COST_KEYS`)."""
    last = max((line["round"] for line in lines), default=None)
    kept = []
    for line in lines:
        if line["round"] == last:
            kept.append({k: line[k] for k in keys if k in line})
        elif "traffic" in line or "gas" in line:
            kept.append({k: line[k] for k in COST_KEYS if k in line})
    return kept


def records(folder: Path) -> RunCopies:
    """The campaign's records in ``folder``: each finished run's configuration, per-round
    table and summary, its trainers' final-round metrics lines and the earlier rounds'
    costs (no weights, no logs), enough to make the report again and to resume the
    campaign on a fresh clone."""
    return RunCopies(folder, ("config.json", "rounds.csv", "summary.json"), record_lines)


def keep_record(run_dir: Path, target: Path) -> bool:
    """Copy a finished run's record (:func:`records`) to ``target``. False (nothing
    copied) for an unfinished run or when ``target`` is the run itself."""
    return records(target.parent).keep(target.name, run_dir)


def make_run(run: PlannedRun, run_dir: Path, console: Console) -> dict[str, Any]:
    """Make one run (the oracle's networks one after the other, then merged)."""
    if not run.parts:
        return run_simulation(run.config, run_dir, console)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(asdict(run.config), indent=1))
    parts = []
    for (label, _), (name, config) in zip(run.parts, run.part_configs(), strict=True):
        part_dir = run_dir / "parts" / name
        if not (part_dir / "summary.json").exists():
            console.print(f"oracle group {label!r}: trainers {config.trainers}")
            run_simulation(config, part_dir, console)
        parts.append((label, part_dir))
    return merge_parts(run_dir, run.config, parts)


def merge_parts(
    run_dir: Path, config: SimulationConfig, parts: Sequence[tuple[str, Path]]
) -> dict[str, Any]:
    """Write one run directory (metrics.jsonl, rounds.csv, summary.json, plots) from the
    finished runs of ``parts`` (group label, run directory), so that the report reads the
    oracle as one run. The parts ran on separate chains, so each line's ``model`` is
    prefixed with its part's name (``classes-0-3/0x…``) to keep models apart; the run's
    ``seconds`` are the parts' sum."""
    lines: list[dict[str, Any]] = []
    models_per_round: Counter[int] = Counter()
    totals = {"models_total": 0, "updates_total": 0}
    seconds = 0.0
    metric = "accuracy"
    records = {}
    for label, part_dir in parts:
        summary = json.loads((part_dir / "summary.json").read_text())
        metric = summary["metric"]
        for line in report.read_metrics([part_dir / "metrics.jsonl"]):
            if line.get("model"):
                line["model"] = f"{part_dir.name}/{line['model']}"
            line["oracle_part"] = label
            lines.append(line)
        for row in summary["rounds"]:
            models_per_round[row["round"]] += row["models"]
        for key in totals:
            totals[key] += summary.get(key, 0)
        seconds += summary["seconds"]
        records[label] = {
            "dir": str(part_dir.relative_to(run_dir)),
            "trainers": summary["config"]["trainers"],
            "seconds": summary["seconds"],
        }
    lines.sort(key=lambda m: (m["round"], int(m.get("trainer_index", 0))))
    with open(run_dir / "metrics.jsonl", "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    summaries = report.summarize(lines, dict(models_per_round))
    report.write_csv(summaries, run_dir / "rounds.csv")
    summary = report.write_summary(
        run_dir,
        lines,
        summaries,
        {
            "config": asdict(config),
            "seconds": round(seconds, 2),
            "metric": metric,
            **totals,
            "parts": records,
        },
    )
    report.plot(run_dir, lines, summaries, metric)
    return summary


def status_line(plan: Plan, finished: set[str]) -> str:
    """How many of ``plan``'s runs are done (their names in ``finished``), and the seeds
    with a run still to make."""
    done = sum(r.name in finished for r in plan.runs)
    pending = sorted({r.seed for r in plan.runs if r.name not in finished})
    return f"{done} of {len(plan.runs)} planned runs done" + (
        f"; seeds with runs to make: {', '.join(map(str, pending))}." if pending else "."
    )
