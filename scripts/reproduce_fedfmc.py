"""FedFMC's own experiment, reproduced at small size: its paper's Figures 1-3 (§4.2).

Three archetypes of one label each (classes 0, 1 and 2 of ``scenarios/fedfmc/``), per
seed three runs of the same data, each an ordinary ``mcfl-chain simulate`` network
(real chain, real workers) kept in ``--out``:

- ``fedfmc-ewc-s<seed>``: ``three-labels.toml``, FedFMC with EWC during the merges
  (the paper's Fig. 1);
- ``fedfmc-no-ewc-s<seed>``: ``three-labels-no-ewc.toml``, the same without EWC (Fig. 2);
- ``fedavg-s<seed>``: ``three-labels.toml`` with FedAvg (Fig. 3). It keeps FedFMC's
  schedule options, which FedAvg ignores, so that it is measured over the same rounds.

Finished runs are skipped and an interrupted one is made again, so the command resumes
where it stopped. ``--rounds N`` caps every run's rounds; the fork stage keeps its T,
so a cap must leave at least one merge round (one that cuts the merges short is noted).

Measures (:mod:`mcfl_chain.simulation.fedfmc_figures`), from each run's metrics lines:
per round, each archetype's mean accuracy (its trainers' deployed model on their own
label); the final accuracy per archetype, the worst of them and their spread (max −
min); the mean absolute round-to-round change over the merge stage (lower = steadier),
over all archetypes and over the rounds an archetype spends on the consolidated model,
and over the whole run; the groups the fork stage formed. Averaged over seeds. Written:
the table, with what the paper claims next to what the numbers show, to
``docs/results/fedfmc.md`` (``report_results.py`` puts it in docs/RESULTS.md, section
"FedFMC's own experiment"), and three figures next to it, named after the table:
``fedfmc-ewc.png``, ``fedfmc-no-ewc.png`` and ``fedfmc-vs-fedavg.png``. The table
starts with the local work per round, which the paper does not give: the default is
ours (2 epochs in batches of 32); ``scenarios/fedfmc-one-step/`` trains one
full-batch step a round, close to FedSGD, where one-label trainers do not end up as
constant predictors. Each finished run's configuration, summary and accuracy lines are
copied to ``records/<table name>/`` next to the table (``--records``), to be
committed: ``--report-only --out`` that folder makes the table again. The last line
printed is

    FedFMC three labels, worst archetype at the end: EWC X %, no EWC Y %, FedAvg Z %

    python scripts/reproduce_fedfmc.py --list
    python scripts/reproduce_fedfmc.py                     # seed 0, 50 rounds a run
    python scripts/reproduce_fedfmc.py --seeds 0,1,2       # more seeds (resumes)
    python scripts/reproduce_fedfmc.py --rounds 30 --out runs/fedfmc-30
    python scripts/reproduce_fedfmc.py --report-only       # measure what finished
    python scripts/reproduce_fedfmc.py --report-only --seeds 0,1,2 \
        --out docs/results/records/fedfmc                  # the same from the kept records
    python scripts/reproduce_fedfmc.py --seeds 0,1,2 --scenarios scenarios/fedfmc-one-step \
        --out runs/fedfmc-one-step --table docs/results/fedfmc-one-step.md
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import click
import matplotlib
from rich.console import Console

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mcfl_chain._utils.config_files import ConfigError  # noqa: E402
from mcfl_chain.learning.scenario import DEFAULT_SPLIT  # noqa: E402
from mcfl_chain.simulation import report  # noqa: E402
from mcfl_chain.simulation.campaign import (  # noqa: E402
    config_differences,
    recorded_seconds,
    state_of,
)
from mcfl_chain.simulation.fedfmc_figures import (  # noqa: E402
    Schedule,
    VariantSummary,
    forked_as_archetypes,
    measure_run,
    natural_key,
    summarise,
)
from mcfl_chain.simulation.runner import (  # noqa: E402
    SimulationConfig,
    SimulationError,
    run_simulation,
)
from mcfl_chain.strategies.fedfmc import fork_eligible  # noqa: E402

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


@dataclasses.dataclass
class Plan:
    runs: list[Run]
    notes: list[str]


# -- planning ----------------------------------------------------------------------------


def parse_seeds(text: str) -> list[int]:
    """``"0,1 2"`` → ``[0, 1, 2]``.

    Raises
    ------
    click.BadParameter
        For anything but distinct whole numbers >= 0.
    """
    items = [s for s in text.replace(",", " ").split() if s]
    if not items or not all(s.isdigit() for s in items):
        raise click.BadParameter(
            f"{text!r}: give whole numbers >= 0, comma-separated, e.g. 0,1,2",
            param_hint="'--seeds'",
        )
    seeds = [int(s) for s in items]
    if len(set(seeds)) != len(seeds):
        raise click.BadParameter(f"{text!r}: a seed is given twice", param_hint="'--seeds'")
    return seeds


def load_pair(scenarios: Path) -> tuple[SimulationConfig, SimulationConfig]:
    """The scenarios with and without EWC, checked to differ in nothing but that.

    Raises
    ------
    click.ClickException
        If a file is missing or unreadable, is not FedFMC with the expected ``ewc``,
        or the two files describe different experiments.
    """
    configs = []
    for file, ewc in ((EWC_FILE, "on"), (NO_EWC_FILE, "off")):
        path = scenarios / file
        if not path.exists():
            raise click.ClickException(
                f"no {path}: --scenarios must name a folder holding {EWC_FILE} and "
                f"{NO_EWC_FILE} (as scenarios/fedfmc does)"
            )
        try:
            config = SimulationConfig.load_file(path)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from exc
        if config.strategy != "fedfmc" or config.ewc != ewc:
            raise click.ClickException(
                f'{path} must set strategy = "fedfmc" and ewc = "{ewc}" (it has '
                f"{config.strategy!r} and {config.ewc!r})"
            )
        configs.append(config)
    ewc_config, no_ewc_config = configs
    # The comparison is only meaningful on the same data and schedule.
    mine, theirs = dataclasses.asdict(ewc_config), dataclasses.asdict(no_ewc_config)
    differing = sorted(k for k in mine if k not in ("name", "ewc") and mine[k] != theirs[k])
    if differing:
        raise click.ClickException(
            f"{NO_EWC_FILE} must differ from {EWC_FILE} only in ewc (and name), but "
            f"differs in {', '.join(differing)}: make these the same"
        )
    return ewc_config, no_ewc_config


def capped(config: SimulationConfig, rounds: int | None) -> SimulationConfig:
    """``config`` with its rounds capped at ``rounds`` (None: as written), its schedule
    checked.

    Raises
    ------
    click.ClickException
        If the fork stage has no fork-eligible round, or the rounds leave no merge round.
    """
    schedule = Schedule.of(config)
    T = config.fork_rounds
    if not any(
        fork_eligible(t, T, config.fork_start, config.fork_gap, config.fork_end) for t in range(T)
    ):
        raise click.ClickException(
            f"{config.name}: its fork stage (T = {T}, fork_start {config.fork_start}, "
            f"fork_gap {config.fork_gap}, fork_end {config.fork_end}) has no fork-eligible "
            f"round: raise fork_rounds above fork_start + fork_end in the scenario file"
        )
    total = config.rounds if rounds is None else min(rounds, config.rounds)
    if total <= T:
        given = "its rounds" if rounds is None else f"--rounds {rounds}"
        raise click.ClickException(
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
    click.ClickException
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
            raise click.ClickException(
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


def keep_records(runs: Sequence[Run], out: Path, target: Path) -> int:
    """Copy each finished run's configuration, summary and metrics lines (only
    :data:`RECORD_FIELDS`) to ``target/<run>``, so that ``--report-only --out target``
    makes the same table without the run directories; the number of runs copied."""
    copied = 0
    for run in runs:
        source = out / run.name
        if state_of(source) != "done" or source.resolve() == (target / run.name).resolve():
            continue
        kept = target / run.name
        kept.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "summary.json"):
            shutil.copyfile(source / name, kept / name)
        lines = report.read_metrics([source / "metrics.jsonl"])
        (kept / "metrics.jsonl").write_text(
            "".join(
                json.dumps({k: line[k] for k in RECORD_FIELDS if k in line}) + "\n"
                for line in lines
            )
        )
        copied += 1
    return copied


# -- figures -----------------------------------------------------------------------------


def _draw(ax, summary: VariantSummary, title: str) -> None:
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


# -- the command -------------------------------------------------------------------------


def _minutes(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds / 60:.0f} min"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--scenarios",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("scenarios/fedfmc"),
    show_default=True,
    help=f"Folder holding {EWC_FILE} (FedFMC with EWC; also FedAvg's data) and "
    f"{NO_EWC_FILE} (the same without EWC).",
)
@click.option("--seeds", default="0", show_default=True, help="Seeds, comma-separated.")
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    help="Cap every run's rounds (the fork stage keeps its T, so give more than T).  "
    "[default: the scenario's, 50]",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/fedfmc"),
    show_default=True,
    help="One run directory per run is made here.",
)
@click.option(
    "--table",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("docs/results/fedfmc.md"),
    show_default=True,
    help="Where the table is written; the three figures go to the same folder.",
)
@click.option(
    "--records",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where each finished run's configuration, summary and accuracy lines are copied, "
    "to be committed; --report-only --out DIR makes the table again from them.  "
    "[default: records/<table name> next to the table]",
)
@click.option("--list", "list_only", is_flag=True, help="Print the planned runs and exit.")
@click.option("--report-only", is_flag=True, help="Measure the finished runs; run nothing.")
def main(
    scenarios: Path,
    seeds: str,
    rounds: int | None,
    out: Path,
    table: Path,
    records: Path | None,
    list_only: bool,
    report_only: bool,
) -> None:
    """Run (or resume) FedFMC's three-label experiment with and without EWC and FedAvg,
    then write its table and its three figures."""
    console = Console(highlight=False, soft_wrap=True)
    planned = plan(scenarios, parse_seeds(seeds), rounds)
    states = {run.name: state_of(out / run.name) for run in planned.runs}
    todo = [run for run in planned.runs if states[run.name] != "done"]
    if list_only:
        for index, run in enumerate(planned.runs, 1):
            line = f"{index:4}  {states[run.name]:8} {run.name}"
            if states[run.name] == "done":
                differences = config_differences(out / run.name, run.config)
                if differences:
                    line += "  [made with other options: " + ", ".join(differences) + "]"
            console.print(line, markup=False)
        for note in planned.notes:
            console.print(f"note: {note}")
        console.print(
            f"{len(planned.runs)} runs planned in {out}: {len(planned.runs) - len(todo)} done"
        )
        return
    for run in planned.runs:
        if states[run.name] == "done":
            # Figures averaged over runs of different rounds or data would mean nothing.
            differences = config_differences(out / run.name, run.config)
            if differences:
                raise click.ClickException(
                    f"{out / run.name} was made with other options than planned: "
                    + ", ".join(differences)
                    + "; give another --out (or the same --rounds), or remove that directory"
                )
    for note in planned.notes:
        console.print(f"note: {note}")
    if not report_only:
        console.print(
            f"{len(planned.runs)} runs planned in {out}: "
            f"{len(planned.runs) - len(todo)} done before, {len(todo)} to run"
        )
        durations = [
            s for run in planned.runs if (s := recorded_seconds(out / run.name)) is not None
        ]
        started = time.monotonic()
        for index, run in enumerate(todo, 1):
            run_dir = out / run.name
            eta = statistics.fmean(durations) * (len(todo) - index + 1) if durations else None
            console.rule(
                f"[{index}/{len(todo)}] {run.name} · elapsed "
                f"{_minutes(time.monotonic() - started)} · ETA {_minutes(eta)}"
            )
            if run_dir.exists():
                console.print(f"{run.name}: removing the unfinished run in {run_dir}")
                shutil.rmtree(run_dir)  # its trainers' metrics would mix with the new ones
            try:
                summary = run_simulation(run.config, run_dir, console)
            except SimulationError as exc:
                raise click.ClickException(
                    f"{run.name} failed: {exc} (run directory kept: {run_dir}; run the "
                    "same command again to resume, the unfinished run is made again)"
                ) from exc
            durations.append(float(summary["seconds"]))
    summaries = measure(planned.runs, out)
    setting = local_work(planned.runs[0].config)
    lines = [f"Local training: {setting}.", "", *table_lines(summaries)]
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("\n".join(lines) + "\n")
    console.print("\n".join(lines))
    console.print(f"table written to {table}")
    for path in draw_figures(summaries, table.parent, table.stem, setting):
        console.print(f"figure written to {path}")
    records = records or table.parent / "records" / table.stem
    try:
        copied = keep_records(planned.runs, out, records)
    except OSError as exc:
        raise click.ClickException(
            f"the runs' records could not be kept in {records} ({exc.strerror or exc}); "
            "give a writable folder with --records (the table and figures are written)"
        ) from exc
    if copied:
        console.print(f"records of {copied} runs kept in {records}")
    print(last_line(summaries))


if __name__ == "__main__":
    main()
