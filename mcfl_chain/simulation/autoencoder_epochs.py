"""The autoencoders on fresh seeds with an epochs sweep (``docs/results/autoencoder-epochs.toml``,
issue 36 item 4).

The report reproduces the paper's autoencoder result only with 6 local epochs a round,
a number read off probes on the seeds the runs were then judged on. This stage asks
whether that choice holds on seeds nothing was chosen on: the same scenario file, only
its ``epochs`` changed, MCFL beside local training and FedAvg, seed by seed. It chooses
nothing; its table is descriptive (uncorrected intervals, no verdict). Nothing here runs
a simulation: ``scripts/run_experiments.py --declared autoencoder-epochs`` does, and
``scripts/report_results.py`` makes the table.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mcfl_chain.simulation import campaign, protocol, stats
from mcfl_chain.simulation.runner import SimulationConfig

EPOCHS_DECLARATION = Path("docs") / "results" / "autoencoder-epochs.toml"
"""The declaration, relative to the repository root."""
STAGE = "autoencoder-epochs"
EPOCHS_RUNS = protocol.DECLARED_RUNS / STAGE
EPOCHS_RECORDS = protocol.DECLARED_RECORDS / STAGE
USED_SEEDS = frozenset(campaign.DEFAULT_SEEDS)
"""The seeds the 6-epoch setting was chosen on: not fresh, so refused."""


@dataclass(frozen=True)
class EpochsSweep:
    """The declaration: the scenario file, the epochs values, the methods (MCFL first,
    the others compared with it) and the fresh seeds."""

    scenario: str
    epochs: tuple[int, ...]
    methods: tuple[str, ...]
    seeds: tuple[int, ...]

    def file_name(self, epochs: int) -> str:
        """The name a scenario file with ``epochs`` gets: runs are ``<it>-<method>-s<seed>``."""
        return f"{self.scenario}-epochs{epochs}"


def parse_epochs_sweep(text: str, where: str = "autoencoder-epochs") -> EpochsSweep:
    """:class:`EpochsSweep` from the text of its declaration.

    Raises
    ------
    ProtocolError
        For invalid TOML, a missing or mistyped key, an epochs value below 1, a method
        list without MCFL first or with an unknown method, or a seed the 6-epoch setting
        was chosen on (:data:`USED_SEEDS`).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise protocol.ProtocolError(f"{where}: {exc}") from exc
    head = protocol._require(data, "autoencoder_epochs", dict, where)
    place = f"{where} [autoencoder_epochs]"
    scenario = protocol._require(head, "scenario", str, place)
    epochs = protocol._whole_numbers(head, "epochs", place, least=1)
    seeds = protocol._seeds(head, "seeds", place)
    reused = sorted(USED_SEEDS & set(seeds))
    if reused:
        raise protocol.ProtocolError(
            f"{place}: seeds {reused} are those the 6-epoch setting was chosen on; the "
            "question needs fresh ones"
        )
    methods = protocol._require(head, "methods", list, place)
    unknown = [m for m in methods if m not in campaign.CAMPAIGN_METHODS]
    if unknown or not methods or methods[0] != "mcfl" or len(set(methods)) != len(methods):
        raise protocol.ProtocolError(
            f"{place}: methods must list mcfl first, then other methods once each (known: "
            f"{', '.join(campaign.CAMPAIGN_METHODS)}), got {methods!r}"
        )
    return EpochsSweep(scenario, epochs, tuple(methods), seeds)


def load_epochs_sweep(path: Path) -> EpochsSweep:
    """:func:`parse_epochs_sweep` of the file at ``path``.

    Raises
    ------
    ProtocolError
        If the file is absent or malformed.
    """
    if not path.is_file():
        raise protocol.ProtocolError(f"no autoencoder epochs declaration at {path}")
    return parse_epochs_sweep(path.read_text(), str(path))


def epochs_plan(
    sweep: EpochsSweep, scenarios: Sequence[SimulationConfig], check: bool = True
) -> campaign.Plan:
    """Seed by seed, every epochs value in the declared order, the declared methods on
    ``sweep.scenario``'s file with only its ``epochs`` (and name) changed.

    Raises
    ------
    ProtocolError
        If no scenario file has the declared name, or a run cannot start.
    """
    by_name = {c.name: c for c in scenarios}
    if sweep.scenario not in by_name:
        raise protocol.ProtocolError(
            f"the autoencoder epochs declaration names scenario {sweep.scenario!r}; the "
            f"scenario files are {', '.join(sorted(by_name))}"
        )
    base = by_name[sweep.scenario]
    runs: list[campaign.PlannedRun] = []
    for seed in sweep.seeds:
        for epochs in sweep.epochs:
            config = replace(base, name=sweep.file_name(epochs), epochs=epochs)
            try:
                plan = campaign.plan(
                    [config], seeds=[seed], methods=sweep.methods, ablation=False, check=check
                )
            except campaign.CampaignError as exc:
                raise protocol.ProtocolError(f"{config.name}, seed {seed}: {exc}") from exc
            runs += plan.runs
    return campaign.Plan(runs)


# -- the table ----------------------------------------------------------------------------


def split_by_dataset(grouping: Mapping[str, Sequence[str]]) -> bool:
    """Whether the deployed models (a summary's ``grouping``: model id → the data groups
    of the trainers holding it) are at least two, each held by one dataset's trainers."""
    return len(grouping) >= 2 and all(len(groups) == 1 for groups in grouping.values())


@dataclass(frozen=True)
class EpochsRow:
    """One epochs value: MCFL against each other method, paired by seed."""

    epochs: int
    seeds: tuple[int, ...]
    """Seeds where MCFL finished."""
    mse: dict[str, stats.Interval | None]
    """Per method, its mean-over-trainers MSE over its finished seeds."""
    versus: dict[str, stats.PairedDifference | None]
    """Per other method, MCFL minus it."""
    models: stats.Interval | None
    split: int
    """Seeds on which MCFL ends split by dataset."""


def epochs_rows(
    sweep: EpochsSweep,
    figures: Mapping[tuple[str, str], Mapping[int, stats.RunFigures]],
    groupings: Mapping[tuple[str, int], Mapping[str, Sequence[str]]],
) -> list[EpochsRow]:
    """One row per declared epochs value with a finished MCFL run, from the stage's runs'
    ``figures`` (by (file name, method) and seed) and MCFL's ``groupings`` (by (file
    name, seed)), on the declared seeds only."""
    rows = []
    wanted = set(sweep.seeds)
    for epochs in sweep.epochs:
        name = sweep.file_name(epochs)
        of = {
            m: {s: f for s, f in figures.get((name, m), {}).items() if s in wanted}
            for m in sweep.methods
        }
        mcfl = of["mcfl"]
        if not mcfl:
            continue
        rows.append(
            EpochsRow(
                epochs,
                tuple(sorted(mcfl)),
                {
                    m: stats.mean_interval(f.average for f in seeds.values())
                    for m, seeds in of.items()
                },
                {m: stats.paired_difference(mcfl, of[m]) for m in sweep.methods[1:]},
                stats.mean_interval(f.models for f in mcfl.values()),
                sum(split_by_dataset(groupings.get((name, s), {})) for s in mcfl),
            )
        )
    return rows


def epochs_table(sweep: EpochsSweep, rows: Sequence[EpochsRow]) -> list[str]:
    """The markdown table of :func:`epochs_rows`, then the per-seed differences."""
    others = sweep.methods[1:]
    label = campaign.LABELS
    header = [
        "epochs", "MCFL seeds",
        *(f"{label.get(m, m)} MSE" for m in sweep.methods),
        *(f"MCFL − {label.get(m, m)} (95 %)" for m in others),
        "MCFL models at the end", "MCFL split by dataset",
    ]  # fmt: skip
    lines, seeds = [], []
    for row in rows:
        versus = [row.versus[m] for m in others]
        lines.append(
            [
                str(row.epochs),
                str(len(row.seeds)),
                *(
                    "–" if (mse := row.mse[m]) is None else mse.format(1.0, 4)
                    for m in sweep.methods
                ),
                *("–" if v is None else v.mean_diff.format(1.0, 4, signed=True) for v in versus),
                "–" if row.models is None else row.models.format(1.0, 1),
                f"{row.split} of {len(row.seeds)}",
            ]
        )
        for method, difference in zip(others, versus, strict=True):
            if difference is not None:
                values = ", ".join(f"s{s} {d[0]:+.4f}" for s, d in difference.per_seed.items())
                seeds.append(f"- {row.epochs} epochs, MCFL − {label.get(method, method)}: {values}")
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(line) + " |" for line in lines),
        "",
        *(["Per seed (mean over trainers, paired):", "", *seeds, ""] if seeds else []),
    ]
