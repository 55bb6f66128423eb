"""The declared defence benchmark (issue 37, deliverable 3): one defence, named before its
runs, under every attack, share and placement (``scripts/bench_adversaries.py``, its
default matrix).

The exploratory matrix (:mod:`~mcfl_chain.simulation.attack_benchmark`) runs every MCFL
variant and headlines the best one after seeing the runs it is scored on. Here
everything is read from a declaration committed before the first run
(``docs/results/defence*.toml``, :class:`Declaration`): the defence (MCFL-plus with its
defaults, or with the options its ``[options]`` table sets) and its tolerance, the
scenario and its size, the seeds, the attacks, the blocks of (share, placement) in the
order they are run, the headline block, and the comparator (local training, clean), so
that "no loss" bought by not collaborating is visible beside each row.

The runs and records are the exploratory benchmark's (:class:`~.attack_benchmark.Run`,
:class:`~.attack_benchmark.Record`: one JSON file per finished run, here in
``results/<the declaration's stem>/``), with the placement in the run's name when it is
not random, e.g. ``groups-mcfl-plus-label-flip0.2-concentrated-s200``. The table
(:func:`table`) has one row per attack × share × placement, in the declared order, and a
first row for the clean defence; :func:`headline` is the script's last line.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mcfl_chain.adversaries.spec import GROUPED_PLACEMENTS, PLACEMENTS, parse_adversary_shares
from mcfl_chain.simulation import adversarial
from mcfl_chain.simulation.attack_benchmark import (
    CLEAN,
    Record,
    Run,
    gather,
    is_backdoor,
    is_sybil,
    stale_lines,
)
from mcfl_chain.simulation.campaign import load_scenarios
from mcfl_chain.simulation.engines import ENGINES
from mcfl_chain.simulation.experiment import RESULTS, ExperimentError, check_seeds
from mcfl_chain.strategies import STRATEGIES

DECLARATIONS = (
    Path("docs/results/defence-v5.toml"),
    Path("docs/results/defence-v4.toml"),
    Path("docs/results/defence-v3.toml"),
    Path("docs/results/defence-v2.toml"),
    Path("docs/results/defence.toml"),
)
"""Every declaration of the benchmark, the newest first; each names its own records,
table and run folder after its file (:func:`records_of`, :func:`table_of`,
:func:`out_of`)."""
DECLARATION = DECLARATIONS[0]
"""The declaration the default matrix is read from (``--declaration``): the newest whose
headline block is finished (the fourth ran its 40 % blocks first, and became the default
once its 20 % concentrated block was done; the fifth, which runs its headline block
first, became it on 2026-12-02, when that block was done)."""
CLOSED = {
    "defence": "its runs were made with MCFL-plus as it was at commit d655983, before the "
    "trained-update guard existed; resuming it now would mix two defences in one table. "
    "Run docs/results/defence-v5.toml (the default) instead"
}
"""Declarations whose campaign is over, by file stem, and why: their tables are remade
from their records, but no run is added to them."""


def records_of(declaration: Path) -> Path:
    """Where each finished run of ``declaration`` leaves its record: ``results/<stem>``."""
    return RESULTS / declaration.stem


def table_of(declaration: Path) -> Path:
    """Where the table of ``declaration`` is written: beside it, ``<stem>.md``."""
    return declaration.with_suffix(".md")


def out_of(declaration: Path) -> Path:
    """Where the run directories of ``declaration`` are made: ``runs/<stem>``."""
    return Path("runs") / declaration.stem


RECORDS = records_of(DECLARATION)
"""Where each finished run of the default declaration goes."""
TABLE = table_of(DECLARATION)
"""Where the default declaration's table is written."""
OUT = out_of(DECLARATION)
"""Where the default declaration's run directories are made."""
LABELS = {"mcfl-plus": "MCFL-plus", "local": "local training", "mcfl": "MCFL"}
"""How the table and the last line name a strategy."""


@dataclasses.dataclass(frozen=True)
class Block:
    """A share of the trainers made adversarial, placed one way; every attack runs at it."""

    share: float
    placement: str

    @property
    def label(self) -> str:
        """``20 % concentrated``."""
        return f"{100 * self.share:g} % {self.placement}"

    def attack(self, name: str) -> str:
        """The attack as the simulator takes it: ``label-flip:0.2``."""
        return f"{name}:{self.share:g}"


@dataclasses.dataclass(frozen=True)
class Declaration:
    """What a declaration file such as ``docs/results/defence-v3.toml`` declares (its
    comments say why)."""

    defence: str
    """The strategy under test, with its default options but :attr:`options`."""
    tolerance: float
    """Algorithm 2's tolerance for every run."""
    comparator: str
    """The strategy run clean beside it (local training)."""
    scenarios: tuple[str, ...]
    rounds: int
    samples: int
    seeds: tuple[int, ...]
    attacks: tuple[str, ...]
    """Adversary names, each run at every block's share."""
    blocks: tuple[Block, ...]
    """In the order their runs are made."""
    headline: Block
    """The block the last line is the worst attack of."""
    engine: str
    device: str
    source: str = "the declaration"
    """The file it was read from (its name is the table's, its stem the campaign's)."""
    options: tuple[tuple[str, Any], ...] = ()
    """The defence's options set away from their defaults (``[options]``), by name, as
    the command line takes them (``("plus_direction", "on")``); its runs only."""

    @property
    def closed(self) -> str | None:
        """Why no run may be added to this declaration's campaign (:data:`CLOSED`), or
        None while it is open."""
        return CLOSED.get(Path(self.source).stem)

    @classmethod
    def load(cls, path: Path) -> Declaration:
        """Read and check the declaration file.

        Raises
        ------
        ExperimentError
            The file is missing or unreadable, or a field is absent or refused; the
            message names the file and the field.
        """
        try:
            fields = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ExperimentError(
                f"cannot read the declaration {path} ({exc}); give --declaration the "
                f"declared benchmark's file ({DECLARATION})"
            ) from exc
        return cls.from_fields(fields, str(path))

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any], source: str = "the declaration") -> Declaration:
        """The declaration of parsed TOML ``fields``, checked (see :meth:`load`).

        Raises
        ------
        ExperimentError
        """
        try:
            blocks = tuple(Block(float(b["share"]), str(b["placement"])) for b in fields["block"])
            headline = Block(float(fields["headline"]["share"]), fields["headline"]["placement"])
            declaration = cls(
                defence=str(fields["defence"]),
                tolerance=float(fields["tolerance"]),
                comparator=str(fields["comparator"]),
                scenarios=tuple(str(s) for s in fields["scenarios"]),
                rounds=int(fields["rounds"]),
                samples=int(fields["samples"]),
                seeds=tuple(int(s) for s in fields["seeds"]),
                attacks=tuple(str(a) for a in fields["attacks"]),
                blocks=blocks,
                headline=headline,
                engine=str(fields["engine"]),
                device=str(fields["device"]),
                source=source,
                options=tuple(sorted(dict(fields.get("options", {})).items())),
            )
        except KeyError as exc:
            raise ExperimentError(f"{source} has no field {exc}; add it") from exc
        except (TypeError, ValueError) as exc:
            raise ExperimentError(f"{source}: a field has the wrong type ({exc})") from exc
        declaration.check(source)
        return declaration

    def check(self, source: str = "the declaration") -> None:
        """Refuse what cannot be run or reported.

        Raises
        ------
        ExperimentError
            Naming the field and what is accepted.
        """
        for field, name in (("defence", self.defence), ("comparator", self.comparator)):
            if name not in STRATEGIES:
                raise ExperimentError(
                    f"{source}: {field} {name!r} is no strategy; known: {', '.join(STRATEGIES)}"
                )
        accepted = {option.name: option for option in STRATEGIES[self.defence].declared_options()}
        for name, value in self.options:
            if name not in accepted or name == "tolerance":
                raise ExperimentError(
                    f"{source}: [options] {name!r} is no option of {self.defence} to set "
                    f"there (tolerance has its own field); known: {', '.join(accepted)}"
                )
            try:
                accepted[name].spec.spelled().convert(value)
            except ValueError as exc:
                raise ExperimentError(
                    f"{source}: [options] {name}: {exc} (write it as the command line "
                    'does: "on" or "off" for a switch)'
                ) from exc
        try:
            check_seeds(self.seeds)
        except ExperimentError as exc:
            raise ExperimentError(f"{source}: {exc}") from exc
        if self.rounds < 1 or self.samples < 1 or not self.scenarios or not self.attacks:
            raise ExperimentError(
                f"{source}: give at least one scenario, one attack, one round and one sample"
            )
        if not self.blocks or len(set(self.blocks)) != len(self.blocks):
            raise ExperimentError(f"{source}: give each [[block]] (share, placement) once")
        for block in self.blocks:
            if block.placement not in PLACEMENTS:
                raise ExperimentError(
                    f"{source}: placement {block.placement!r} is not one of {', '.join(PLACEMENTS)}"
                )
            for attack in self.attacks:
                try:
                    parse_adversary_shares(block.attack(attack))
                except ValueError as exc:
                    raise ExperimentError(f"{source}: attack {attack!r}: {exc}") from exc
        if self.headline not in self.blocks:
            raise ExperimentError(f"{source}: [headline] must be one of the [[block]] entries")
        if self.engine not in ENGINES:
            raise ExperimentError(
                f"{source}: engine {self.engine!r} is not one of {', '.join(ENGINES)}"
            )


def clean_run(scenario: str, method: str, seed: int) -> Run:
    """The clean run of ``method`` (without its configuration)."""
    return Run(scenario, method, CLEAN, seed, None)  # type: ignore[arg-type]


def plan(
    declaration: Declaration,
    scenarios: Path,
    engine: str | None = None,
    device: str | None = None,
) -> list[Run]:
    """The declared runs in the declared order: block by block, seed by seed; each
    seed's clean defence and clean comparator runs first (once), then every attack.

    Parameters
    ----------
    declaration : Declaration
    scenarios : Path
        The folder of the declared scenarios' files.
    engine, device : str, optional
        Another engine or device than the declared ones (their records say which ran).

    Raises
    ------
    ExperimentError
        A declared scenario has no file in ``scenarios``.
    """
    bases = {c.name: c for c in load_scenarios(scenarios) if c.name in declaration.scenarios}
    missing = sorted(set(declaration.scenarios) - set(bases))
    if missing:
        raise ExperimentError(f"no scenario file named {missing} in {scenarios}")
    runs: dict[str, Run] = {}

    def add(run: Run, strategy: str) -> None:
        if run.name in runs:
            return
        # tolerance is a strategy option, a field SimulationConfig gains at run time
        options: dict[str, Any] = {"strategy": strategy, "tolerance": declaration.tolerance}
        if strategy == declaration.defence:
            options.update(declaration.options)
        config = dataclasses.replace(
            bases[run.scenario],
            name=run.name,
            seed=run.seed,
            rounds=declaration.rounds,
            samples=declaration.samples,
            adversaries=None if run.attack == CLEAN else run.attack,
            placement=run.placement,
            engine=engine or declaration.engine,
            device=device or declaration.device,
            **options,
        )
        runs[run.name] = dataclasses.replace(run, config=config)

    for block in declaration.blocks:
        for seed in declaration.seeds:
            for scenario in declaration.scenarios:
                for method in (declaration.defence, declaration.comparator):
                    add(clean_run(scenario, method, seed), method)
                for attack in declaration.attacks:
                    run = Run(
                        scenario,
                        declaration.defence,
                        block.attack(attack),
                        seed,
                        None,  # type: ignore[arg-type]
                        placement=block.placement,
                    )
                    add(run, declaration.defence)
    return list(runs.values())


# -- the table ----------------------------------------------------------------------------


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}"


def _pts(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:+.1f}"


@dataclasses.dataclass(frozen=True)
class Row:
    """One row's figures, means over the seeds with a record (NaN: none)."""

    seeds: int
    worst: float
    average: float
    worst_drops: tuple[float, ...]
    """The worst honest trainer's drop against the same seed's clean defence run, one a
    seed that has both records (pts)."""
    average_drops: tuple[float, ...]
    largest_losses: tuple[float, ...]
    """The most any one honest trainer lost against the same seed's clean run, one a
    seed (pts; added after the declaration, see :func:`table`)."""
    local_worst: float
    local_average: float
    backdoor: float
    sybil: float
    fallback: float


def _local_over(local: Record | None, honest: Mapping[int, float]) -> tuple[float, float]:
    """Local training's worst and average over the trainers of ``honest`` (NaN without
    the local record or one of those trainers in it)."""
    if local is None or not set(honest) <= set(local.honest.accuracies):
        return math.nan, math.nan
    figures = [local.honest.accuracies[index] for index in honest]
    return min(figures), sum(figures) / len(figures)


def row(runs: Sequence[Run], found: Mapping[str, Record], comparator: str) -> Row:
    """The figures of one row over its runs (one a seed) that have a record in ``found``.

    Drops are against the same seed's clean run of the same method, and local training's
    figures over the same honest trainers of the same seed's clean ``comparator`` run: a
    seed whose clean run has no record yet has no drop, one whose comparator run has none
    no local figure (the headline says how many seeds its drop rests on).

    Raises
    ------
    ExperimentError
        A clean record lacks an honest trainer of its attacked run.
    """
    done = [run for run in runs if run.name in found]
    records = [found[run.name] for run in done]
    worst_drops, average_drops, largest, local_worst, local_average = [], [], [], [], []
    for run, record in zip(done, records, strict=True):
        if run.attack != CLEAN and run.clean in found:
            try:
                drop = adversarial.drop_points(found[run.clean].honest, record.honest)
            except ValueError as exc:
                raise ExperimentError(
                    f"{run.name} against {run.clean}: {exc}; delete {run.clean}.json in the "
                    "records folder (and its run directory, if any) and run the benchmark again"
                ) from exc
            worst_drops.append(drop[0])
            average_drops.append(drop[1])
            largest.append(adversarial.largest_loss_points(found[run.clean].honest, record.honest))
        local = found.get(clean_run(run.scenario, comparator, run.seed).name)
        worst, average = _local_over(local, record.honest.accuracies)
        if not math.isnan(worst):
            local_worst.append(worst)
            local_average.append(average)
    backdoor = [
        sum(r.backdoor.values()) / len(r.backdoor)
        for r, run in zip(records, done, strict=True)
        if is_backdoor(run.attack) and r.backdoor
    ]
    sybil = [
        r.sybil_adoption
        for r, run in zip(records, done, strict=True)
        if is_sybil(run.attack) and r.sybil_adoption is not None
    ]
    fallback = [r.fallback.share for r in records if r.fallback and r.fallback.aggregations]
    mean = adversarial.mean
    return Row(
        len(done),
        mean([r.honest.worst for r in records]),
        mean([r.honest.average for r in records]),
        tuple(worst_drops),
        tuple(average_drops),
        tuple(largest),
        mean(local_worst),
        mean(local_average),
        mean(backdoor),
        mean(sybil),
        mean(fallback),
    )


def _seeds(done: int, declared: int) -> str:
    """``5``, or ``3 of 5`` for a row with fewer seeds than declared."""
    return str(done) if done == declared else f"{done} of {declared}"


def rows(declaration: Declaration) -> list[tuple[str, Block | None, str, list[Run]]]:
    """(scenario, block (None: clean), attack name, its runs, one a seed and without
    their configurations) for each row of the table, in the declared order: the clean
    defence first, then block by block, attack by attack."""
    out: list[tuple[str, Block | None, str, list[Run]]] = []
    for scenario in declaration.scenarios:
        clean = [clean_run(scenario, declaration.defence, seed) for seed in declaration.seeds]
        out.append((scenario, None, CLEAN, clean))
        for block in declaration.blocks:
            for attack in declaration.attacks:
                members = [
                    Run(
                        scenario,
                        declaration.defence,
                        block.attack(attack),
                        seed,
                        None,  # type: ignore[arg-type]
                        placement=block.placement,
                    )  # fmt: skip
                    for seed in declaration.seeds
                ]
                out.append((scenario, block, attack, members))
    return out


def table(declaration: Declaration, runs: Sequence[Run], found: Mapping[str, Record]) -> list[str]:
    """The declared table (markdown lines): a row per attack × share × placement, and the
    clean defence first; every declared row, those without a finished seed included."""
    declared = len(declaration.seeds)
    defence = LABELS.get(declaration.defence, declaration.defence)
    local = LABELS.get(declaration.comparator, declaration.comparator)
    multi = len(declaration.scenarios) > 1
    lines = [
        "| " + ("scenario | " if multi else "") + "attack | share | placement | seeds | "
        "honest worst % | honest avg % | worst drop (pts) | avg drop (pts) | "
        "largest loss of one trainer (pts) | "
        f"{local} worst % | {local} avg % | backdoor success % | Sybil adoption % | "
        "fallback % |",
        "| " + "--- | " * (14 + multi),
    ]
    lines[1] = lines[1].rstrip()
    for scenario, block, attack, members in rows(declaration):
        figures = row(members, found, declaration.comparator)
        share, placement = ("–", "–") if block is None else (
            f"{100 * block.share:g} %", block.placement
        )  # fmt: skip
        lines.append(
            "| " + (f"{scenario} | " if multi else "") + f"{attack} | {share} | {placement} | "
            f"{_seeds(figures.seeds, declared)} | {_pct(figures.worst)} | "
            f"{_pct(figures.average)} | {_pts(adversarial.mean(figures.worst_drops))} | "
            f"{_pts(adversarial.mean(figures.average_drops))} | "
            f"{_pts(adversarial.mean(figures.largest_losses))} | {_pct(figures.local_worst)} | "
            f"{_pct(figures.local_average)} | {_pct(figures.backdoor)} | "
            f"{_pct(figures.sybil)} | {_pct(figures.fallback)} |"
        )
    settings = sorted(
        {f"{r.engine or '?'} engine on {r.device or '?'}" for r in found.values()}
    )  # fmt: skip
    done = sum(1 for run in runs if run.name in found)
    lines += [
        "",
        f"{defence} ({declaration.defence} with its default options"
        f"{''.join(f', {name} {value}' for name, value in declaration.options)}, tolerance "
        f"{declaration.tolerance:g}) as declared in "
        f"`docs/results/{Path(declaration.source).name}` before its "
        f"runs: {', '.join(declaration.scenarios)} reduced to {declaration.samples} samples a "
        f"trainer and {declaration.rounds} rounds, seeds "
        f"{', '.join(str(s) for s in declaration.seeds)}. Figures at the last round over the "
        "honest trainers only, means over the seeds finished; drops against the same seed's "
        f"clean {defence} run over the same trainers (positive: the attack cost); the "
        "largest loss of one trainer follows each honest trainer from the clean run to the "
        "attacked one and takes the most any lost (not declared: added after seed 200 showed "
        "the worst trainer sitting outside the attacked group, where the worst-trainer drop "
        f"cannot see the attack); {local}'s "
        "figures are its clean run of the same seed over the same honest trainers. Fallback: "
        "of the honest trainers' aggregations after round 0, the share that kept only the "
        "trainer's own update while others were proposed on its parent. Concentrated: the "
        "adversaries fill one data group but for one trainer, then the next. "
        f"{done} of {len(runs)} declared runs finished"
        + (f" ({'; '.join(settings)})." if settings else "."),
    ]
    return lines + stale_lines(list(runs), dict(found))


@dataclasses.dataclass(frozen=True)
class Headline:
    """The worst attack of the headline block."""

    attack: str
    """Its name (several, comma-separated, when tied)."""
    drop: float
    """Its mean worst-honest-trainer drop (pts)."""
    seeds: int
    """The seeds that drop rests on."""
    attacks_measured: int
    """Attacks of the block with at least one seed and its clean run."""


def headline(declaration: Declaration, found: Mapping[str, Record]) -> Headline | None:
    """Over the attacks of the declared headline block, the one with the largest mean
    worst-honest-trainer drop (over its seeds with a record and a clean record); None
    before any such seed."""
    measured: list[Headline] = []
    for _, block, attack, members in rows(declaration):
        if block != declaration.headline:
            continue
        drops = row(members, found, declaration.comparator).worst_drops
        if drops:
            measured.append(Headline(attack, adversarial.mean(drops), len(drops), 0))
    if not measured:
        return None
    worst = max(measured, key=lambda h: h.drop)
    # attacks level with the worst are named with it: the first in the declared order
    # alone would read as the only one that costs this much
    tied = [h.attack for h in measured if h.drop == worst.drop]
    return dataclasses.replace(worst, attack=", ".join(tied), attacks_measured=len(measured))


def headline_label(declaration: Declaration) -> str:
    """The last line's text before its figure: ``worst honest accuracy drop, declared
    defence (MCFL-plus), worst 20% attack, worst-case placement``."""
    block = declaration.headline
    placement = "worst-case" if block.placement in GROUPED_PLACEMENTS else block.placement
    return (
        f"worst honest accuracy drop, declared defence "
        f"({LABELS.get(declaration.defence, declaration.defence)}), worst "
        f"{100 * block.share:g}% attack, {placement} placement"
    )


def closing_lines(declaration: Declaration, worst: Headline | None) -> list[str]:
    """The script's last two lines: which attack and how many seeds, then the headline
    (``n/a`` and why before any finished seed)."""
    label = headline_label(declaration)
    block = declaration.headline
    if worst is None:
        return [
            f"no {block.label} attack has finished with the clean run of its seed yet",
            f"{label}: n/a",
        ]
    return [
        f"worst attack at {block.label}: {worst.attack} "
        f"({_seeds(worst.seeds, len(declaration.seeds))} seeds; "
        f"{worst.attacks_measured} of {len(declaration.attacks)} attacks measured)",
        f"{label}: {worst.drop:.1f} pts",
    ]


def report(
    declaration: Declaration, runs: Sequence[Run], out: Path, records: Path
) -> tuple[list[str], Headline | None]:
    """The table and the headline from the records in ``records`` (a finished run
    directory in ``out`` is measured again and its record rewritten first).

    Raises
    ------
    ExperimentError
        A record cannot be read or written, or does not match its clean run.
    """
    found = gather(list(runs), out, records)
    return table(declaration, runs, found), headline(declaration, found)
