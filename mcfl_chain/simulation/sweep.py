"""The declared optimiser sweep (issue 36, deliverable 1): its grid, plan, choice, file.

Every method, MCFL included, gets the same learning-rate and optimiser sweep, chosen on
validation splits and seeds that the evaluation never uses. The grid is declared in
``docs/results/sweep.toml`` (:func:`load_grid`), committed before any sweep run. The
plan (:func:`sweep_plan`) repeats each run of the declared tuning stage (MCFL and every
candidate of ``docs/results/protocol.toml`` on its tuning seeds,
:func:`~mcfl_chain.simulation.protocol.candidate_plan`) at every grid point. Per
(scenario, method), :func:`choose_point` picks the point with the best mean over the
tuning seeds of the mean over trainers of each trainer's deployed model's figure on its
own *validation* split after the last round (:func:`run_validation`; the test split
plays no part), ties to the point listed first. The choices are written to
``docs/results/tuned.toml`` (:func:`tuned_text`), which the declared tuning and
evaluation stages apply (:func:`~mcfl_chain.simulation.protocol.with_tuned_settings`).

Where the validation figure comes from: every worker scores each of its aggregations on
its validation split (the "selection metric" of Algorithm 1: the accuracy, or 1 / MSE
for an autoencoder) and deploys the best; its metrics line lists them under
``aggregations``. The sweep reads the deployed one's, and its records keep it as
``selection_metric`` (:func:`record_lines`).

The declared tuning stage's runs are the sweep's runs at the chosen points: a tuning run
and the sweep run at its method's point have the same configuration but for their
names. So ``--declared tuning`` takes such a finished sweep run (:func:`reusable_runs`)
instead of making it a second time, after checking the configurations field by field;
the copy's summary names the sweep run (:func:`reuse_origin`,
:data:`~mcfl_chain.simulation.experiment.REUSED_FROM`). Nothing here runs a simulation.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import statistics
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mcfl_chain.learning.optimisers import OPTIMISERS
from mcfl_chain.simulation import campaign, experiment, protocol, report, stats
from mcfl_chain.simulation.runner import SimulationConfig, SimulationError
from mcfl_chain.worker.reporting import deployed

STAGE = "sweep"
"""``run_experiments.py --declared sweep``."""
GRID = Path("docs") / "results" / "sweep.toml"
"""The declared grid, relative to the repository root."""
TUNED = Path("docs") / "results" / "tuned.toml"
"""The sweep's choices, which ``--declared tuning`` and ``evaluation`` apply."""
SWEEP_RUNS = protocol.DECLARED_RUNS / "sweep"
SWEEP_RECORDS = protocol.DECLARED_RECORDS / "sweep"
TUNABLE = ("optimiser", "lr")
"""The configuration fields a grid point may set: the optimiser preset and its rate."""
TIE = 1e-9
"""Means closer than this are a tie (broken by the grid's order)."""
POINT_NAME = re.compile(r"^[a-z0-9][a-z0-9.]*(-[a-z0-9.]+)*$")


class SweepError(experiment.ExperimentError):
    """The grid or the choices file is malformed, or the sweep cannot be planned; the
    message says what to change."""


# -- the grid -----------------------------------------------------------------------------


@dataclass(frozen=True)
class GridPoint:
    name: str
    """Part of each run's name: ``<scenario>-<method>-<point>-s<seed>``."""
    settings: Mapping[str, Any]
    """The configuration fields (of :data:`TUNABLE`) every run of the point sets."""
    why: str = ""


@dataclass(frozen=True)
class Grid:
    points: tuple[GridPoint, ...]
    """In tie-break order: on equal means the earlier point is chosen."""
    scenario_order: tuple[str, ...] = ()
    """Declared scenarios in the order the sweep runs them (the others after, in the
    protocol's order)."""
    method_order: tuple[str, ...] = ()
    """Methods run first within a scenario (the others after, in the protocol's order)."""

    def point(self, name: str) -> GridPoint:
        """The point called ``name``.

        Raises
        ------
        SweepError
            If the grid has none (the message lists them).
        """
        for point in self.points:
            if point.name == name:
                return point
        known = ", ".join(p.name for p in self.points)
        raise SweepError(f"the grid has no point {name!r}; its points: {known}")


def _settings(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not value:
        raise SweepError(f"{where}: 'settings' must be a table of {', '.join(TUNABLE)}")
    unknown = sorted(set(value) - set(TUNABLE))
    if unknown:
        raise SweepError(
            f"{where}: settings {unknown} cannot be swept; only {', '.join(TUNABLE)} are "
            "options of a simulated network's training (momentum is fixed at 0.9)"
        )
    optimiser = value.get("optimiser")
    if optimiser is not None and optimiser not in OPTIMISERS:
        raise SweepError(
            f"{where}: unknown optimiser preset {optimiser!r}; known: {', '.join(OPTIMISERS)}"
        )
    lr = value.get("lr")
    if lr is not None and (
        not isinstance(lr, int | float) or isinstance(lr, bool) or not 0 < lr < math.inf
    ):
        raise SweepError(f"{where}: lr must be a number > 0, got {lr!r}")
    return {k: float(v) if k == "lr" else v for k, v in value.items()}


def _names(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    names = table.get(key, [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SweepError(f"{where}: {key!r} must be a list of names, got {names!r}")
    if len(set(names)) != len(names):
        raise SweepError(f"{where}: {key!r} names one twice: {names!r}")
    return tuple(names)


def parse_grid(text: str, where: str = "sweep") -> Grid:
    """:class:`Grid` from the text of a grid file (``[sweep]`` with ``[[sweep.points]]``).

    Raises
    ------
    SweepError
        For invalid TOML, no point, a point without a valid name, two points with one
        name or the same settings, or settings that are not :data:`TUNABLE`.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{where}: {exc}") from exc
    table = data.get("sweep")
    if not isinstance(table, dict):
        raise SweepError(f"{where}: missing the [sweep] table")
    raw = table.get("points")
    if not isinstance(raw, list) or not raw:
        raise SweepError(f"{where}: declare at least one [[sweep.points]]")
    points: list[GridPoint] = []
    for index, entry in enumerate(raw, 1):
        at = f"{where} point {index}"
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not POINT_NAME.match(name):
            raise SweepError(
                f"{at}: 'name' must be lower-case letters, digits, dots and single dashes "
                f"(it is part of run names), got {name!r}"
            )
        settings = _settings(entry.get("settings"), f"{at} ({name})")
        for other in points:
            if other.name == name:
                raise SweepError(f"{at}: two points are named {name!r}")
            if dict(other.settings) == settings:
                raise SweepError(f"{at}: {name!r} has the settings of {other.name!r}")
        points.append(GridPoint(name, settings, str(entry.get("why", ""))))
    return Grid(
        tuple(points),
        _names(table, "scenario_order", where),
        _names(table, "method_order", where),
    )


def load_grid(path: Path) -> Grid:
    """:func:`parse_grid` of the file at ``path``.

    Raises
    ------
    SweepError
        If the file is absent or malformed.
    """
    if not path.is_file():
        raise SweepError(f"no sweep grid at {path}")
    return parse_grid(path.read_text(), str(path))


# -- the plan -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepRun:
    """One run of the sweep: a run of the declared tuning stage at one grid point."""

    name: str
    """Its directory: ``<label>-<method>-<point>-s<seed>``."""
    scenario: str
    """The declared scenario (a key of ``tuned.toml``)."""
    label: str
    """The tuning run's ``scenario``: MCFL's scenario file, or the baselines' stem."""
    method: str
    seed: int
    point: str
    config: SimulationConfig


def sweep_run_name(label: str, method: str, point: str, seed: int) -> str:
    """A sweep run's directory: ``<label>-<method>-<point>-s<seed>``, ``label`` the tuning
    run's ``scenario`` (MCFL's scenario file, or the baselines' stem)."""
    return f"{label}-{method}-{point}-s{seed}"


def sweep_plan(
    declaration: protocol.Declaration,
    grid: Grid,
    scenarios: Sequence[SimulationConfig],
    engine: str = "batched",
    device: str = "cpu",
    check: bool = True,
) -> experiment.Plan[SweepRun]:
    """Every run of the sweep: each run of the declared tuning stage (MCFL and every
    candidate, tuning seeds; :func:`protocol.candidate_plan`) at each grid point, on
    ``engine`` and ``device``. Ordered by the grid's scenario order, then its method
    order, then seed, then point, so that a (scenario, method) finishes, and can be
    chosen, before the next starts.

    Raises
    ------
    SweepError
        If the grid orders a scenario the protocol does not declare or a method that is
        not planned, or a run's configuration is invalid (``check``).
    """
    declared = [s.name for s in declaration.scenarios]
    methods = ["mcfl", *declaration.candidates]
    unknown = [s for s in grid.scenario_order if s not in declared]
    if unknown:
        raise SweepError(
            f"the grid's scenario_order names {unknown}, not declared in the protocol "
            f"({', '.join(declared)})"
        )
    unknown = [m for m in grid.method_order if m not in methods]
    if unknown:
        raise SweepError(
            f"the grid's method_order names {unknown}, not planned ({', '.join(methods)})"
        )
    scenario_rank = {s: i for i, s in enumerate(dict.fromkeys([*grid.scenario_order, *declared]))}
    method_rank = {m: i for i, m in enumerate(dict.fromkeys([*grid.method_order, *methods]))}
    seed_rank = {s: i for i, s in enumerate(declaration.tuning_seeds)}
    base = protocol.candidate_plan(declaration, scenarios, check=False)
    names = protocol.declared_scenario_names(declaration, scenarios)
    runs = []
    for run in base.runs:
        for point in grid.points:
            name = sweep_run_name(run.scenario, run.method, point.name, run.seed)
            config = replace(run.config, **point.settings, name=name, engine=engine, device=device)
            runs.append(
                SweepRun(
                    name,
                    names[run.scenario],
                    run.scenario,
                    run.method,
                    run.seed,
                    point.name,
                    config,
                )
            )
    point_rank = {p.name: i for i, p in enumerate(grid.points)}
    runs.sort(
        key=lambda r: (
            scenario_rank[r.scenario],
            method_rank[r.method],
            seed_rank[r.seed],
            point_rank[r.point],
        )
    )
    for planned in runs if check else ():
        try:
            planned.config.validate()
        except SimulationError as exc:
            raise SweepError(f"run {planned.name}: {exc}") from exc
    return experiment.Plan(runs, list(base.notes))


def kinds(run: SweepRun) -> tuple[tuple[str, str, str], tuple[str, str], str]:
    """What a sweep run's duration is estimated from (:func:`experiment.estimate_seconds`):
    the same scenario, method and point at other seeds, else the same scenario and
    method, else the same method."""
    return (run.label, run.method, run.point), (run.label, run.method), run.method


# -- the validation figure ----------------------------------------------------------------


def line_validation(line: Mapping[str, Any], metric: str) -> float | None:
    """The validation figure of one metrics line's deployed model, in the metric's unit
    (accuracy; MSE for an autoencoder, from its selection metric 1 / MSE). A record's
    line carries it as ``selection_metric``; a run's line has every aggregation's. None
    when the trainer deployed nothing scored."""
    if "selection_metric" in line:
        score = line["selection_metric"]
    else:
        best = deployed(line.get("aggregations") or [])
        score = None if best is None else best.get("selection_metric")
    if score is None or not math.isfinite(score):
        return None
    if metric == "accuracy":
        return float(score)
    return 1.0 / score if score > 0 else None


def run_validation(lines: Sequence[Mapping[str, Any]], metric: str) -> float | None:
    """The mean over trainers of each trainer's deployed model's validation figure after
    the last round (:func:`line_validation`); None without a last round or when one of
    its trainers has no such figure (the run then counts as failed at its point)."""
    if not lines:
        return None
    last = max(line["round"] for line in lines)
    values = [line_validation(line, metric) for line in lines if line["round"] == last]
    present = [v for v in values if v is not None]
    if not present or len(present) != len(values):
        return None
    return statistics.fmean(present)


def record_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a sweep record keeps of a run's metrics lines: the campaign's
    (:func:`campaign.record_lines`), the final round's lines with their deployed model's
    ``selection_metric`` (its validation score) too."""
    scored = [
        {**line, "selection_metric": _deployed_score(line)} if "aggregations" in line else line
        for line in lines
    ]
    return campaign.record_lines(scored, (*campaign.RECORD_KEYS, "selection_metric"))


def _deployed_score(line: Mapping[str, Any]) -> float | None:
    best = deployed(line.get("aggregations") or [])
    return None if best is None else best.get("selection_metric")


def records(folder: Path) -> experiment.RunCopies:
    """The sweep's records in ``folder``: as the campaign's (:func:`campaign.records`),
    with each trainer's validation score after the last round."""
    return experiment.RunCopies(folder, ("config.json", "rounds.csv", "summary.json"), record_lines)


def drop_weights(run_dir: Path) -> None:
    """Remove a finished sweep run's weights (its embedded store, ``blobs/``): the choice
    needs only its metrics, and 800 runs' weights (80 MB to a few hundred each) would
    not fit on the disk. The run stays finished (its summary.json is kept)."""
    shutil.rmtree(run_dir / "blobs", ignore_errors=True)


SweepFigures = dict[tuple[str, str], dict[str, dict[int, float | None]]]
"""(declared scenario, method) → point → seed → the run's validation figure (None: the
run finished without one)."""


def sweep_figures(plan: experiment.Plan[SweepRun], folders: Sequence[Path]) -> SweepFigures:
    """The validation figure of every finished run of ``plan``, from the first of
    ``folders`` (run directories, then records) holding it made with the planned
    options. Runs not finished anywhere are absent."""
    out: SweepFigures = {}
    for run in plan.runs:
        for folder in folders:
            run_dir = folder / run.name
            if experiment.state_of(run_dir) != "done":
                continue
            if experiment.config_differences(run_dir, run.config):
                continue  # made with other options: not this grid point's run
            metric = protocol.metric_of(run.config)
            lines = report.read_metrics([run_dir / "metrics.jsonl"])
            figure = run_validation(lines, metric)
            out.setdefault((run.scenario, run.method), {}).setdefault(run.point, {})[run.seed] = (
                figure
            )
            break
    return out


# -- the tuning stage's reuse --------------------------------------------------------------


def reusable_runs(
    runs: Sequence[campaign.PlannedRun], grid: Grid, folders: Sequence[Path]
) -> dict[str, Path]:
    """The runs of ``runs`` (the declared tuning stage's, with the chosen settings and
    the engine and device they will run on) that a finished sweep run already is: run
    name → that sweep run's directory or record, from the first of ``folders`` (the
    sweep's run directories, then its records) holding one.

    A sweep run of the same scenario, method and seed, at any grid point (the chosen
    one's settings are the tuning run's, so only a point with the same effect can
    match), qualifies when it is finished (a ``summary.json``), has its ``config.json``
    and metrics, and its recorded configuration equals the tuning run's in every field
    but the name (:func:`experiment.same_run_differences`; a field added to the
    configuration since the sweep run was made counts as equal only while the tuning run
    leaves it at its default, and the copy names it). Any other difference, and the
    tuning run is not listed: it is made as planned.
    """
    out: dict[str, Path] = {}
    for run in runs:
        for point in grid.points:
            name = sweep_run_name(run.scenario, run.method, point.name, run.seed)
            source = next((f / name for f in folders if _same_run(f / name, run)), None)
            if source is not None:
                out[run.name] = source
                break
    return out


def _same_run(run_dir: Path, run: campaign.PlannedRun) -> bool:
    if experiment.state_of(run_dir) != "done" or not (run_dir / "metrics.jsonl").is_file():
        return False
    recorded = experiment.recorded_config(run_dir)
    return recorded is not None and not experiment.same_run_differences(recorded, run.config)


def reuse_origin(source: Path, run: campaign.PlannedRun) -> dict[str, Any]:
    """What the summary of ``run``, a tuning run copied from the sweep run ``source``,
    says of it (:data:`experiment.REUSED_FROM`): the sweep run's name, where it was read,
    why it serves, and the fields its configuration lacks as added since, taken at their
    default (:func:`experiment.added_since`).

    Raises
    ------
    SweepError
        If ``source`` has no readable ``config.json``.
    """
    recorded = experiment.recorded_config(source)
    if recorded is None:
        raise SweepError(f"{source} has no readable config.json; it cannot stand for {run.name}")
    return {
        "stage": STAGE,
        "run": source.name,
        "dir": str(source),
        "why": "the optimiser sweep's run at the chosen point: the same configuration, "
        "field by field, but for its name; copied, not run again",
        "added_since": experiment.added_since(recorded, run.config),
    }


# -- the choice ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PointChoice:
    """A (scenario, method)'s grid point, or None and why none is chosen yet."""

    point: str | None
    reason: str
    means: dict[str, float | None] = field(default_factory=dict)
    """Each point's mean validation figure over the tuning seeds (None: a run failed)."""
    missing: list[str] = field(default_factory=list)
    """The sweep runs (``point sSEED``) the choice waits for."""


def choose_point(
    points: Sequence[str],
    figures: Mapping[str, Mapping[int, float | None]],
    seeds: Sequence[int],
    metric: str,
) -> PointChoice:
    """The declared rule: the point with the best mean over ``seeds`` of its runs'
    validation figures (highest accuracy, lowest MSE), on a tie (means within
    :data:`TIE`) the first in ``points`` order. No choice while any point lacks a seed;
    a point with a run that has no figure ranks below every other, and none is chosen
    when no point has a figure on every seed."""
    missing = [f"{p} s{s}" for p in points for s in seeds if s not in figures.get(p, {})]
    if missing:
        total = len(points) * len(seeds)
        return PointChoice(None, f"{len(missing)} of {total} sweep runs missing", {}, missing)
    means: dict[str, float | None] = {}
    for point in points:
        values = [figures[point][s] for s in seeds]
        means[point] = (
            None
            if any(v is None for v in values)
            else statistics.fmean(v for v in values if v is not None)
        )
    sign = 1.0 if stats.higher_is_better(metric) else -1.0
    scored = {p: sign * m for p, m in means.items() if m is not None}
    if not scored:
        return PointChoice(None, "no point has a validation figure on every seed", means)
    top = max(scored.values())
    tied = [p for p in points if p in scored and scored[p] >= top - TIE]
    reason = "best mean validation figure over the tuning seeds"
    if len(tied) > 1:
        reason += f" (tied with {', '.join(tied[1:])}: the grid's order decides)"
    return PointChoice(tied[0], reason, means)


def sweep_choices(
    declaration: protocol.Declaration,
    grid: Grid,
    plan: experiment.Plan[SweepRun],
    figures: SweepFigures,
) -> dict[tuple[str, str], PointChoice]:
    """Each planned (declared scenario, method)'s point by :func:`choose_point`, in the
    plan's order."""
    metrics = {(r.scenario, r.method): protocol.metric_of(r.config) for r in plan.runs}
    points = [p.name for p in grid.points]
    return {
        key: choose_point(points, figures.get(key, {}), declaration.tuning_seeds, metric)
        for key, metric in metrics.items()
    }


# -- the choices file ---------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else '"not finite"'
    return str(value)


TUNED_HEADER = (
    "# The optimiser sweep's choices (issue 36, deliverable 1), written by",
    "# `python scripts/run_experiments.py --declared sweep` from its runs, never by hand.",
    "# The grid and the rule: docs/results/sweep.toml. `--declared tuning` and",
    "# `--declared evaluation` run each (scenario, method) with its settings below and",
    "# do not plan a scenario until every one of its methods is here.",
)


def tuned_text(
    grid: Grid,
    choices: Mapping[tuple[str, str], PointChoice],
    header: Sequence[str] = TUNED_HEADER,
) -> str:
    """``docs/results/tuned.toml`` (or another choices file, by its ``header`` comment):
    each chosen (scenario, method)'s settings, point and the means it was chosen on; the
    (scenario, method)s still waiting as a comment."""
    lines = [*header, ""]
    waiting = []
    for (scenario, method), choice in choices.items():
        if choice.point is None:
            waiting.append(f"#   {scenario} {method}: {choice.reason}")
            continue
        lines.append(f"[{_toml_value(scenario)}.{_toml_value(method)}]")
        for key, value in grid.point(choice.point).settings.items():
            lines.append(f"{key} = {_toml_value(value)}")
        lines.append(f"point = {_toml_value(choice.point)}")
        lines.append(f"reason = {_toml_value(choice.reason)}")
        means = ", ".join(
            f"{_toml_value(p)} = {_toml_value('failed' if m is None else m)}"
            for p, m in choice.means.items()
        )
        lines += [f"validation = {{ {means} }}", ""]
    if waiting:
        lines += ["# Not chosen yet:", *waiting, ""]
    return "\n".join(lines)


def parse_tuned(text: str, where: str = "tuned") -> dict[str, dict[str, dict[str, Any]]]:
    """The settings of each chosen (declared scenario, method) of a choices file
    (:data:`protocol.Tuned`); the other keys (point, reason, means) are read, not used.

    Raises
    ------
    SweepError
        For invalid TOML or settings that are not :data:`TUNABLE`.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{where}: {exc}") from exc
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for scenario, methods in data.items():
        if not isinstance(methods, dict):
            raise SweepError(f"{where}: [{scenario}] must be a table of methods")
        for method, table in methods.items():
            if not isinstance(table, dict):
                raise SweepError(f"{where}: [{scenario}.{method}] must be a table")
            settings = {k: v for k, v in table.items() if k in TUNABLE}
            out.setdefault(scenario, {})[method] = _settings(
                settings, f"{where} [{scenario}.{method}]"
            )
    return out


def load_tuned(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """:func:`parse_tuned` of the file at ``path``; nothing chosen if it is absent."""
    if not path.is_file():
        return {}
    return parse_tuned(path.read_text(), str(path))


def write_tuned(path: Path, text: str) -> None:
    """Write the choices file whole or not at all (write, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(text)
    os.replace(partial, path)
