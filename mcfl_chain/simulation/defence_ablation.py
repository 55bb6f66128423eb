"""The ablation of the declared defence (issue 37, item 2: "ablate one by one"): MCFL-plus
with one mechanism switched off at a time, under the conditions each mechanism was made
for, paired by seed with the declared benchmark's own runs of the full defence.

An ablation file (``docs/results/defence-ablation.toml``, :class:`Ablation`) names the
declaration it ablates (its ``base``: scenario, size, tolerance, engine), a subset of its
seeds, the variants (each a name and the strategy options it switches off) and the
conditions (clean, or an attack of the base matrix at one of its shares and placements).
Every variant runs every condition on every seed, and its clean run besides, so that its
drops are against its own clean run; the full defence's figures are the base
declaration's records of the same runs, never run again here.

Runs are the defence benchmark's (:class:`~.attack_benchmark.Run`, records as JSON), the
variant in the method's name: ``groups-mcfl-plus-no-agreement-sybil0.2-s210``. The table
(:func:`table`) has, per condition, the full defence first, then each variant: the honest
worst and average accuracy, the paired difference of each against the full defence (a
negative figure: switching the mechanism off cost that much), the drop against the
variant's clean run, Sybil adoption and the fallback share.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mcfl_chain.simulation import adversarial
from mcfl_chain.simulation import defence_benchmark as declared
from mcfl_chain.simulation.attack_benchmark import CLEAN, Record, Run, gather, read_records
from mcfl_chain.simulation.experiment import RESULTS, ExperimentError
from mcfl_chain.strategies import make_strategy

ABLATION = Path("docs/results/defence-ablation.toml")
"""The ablation ``--matrix ablation`` runs by default."""
RECORDS = RESULTS / "defence-ablation"
"""Where each finished ablation run leaves its record."""
TABLE = Path("docs/results/defence-ablation.md")
"""Where its table is written."""
OUT = Path("runs/defence-ablation")
"""Where its run directories are made."""


@dataclasses.dataclass(frozen=True)
class Variant:
    """The defence with some of its options changed (a mechanism switched off)."""

    name: str
    """Short, in run names: ``no-agreement``."""
    options: Mapping[str, Any]
    """Strategy option → value, as ``simulate`` takes it (``plus_agreement = "off"``)."""


@dataclasses.dataclass(frozen=True)
class Condition:
    """Clean, or one attack of the base matrix at one of its blocks."""

    attack: str
    """An attack name of the base declaration, or ``clean``."""
    block: declared.Block | None
    """Its share and placement (None when clean)."""

    @property
    def label(self) -> str:
        """``sybil-sign-flip, 20 % random``, or ``clean``."""
        return CLEAN if self.block is None else f"{self.attack}, {self.block.label}"


@dataclasses.dataclass(frozen=True)
class Ablation:
    """What an ablation file declares (the file's comments say why)."""

    base: declared.Declaration
    base_path: Path
    seeds: tuple[int, ...]
    variants: tuple[Variant, ...]
    conditions: tuple[Condition, ...]

    @classmethod
    def load(cls, path: Path) -> Ablation:
        """Read and check an ablation file; ``base`` is a path relative to the file.

        Raises
        ------
        ExperimentError
            The file or its base is unreadable, or a field is absent or refused; the
            message names the file and the field.
        """
        try:
            fields = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ExperimentError(
                f"cannot read the ablation {path} ({exc}); give --ablation the ablation's "
                f"file ({ABLATION})"
            ) from exc
        try:
            base_path = path.parent / str(fields["base"])
            base = declared.Declaration.load(base_path)
            variants = tuple(Variant(str(v["name"]), dict(v["options"])) for v in fields["variant"])
            conditions = tuple(
                Condition(CLEAN, None)
                if c["attack"] == CLEAN
                else Condition(str(c["attack"]), declared.Block(float(c["share"]), c["placement"]))
                for c in fields["condition"]
            )
            ablation = cls(
                base, base_path, tuple(int(s) for s in fields["seeds"]), variants, conditions
            )
        except KeyError as exc:
            raise ExperimentError(f"{path} has no field {exc}; add it") from exc
        except (TypeError, ValueError) as exc:
            raise ExperimentError(f"{path}: a field has the wrong type ({exc})") from exc
        ablation.check(str(path))
        return ablation

    def check(self, source: str) -> None:
        """Refuse what the base's records cannot pair with, or the defence cannot take.

        Raises
        ------
        ExperimentError
        """
        if not self.seeds or not set(self.seeds) <= set(self.base.seeds):
            raise ExperimentError(
                f"{source}: seeds must be some of the base declaration's "
                f"({', '.join(map(str, self.base.seeds))}), whose runs of the full defence "
                "they are paired with"
            )
        names = [v.name for v in self.variants]
        if not names or len(set(names)) != len(names):
            raise ExperimentError(f"{source}: give each [[variant]] once, with its own name")
        for variant in self.variants:
            if not variant.options:
                raise ExperimentError(f"{source}: variant {variant.name!r} changes no option")
            try:
                make_strategy(self.base.defence, **variant.options)
            except (TypeError, ValueError) as exc:
                raise ExperimentError(f"{source}: variant {variant.name!r}: {exc}") from exc
        if not self.conditions or len(set(self.conditions)) != len(self.conditions):
            raise ExperimentError(f"{source}: give each [[condition]] once")
        for condition in self.conditions:
            if condition.block is None:
                continue
            if condition.attack not in self.base.attacks or condition.block not in (
                self.base.blocks
            ):
                raise ExperimentError(
                    f"{source}: condition {condition.label!r} is not in the base "
                    "declaration's matrix, so the full defence has no run to pair with"
                )


def method(ablation: Ablation, variant: Variant) -> str:
    """The method name of a variant's runs: ``mcfl-plus-no-agreement``."""
    return f"{ablation.base.defence}-{variant.name}"


def _condition_of(run: Run) -> Condition:
    if run.attack == CLEAN:
        return Condition(CLEAN, None)
    name, share = run.attack.rsplit(":", 1)
    return Condition(name, declared.Block(float(share), run.placement))


def base_runs(ablation: Ablation, scenarios: Path) -> list[Run]:
    """The base declaration's runs this ablation pairs with: the full defence under each
    condition, and the clean comparator, on the ablation's seeds."""
    wanted = set(ablation.conditions)
    return [
        run
        for run in declared.plan(ablation.base, scenarios)
        if run.seed in ablation.seeds
        and (
            run.method == ablation.base.comparator
            or (run.method == ablation.base.defence and _condition_of(run) in wanted)
        )
    ]


def plan(ablation: Ablation, scenarios: Path) -> list[Run]:
    """The ablation's own runs, seed by seed (each seed's clean runs first), then
    condition by condition, then variant by variant: the base's configuration of the
    same condition and seed, with the variant's options and its method name."""
    base = {
        (r.seed, _condition_of(r)): r
        for r in base_runs(ablation, scenarios)
        if r.method == ablation.base.defence  # the comparator's clean runs are not varied
    }
    conditions = [Condition(CLEAN, None)]
    conditions += [c for c in ablation.conditions if c.block is not None]
    runs: list[Run] = []
    for seed in ablation.seeds:
        for condition in conditions:
            source = base[seed, condition]
            for variant in ablation.variants:
                run = dataclasses.replace(source, method=method(ablation, variant))
                config = dataclasses.replace(source.config, name=run.name, **variant.options)
                runs.append(dataclasses.replace(run, config=config))
    return runs


# -- the table ----------------------------------------------------------------------------


def _paired(
    runs: Sequence[Run], against: Mapping[int, Run], found: Mapping[str, Record]
) -> tuple[float, float]:
    """Mean over the seeds with both records of (worst, average) of ``runs`` minus the
    full defence's (points)."""
    worst, average = [], []
    for run in runs:
        full = against.get(run.seed)
        if run.name in found and full is not None and full.name in found:
            worst.append(100 * (found[run.name].honest.worst - found[full.name].honest.worst))
            average.append(100 * (found[run.name].honest.average - found[full.name].honest.average))
    return adversarial.mean(worst), adversarial.mean(average)


def _pts(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:+.1f}"


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}"


def table(
    ablation: Ablation, runs: Sequence[Run], bases: Sequence[Run], found: Mapping[str, Record]
) -> list[str]:
    """The ablation's table (markdown lines): per condition, the full defence, then each
    variant (module docstring)."""
    defence = declared.LABELS.get(ablation.base.defence, ablation.base.defence)
    lines = [
        "| condition | variant | seeds | honest worst % | honest avg % | worst vs full "
        "(pts) | avg vs full (pts) | worst drop vs its clean run (pts) | Sybil adoption % | "
        "fallback % |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    full = {(r.seed, _condition_of(r)): r for r in bases if r.method == ablation.base.defence}

    def line(condition: Condition, label: str, group: list[Run], paired: str) -> str:
        figures = declared.row(group, found, ablation.base.comparator)
        seeds = f"{figures.seeds}" + (
            "" if figures.seeds == len(ablation.seeds) else f" of {len(ablation.seeds)}"
        )
        return (
            f"| {condition.label} | {label} | {seeds} | {_pct(figures.worst)} | "
            f"{_pct(figures.average)} | {paired} | "
            f"{_pts(adversarial.mean(figures.worst_drops))} | {_pct(figures.sybil)} | "
            f"{_pct(figures.fallback)} |"
        )

    for condition in ablation.conditions:
        against = {seed: full[seed, condition] for seed in ablation.seeds}
        lines.append(line(condition, f"{defence} (all on)", list(against.values()), " | "))
        for variant in ablation.variants:
            group = [
                r
                for r in runs
                if r.method == method(ablation, variant) and _condition_of(r) == condition
            ]
            worst, average = _paired(group, against, found)
            lines.append(line(condition, variant.name, group, f"{_pts(worst)} | {_pts(average)}"))
    done = sum(1 for run in runs if run.name in found)
    variants = "; ".join(
        f"{v.name}: " + ", ".join(f"{k} = {val}" for k, val in v.options.items())
        for v in ablation.variants
    )
    lines += [
        "",
        f"{defence} with one mechanism switched off at a time ({variants}), on the "
        f"configuration of `{ablation.base_path.name}` (seeds "
        f"{', '.join(map(str, ablation.seeds))}); the full defence's rows are that "
        "declaration's own runs. Figures at the last round over the honest trainers, means "
        "over the seeds finished; *vs full*: the variant minus the full defence, paired by "
        "seed (negative: switching the mechanism off cost that much); the drop is against "
        f"the variant's own clean run. {done} of {len(runs)} ablation runs finished.",
    ]
    return lines


def report(
    ablation: Ablation, scenarios: Path, out: Path, records: Path
) -> tuple[list[Run], list[str]]:
    """The ablation's runs, and its table from their records in ``records`` (a finished
    run directory in ``out`` measured again first) and the base declaration's records
    (``results/<its stem>``).

    Raises
    ------
    ExperimentError
        A record cannot be read or written, or does not match its clean run.
    """
    runs = plan(ablation, scenarios)
    bases = base_runs(ablation, scenarios)
    found = gather(runs, out, records)
    # The base's records as its own campaign wrote them (its run directories are its
    # script's to measure again, not this one's).
    wanted = {run.name for run in bases}
    recorded = read_records(declared.records_of(ablation.base_path))
    found.update({name: record for name, (_, record) in recorded.items() if name in wanted})
    return runs, table(ablation, runs, bases, found)
