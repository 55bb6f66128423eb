"""The experiment framework: a plan of runs, resumable execution, kept records, tables.

Every experiment of the repository has the same four parts, and this module holds what
they share:

- a **plan**: runs (:class:`PlannedRun`: a name and the :class:`SimulationConfig` of one
  simulator network), seed by seed, and notes on the runs left out (:class:`Plan`);
- **resumable execution** (:func:`execute`): a run directory with a ``summary.json`` is
  finished and skipped, an unfinished one is removed and made again, and a run made with
  other options than planned is refused (:func:`refuse_other_options`); a run another
  plan already made under another name, with the same configuration in every other
  field (:func:`same_run_differences`), can be copied instead of made again, its summary
  naming where it came from (:func:`reuse_run`, :data:`REUSED_FROM`);
- **records**: what the tables need of a finished run, written as it ends into
  ``results/`` and committed (:class:`RunCopies`: a trimmed copy of the run directory;
  :class:`JsonLines`: one line per run), so that a fresh clone makes the tables again,
  and resumes, without the run directories;
- **tables**, made from the records only.

The experiments themselves: :mod:`~mcfl_chain.simulation.campaign` (the paper's
scenarios × methods), :mod:`~mcfl_chain.simulation.attack_benchmark` (adversaries ×
defences), :mod:`~mcfl_chain.simulation.defence_benchmark` (the declared defence under
every attack and placement) and :mod:`~mcfl_chain.simulation.fedfmc_experiment`
(FedFMC's own figures);
``scripts/`` holds their command lines.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import shutil
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from rich.console import Console

from mcfl_chain.simulation import report
from mcfl_chain.simulation.runner import SimulationConfig, SimulationError, run_simulation

RESULTS = Path("results")
"""Where the records are committed (relative to the repository root)."""


class ExperimentError(ValueError):
    """An experiment cannot be planned, resumed or reported as asked; the message says
    what to change."""


class PlannedRun(Protocol):
    """One run of a plan: one simulator network, in the run directory ``<out>/<name>``."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> SimulationConfig: ...


R = TypeVar("R", bound=PlannedRun)


@dataclass
class Plan(Generic[R]):
    runs: list[R]
    notes: list[str] = field(default_factory=list)
    """Runs left out of the plan, and why (e.g. no oracle for a one-group scenario)."""


# -- seeds --------------------------------------------------------------------------------


def parse_seeds(values: str | Iterable[str]) -> list[int]:
    """``"0,1 2"``, ``("0,1", "2")`` or ``("0 1 2",)`` → ``[0, 1, 2]``.

    Raises
    ------
    ValueError
        For anything but whole numbers >= 0, naming the item.
    """
    seeds = []
    for value in [values] if isinstance(values, str) else values:
        for item in re.split(r"[,\s]+", value.strip()):
            if not item:
                continue
            if not item.isdigit():
                raise ValueError(f"{item!r} is not a seed (a whole number >= 0)")
            seeds.append(int(item))
    return seeds


def check_seeds(seeds: Sequence[int]) -> None:
    """Refuse no seed, or a seed given twice (two runs would share one directory).

    Raises
    ------
    ExperimentError
    """
    if not seeds:
        raise ExperimentError("give at least one seed")
    if len(set(seeds)) != len(seeds) or any(s < 0 for s in seeds):
        raise ExperimentError(f"seeds must be distinct and >= 0, got {list(seeds)}")


# -- run directories ----------------------------------------------------------------------


def state_of(run_dir: Path) -> str:
    """``done`` (a summary.json), ``partial`` (started, unfinished) or ``pending``."""
    if (run_dir / "summary.json").exists():
        return "done"
    return "partial" if run_dir.exists() else "pending"


@dataclass
class Progress(Generic[R]):
    """How far a plan is in an output folder."""

    states: dict[str, str]
    """Run name → :func:`state_of` its directory."""
    done: list[R]
    todo: list[R]
    """The runs not done (partial or pending), in the plan's order."""
    finished: list[tuple[R, float]]
    """The done runs whose duration is known, with it (for estimates)."""


def progress(runs: Sequence[R], out: Path) -> Progress[R]:
    """The state of each of ``runs`` in ``out``."""
    states = {run.name: state_of(out / run.name) for run in runs}
    done = [run for run in runs if states[run.name] == "done"]
    finished = [
        (run, seconds) for run in done if (seconds := recorded_seconds(out / run.name)) is not None
    ]
    todo = [run for run in runs if states[run.name] != "done"]
    return Progress(states, done, todo, finished)


WHERE_KEYS = frozenset({"device"})
"""Configuration keys that say where a run was made, not what was run: a run made on a
GPU answers for the same planned run on the CPU (its config.json still says where)."""


def config_differences(run_dir: Path, config: SimulationConfig) -> list[str]:
    """The options a finished run was made with that differ from ``config`` (only the
    keys both know, so an option added since does not count, and not
    :data:`WHERE_KEYS`)."""
    path = run_dir / "config.json"
    if not path.exists():
        return []
    recorded = json.loads(path.read_text())
    planned = json.loads(json.dumps(asdict(config)))
    return [
        f"{key}={recorded[key]!r} (planned {planned[key]!r})"
        for key in sorted((recorded.keys() & planned.keys()) - WHERE_KEYS)
        if recorded[key] != planned[key]
    ]


def recorded_config(run_dir: Path) -> dict[str, Any] | None:
    """A run directory's ``config.json``; None when it is absent or not a JSON object."""
    try:
        recorded = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


def added_since(recorded: Mapping[str, Any], planned: SimulationConfig) -> list[str]:
    """The fields of ``planned`` that a finished run's recorded configuration lacks
    because they were added to :class:`SimulationConfig` after it was made, and that
    ``planned`` leaves at their default. An option is added with the default that keeps
    the earlier behaviour (what :func:`config_differences` relies on for resuming), so
    such a run was made as ``planned`` asks; :func:`same_run_differences` counts them as
    equal and a reused run names them (:func:`reuse_run`)."""
    values = json.loads(json.dumps(asdict(planned)))
    return [
        f.name
        for f in dataclasses.fields(planned)
        if f.name not in recorded
        and f.default is not dataclasses.MISSING
        # The default in config.json's form (a tuple default is a list there).
        and values[f.name] == json.loads(json.dumps(f.default))
    ]


def same_run_differences(recorded: Mapping[str, Any], planned: SimulationConfig) -> list[str]:
    """Every field but ``name`` in which a finished run's recorded configuration (its
    ``config.json``) differs from ``planned``, a field that only one of them has
    included, except a field added since the run was made that ``planned`` leaves at
    its default (:func:`added_since`). Stricter than :func:`config_differences`: a run
    taken for another under another name (:func:`reuse_run`) must be that run in every
    respect. Empty: the same run."""
    fields = json.loads(json.dumps(asdict(planned)))
    added = set(added_since(recorded, planned))
    keys = sorted((recorded.keys() | fields.keys()) - {"name"} - added)
    return [
        f"{key}={recorded.get(key, '(absent)')!r} (planned {fields.get(key, '(absent)')!r})"
        for key in keys
        if key not in recorded or key not in fields or recorded[key] != fields[key]
    ]


def refuse_other_options(runs: Iterable[PlannedRun], out: Path, hint: str) -> None:
    """Refuse a finished run made with other options than planned: tables over runs of
    different rounds or data would mean nothing.

    Raises
    ------
    ExperimentError
        Naming the run, the options that differ and ``hint`` (what to do).
    """
    for run in runs:
        if state_of(out / run.name) == "done":
            differences = config_differences(out / run.name, run.config)
            if differences:
                raise ExperimentError(
                    f"{out / run.name} was made with other options than planned: "
                    + ", ".join(differences)
                    + f"; {hint}"
                )


def listing(run: PlannedRun, out: Path, state: str | None = None, detail: str = "") -> str:
    """One line of ``--list``: the run's state (default: its directory's), its name and
    ``detail``, and the options a finished run directory was made with that differ from
    the plan."""
    state = state or state_of(out / run.name)
    line = f"{state:8} {run.name}{detail}"
    if state == "done":
        differences = config_differences(out / run.name, run.config)
        if differences:
            line += "  [made with other options: " + ", ".join(differences) + "]"
    return line


REUSED_FROM = "reused_from"
"""The key of a reused run's ``summary.json`` (:func:`reuse_run`) naming the run it was
copied from, so that a table made from it, and its reader, can trace it there."""
REUSED_FILES = ("config.json", "summary.json", "metrics.jsonl", "rounds.csv")
"""What a reused run's directory holds: what the records and tables read (no weights);
the first three must be there, ``rounds.csv`` is copied where it is."""


def reused_from(run_dir: Path) -> dict[str, Any] | None:
    """Where a finished run was copied from (its summary's :data:`REUSED_FROM`); None for
    a run made here, or one not finished."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    origin = summary.get(REUSED_FROM) if isinstance(summary, dict) else None
    return origin if isinstance(origin, dict) else None


def reuse_run(source: Path, run_dir: Path, name: str, origin: Mapping[str, Any]) -> dict[str, Any]:
    """Make ``run_dir`` the finished run ``name`` from the finished run ``source``, made
    under another name with the same configuration in every other field (the caller
    checks that, :func:`same_run_differences`): its :data:`REUSED_FILES`, with ``name``
    in its ``config.json`` and its summary's configuration, and ``origin`` (at least the
    source run's name, ``run``) under the summary's :data:`REUSED_FROM`. Nothing else is
    changed. The copy is made beside ``run_dir`` and renamed into place, so an
    interrupted one leaves no directory that looks finished; an unfinished run in
    ``run_dir`` is replaced. Returns the new summary.

    Raises
    ------
    ExperimentError
        When ``origin`` names no ``run``, ``source`` lacks a file it must have, or
        ``run_dir`` cannot be written.
    """
    if not origin.get("run"):
        raise ExperimentError(f"a reused run must name the run it comes from, got {origin!r}")
    if state_of(run_dir) == "done":
        raise ExperimentError(f"{run_dir} is a finished run already; remove it to reuse {source}")
    missing = [f for f in REUSED_FILES[:3] if not (source / f).is_file()]
    if missing:
        raise ExperimentError(
            f"cannot reuse {source}: it has no {', '.join(missing)}; remove it, or run "
            f"{name} as planned"
        )
    staging = run_dir.with_name(run_dir.name + ".reusing")
    try:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for file in REUSED_FILES[2:]:
            if (source / file).is_file():
                shutil.copyfile(source / file, staging / file)
        config = json.loads((source / "config.json").read_text())
        (staging / "config.json").write_text(json.dumps({**config, "name": name}, indent=1))
        summary = json.loads((source / "summary.json").read_text())
        if isinstance(summary.get("config"), dict):
            summary["config"] = {**summary["config"], "name": name}
        summary[REUSED_FROM] = dict(origin)
        (staging / "summary.json").write_text(json.dumps(summary, indent=1))
        if run_dir.exists():
            shutil.rmtree(run_dir)  # an interrupted run's leftovers
        os.replace(staging, run_dir)
    except OSError as exc:
        raise ExperimentError(
            f"cannot copy {source} to {run_dir} ({exc}); give --out a folder you can write to"
        ) from exc
    return summary


def recorded_seconds(run_dir: Path) -> float | None:
    """How long a finished run took (its summary's ``seconds``)."""
    try:
        return float(json.loads((run_dir / "summary.json").read_text())["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def estimate_seconds(
    pending: Sequence[R],
    finished: Sequence[tuple[R, float]],
    kinds: Callable[[R], Sequence[Hashable]],
) -> float | None:
    """Time the ``pending`` runs should take, from the ``finished`` runs' durations:
    each like the finished runs of its first kind that has any (``kinds`` lists a run's
    kinds from the closest, e.g. (scenario and method, method)), else like any run.
    None before any run finished."""
    if not finished:
        return None
    seen: dict[Hashable, list[float]] = defaultdict(list)
    for run, seconds in finished:
        for kind in kinds(run):
            seen[kind].append(seconds)
    every = statistics.fmean(seconds for _, seconds in finished)
    total = 0.0
    for run in pending:
        same = next((seen[k] for k in kinds(run) if k in seen), None)
        total += statistics.fmean(same) if same else every
    return total


def duration(seconds: float | None) -> str:
    """``42 min``, ``3 h 05 min``, or ``?`` (unknown)."""
    if seconds is None:
        return "?"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def parse_until(text: str, now: datetime.datetime | None = None) -> datetime.datetime:
    """The local wall-clock time that ``--until`` names: ``HH:MM`` is its next occurrence
    after ``now`` (so ``02:00`` given at 23:00 is tomorrow's), ``YYYY-MM-DD HH:MM`` (or
    with a ``T``) that very time.

    Raises
    ------
    ValueError
        For any other text, or a full date and time already past.
    """
    now = now or datetime.datetime.now()
    text = text.strip()
    try:
        clock = datetime.datetime.strptime(text, "%H:%M")
    except ValueError:
        pass
    else:
        at = now.replace(hour=clock.hour, minute=clock.minute, second=0, microsecond=0)
        return at if at > now else at + datetime.timedelta(days=1)
    try:
        at = datetime.datetime.fromisoformat(text.replace(" ", "T", 1))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: give HH:MM (its next occurrence) or YYYY-MM-DD HH:MM"
        ) from None
    if at.tzinfo is not None:
        at = at.astimezone().replace(tzinfo=None)
    if at <= now:
        raise ValueError(f"{text!r} is already past (now {now:%Y-%m-%d %H:%M})")
    return at


def remove_run(run: PlannedRun, run_dir: Path) -> None:
    """What an interrupted run left goes (its trainers' metrics would mix with the new
    ones)."""
    shutil.rmtree(run_dir)


def simulate(run: PlannedRun, run_dir: Path, console: Console) -> dict[str, Any]:
    """Make one run: its network, simulated (the summary)."""
    return run_simulation(run.config, run_dir, console)


def execute(
    todo: Sequence[R],
    out: Path,
    console: Console,
    *,
    make: Callable[[R, Path, Console], dict[str, Any]] = simulate,
    clear: Callable[[R, Path], None] = remove_run,
    keep: Callable[[R, Path], object] | None = None,
    kinds: Callable[[R], Sequence[Hashable]] = lambda run: (),
    finished: Sequence[tuple[R, float]] = (),
    until: float | None = None,
) -> list[R]:
    """Make the ``todo`` runs in order, each in ``out/<name>``: an unfinished directory
    is cleared first (``clear``), then the run made (``make``), then its record kept
    (``keep``) at once, so an interrupted campaign loses at most the run in progress.
    Each run opens with a rule giving its rank, the time spent and the time left, as
    estimated from the ``finished`` runs' durations and those made here (``kinds``,
    see :func:`estimate_seconds`).

    With ``until`` (a wall-clock time, seconds since the epoch), a run whose estimated
    duration would take it past ``until`` is not started, nor any after it: a campaign
    given a time budget stops between runs, losing nothing. A run with no estimate yet
    (no run has finished) is started.

    Returns
    -------
    list
        The runs not started because of ``until`` (empty when all were made).

    Raises
    ------
    ExperimentError
        When a run fails; the message says how to resume.
    """
    done = list(finished)
    started = time.monotonic()
    for index, run in enumerate(todo, 1):
        expected = estimate_seconds([run], done, kinds)
        if until is not None and expected is not None and time.time() + expected > until:
            left = list(todo[index - 1 :])
            console.print(
                f"stopping before {run.name}: about {duration(expected)}, it would end after "
                f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(until))} (--until); "
                f"{len(left)} runs left, run the same command again to resume"
            )
            return left
        run_dir = out / run.name
        if run_dir.exists():
            console.print(f"{run.name}: removing the unfinished run in {run_dir}")
            clear(run, run_dir)
        console.rule(
            f"[{index}/{len(todo)}] {run.name} · elapsed {duration(time.monotonic() - started)}"
            f" · ETA {duration(estimate_seconds(todo[index - 1 :], done, kinds))}"
        )
        try:
            summary = make(run, run_dir, console)
        except SimulationError as exc:
            raise ExperimentError(
                f"{run.name} failed: {exc}\n(run directory kept: {run_dir}; run the same "
                "command again to resume, the unfinished run is made again)"
            ) from exc
        done.append((run, float(summary["seconds"])))
        if keep is not None:
            keep(run, run_dir)
        console.print(f"{run.name}: {duration(summary['seconds'])}")
    return []


# -- records ------------------------------------------------------------------------------


LineFilter = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


@dataclass(frozen=True)
class RunCopies:
    """Records that are trimmed copies of run directories: ``folder/<run>/`` holds the
    run's ``files`` and the metrics lines ``lines`` keeps (no weights, no logs). A record
    reads like a finished run directory, so the tables are made from either, and
    :meth:`restore` copies it back into a fresh output folder as a finished run."""

    folder: Path
    files: tuple[str, ...]
    lines: LineFilter

    def keep(self, name: str, run_dir: Path) -> bool:
        """Copy the finished run ``run_dir`` to ``folder/name``; False (nothing copied)
        for an unfinished run or when the record is the run itself.

        Raises
        ------
        OSError
            When ``folder`` cannot be written.
        """
        target = self.folder / name
        if state_of(run_dir) != "done" or target.resolve() == run_dir.resolve():
            return False
        target.mkdir(parents=True, exist_ok=True)
        for file in self.files:
            if (run_dir / file).exists():
                shutil.copyfile(run_dir / file, target / file)
        kept = self.lines(report.read_metrics([run_dir / "metrics.jsonl"]))
        (target / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in kept))
        return True

    def holds(self, run: PlannedRun) -> bool:
        """Whether a record of ``run`` made with its planned options is kept."""
        kept = self.folder / run.name
        return state_of(kept) == "done" and not config_differences(kept, run.config)

    def restore(self, runs: Iterable[PlannedRun], out: Path) -> int:
        """Copy into ``out`` the record of each run that has no directory there and was
        recorded with the planned options (so a fresh clone resumes a campaign instead of
        making its finished runs again); how many were copied.

        Raises
        ------
        ExperimentError
            When ``out`` cannot be written.
        """
        copied = 0
        for run in runs:
            kept, run_dir = self.folder / run.name, out / run.name
            if run_dir.exists() or kept.resolve() == run_dir.resolve() or not self.holds(run):
                continue
            try:
                shutil.copytree(kept, run_dir)
            except OSError as exc:
                raise ExperimentError(
                    f"cannot copy the record {kept} to {run_dir} ({exc.strerror}); give --out "
                    "a folder you can write to"
                ) from exc
            copied += 1
        return copied


def keep_fields(*keys: str) -> LineFilter:
    """A :data:`LineFilter` keeping every line, with only ``keys``."""
    return lambda lines: [{k: line[k] for k in keys if k in line} for line in lines]


@dataclass(frozen=True)
class JsonLines:
    """Records as one JSON line per run, appended as each run ends."""

    path: Path

    def load(self) -> list[dict[str, Any]]:
        """Every record, in the order they were made (none if the file is absent)."""
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
