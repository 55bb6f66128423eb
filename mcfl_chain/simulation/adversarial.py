"""What an attack did to a finished run: the measures of ``scripts/bench_adversaries.py``.

Every measure reads only a run directory (its ``metrics.jsonl``, ``dag.json``,
``config.json`` and blob store), so a campaign can be measured again without rerunning.

- :func:`honest_final`: the honest trainers' accuracy at the last round (adversaries'
  own figures are left out: the question is what they cost the others);
- :func:`backdoor_success`: for each honest trainer, the share of its triggered test
  images (not of the target class) its deployed model classifies as the target;
- :func:`sybil_adoption`: how often honest trainers trained a model made only of the
  Sybil coalition's updates;
- :func:`sybil_registration`: how many Sybil identities the registration policy let in,
  and the stake they locked;
- :func:`sample_claims`: the sample counts adversaries and honest trainers declared,
  against the network's cap;
- :func:`fallback`: how often honest trainers aggregated their own update alone while
  other updates were proposed on the same parent (a rule that falls back to the own
  update looks robust by not collaborating: issue 37 asks for its share);
- :func:`run_setting`: the engine and device the run's metrics lines name.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcfl_chain.adversaries.backdoor import attack_success_rate
from mcfl_chain.chain.deployment import DEFAULT_MAX_SAMPLES
from mcfl_chain.learning.codec import decode_weights
from mcfl_chain.learning.models import create_model
from mcfl_chain.learning.scenario import TrainerDataSpec, build_trainer_data, scenario_specs
from mcfl_chain.simulation import report
from mcfl_chain.storage import open_storage


@dataclass(frozen=True)
class HonestFinal:
    """The honest trainers' figures at a run's last round (accuracy in [0, 1])."""

    round: int
    accuracies: dict[int, float]
    """Trainer index → accuracy of the latest model deployed for it."""
    stale: dict[int, int] = field(default_factory=dict)
    """Trainer index → round of the model it still held, for the honest trainers that
    deployed no model in the last round (every update they received was rejected, e.g.
    after a network's weights blew up): their figure is that older model's."""

    @property
    def worst(self) -> float:
        return min(self.accuracies.values())

    @property
    def average(self) -> float:
        return statistics.fmean(self.accuracies.values())


def _lines(run_dir: Path) -> list[dict[str, Any]]:
    return report.read_metrics([run_dir / "metrics.jsonl"])


def _latest_honest(lines: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Honest trainer index → its metrics line of the latest round it reported an
    accuracy in."""
    latest: dict[int, dict[str, Any]] = {}
    for line in lines:
        if line.get("adversary") or line.get("accuracy") is None:
            continue
        index = int(line["trainer_index"])
        if index not in latest or line["round"] >= latest[index]["round"]:
            latest[index] = line
    return latest


def honest_final(run_dir: Path) -> HonestFinal:
    """The honest trainers' accuracies at the last round any trainer reported.

    An honest trainer without a model in that round (its aggregation failed) keeps the
    accuracy of the latest model it had, and is listed in :attr:`HonestFinal.stale`:
    leaving it out would hide what the attack cost it.

    Raises
    ------
    ValueError
        No honest trainer reported an accuracy in any round.
    """
    lines = _lines(run_dir)
    if not lines:
        raise ValueError(f"{run_dir}: no metrics")
    last = max(line["round"] for line in lines)
    latest = _latest_honest(lines)
    if not latest:
        raise ValueError(f"{run_dir}: no honest trainer reported an accuracy in any round")
    accuracies = {index: float(line["accuracy"]) for index, line in latest.items()}
    stale = {index: line["round"] for index, line in latest.items() if line["round"] != last}
    return HonestFinal(last, accuracies, stale)


def _config(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "config.json").read_text())


def data_specs_of(config: Mapping[str, Any]) -> list[TrainerDataSpec]:
    """Every trainer's data spec from a run's recorded ``config.json`` (the same data the
    run trained and tested on)."""
    return scenario_specs(
        config["scenario"],
        config["n_trainers"],
        config["seed"],
        dataset=config["dataset"],
        samples_per_trainer=config["samples"],
        **config.get("scenario_params", {}),
    )


def backdoor_success(run_dir: Path, target: int = 0) -> dict[int, float]:
    """Honest trainer index → the backdoor's success on its latest deployed model (see
    :func:`honest_final`): the share of its triggered test images not of class
    ``target`` classified as ``target``. The model's weights are those its first
    aggregator published.

    Raises
    ------
    ValueError
        A deployed model without published weights, or a scenario whose data cannot be
        rebuilt.
    """
    config = _config(run_dir)
    deployed = {index: line["model"] for index, line in _latest_honest(_lines(run_dir)).items()}
    if not all(deployed.values()):
        raise ValueError(f"{run_dir}: a trainer reported an accuracy without its model id")
    models = {m["id"]: m for m in json.loads((run_dir / "dag.json").read_text())["models"]}
    specs = data_specs_of(config)
    store = open_storage(f"local:{run_dir / 'blobs'}")
    rates: dict[int, float] = {}
    for index, model_id in sorted(deployed.items()):
        cid = models[model_id].get("weights_cid")
        if not cid:
            raise ValueError(f"{run_dir}: model {model_id} has no published weights")
        net = create_model(config["arch"], seed=0)
        net.load_state_dict(decode_weights(store.get(cid), config["arch"]))
        data = build_trainer_data(specs[index])
        rates[index] = attack_success_rate(net, data.test_x, data.test_y, target)
    return rates


def sybil_adoption(run_dir: Path) -> float:
    """Share of the honest trainers' (trainer, round) pairs, from round 1 on, in which it
    trained a model every update of which a Sybil proposed.

    Raises
    ------
    ValueError
        The run has no Sybil or no honest trainer past round 0.
    """
    lines = _lines(run_dir)
    sybils = _sybil_ids(lines)
    if not sybils:
        raise ValueError(f"{run_dir}: no Sybil trainer in this run")
    dag = json.loads((run_dir / "dag.json").read_text())
    proposer = {u["id"]: int(u["trainer_id"]) for u in dag["updates"]}
    coalition_models = {
        m["id"]
        for m in dag["models"]
        if m["updates"] and all(proposer.get(u) in sybils for u in m["updates"])
    }
    pairs = [
        bool(coalition_models & set(line.get("trained") or []))
        for line in lines
        if line["round"] >= 1 and not line.get("adversary")
    ]
    if not pairs:
        raise ValueError(f"{run_dir}: no honest trainer reported past round 0")
    return sum(pairs) / len(pairs)


@dataclass(frozen=True)
class SybilRegistration:
    """What a run's registration policy let a Sybil coalition do."""

    policy: str
    identities: int
    """The coalition's identities among the run's trainers."""
    registered: int
    """Those that hold a trainer token (registered)."""
    locked_wei: int
    """The deposits those registered identities locked."""


def _sybil_ids(lines: Sequence[dict[str, Any]]) -> set[int]:
    return {
        int(line["trainer_id"])
        for line in lines
        if str(line.get("adversary") or "").startswith("sybil")
    }


def sybil_registration(run_dir: Path) -> SybilRegistration:
    """The registration record of ``summary.json`` (written by the simulator since
    registration policies exist); for a run made before, an open network in which every
    Sybil that reported registered without a deposit.

    Raises
    ------
    ValueError
        The run has no Sybil.
    """
    summary = json.loads((run_dir / "summary.json").read_text())
    record = summary.get("registration")
    if record is None:
        identities = len(_sybil_ids(_lines(run_dir)))
        if not identities:
            raise ValueError(f"{run_dir}: no Sybil trainer in this run")
        return SybilRegistration("open", identities, identities, 0)
    if not record["sybils"]:
        raise ValueError(f"{run_dir}: no Sybil trainer in this run")
    return SybilRegistration(
        record["policy"],
        len(record["sybils"]),
        len(record["sybils_registered"]),
        int(record["deposit_locked_wei"]),
    )


@dataclass(frozen=True)
class SampleClaims:
    """The sample counts a run's updates declared (their FedAvg weights)."""

    cap: int
    """The network's cap on one update's count (``Updates.maxSamples``)."""
    adversary: int
    """The most an adversary's update declared."""
    honest: float
    """The median an honest trainer's update declared."""

    @property
    def weight_ratio(self) -> float:
        """How many honest updates one adversarial update outweighs in FedAvg."""
        return self.adversary / self.honest


def sample_claims(run_dir: Path) -> SampleClaims:
    """The declared sample counts of a run's updates, from ``dag.json`` (what the chain
    recorded), told apart by the metrics' ``adversary``; the cap from the run's copy of
    the deployment file (the default cap when it has none).

    Raises
    ------
    ValueError
        No update of an adversary, or none of an honest trainer.
    """
    lines = _lines(run_dir)
    adversaries = {int(line["trainer_id"]) for line in lines if line.get("adversary")}
    honest_ids = {int(line["trainer_id"]) for line in lines} - adversaries
    updates = json.loads((run_dir / "dag.json").read_text())["updates"]
    declared = {
        kind: [int(u["num_samples"]) for u in updates if int(u["trainer_id"]) in ids]
        for kind, ids in (("adversary", adversaries), ("honest", honest_ids))
    }
    for kind, counts in declared.items():
        if not counts:
            raise ValueError(f"{run_dir}: no update of an {kind} trainer")
    deployment = run_dir / "deployment.json"
    cap = DEFAULT_MAX_SAMPLES
    if deployment.exists():
        cap = int(json.loads(deployment.read_text()).get("max_samples", DEFAULT_MAX_SAMPLES))
    return SampleClaims(cap, max(declared["adversary"]), statistics.median(declared["honest"]))


def _clean_of(clean: HonestFinal, attacked: HonestFinal) -> dict[int, float]:
    """The clean run's accuracy of each honest trainer of the attacked run.

    Raises
    ------
    ValueError
        The clean run lacks one of them.
    """
    missing = sorted(set(attacked.accuracies) - set(clean.accuracies))
    if missing:
        raise ValueError(f"the clean run has no accuracy for honest trainer(s) {missing}")
    return {i: clean.accuracies[i] for i in attacked.accuracies}


def drop_points(clean: HonestFinal, attacked: HonestFinal) -> tuple[float, float]:
    """(worst, average) accuracy lost to the attack, in percentage points (positive:
    the attack hurt), over the attacked run's honest trainers in both runs.

    The clean run's adversary seats are left out: its worst trainer may be one of them,
    and comparing different sets of trainers would credit or charge the attack with
    that trainer's figure.

    Raises
    ------
    ValueError
        The clean run lacks a figure for one of the attacked run's honest trainers.
    """
    paired = HonestFinal(clean.round, _clean_of(clean, attacked))
    return (
        100.0 * (paired.worst - attacked.worst),
        100.0 * (paired.average - attacked.average),
    )


def largest_loss_points(clean: HonestFinal, attacked: HonestFinal) -> float:
    """The most accuracy any one honest trainer lost to the attack, in percentage points
    (its clean figure minus its attacked one; negative if every trainer gained).

    The worst-trainer drop (:func:`drop_points`) compares the two runs' worst trainers,
    who may be different people: when the attackers sit in one data group and the
    worst trainer is in another, an attack that costs the attacked group's honest
    trainers a lot can leave the worst figure unchanged. This measure follows each
    trainer.

    Raises
    ------
    ValueError
        The clean run lacks a figure for one of the attacked run's honest trainers.
    """
    before = _clean_of(clean, attacked)
    return 100.0 * max(before[i] - a for i, a in attacked.accuracies.items())


@dataclass(frozen=True)
class Fallback:
    """How often a run's honest trainers kept only their own update."""

    aggregations: int
    """The honest trainers' aggregations on a parent other than the root (metrics
    ``aggregations``)."""
    own_only: int
    """Those that kept a single update (``selected == 1``: the trainer's own, which
    Algorithm 2 always keeps) while two or more were proposed on that parent
    (``proposals >= 2``): the trainer could have collaborated and did not."""

    @property
    def share(self) -> float:
        """``own_only / aggregations`` (NaN without any aggregation)."""
        return self.own_only / self.aggregations if self.aggregations else float("nan")


def fallback_count(lines: Sequence[dict[str, Any]]) -> Fallback:
    """:class:`Fallback` over the honest trainers' metrics lines (adversaries' lines
    are left out: whom they aggregate with is their choice, not the rule's).

    An aggregation alone on a parent nobody else trained (``proposals < 2``) counts in
    the denominator but is no fallback: nobody was there to collaborate with. An
    aggregation on the root (round 0) counts in neither: there every update started from
    its own trainer's weights, and MCFL's ``start = "own"`` keeps each alone by design,
    under attack or not.
    """
    aggregations = own_only = 0
    for line in lines:
        if line.get("adversary"):
            continue
        for aggregation in line.get("aggregations") or []:
            if _is_root(aggregation.get("parent")):
                continue
            aggregations += 1
            if int(aggregation["selected"]) == 1 and int(aggregation["proposals"]) >= 2:
                own_only += 1
    return Fallback(aggregations, own_only)


def _is_root(model_id: object) -> bool:
    """Whether ``model_id`` (``0x…`` text) is the DAG's root, the all-zero id."""
    try:
        return int(str(model_id), 16) == 0
    except ValueError:
        return False


def fallback(run_dir: Path) -> Fallback:
    """:func:`fallback_count` over a run directory's ``metrics.jsonl``."""
    return fallback_count(_lines(run_dir))


def run_setting(run_dir: Path) -> tuple[str | None, str | None]:
    """The engine and the device the run's metrics lines name (several, ``+``-joined,
    sorted; None where no line names one, as in runs made before lines did)."""
    lines = _lines(run_dir)

    def named(key: str) -> str | None:
        values = sorted({str(line[key]) for line in lines if line.get(key)})
        return "+".join(values) or None

    return named("engine"), named("device")


def cpu_capability(run_dir: Path) -> str | None:
    """The CPU kernels' instruction set the run computed with (its summary's
    ``platform``, :func:`mcfl_chain.compute.device.platform_record`); None in runs made
    before it was recorded. Runs repeat bit for bit only where it is the same."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    platform = summary.get("platform") if isinstance(summary, dict) else None
    return platform.get("cpu_capability") if isinstance(platform, dict) else None


def cpu_kinds(capabilities: Iterable[str | None]) -> str:
    """The CPU kernels a set of runs computed with (:func:`cpu_capability` of each), as
    a comparison names them: e.g. "AVX2" or "AVX2, unrecorded"; "none" without runs."""
    return ", ".join(sorted({c or "unrecorded" for c in capabilities})) or "none"


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")
