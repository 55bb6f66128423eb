"""The MCFL authors' metric, recomputed on a finished run as a diagnostic (issue 36, item 4).

Our figure for a trainer after round r is its *deployed* model (the aggregation it made
in round r with the best validation score) on its own held-out test split. The authors'
notebooks report something else (docs: ``../shared/notes/mcfl-fidelity-audit.md``, §0.3):
for each trainer and round, the **best** test figure over every candidate model the
trainer tested during selection (``groupby(["round_id", "trainer_id"])["test_acc"].max()``;
for autoencoders the lowest loss), each test drawn again **with replacement** from the
trainer's share of the test set at every evaluation (``WeightedRandomSampler``). FedAvg
has one model a round, so the maximum only helps MCFL, and a maximum over noisy
estimates is biased upwards even between equal models.

Here the candidates a trainer tests after round r are the models appended in round r
(Algorithm 1's candidates of round r + 1: every trainer scores all of them). The best of
them is taken twice: on the trainer's test split as it is (``fixed``: what the maximum
alone adds), and with each candidate scored on its own draw with replacement of the same
size (``redrawn``: the authors' figure). One draw is as noisy as one of the authors' runs;
the redrawn figure is the mean over :data:`DRAWS` repetitions, the metric's expected
value, so that what it shows is the metric's bias and not one draw's luck. The draws
come from generators seeded by the run's seed, the trainer, the round, the candidate and
the repetition, so the diagnostic repeats exactly.

It reads only a run directory (``config.json``, ``metrics.jsonl``, ``dag.json`` and the
blob store), so it measures runs made for anything else; runs whose blobs were deleted
cannot be measured. Personalised methods (Ditto, FedAvg-FT) deploy a model that is not on
chain; their authors' figure is over the chain's models only.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mcfl_chain.learning.codec import decode_weights
from mcfl_chain.learning.models import ModelKind, create_model, model_kind
from mcfl_chain.learning.scenario import build_trainer_data
from mcfl_chain.simulation.adversarial import data_specs_of
from mcfl_chain.simulation.report import metric_of, read_metrics
from mcfl_chain.storage import open_storage


def best_candidate(figures: Iterable[float], kind: ModelKind) -> float:
    """The authors' per-(trainer, round) figure: the best of the candidates' figures
    (highest accuracy; lowest MSE for an autoencoder).

    Raises
    ------
    ValueError
        Without any figure.
    """
    values = list(figures)
    if not values:
        raise ValueError("no candidate was scored: the best of nothing is undefined")
    return max(values) if kind == "classifier" else min(values)


def redraw(size: int, seed: Sequence[int]) -> np.ndarray:
    """Indices of a draw with replacement of ``size`` samples out of ``size``, seeded by
    ``seed`` (a sequence of non-negative ints: the same seed, the same draw)."""
    if size <= 0:
        raise ValueError(f"cannot redraw an empty split (size {size})")
    return np.random.default_rng(list(seed)).integers(0, size, size=size)


@dataclass(frozen=True)
class TrainerRound:
    """One trainer's figures after one round (accuracy in [0, 1], or MSE)."""

    ours: float
    """The deployed model on the held-out test split (the report's figure)."""
    fixed: float
    """The best candidate on the same test split."""
    redrawn: float
    """The best candidate, each scored on its own draw with replacement (the authors'),
    averaged over repetitions of the draws."""
    candidates: int


@dataclass(frozen=True)
class RunFigures:
    """A run's figures per round and trainer index, and what it is."""

    scenario: str
    strategy: str
    seed: int
    kind: ModelKind
    rounds: dict[int, dict[int, TrainerRound]]

    def mean(self, round_: int, which: str) -> float:
        """The mean over trainers of ``which`` (ours, fixed or redrawn) after ``round_``."""
        return statistics.fmean(getattr(f, which) for f in self.rounds[round_].values())

    @property
    def last(self) -> int:
        return max(self.rounds)


def _deployed_figures(run_dir: Path) -> dict[int, dict[int, float]]:
    """Round → honest trainer index → the deployed model's test figure (accuracy, or
    MSE), from metrics.jsonl."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{run_dir}: no metrics.jsonl: is it a finished run directory?")
    figures: dict[int, dict[int, float]] = defaultdict(dict)
    for line in read_metrics([path]):
        if line.get("adversary"):
            continue  # the question is what honest trainers are told
        if (value := metric_of(line)) is not None:
            figures[int(line["round"])][int(line["trainer_index"])] = float(value)
    return figures


DRAWS = 50
"""Repetitions of the authors' draw averaged into one figure (see :func:`authors_figure`)."""


def run_figures(
    run_dir: Path, rounds: Iterable[int] | None = None, draws: int = DRAWS
) -> RunFigures:
    """Our figure and the authors' for every honest trainer and round of a finished run
    (``rounds``: only these; None: every round with a metrics line).

    Raises
    ------
    FileNotFoundError
        A run directory without its config, metrics, DAG or blobs.
    ValueError
        A candidate whose weights were never published.
    """
    if not (run_dir / "config.json").exists():
        raise FileNotFoundError(f"{run_dir}: no config.json: give a finished run directory")
    config = json.loads((run_dir / "config.json").read_text())
    if not (run_dir / "blobs").is_dir():
        raise FileNotFoundError(
            f"{run_dir}: no blob store (blobs/): the candidates' weights are needed; "
            "rerun it, or measure a run whose blobs were kept"
        )
    arch = config["arch"]
    kind = model_kind(create_model(arch, seed=0))
    ours = _deployed_figures(run_dir)
    wanted = sorted(ours) if rounds is None else sorted(set(rounds) & set(ours))
    models: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for model in json.loads((run_dir / "dag.json").read_text())["models"]:
        if model.get("round") is not None:  # the root has no round
            models[int(model["round"])].append(model)
    specs = data_specs_of(config)
    trainers = sorted({index for figures in ours.values() for index in figures})
    data = {index: build_trainer_data(specs[index]) for index in trainers}
    tests = {index: (d.test_x, d.test_y) for index, d in data.items()}
    store = open_storage(f"local:{run_dir / 'blobs'}")
    net = create_model(arch, seed=0)
    result: dict[int, dict[int, TrainerRound]] = {}
    for round_ in wanted:
        candidates = sorted(models.get(round_, []), key=lambda m: m["id"])
        if not candidates:
            continue
        # Per trainer, each candidate's figure per test sample (one forward pass each):
        # a draw's figure is then the mean over the drawn samples.
        samples: dict[int, list[np.ndarray]] = defaultdict(list)
        for model in candidates:
            cid = model.get("weights_cid")
            if not cid:
                raise ValueError(f"{run_dir}: model {model['id']} has no published weights")
            net.load_state_dict(decode_weights(store.get(cid), arch))
            for index in ours[round_]:
                samples[index].append(per_sample(net, *tests[index], kind))
        result[round_] = {
            index: TrainerRound(
                ours=figure,
                fixed=best_candidate((float(s.mean()) for s in samples[index]), kind),
                redrawn=authors_figure(
                    samples[index], kind, (int(config["seed"]), index, round_), draws
                ),
                candidates=len(candidates),
            )
            for index, figure in ours[round_].items()
        }
    return RunFigures(config["scenario"], config["strategy"], int(config["seed"]), kind, result)


def per_sample(
    net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, kind: ModelKind
) -> np.ndarray:
    """The model's figure on each sample: 1.0 where a classifier is right, else 0.0; an
    autoencoder's squared error averaged over the sample's pixels. Their mean is
    :func:`~mcfl_chain.learning.training.evaluate`'s accuracy, or its MSE."""
    was_training = net.training
    net.eval()
    try:
        with torch.inference_mode():
            out = net(x)
    finally:
        net.train(was_training)
    if kind == "classifier":
        return (out.argmax(dim=1) == y).double().numpy()
    return ((out - x) ** 2).flatten(1).mean(dim=1).double().numpy()


def authors_figure(
    candidates: Sequence[np.ndarray], kind: ModelKind, seed: Sequence[int], draws: int
) -> float:
    """The authors' figure for one trainer and round, as an expectation: over ``draws``
    repetitions, the best of the candidates each scored on its own draw with replacement
    of the test split (``candidates``: each one's per-sample figures), averaged. One
    repetition is what one of the authors' runs reports; the mean over many is the bias
    the metric adds, without the noise of one draw."""
    if draws < 1:
        raise ValueError(f"draws must be at least 1, not {draws}")
    best = [
        best_candidate(
            (float(c[redraw(len(c), (*seed, k, d))].mean()) for k, c in enumerate(candidates)),
            kind,
        )
        for d in range(draws)
    ]
    return statistics.fmean(best)


@dataclass(frozen=True)
class Gap:
    """One scenario's MCFL − baseline at a round, under each metric, paired by seed."""

    scenario: str
    baseline: str
    round: int
    seeds: list[int]
    ours: list[float]
    redrawn: list[float]
    """MCFL's authors' figure minus the baseline's (each under the authors' metric)."""
    fixed: list[float]


def gaps(
    runs: Sequence[RunFigures], mcfl: str = "mcfl", baseline: str = "fedavg", round_: int = -1
) -> list[Gap]:
    """MCFL − ``baseline`` per scenario, paired by seed, at ``round_`` (-1: each pair's
    last common round), under our metric and the authors' (accuracy in points, MSE as
    is)."""
    by_key = {(r.scenario, r.strategy, r.seed): r for r in runs}
    found: dict[str, Gap] = {}
    for (scenario, strategy, seed), run in sorted(by_key.items()):
        other = by_key.get((scenario, baseline, seed))
        if strategy != mcfl or other is None:
            continue
        common = set(run.rounds) & set(other.rounds)
        at = max(common) if round_ == -1 and common else round_
        if at not in common:
            continue
        scale = 100.0 if run.kind == "classifier" else 1.0
        gap = found.setdefault(scenario, Gap(scenario, baseline, at, [], [], [], []))
        gap.seeds.append(seed)
        for which in ("ours", "redrawn", "fixed"):
            getattr(gap, which).append(scale * (run.mean(at, which) - other.mean(at, which)))
    return list(found.values())


def summary(gap: Gap) -> Mapping[str, float]:
    """Means over the seeds of a :class:`Gap`."""
    return {w: statistics.fmean(getattr(gap, w)) for w in ("ours", "redrawn", "fixed")}
