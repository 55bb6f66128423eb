"""MCFL-plus confirmed on fresh seeds (``docs/results/mcfl-plus-confirmatory.toml``, issue
37 item 4): its plan, its test and its table.

The first clean declaration (:mod:`~mcfl_chain.simulation.plus_clean`) judged MCFL-plus
with the third defence declaration's options on the protocol's evaluation seeds. Since
then the defence headline has run another configuration (the chance floor on), later
mechanisms were designed on some of those seeds, and its rule ("ahead", or equivalent by
TOST) could not credit a row ahead by less than significance. This stage runs one
configuration, named before its runs, on seeds no choice has seen, beside the comparator
the protocol's rule chose (its own runs on the same seeds), and asks the question issue
37's target words, "at or above the best baseline, or equivalent to it": non-inferiority
within the protocol's margin, a one-sided paired t test (the lower test of
:func:`~mcfl_chain.simulation.inference.tost_paired`; the upper one for an MSE), Holm
over the declared scenarios. Each method keeps the optimiser settings its sweep chose
(nothing is chosen here). Nothing here runs a simulation: ``scripts/run_experiments.py
--declared mcfl-plus-confirmatory`` does, and ``scripts/report_results.py`` makes the
table.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mcfl_chain.simulation import campaign, inference, plus_clean, protocol, stats
from mcfl_chain.simulation.runner import SimulationConfig, SimulationError

CONFIRMATORY = Path("docs") / "results" / "mcfl-plus-confirmatory.toml"
"""The declaration, relative to the repository root."""
STAGE = "mcfl-plus-confirmatory"
CONFIRMATORY_RUNS = protocol.DECLARED_RUNS / STAGE
CONFIRMATORY_RECORDS = protocol.DECLARED_RECORDS / STAGE
METHOD = plus_clean.METHOD


@dataclass(frozen=True)
class Confirmatory:
    """The declaration: MCFL-plus's options away from their defaults, the fresh seeds,
    the scenarios in the order they run, and the methods run beside MCFL-plus and the
    comparator (shown, not tested)."""

    options: tuple[tuple[str, Any], ...]
    seeds: tuple[int, ...]
    order: tuple[str, ...]
    also: tuple[str, ...]


def parse_confirmatory(text: str, where: str = "mcfl-plus-confirmatory") -> Confirmatory:
    """:class:`Confirmatory` from the text of its declaration.

    Raises
    ------
    ProtocolError
        For invalid TOML, a missing or mistyped key, an option MCFL-plus does not have (or
        a value it refuses), a scenario listed twice or an unknown method in ``also``.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise protocol.ProtocolError(f"{where}: {exc}") from exc
    head = protocol._require(data, "mcfl_plus_confirmatory", dict, where)
    place = f"{where} [mcfl_plus_confirmatory]"
    options = plus_clean.checked_options(protocol._require(head, "options", dict, place), place)
    order = plus_clean.checked_order(protocol._require(head, "order", list, place), place)
    also = protocol._require(head, "also", list, place)
    strangers = [m for m in also if m not in campaign.CAMPAIGN_METHODS or m == METHOD]
    if strangers or len(set(also)) != len(also):
        raise protocol.ProtocolError(
            f"{place}: also must name distinct methods other than {METHOD} (known: "
            f"{', '.join(campaign.CAMPAIGN_METHODS)}), got {also!r}"
        )
    return Confirmatory(options, protocol._seeds(head, "seeds", place), order, tuple(also))


def load_confirmatory(path: Path) -> Confirmatory:
    """:func:`parse_confirmatory` of the file at ``path``.

    Raises
    ------
    ProtocolError
        If the file is absent or malformed.
    """
    if not path.is_file():
        raise protocol.ProtocolError(f"no confirmatory MCFL-plus declaration at {path}")
    return parse_confirmatory(path.read_text(), str(path))


def confirmatory_plan(
    confirm: Confirmatory,
    declaration: protocol.Declaration,
    scenarios: Sequence[SimulationConfig],
    figures: protocol.Figures,
    tuned: protocol.Tuned,
    check: bool = True,
) -> campaign.Plan:
    """Per scenario of ``confirm.order``, seed by seed: MCFL-plus with the declared
    options, the comparator the protocol's rule chose from the tuning runs' ``figures``,
    and ``confirm.also``, each with the optimiser settings ``tuned`` holds for it (the
    common sweep's and MCFL-plus's, merged). A scenario whose comparator or some method's
    settings are not chosen yet is left out, with a note.

    Raises
    ------
    ProtocolError
        If a declared seed is one of the protocol's (tuning or evaluation seeds: not
        fresh), the order names a scenario the protocol does not declare, or a run cannot
        start.
    """
    used = sorted(set(confirm.seeds) & {*declaration.tuning_seeds, *declaration.evaluation_seeds})
    if used:
        raise protocol.ProtocolError(
            f"the confirmatory seeds {used} are the protocol's tuning or evaluation seeds; "
            "declare seeds no run has used"
        )
    configs = protocol.declared_configs(declaration, scenarios)
    strangers = [name for name in confirm.order if name not in configs]
    if strangers:
        raise protocol.ProtocolError(
            f"the confirmatory declaration orders {strangers}, not declared in the protocol "
            f"({', '.join(configs)})"
        )
    choices = protocol.scenario_choices(declaration, scenarios, figures)
    position = {seed: i for i, seed in enumerate(confirm.seeds)}
    runs: list[campaign.PlannedRun] = []
    notes: list[str] = []
    for name in confirm.order:
        choice = choices[name]
        if choice.method is None:
            notes.append(f"{name}: not planned, no comparator yet ({choice.reason})")
            continue
        methods = tuple(dict.fromkeys((METHOD, choice.method, *confirm.also)))
        waiting = [m for m in methods if m not in tuned.get(name, {})]
        if waiting:
            notes.append(
                f"{name}: not planned, no optimiser settings chosen yet for " + ", ".join(waiting)
            )
            continue
        try:
            part = campaign.plan(
                [configs[name]], seeds=confirm.seeds, methods=methods, ablation=False, check=False
            )
        except campaign.CampaignError as exc:
            raise protocol.ProtocolError(f"{name}: {exc}") from exc
        for run in sorted(part.runs, key=lambda r: position[r.seed]):
            extra = dict(tuned[name][run.method])
            if run.method == METHOD:
                extra.update(confirm.options)
            run = replace(run, config=replace(run.config, **extra))
            if check:
                try:
                    run.config.validate()
                except SimulationError as exc:
                    raise protocol.ProtocolError(f"run {run.name}: {exc}") from exc
            runs.append(run)
        notes.append(f"{name}: comparator {choice.method} ({choice.reason})")
    return campaign.Plan(runs, notes)


# -- the test and the table -----------------------------------------------------------------


@dataclass(frozen=True)
class ConfirmatoryRow:
    """One scenario: MCFL-plus − the comparator per seed, and the declared test once every
    declared seed is paired."""

    scenario: str
    metric: str
    comparator: str | None
    differences: dict[int, tuple[float, float]]
    """Seed → (mean over trainers of the paired differences, worst − worst)."""
    test: inference.EquivalenceTest | None = None
    p_holm: float | None = None
    """The non-inferiority test's p, Holm-adjusted over the declared scenarios."""

    @property
    def p_raw(self) -> float:
        """The one-sided p on the worse side (1 before the row is tested)."""
        if self.test is None:
            return 1.0
        return inference.noninferiority_p(self.test, stats.higher_is_better(self.metric))


def confirmatory_rows(
    confirm: Confirmatory,
    declaration: protocol.Declaration,
    scenarios: Sequence[SimulationConfig],
    figures: protocol.Figures,
    confirm_figures: protocol.Figures,
) -> list[ConfirmatoryRow]:
    """Every declared scenario's row, in the declared order: the comparator by the
    protocol's rule (from the tuning runs' ``figures``), the paired differences on the
    declared seeds from the stage's finished runs (``confirm_figures``), the test once
    every seed is paired (a campaign stopped part-way is judged on no subset), and Holm
    over the declared scenarios (a row not tested counts with p = 1)."""
    configs = protocol.declared_configs(declaration, scenarios)
    choices = protocol.scenario_choices(declaration, scenarios, figures)
    rows = []
    for name in confirm.order:
        config, comparator = configs[name], choices[name].method
        metric = protocol.metric_of(config)
        if comparator is None:
            rows.append(ConfirmatoryRow(name, metric, None, {}))
            continue
        mine = confirm_figures.get((config.name, METHOD), {})
        theirs = confirm_figures.get((campaign.baseline_stem(config), comparator), {})
        seeds = [s for s in confirm.seeds if s in mine and s in theirs]
        differences = {s: stats.seed_difference(mine[s], theirs[s]) for s in seeds}
        test = None
        if len(differences) == len(confirm.seeds) >= 2:
            test = inference.tost_paired(
                [d[0] for d in differences.values()],
                declaration.margin(metric),
                declaration.alpha,
            )
        rows.append(ConfirmatoryRow(name, metric, comparator, differences, test))
    adjusted = inference.holm_adjusted([r.p_raw for r in rows])
    return [
        replace(r, p_holm=p) if r.test is not None else r
        for r, p in zip(rows, adjusted, strict=True)
    ]


def reading(row: ConfirmatoryRow, alpha: float) -> str:
    """The declared reading: ``met`` when the Holm-adjusted non-inferiority p is below
    ``alpha``; ``not shown`` otherwise; before every declared seed is paired, ``not run``
    (no seed yet) or ``not judged yet`` (some seeds: the table says how many)."""
    if row.p_holm is None:
        return "not judged yet" if row.differences else protocol.NOT_RUN
    return "met" if row.p_holm < alpha else "not shown"


def confirmatory_table(
    confirm: Confirmatory, declaration: protocol.Declaration, rows: Sequence[ConfirmatoryRow]
) -> list[str]:
    """The markdown of :func:`confirmatory_rows`, then each row's per-seed differences."""
    header = [
        "scenario", "comparator", "paired seeds", "MCFL-plus − comparator, mean over trainers "
        "(95 %)", "non-inferiority p (Holm)", "issue 37 target", "worst trainer (95 %)",
    ]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    per_seed = []
    for row in rows:
        scale = stats.scale_of(row.metric)
        mean = stats.mean_interval(d[0] for d in row.differences.values())
        worst = stats.mean_interval(d[1] for d in row.differences.values())
        label = campaign.LABELS.get(row.comparator, row.comparator) if row.comparator else None
        lines.append(
            "| "
            + " | ".join(
                [
                    row.scenario,
                    label or "not chosen yet",
                    f"{len(row.differences)} of {len(confirm.seeds)}",
                    "–" if mean is None else mean.format(*scale, signed=True),
                    "–" if row.p_holm is None else f"{row.p_holm:.3g}",
                    reading(row, declaration.alpha),
                    "–" if worst is None else worst.format(*scale, signed=True),
                ]
            )
            + " |"
        )
        if row.differences:
            values = ", ".join(
                f"s{s} {protocol._value(d[0], row.metric)}" for s, d in row.differences.items()
            )
            per_seed.append(f"- {row.scenario}: {values}")
    return [*lines, "", *(["Per seed, mean over trainers:", "", *per_seed, ""] if per_seed else [])]


def status_lines(plan: campaign.Plan, finished: set[str]) -> list[str]:
    """Runs done of those planned, and the scenarios not planned yet (with why)."""
    done = sum(r.name in finished for r in plan.runs)
    lines = [f"{done} of {len(plan.runs)} planned runs done."]
    return lines + [n.rstrip(".") + "." for n in plan.notes if "not planned" in n]


def options_text(confirm: Confirmatory) -> str:
    """The declared options as the command line spells them."""
    return plus_clean.options_text(confirm.options) or "none"
