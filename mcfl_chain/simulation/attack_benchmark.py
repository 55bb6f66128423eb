"""The adversaries benchmark: what attacks cost honest trainers under FedAvg, MCFL and
MCFL with each defence (``scripts/bench_adversaries.py``).

An experiment of the framework (:mod:`~mcfl_chain.simulation.experiment`): the plan
(:func:`plan`) is scenario × method × attack × seed, with the Sybil attacks also run under
the registration policies asked for and the sample-inflation attacks under the sample
caps asked for; each finished run's record is one JSON file of measures
(:class:`Record`, kept in ``results/adversaries/``), and the tables (:func:`measure`)
are made from the records. The measures themselves are in
:mod:`~mcfl_chain.simulation.adversarial`. The declared matrix of issue 37 (one defence,
named before its runs, under every attack and placement) is
:mod:`~mcfl_chain.simulation.defence_benchmark`, on the runs and records of this module.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import defaultdict
from pathlib import Path

from mcfl_chain.adversaries.backdoor import Backdoor
from mcfl_chain.algorithms.robust import defence_names, parse_defence
from mcfl_chain.simulation import adversarial
from mcfl_chain.simulation.campaign import load_scenarios
from mcfl_chain.simulation.experiment import RESULTS, ExperimentError, state_of
from mcfl_chain.simulation.registration import ETHER, POLICIES
from mcfl_chain.simulation.runner import SimulationConfig
from mcfl_chain.storage.errors import BlobNotFound

RECORDS = RESULTS / "adversaries"
"""Where each finished run's record goes (``--records``)."""
TABLE = Path("docs/results/adversaries.md")
"""Where the tables are written (``--table``)."""
ATTACKS = (
    "label-flip:0.2",
    "sign-flip:0.2",
    "backdoor:0.2",
    "free-rider:0.2",
    "sample-inflation:0.2",
    "sybil:0.2",
    "label-flip:0.4",
    "sign-flip:0.4",
    "sybil-backdoor:0.2",
    "sybil-sign-flip:0.2",
    "alie:0.2",
    "ipm:0.2",
    "min-max:0.2",
    "min-sum:0.2",
    "filter-aware:0.2",
)
"""20 % of the trainers for every attack, 40 % for the two strongest (issue 13); then
the Sybils that carry an attack and the adaptive attacks (issue 37)."""
CLEAN = "clean"
SCENARIOS = ("groups", "iid")
HEADLINE_ATTACK = "label-flip:0.2"
OPEN = "open"
"""The registration policy of every run but the ``--registration`` ones."""
RANDOM = "random"
"""The placement of every run but the declared matrix's worst-case ones
(:data:`~mcfl_chain.adversaries.spec.PLACEMENTS`)."""


def _usable_defences() -> list[str]:
    """Every defence a trainer can select (selection and aggregation rules alike)."""
    usable = []
    for name in defence_names():
        try:
            parse_defence(name)
        except ValueError:
            continue  # a name that is no defence (the network's default rule)
        usable.append(name)
    return usable


def methods() -> dict[str, dict[str, object]]:
    """Method name → the simulation options it sets."""
    table: dict[str, dict[str, object]] = {
        "fedavg": {"strategy": "fedavg"},
        "mcfl-tol1": {"strategy": "mcfl", "tolerance": 1.0},
        "mcfl-tol2": {"strategy": "mcfl", "tolerance": 2.0},
    }
    for defence in _usable_defences():
        table[f"mcfl-{defence}"] = {"strategy": "mcfl", "tolerance": 1.0, "defence": defence}
    return table


@dataclasses.dataclass(frozen=True)
class Run:
    scenario: str
    method: str
    attack: str
    seed: int
    config: SimulationConfig
    policy: str = OPEN
    cap: int | None = None
    """The network's ``maxSamples`` (None: the contracts' default)."""
    placement: str = RANDOM
    """Where the adversaries sit (:func:`~mcfl_chain.adversaries.spec.placement_order`);
    named in the run's name unless random, so the names of earlier runs stand. A clean
    run has no adversary to place: always random."""

    @property
    def name(self) -> str:
        placement = "" if self.placement == RANDOM else f"-{self.placement}"
        policy = "" if self.policy == OPEN else f"-{self.policy}"
        cap = "" if self.cap is None else f"-cap{self.cap}"
        attack = self.attack.replace(":", "")
        return f"{self.scenario}-{self.method}-{attack}{placement}{policy}{cap}-s{self.seed}"

    @property
    def clean(self) -> str:
        """The name of the run its drops are measured against: clean, open registration,
        the default cap (and no placement)."""
        return dataclasses.replace(self, attack=CLEAN, policy=OPEN, cap=None, placement=RANDOM).name

    @property
    def variant(self) -> bool:
        """A run of the policy or cap tables only, not of the main one."""
        return self.policy != OPEN or self.cap is not None


@dataclasses.dataclass(frozen=True)
class Record:
    """What the tables need of one finished run, kept in the repository."""

    honest: adversarial.HonestFinal
    backdoor: dict[int, float] | None = None
    """Honest trainer index → the backdoor's success on its deployed model."""
    sybil_adoption: float | None = None
    registration: adversarial.SybilRegistration | None = None
    claims: adversarial.SampleClaims | None = None
    fallback: adversarial.Fallback | None = None
    """How often honest trainers kept only their own update (None in records made before
    it was measured)."""
    engine: str | None = None
    """The engine the run's metrics name (None in records made before it was kept)."""
    device: str | None = None
    """The device the run's metrics name (likewise)."""
    cpu_capability: str | None = None
    """The CPU kernels' instruction set it computed with, e.g. AVX2 (None in records made
    before it was kept): runs pair bit for bit only where it is the same."""

    @classmethod
    def of(cls, run: Run, run_dir: Path) -> Record:
        """Measured from a finished run directory (the backdoor rates need its weights)."""
        backdoor = sybil_adoption = registration = claims = None
        if is_backdoor(run.attack):
            backdoor = adversarial.backdoor_success(run_dir, Backdoor().target)
        if is_sybil(run.attack):
            sybil_adoption = adversarial.sybil_adoption(run_dir)
            registration = adversarial.sybil_registration(run_dir)
        if is_inflation(run.attack):
            claims = adversarial.sample_claims(run_dir)
        engine, device = adversarial.run_setting(run_dir)
        return cls(
            adversarial.honest_final(run_dir),
            backdoor,
            sybil_adoption,
            registration,
            claims,
            adversarial.fallback(run_dir),
            engine,
            device,
            adversarial.cpu_capability(run_dir),
        )

    def to_json(self, run: Run) -> str:
        fields = dataclasses.asdict(self)
        fields["honest"]["accuracies"] = {str(k): v for k, v in self.honest.accuracies.items()}
        fields["honest"]["stale"] = {str(k): v for k, v in self.honest.stale.items()}
        if self.backdoor is not None:
            fields["backdoor"] = {str(k): v for k, v in self.backdoor.items()}
        key = {
            "run": run.name,
            "scenario": run.scenario,
            "method": run.method,
            "attack": run.attack,
            "seed": run.seed,
            "policy": run.policy,
            "cap": run.cap,
            "placement": run.placement,
        }
        return json.dumps({**key, **fields}, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Record:
        return cls.from_fields(json.loads(text))

    @classmethod
    def from_fields(cls, fields: dict) -> Record:
        honest = fields["honest"]
        accuracies = {int(k): float(v) for k, v in honest["accuracies"].items()}
        stale = {int(k): int(v) for k, v in honest.get("stale", {}).items()}
        backdoor = fields.get("backdoor")
        registration = fields.get("registration")
        claims = fields.get("claims")
        fallback = fields.get("fallback")
        return cls(
            adversarial.HonestFinal(int(honest["round"]), accuracies, stale),
            None if backdoor is None else {int(k): float(v) for k, v in backdoor.items()},
            fields.get("sybil_adoption"),
            None if registration is None else adversarial.SybilRegistration(**registration),
            None if claims is None else adversarial.SampleClaims(**claims),
            None if fallback is None else adversarial.Fallback(**fallback),
            fields.get("engine"),
            fields.get("device"),
            fields.get("cpu_capability"),
        )


def keep_record(run: Run, out: Path, records: Path) -> Record:
    """Measure a finished run directory and write its record."""
    record = Record.of(run, out / run.name)
    try:
        records.mkdir(parents=True, exist_ok=True)
        (records / f"{run.name}.json").write_text(record.to_json(run))
    except OSError as exc:
        raise ExperimentError(
            f"cannot write the record of {run.name} in {records} ({exc.strerror}); give "
            "--records a folder you can write to (the run itself is kept in its directory)"
        ) from exc
    return record


def read_records(records: Path) -> dict[str, tuple[Run, Record]]:
    """Run name → (the run, without its configuration: enough for the tables; its
    record), for every record in ``records``."""
    found: dict[str, tuple[Run, Record]] = {}
    for path in sorted(records.glob("*.json")) if records.is_dir() else []:
        try:
            fields = json.loads(path.read_text())
            run = Run(
                fields["scenario"],
                fields["method"],
                fields["attack"],
                int(fields["seed"]),
                None,  # type: ignore[arg-type]
                fields["policy"],
                fields["cap"],
                fields.get("placement", RANDOM),  # records made before placements existed
            )
            record = Record.from_fields(fields)
        except (ValueError, KeyError, TypeError) as exc:
            raise ExperimentError(
                f"{path} is not a record this script wrote ({exc}); delete it to make the run again"
            ) from exc
        if run.name != path.stem:
            raise ExperimentError(
                f"{path} holds the record of {run.name}; rename it {run.name}.json"
            )
        found[run.name] = (run, record)
    return found


def gather(
    runs: list[Run],
    out: Path,
    records: Path,
    recorded: dict[str, tuple[Run, Record]] | None = None,
) -> dict[str, Record]:
    """Run name → record, for the finished runs: measured again from the run directory
    where there is one (its record rewritten), taken from ``recorded`` (default: read
    from ``records``) otherwise, or where the directory's blobs were pruned (about 70 MB
    a run: campaigns delete them once the records are committed) and a record exists."""
    if recorded is None:
        recorded = read_records(records)
    found: dict[str, Record] = {}
    for run in runs:
        if state_of(out / run.name) == "done":
            try:
                found[run.name] = keep_record(run, out, records)
            except BlobNotFound:
                if run.name not in recorded:
                    raise
                found[run.name] = recorded[run.name][1]
        elif run.name in recorded:
            found[run.name] = recorded[run.name][1]
    return found


def table_runs(planned: list[Run], recorded: dict[str, tuple[Run, Record]]) -> list[Run]:
    """The planned runs and every recorded one, in the tables' order (scenario, method,
    attack as listed here, then policy, cap, seed), so that any slice of the benchmark
    writes the whole table."""
    runs = {run.name: run for run in planned}
    for name, (run, _) in recorded.items():
        runs.setdefault(name, run)
    method_order = {m: i for i, m in enumerate(methods())}
    attack_order = {a: i for i, a in enumerate((CLEAN, *ATTACKS))}

    def key(run: Run) -> tuple:
        return (
            SCENARIOS.index(run.scenario) if run.scenario in SCENARIOS else len(SCENARIOS),
            run.scenario,
            method_order.get(run.method, len(method_order)),
            run.method,
            attack_order.get(run.attack, len(attack_order)),
            run.attack,
            run.policy != OPEN,
            run.policy,
            -1 if run.cap is None else run.cap,
            run.seed,
        )

    return sorted(runs.values(), key=key)


def finished(run: Run, out: Path, records: Path) -> bool:
    return state_of(out / run.name) == "done" or (records / f"{run.name}.json").exists()


def is_inflation(attack: str) -> bool:
    return attack.startswith("sample-inflation")


def is_sybil(attack: str) -> bool:
    return attack.startswith("sybil")


def is_backdoor(attack: str) -> bool:
    """Whether the attack's trainers plant the backdoor (alone, or as Sybils' payload)."""
    return attack.startswith(("backdoor", "sybil-backdoor")) or "payload=backdoor" in attack


def plan(
    scenarios: Path,
    only: tuple[str, ...],
    chosen_methods: tuple[str, ...],
    attacks: tuple[str, ...],
    seeds: list[int],
    rounds: int,
    policies: tuple[str, ...] = (),
    caps: tuple[int, ...] = (),
) -> list[Run]:
    bases = {c.name: c for c in load_scenarios(scenarios) if c.name in (only or SCENARIOS)}
    missing = set(only or SCENARIOS) - set(bases)
    if missing:
        raise ExperimentError(f"no scenario file named {sorted(missing)} in {scenarios}")
    table = methods()
    unknown = set(chosen_methods) - set(table)
    if unknown:
        raise ExperimentError(f"unknown method(s) {sorted(unknown)}; known: {', '.join(table)}")
    runs = []
    for seed in seeds:
        for scenario, base in bases.items():
            for method in chosen_methods or tuple(table):
                for attack in (CLEAN, *(attacks or ATTACKS)):
                    config = dataclasses.replace(
                        base,
                        seed=seed,
                        rounds=min(rounds, base.rounds),
                        adversaries=None if attack == CLEAN else attack,
                        **table[method],  # type: ignore[arg-type]
                    )
                    extra = [p for p in policies if p != OPEN] if is_sybil(attack) else []
                    variants: list[tuple[str, int | None]] = [(OPEN, None)]
                    variants += [(policy, None) for policy in extra]
                    variants += [(OPEN, cap) for cap in caps] if is_inflation(attack) else []
                    for policy, cap in variants:
                        run = Run(scenario, method, attack, seed, config, policy, cap)
                        named = dataclasses.replace(
                            config, name=run.name, registration=policy, max_samples=cap
                        )
                        runs.append(dataclasses.replace(run, config=named))
    return runs


def _pct(value: float) -> str:
    return "–" if value != value else f"{100 * value:.1f}"


def _pts(value: float) -> str:
    return "–" if value != value else f"{value:+.1f}"


def drops_against_clean(done: list[Run], found: dict[str, Record]) -> list[tuple[float, float]]:
    """(worst, average) drop of each attacked run against its clean run, where that is
    recorded."""
    drops = []
    for r in done:
        if r.clean == r.name or r.clean not in found:
            continue
        try:
            drops.append(adversarial.drop_points(found[r.clean].honest, found[r.name].honest))
        except ValueError as exc:  # a clean record that does not match its attacked run
            raise ExperimentError(
                f"{r.name} against {r.clean}: {exc}; delete {r.clean}.json in the records "
                "folder (and its run directory, if any) and run the benchmark again"
            ) from exc
    return drops


def measure(
    runs: list[Run], found: dict[str, Record]
) -> tuple[list[str], dict[tuple[str, str], list[float]]]:
    """The table's lines, and (method, attack) → worst-trainer drops over seeds and
    scenarios, for the runs with a record in ``found`` (see :func:`gather`)."""
    groups: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for run in runs:
        if not run.variant:
            groups[run.scenario, run.method, run.attack].append(run)
    drops: dict[tuple[str, str], list[float]] = defaultdict(list)
    lines = [
        "| scenario | method | attack | seeds | honest worst % | honest avg % | "
        "worst drop (pts) | avg drop (pts) | backdoor success % | Sybil adoption % |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (scenario, method, attack), members in groups.items():
        done = [r for r in members if r.name in found]
        if not done:
            continue
        worst = [found[r.name].honest.worst for r in done]
        average = [found[r.name].honest.average for r in done]
        pairs = drops_against_clean(done, found)
        worst_drop, avg_drop = [w for w, _ in pairs], [a for _, a in pairs]
        drops[method, attack] += worst_drop
        backdoor = sybil = float("nan")
        if is_backdoor(attack):
            rates = [found[r.name].backdoor or {} for r in done]
            backdoor = adversarial.mean([statistics.fmean(rate.values()) for rate in rates if rate])
        if is_sybil(attack):
            adoption = [found[r.name].sybil_adoption for r in done]
            sybil = adversarial.mean([a for a in adoption if a is not None])
        lines.append(
            f"| {scenario} | {method} | {attack} | {len(done)} | "
            f"{_pct(adversarial.mean(worst))} | {_pct(adversarial.mean(average))} | "
            f"{_pts(adversarial.mean(worst_drop))} | {_pts(adversarial.mean(avg_drop))} | "
            f"{_pct(backdoor)} | {_pct(sybil)} |"
        )
    lines += stale_lines(runs, found)
    lines += policy_lines(runs, found)
    lines += inflation_lines(runs, found)
    return lines, drops


def stale_lines(runs: list[Run], found: dict[str, Record]) -> list[str]:
    """A note naming the finished runs in which honest trainers ended without a model of
    the last round (none: no line)."""
    stale = [run for run in runs if run.name in found and found[run.name].honest.stale]
    if not stale:
        return []
    parts = []
    for run in stale:
        honest = found[run.name].honest
        rounds = sorted(set(honest.stale.values()))
        since = f"round {rounds[0]}" if len(rounds) == 1 else f"rounds {rounds[0]}-{rounds[-1]}"
        parts.append(
            f"`{run.name}` ({len(honest.stale)} of {len(honest.accuracies)} honest trainers, "
            f"last model in {since}, run ends in round {honest.round})"
        )
    return [
        "",
        "Honest trainers without a model in the last round (every update they received "
        "was rejected, e.g. as NaN after the weights blew up) count with the latest model "
        "they had: " + "; ".join(parts) + ".",
    ]


def policy_lines(runs: list[Run], found: dict[str, Record]) -> list[str]:
    """The second table: the finished Sybil runs by registration policy (none: no line)."""
    groups: dict[tuple[str, str, str, str], list[Run]] = defaultdict(list)
    for run in runs:
        if is_sybil(run.attack) and run.cap is None and run.name in found:
            groups[run.scenario, run.method, run.attack, run.policy].append(run)
    if not groups:
        return []
    lines = [
        "",
        "### Registration policies against Sybils",
        "",
        "| scenario | method | attack | policy | seeds | Sybil identities registered | "
        "stake locked (ETH) | Sybil adoption % | honest worst drop (pts) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = {policy: rank for rank, policy in enumerate(POLICIES)}
    for scenario, method, attack, policy in sorted(
        groups, key=lambda key: (*key[:3], order.get(key[3], len(order)))
    ):
        done = groups[scenario, method, attack, policy]
        records = [found[r.name].registration for r in done]
        kept = [r for r in records if r is not None]
        registered = adversarial.mean([float(r.registered) for r in kept])
        identities = adversarial.mean([float(r.identities) for r in kept])
        locked = adversarial.mean([r.locked_wei / ETHER for r in kept])
        adoption = adversarial.mean(
            [a for r in done if (a := found[r.name].sybil_adoption) is not None]
        )
        drops = [worst for worst, _ in drops_against_clean(done, found)]
        lines.append(
            f"| {scenario} | {method} | {attack} | {policy} | {len(done)} | "
            f"{registered:g} of {identities:g} | {locked:g} | {_pct(adoption)} | "
            f"{_pts(adversarial.mean(drops))} |"
        )
    lines += [
        "",
        "Allowlist: the admin admits one identity per organisation, so a coalition keeps "
        "one; deposit: every identity registers, each locking the deposit until it exits "
        "and the cooldown passes. Drops against the clean run with open registration.",
    ]
    return lines


def inflation_lines(runs: list[Run], found: dict[str, Record]) -> list[str]:
    """The third table: the finished sample-inflation runs by the network's cap (none:
    no line)."""
    groups: dict[tuple[str, str, str, int], list[Run]] = defaultdict(list)
    claims: dict[str, adversarial.SampleClaims] = {}
    for run in runs:
        made = found.get(run.name)
        if is_inflation(run.attack) and run.policy == OPEN and made and made.claims:
            claims[run.name] = made.claims
            groups[run.scenario, run.method, run.attack, claims[run.name].cap].append(run)
    if not groups:
        return []
    lines = [
        "",
        "### Sample cap against inflation",
        "",
        "| scenario | method | attack | cap (`maxSamples`) | seeds | declared by an inflator | "
        "honest (median) | one inflated update weighs (honest ones) | honest worst drop (pts) "
        "| honest avg drop (pts) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for scenario, method, attack, cap in sorted(groups):
        done = groups[scenario, method, attack, cap]
        declared = max(claims[r.name].adversary for r in done)
        honest = statistics.median(claims[r.name].honest for r in done)
        drops = drops_against_clean(done, found)
        lines.append(
            f"| {scenario} | {method} | {attack} | {cap:,} | {len(done)} | {declared:,} | "
            f"{honest:,.0f} | {declared / honest:,.1f} | "
            f"{_pts(adversarial.mean([d[0] for d in drops]))} | "
            f"{_pts(adversarial.mean([d[1] for d in drops]))} |"
        )
    lines += [
        "",
        "Inflators declare the network's cap; an honest trainer its own sample count. Drops "
        "against the clean run under the default cap.",
    ]
    return lines


def tables(
    planned: list[Run], out: Path, records: Path, table: Path
) -> tuple[list[str], dict[tuple[str, str], list[float]]]:
    """The tables (:func:`measure`) over every run planned or recorded, from the records
    (a finished run directory's measured again and its record rewritten).

    Raises
    ------
    ExperimentError
        Without any finished run or record (``table`` is then left as it is).
    """
    recorded = read_records(records)
    everything = table_runs(planned, recorded)
    found = gather(everything, out, records, recorded)
    if not found:
        raise ExperimentError(
            f"no finished run in {out} and no record in {records}: {table} left as it is "
            "(run the benchmark without --report-only to make runs)"
        )
    return measure(everything, found)


def best_defence(drops: dict[tuple[str, str], list[float]]) -> tuple[str, float] | None:
    """The MCFL variant with the smallest mean worst-trainer drop under
    :data:`HEADLINE_ATTACK`, and that drop (None without such a run and its clean run)."""
    candidates = {
        method: adversarial.mean(values)
        for (method, attack), values in drops.items()
        if attack == HEADLINE_ATTACK and method.startswith("mcfl") and values
    }
    if not candidates:
        return None
    best = min(candidates, key=lambda m: candidates[m])
    return best, candidates[best]
