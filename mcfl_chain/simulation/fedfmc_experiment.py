"""FedFMC's own experiment, reproduced at small size: its paper's Figures 1-3 (§4.2)
(``scripts/reproduce_fedfmc.py``).

An experiment of the framework (:mod:`~mcfl_chain.simulation.experiment`): the plan
(:func:`plan`) is, per seed, FedFMC with EWC during the merges, without, and FedAvg on
the same data (three archetypes of one label each, ``scenarios/fedfmc/``); each finished
run's record (:func:`records`: its configuration, summary and accuracy lines) is kept in
``results/<table name>/``; the table (:func:`table_lines`), with what the paper claims
next to what the numbers show, and the three figures (:func:`draw_figures`) are made
from the runs or their records. The measures themselves are in
:mod:`~mcfl_chain.simulation.fedfmc_figures`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mcfl_chain._utils.config_files import ConfigError
from mcfl_chain.learning.scenario import DEFAULT_SPLIT
from mcfl_chain.simulation import experiment, report
from mcfl_chain.simulation.experiment import RESULTS, ExperimentError, RunCopies, state_of
from mcfl_chain.simulation.fedfmc_figures import (
    Schedule,
    VariantSummary,
    forked_as_archetypes,
    measure_run,
    natural_key,
    summarise,
)
from mcfl_chain.simulation.runner import SimulationConfig
from mcfl_chain.strategies.fedfmc import fork_eligible

EWC_FILE = "three-labels.toml"
NO_EWC_FILE = "three-labels-no-ewc.toml"


@dataclasses.dataclass(frozen=True)
class Variant:
    key: str
    label: str
    short: str
    """Its name in the last line."""
    figure: str
    """The paper's figure it mirrors."""


VARIANTS = (
    Variant("fedfmc-ewc", "FedFMC + EWC", "EWC", "Fig. 1"),
    Variant("fedfmc-no-ewc", "FedFMC without EWC", "no EWC", "Fig. 2"),
    Variant("fedavg", "FedAvg", "FedAvg", "Fig. 3"),
)
BY_KEY = {v.key: v for v in VARIANTS}
FIGURE_SUFFIXES = {
    "fedfmc-ewc": "-ewc.png",
    "fedfmc-no-ewc": "-no-ewc.png",
    "versus": "-vs-fedavg.png",
}


def figure_names(stem: str) -> dict[str, str]:
    """Figure key → file name, named after the table (``fedfmc`` → ``fedfmc-ewc.png``), so
    that a variant of the experiment written to another table keeps its own figures."""
    return {key: stem + suffix for key, suffix in FIGURE_SUFFIXES.items()}


@dataclasses.dataclass(frozen=True)
class Run:
    variant: str
    seed: int
    config: SimulationConfig

    @property
    def name(self) -> str:
        return f"{self.variant}-s{self.seed}"


Plan = experiment.Plan[Run]


# -- planning ----------------------------------------------------------------------------


def load_pair(scenarios: Path) -> tuple[SimulationConfig, SimulationConfig]:
    """The scenarios with and without EWC, checked to differ in nothing but that.

    Raises
    ------
    ExperimentError
        If a file is missing or unreadable, is not FedFMC with the expected ``ewc``,
        or the two files describe different experiments.
    """
    configs = []
    for file, ewc in ((EWC_FILE, "on"), (NO_EWC_FILE, "off")):
        path = scenarios / file
        if not path.exists():
            raise ExperimentError(
                f"no {path}: --scenarios must name a folder holding {EWC_FILE} and "
                f"{NO_EWC_FILE} (as scenarios/fedfmc does)"
            )
        try:
            config = SimulationConfig.load_file(path)
        except ConfigError as exc:
            raise ExperimentError(str(exc)) from exc
        if config.strategy != "fedfmc" or config.ewc != ewc:
            raise ExperimentError(
                f'{path} must set strategy = "fedfmc" and ewc = "{ewc}" (it has '
                f"{config.strategy!r} and {config.ewc!r})"
            )
        configs.append(config)
    ewc_config, no_ewc_config = configs
    # The comparison is only meaningful on the same data and schedule.
    mine, theirs = dataclasses.asdict(ewc_config), dataclasses.asdict(no_ewc_config)
    differing = sorted(k for k in mine if k not in ("name", "ewc") and mine[k] != theirs[k])
    if differing:
        raise ExperimentError(
            f"{NO_EWC_FILE} must differ from {EWC_FILE} only in ewc (and name), but "
            f"differs in {', '.join(differing)}: make these the same"
        )
    return ewc_config, no_ewc_config


def capped(config: SimulationConfig, rounds: int | None) -> SimulationConfig:
    """``config`` with its rounds capped at ``rounds`` (None: as written), its schedule
    checked.

    Raises
    ------
    ExperimentError
        If the fork stage has no fork-eligible round, or the rounds leave no merge round.
    """
    schedule = Schedule.of(config)
    T = config.fork_rounds
    if not any(
        fork_eligible(t, T, config.fork_start, config.fork_gap, config.fork_end) for t in range(T)
    ):
        raise ExperimentError(
            f"{config.name}: its fork stage (T = {T}, fork_start {config.fork_start}, "
            f"fork_gap {config.fork_gap}, fork_end {config.fork_end}) has no fork-eligible "
            f"round: raise fork_rounds above fork_start + fork_end in the scenario file"
        )
    total = config.rounds if rounds is None else min(rounds, config.rounds)
    if total <= T:
        given = "its rounds" if rounds is None else f"--rounds {rounds}"
        raise ExperimentError(
            f"{config.name}: {given} leave no merge round, since the fork stage takes "
            f"T = {T} rounds: give --rounds {T + 1} or more ({schedule.planned_end} for "
            f"every merge to finish)"
        )
    return dataclasses.replace(config, rounds=total)


def schedule_note(config: SimulationConfig) -> str | None:
    """Why the merges will not all finish within ``config``'s rounds (None if they do)."""
    schedule = Schedule.of(config)
    if schedule.complete:
        return None
    steps = schedule.groups - 1
    return (
        f"{config.rounds} rounds cut the merges short: T = {schedule.fork_rounds} then "
        f"{steps} merge step{'s' * (steps != 1)} of M = {schedule.merge_rounds} need "
        f"{schedule.planned_end}; {len(schedule.merge_starts)} of them "
        f"start{'s' * (len(schedule.merge_starts) == 1)}"
    )


def plan(scenarios: Path, seeds: Sequence[int], rounds: int | None = None) -> Plan:
    """The runs, seed by seed: FedFMC with EWC, without, and FedAvg on the same data."""
    ewc_config, no_ewc_config = load_pair(scenarios)
    ewc_config, no_ewc_config = capped(ewc_config, rounds), capped(no_ewc_config, rounds)
    bases = {
        "fedfmc-ewc": ewc_config,
        "fedfmc-no-ewc": no_ewc_config,
        # FedFMC's options stay: FedAvg ignores them, and its measures read the merge
        # stage's rounds from them, so both methods are measured over the same rounds.
        "fedavg": dataclasses.replace(ewc_config, strategy="fedavg"),
    }
    runs = []
    for seed in seeds:
        for variant in VARIANTS:
            run = Run(variant.key, seed, bases[variant.key])
            config = dataclasses.replace(run.config, seed=seed, name=run.name)
            runs.append(dataclasses.replace(run, config=config))
    note = schedule_note(ewc_config)
    return Plan(runs, [note] if note else [])


def local_work(config: SimulationConfig) -> str:
    """How much each trainer trains a round, e.g. ``1 local epoch in batches of 600, lr
    0.05: 1 SGD step a round`` (the paper gives neither its epochs nor its learning rate)."""
    text = (
        f"{config.epochs} local epoch{'s' * (config.epochs != 1)} in batches of "
        f"{config.batch_size}, lr {config.lr:g}"
    )
    if config.samples is None:
        return text
    steps = config.epochs * math.ceil(round(DEFAULT_SPLIT[0] * config.samples) / config.batch_size)
    return text + f": {steps} SGD step{'s' * (steps != 1)} a round"


# -- measuring ---------------------------------------------------------------------------


def measure(runs: Sequence[Run], out: Path) -> dict[str, VariantSummary]:
    """Variant key → the mean of its finished runs (variants without one are absent).

    Raises
    ------
    ExperimentError
        If a finished run's config.json cannot be read.
    """
    measured: dict[str, list] = {}
    for run in runs:
        run_dir = out / run.name
        if state_of(run_dir) != "done":
            continue
        try:
            config = SimulationConfig.from_mapping(
                json.loads((run_dir / "config.json").read_text()), str(run_dir / "config.json")
            )
        except (OSError, ValueError, ConfigError) as exc:
            raise ExperimentError(
                f"{run_dir}: its config.json is unreadable ({exc}); remove the directory "
                "to make the run again"
            ) from exc
        lines = report.read_metrics([run_dir / "metrics.jsonl"])
        measured.setdefault(run.variant, []).append(measure_run(lines, Schedule.of(config)))
    return {key: summarise(values) for key, values in measured.items()}


def pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}"


def fork_cell(summary: VariantSummary, variant: str) -> str:
    """The groups each run's fork stage ended with: ``3 = archetypes`` when it forked
    exactly into the archetypes, else the archetypes of each group."""
    if variant == "fedavg":
        return "–"
    cells = []
    for groups in summary.fork_groups:
        if forked_as_archetypes(groups, summary.archetypes):
            cells.append(f"{len(groups)} = archetypes")
        else:
            cells.append(f"{len(groups)}: " + " / ".join(" + ".join(sorted(g)) for g in groups))
    return "; ".join(cells)


def table_lines(summaries: Mapping[str, VariantSummary]) -> list[str]:
    """The markdown table, a row per variant run, then how to read it and the verdicts."""
    archetypes = sorted({a for s in summaries.values() for a in s.archetypes}, key=natural_key)
    header = [
        "variant", "seeds", "fork groups at T", *[f"{a} %" for a in archetypes],
        "worst archetype %", "spread (pts)", "merge stage: mean abs. Δ (pts/round)",
        "merge stage, on the consolidated model (pts/round)", "whole run (pts/round)",
    ]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for variant in VARIANTS:
        summary = summaries.get(variant.key)
        if summary is None:
            lines.append(
                f"| {variant.label} | 0 | " + " | ".join(["not run"] * (len(header) - 2)) + " |"
            )
            continue
        cells = [variant.label, str(summary.runs), fork_cell(summary, variant.key)]
        cells += [pct(summary.final.get(a, math.nan)) for a in archetypes]
        cells += [pct(summary.worst), pct(summary.spread), pct(summary.merge_change)]
        cells += [pct(summary.merged_change), pct(summary.run_change)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + ["", *explanation(summaries), "", *verdict_lines(summaries)]


def explanation(summaries: Mapping[str, VariantSummary]) -> list[str]:
    """How the table's figures are made, with the schedule the runs followed."""
    schedules = {s for summary in summaries.values() for s in summary.schedules}
    if len(schedules) == 1:
        (schedule,) = schedules
        starts = ", ".join(map(str, schedule.merge_starts))
        plural = "s" * (len(schedule.merge_starts) > 1)
        cut = f" (cut short: the merges need {schedule.planned_end} rounds)"
        timing = (
            f"The runs had {schedule.rounds} rounds: fork stage rounds 0-"
            f"{schedule.fork_rounds - 1} (T = {schedule.fork_rounds}), merge steps of "
            f"M = {schedule.merge_rounds} round{'s' * (schedule.merge_rounds != 1)} starting "
            f"in round{plural} {starts}, merge "
            f"stage until round {schedule.merge_end - 1}{'' if schedule.complete else cut}. "
        )
    else:
        timing = "The runs followed different schedules (different --rounds): compare with care. "
    mismatch = ""
    if any(
        not forked_as_archetypes(groups, summary.archetypes)
        for key in ("fedfmc-ewc", "fedfmc-no-ewc")
        if (summary := summaries.get(key)) is not None
        for groups in summary.fork_groups
    ):
        # The strategy merges the groups the trainers formed, not the planned ones.
        mismatch = (
            " Some FedFMC run forked otherwise than into the archetypes: it merged the "
            "groups it formed (one step fewer than groups), so its actual merge stage "
            "differs from the planned rounds measured here."
        )
    return [
        "Final round, mean over seeds. An archetype's accuracy is the mean over its trainers "
        "of their deployed model's accuracy on their own held-out test split, i.e. on the "
        "archetype's one label. Worst and spread (max − min) are taken per seed, then "
        "averaged. Mean abs. Δ: the mean absolute change of an archetype's accuracy from "
        "one round to the next (lower = steadier), over the merge stage's rounds (the jump "
        "into its first round included) or the whole run. Until its group is merged in, an "
        "archetype's trainers deploy their group's own model, whereas the paper's figures "
        "evaluate the consolidated model on every group: the 'on the consolidated model' "
        "column counts only the changes between two rounds in which all of an archetype's "
        "trainers deploy the round's consolidated model, from T on (for FedAvg, the one "
        "model: the merge stage's changes but the jump into its first round). "
        + timing
        + "FedAvg is measured over the "
        "same rounds. Fork groups at T: the models of the fork stage's last round and "
        "their archetypes ('= archetypes' when each group is one archetype, as in the "
        "paper)." + mismatch
    ]


SAME_WITHIN = 1.0
"""Points under which two figures count as equal in a verdict: an archetype's accuracy
is a mean over 3 trainers' test splits of ~90 images, so a smaller gap is noise."""


def _compare(lower: float, higher: float) -> str:
    """Whether ``lower`` is below ``higher`` by at least :data:`SAME_WITHIN` points (both
    fractions): yes, no, no (within 1 pt) or n/a (a NaN)."""
    if math.isnan(lower) or math.isnan(higher):
        return "n/a"
    gap = 100 * (higher - lower)
    if abs(gap) < SAME_WITHIN:
        return f"no (within {SAME_WITHIN:g} pt)"
    return "yes" if gap > 0 else "no"


def verdict_lines(summaries: Mapping[str, VariantSummary]) -> list[str]:
    """What the paper claims, and what our figures say on it (computed)."""
    ewc, no_ewc = summaries.get("fedfmc-ewc"), summaries.get("fedfmc-no-ewc")
    fedavg = summaries.get("fedavg")
    if ewc is not None and no_ewc is not None:
        here = (
            f"EWC steadier than no EWC during the merges: "
            f"{_compare(ewc.merge_change, no_ewc.merge_change)} (mean abs. Δ "
            f"{pct(ewc.merge_change)} vs {pct(no_ewc.merge_change)} pts per round; on the "
            f"consolidated model only: {_compare(ewc.merged_change, no_ewc.merged_change)}, "
            f"{pct(ewc.merged_change)} vs {pct(no_ewc.merged_change)}); worst archetype at "
            f"the end {pct(ewc.worst)} % with EWC, {pct(no_ewc.worst)} % without."
        )
    else:
        here = "EWC steadier than no EWC during the merges: n/a (a variant not run)."
    if ewc is not None and fedavg is not None:
        versus = (
            f"FedFMC + EWC steadier than FedAvg over the run: "
            f"{_compare(ewc.run_change, fedavg.run_change)} (mean abs. Δ "
            f"{pct(ewc.run_change)} vs {pct(fedavg.run_change)} pts per round); archetypes "
            f"closer at the end: {_compare(ewc.spread, fedavg.spread)} (spread "
            f"{pct(ewc.spread)} vs {pct(fedavg.spread)} pts)."
        )
    else:
        versus = "FedFMC + EWC steadier than FedAvg over the run: n/a (a variant not run)."
    return [
        "**Paper (Figs. 1-2):** with EWC during the merges each fork group's accuracy stays "
        "steady while the other groups are merged in, without EWC it drops or oscillates. "
        f"**Here:** {here}",
        "",
        "**Paper (Fig. 3):** FedFMC's archetypes stay more in line with each other than "
        f"FedAvg's, which oscillates. **Here:** {versus}",
    ]


def last_line(summaries: Mapping[str, VariantSummary]) -> str:
    parts = []
    for variant in VARIANTS:
        summary = summaries.get(variant.key)
        value = "n/a" if summary is None or math.isnan(summary.worst) else f"{pct(summary.worst)} %"
        parts.append(f"{variant.short} {value}")
    return "FedFMC three labels, worst archetype at the end: " + ", ".join(parts)


# -- records -----------------------------------------------------------------------------

RECORD_FIELDS = ("round", "trainer", "trainer_index", "trainer_id", "group", "accuracy", "loss",
                 "model", "personal")  # fmt: skip
"""What the measures read of a metrics line; the rest (timings, traffic, gas) stays in
the run directory."""


def records(folder: Path) -> RunCopies:
    """The experiment's records in ``folder``: each finished run's configuration, summary
    and metrics lines (only :data:`RECORD_FIELDS`), so that ``--report-only --out
    folder`` makes the same table without the run directories."""
    return RunCopies(
        folder, ("config.json", "summary.json"), experiment.keep_fields(*RECORD_FIELDS)
    )


def records_folder(table: Path) -> Path:
    """Where the records of the runs behind ``table`` go by default: ``results/<its
    stem>`` (``docs/results/fedfmc.md`` → ``results/fedfmc``)."""
    return RESULTS / table.stem


def keep_records(runs: Sequence[Run], out: Path, target: Path) -> int:
    """Keep each finished run's record (:func:`records`) in ``target``; the number of
    runs copied (a run is not copied onto itself).

    Raises
    ------
    OSError
        When ``target`` cannot be written.
    """
    kept = records(target)
    return sum(kept.keep(run.name, out / run.name) for run in runs)


# -- figures -----------------------------------------------------------------------------


def _draw(ax: Any, summary: VariantSummary, title: str) -> None:
    """One line per archetype (filled markers: the rounds its trainers all deploy the
    consolidated model), the stage boundaries as vertical lines."""
    schedule = summary.schedules[0]
    for index, archetype in enumerate(summary.archetypes):
        curve = summary.curves[archetype]
        xs = sorted(curve)
        ys = [100 * curve[x] for x in xs]
        colour = f"C{index}"  # the same archetype, the same colour in every panel
        ax.plot(xs, ys, label=archetype, linewidth=1.2, color=colour)
        merged = [x for x in xs if x in summary.consolidated.get(archetype, frozenset())]
        own = [x for x in xs if x not in merged]
        ax.plot(merged, [100 * curve[x] for x in merged], "o", color=colour, markersize=4)
        ax.plot(
            own, [100 * curve[x] for x in own], "o", markerfacecolor="none",
            markeredgecolor=colour, markersize=4,
        )  # fmt: skip
    ax.axvline(
        schedule.fork_rounds - 0.5, color="black", linewidth=1, label="end of fork stage (T)"
    )
    for start in schedule.merge_starts[1:]:
        ax.axvline(start - 0.5, color="grey", linestyle="--", linewidth=0.8)
    if schedule.merge_end < schedule.rounds:
        ax.axvline(schedule.merge_end - 0.5, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("round (dashed: next merge step; dotted: merges over)")
    ax.set_ylabel("accuracy on the archetype's label (%)")
    ax.set_ylim(-5, 105)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="best")


def draw_figures(
    summaries: Mapping[str, VariantSummary], folder: Path, stem: str = "fedfmc", setting: str = ""
) -> list[Path]:
    """The three figures, each drawn when its runs finished; the paths written.

    ``stem`` names them (:func:`figure_names`); ``setting`` (e.g. the local work) ends
    their titles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    names = figure_names(stem)
    suffix = f"; {setting}" if setting else ""
    written = []
    for key in ("fedfmc-ewc", "fedfmc-no-ewc"):
        summary = summaries.get(key)
        if summary is None:
            continue
        variant = BY_KEY[key]
        fig, ax = plt.subplots(figsize=(7.5, 4))
        _draw(
            ax, summary,
            f"{variant.label}, three archetypes of one label (cf. the paper's {variant.figure})\n"
            f"mean over {summary.runs} seed{'s' * (summary.runs > 1)}; filled: on the "
            f"consolidated model{suffix}",
        )  # fmt: skip
        fig.tight_layout()
        path = folder / names[key]
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    pair = [(BY_KEY[k], summaries.get(k)) for k in ("fedfmc-ewc", "fedavg")]
    if any(summary is not None for _, summary in pair):
        fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
        for ax, (variant, summary) in zip(axes, pair, strict=True):
            if summary is None:
                ax.set_title(f"{variant.label}: not run", fontsize=10)
                ax.set_axis_off()
                continue
            _draw(ax, summary, f"{variant.label} (filled: on the consolidated model)")
        fig.suptitle(f"FedFMC vs FedAvg on three archetypes (cf. the paper's Fig. 3){suffix}")
        fig.tight_layout()
        path = folder / names["versus"]
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
