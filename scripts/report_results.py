"""Write docs/RESULTS.md from the experiment run directories.

Reads ``runs/experiments/<run>/`` (made by ``scripts/run_experiments.py``), the scaling
measurements ``runs/scaling/scaling.json`` (``scripts/bench_scaling.py``) and the gas
snapshot, draws the comparison plots into ``docs/results/`` and writes the report with
the paper's published figures beside ours. The discussion of each scenario is written
by hand in ``docs/discussion/<scenario>.md`` and included as is.

Usage: python scripts/report_results.py [--runs runs/experiments] [--out docs]
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import click
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mcfl_chain.simulation.report import fair_accuracy, metric_of  # noqa: E402
from mcfl_chain.worker.timing import CATEGORIES  # noqa: E402

GAS_SNAPSHOT = Path("tests/contracts/gas-snapshot.json")
# The thesis contracts doing the same work, one transaction per call, 21,000 base each
# (scripts/bench_gas.py): (a) propose + aggregate + nextRound; (b) two of each + nextRound.
THESIS_PER_TRAINER_ROUND = {"consensus": 340_465, "forking": 633_748}

SCENARIOS: list[dict[str, Any]] = [
    {
        "name": "iid",
        "title": "IID data (paper §5.2, Table 2)",
        "runs": ["iid"],
        "target": 0.80,
        "paper": "MNIST, 38 trainers, 102 rounds. Accuracy min / avg / max: FedAvg 96.2 / "
        "98.2 / 99.5 %, MCFL 98.1 / 99.2 / 99.8 %. MCFL's average is 20 % higher in "
        "round 1, 2-3 % by round 5.",
    },
    {
        "name": "groups",
        "title": "Three groups with disjoint classes (paper §5.3, Figure 4)",
        "runs": ["groups"],
        "target": 0.80,
        "paper": "38 trainers in 3 class groups, 100 rounds. FedAvg's worst trainer is still "
        "at 82 % after 100 rounds; MCFL's trainers group correctly and reach a higher "
        "accuracy on their local data than in the IID case.",
    },
    {
        "name": "gaussian",
        "title": "Gaussian class distribution per trainer, tolerance 1, 2, 3 "
        "and mixed (paper §5.3, Figures 5-6)",
        "runs": ["gaussian-tol1", "gaussian-tol2", "gaussian-tol3", "gaussian-tolmixed"],
        "target": 0.80,
        "paper": "Tolerance 3 converges to a single model; lower tolerances fork more; the "
        "mixed tolerances show the least volatility in accuracy and model count. "
        "Spikes come from the popularity bonus merging groups.",
    },
    {
        "name": "two-datasets",
        "title": "Two datasets, LeNet-light (thesis §5.3.3)",
        "runs": ["two-datasets"],
        "target": 0.70,
        "paper": "Half MNIST, half Fashion-MNIST trainers with LeNet-light: the network forms "
        "specialised branches per dataset. Local baselines: LeNet-light 96 % on "
        "MNIST, 77 % on Fashion-MNIST.",
    },
    {
        "name": "autoencoders",
        "title": "Autoencoders on two datasets (paper §5.3)",
        "runs": ["autoencoders", "autoencoders-tol1"],
        "target": None,
        "paper": "LeNet CAE, tolerance 3, one group on MNIST and one on Fashion-MNIST: the "
        "specialised models beat the global model by 24.5 % (MNIST) and 17.5 % "
        "(FMNIST) in MSE. Local baselines: MSE 0.006 (MNIST), 0.015 (FMNIST).",
    },
]


def load_run(run_dir: Path) -> dict[str, Any] | None:
    if not (run_dir / "summary.json").exists():
        return None
    summary = json.loads((run_dir / "summary.json").read_text())
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {"summary": summary, "lines": lines, "dir": run_dir}


def per_round(run: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {r["round"]: r for r in run["summary"]["rounds"]}


def fmt(value: float | None, metric: str) -> str:
    if value is None:
        return "–"
    return f"{100 * value:.1f}" if metric == "accuracy" else f"{value:.4f}"


def group_means(run: dict[str, Any], round_: int) -> dict[str, float]:
    groups: dict[str, list[float]] = defaultdict(list)
    for line in run["lines"]:
        value = metric_of(line)
        if line["round"] == round_ and value is not None:
            groups[str(line.get("group", ""))].append(value)
    return {g: statistics.fmean(v) for g, v in sorted(groups.items())}


def rounds_to(run: dict[str, Any], target: float | None) -> str:
    if target is None:
        return "–"
    for round_, r in sorted(per_round(run).items()):
        if r["metric_avg"] is not None and r["metric_avg"] >= target:
            return str(round_)
    return f"not within {len(per_round(run))}"


def checkpoints(last: int) -> list[int]:
    marks = sorted({0, 4, 9, 14, 19, 24, 29, last} & set(range(last + 1)))
    return marks


def plot_pair(name: str, runs: dict[str, dict[str, Any]], metric: str, out: Path) -> Path:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for label, run in runs.items():
        rounds = per_round(run)
        xs = sorted(rounds)
        line = ax1.plot(xs, [rounds[x]["metric_avg"] for x in xs], label=f"{label} avg")[0]
        ax1.plot(
            xs,
            [rounds[x]["metric_min"] for x in xs],
            "--",
            color=line.get_color(),
            label=f"{label} min" if metric == "accuracy" else f"{label} best",
        )
        ax2.step(xs, [rounds[x]["models"] for x in xs], where="mid", label=label)
    ax1.set_xlabel("round")
    ax1.set_ylabel(metric)
    ax1.set_title(f"{metric} on each trainer's test split")
    ax1.legend(fontsize=7)
    ax2.set_xlabel("round")
    ax2.set_ylabel("models appended")
    ax2.set_title("models (clusters) per round")
    ax2.set_ylim(bottom=0)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    path = out / f"{name}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def scenario_section(spec: dict[str, Any], runs_dir: Path, docs: Path) -> tuple[str, list[str]]:
    """The markdown section of one scenario, and its summary-table rows."""
    mcfl = {name: load_run(runs_dir / name) for name in spec["runs"]}
    baseline_name = spec["runs"][0].split("-tol")[0] + "-fedavg"
    baseline = load_run(runs_dir / baseline_name)
    missing = [n for n, r in mcfl.items() if r is None] + ([] if baseline else [baseline_name])
    mcfl = {n: r for n, r in mcfl.items() if r is not None}
    out = [f"## {spec['title']}", ""]
    if missing:
        out += [
            f"Not run yet: {', '.join(missing)} (`python scripts/run_experiments.py "
            + " ".join(f"--only {n}" for n in missing if not n.endswith("-fedavg"))
            + "`).",
            "",
        ]
    if not mcfl or baseline is None:
        return "\n".join(out), []
    config = next(iter(mcfl.values()))["summary"]["config"]  # type: ignore[index]
    metric = next(iter(mcfl.values()))["summary"]["metric"]  # type: ignore[index]
    unit = "%" if metric == "accuracy" else "MSE"
    out += [
        f"Setup: {config['dataset']}"
        + (
            f" + {config['scenario_params'].get('other_dataset')}"
            if config["scenario"] == "two-datasets"
            else ""
        )
        + f", scenario `{config['scenario']}` {config['scenario_params'] or ''}, "
        f"{config['n_trainers']} trainers, {config['samples']} samples each "
        f"(70/15/15 train/validation/test), {config['rounds']} rounds, "
        f"{config['epochs']} epochs, `{config['arch']}`, seed {config['seed']}"
        + (f", MCFL tolerance {config['tolerance']}" if len(mcfl) == 1 else "")
        + ". "
        + f"Metric: {metric} of each trainer's aggregated model on its own test split "
        f"({unit}).",
        "",
        "Reproduce: "
        + ", ".join(
            f"`mcfl-chain simulate --config scenarios/paper/{n}.toml`" for n in spec["runs"]
        )
        + "; baseline: add `--strategy fedavg`.",
        "",
        f"**Paper:** {spec['paper']}",
        "",
    ]
    every = {
        **{
            f"MCFL {r['summary']['config']['tolerance']}" if len(mcfl) > 1 else "MCFL": r
            for r in mcfl.values()
            if r
        },
        "FedAvg": baseline,
    }
    last = max(per_round(baseline))
    marks = checkpoints(last)
    header = (
        "| run | "
        + " | ".join(f"round {m}" for m in marks)
        + " | rounds to avg ≥ target | models at end | mean round time |"
    )
    out += [
        f"{metric} min / avg / max ("
        + ("%" if metric == "accuracy" else "MSE")
        + ") at fixed rounds"
        + (f"; target avg {fmt(spec['target'], metric)}" if spec["target"] else "")
        + ":",
        "",
        header,
        "|" + "---|" * (len(marks) + 4),
    ]
    rows = []
    for label, run in every.items():
        rounds = per_round(run)
        cells = [
            " / ".join(
                fmt(rounds[m][k], metric) for k in ("metric_min", "metric_avg", "metric_max")
            )
            if m in rounds
            else "–"
            for m in marks
        ]
        seconds = statistics.fmean(r["seconds"] for r in rounds.values())
        out.append(
            f"| {label} | "
            + " | ".join(cells)
            + f" | {rounds_to(run, spec['target'])} | {rounds[max(rounds)]['models']} | "
            f"{seconds:.1f} s |"
        )
        final = rounds[max(rounds)]
        worst, best = (
            ("metric_min", "metric_max") if metric == "accuracy" else ("metric_max", "metric_min")
        )
        rows.append(
            f"| {spec['name']} | {label} | {fmt(final[worst], metric)} | "
            f"{fmt(final['metric_avg'], metric)} | {fmt(final[best], metric)} "
            f"| {final['models']} |"
        )
    out.append("")
    groups = {label: group_means(run, max(per_round(run))) for label, run in every.items()}
    if len(next(iter(groups.values()))) > 1:
        names = list(next(iter(groups.values())))
        out += [
            f"Final {metric} by data group (mean over the group's trainers)"
            + (
                "; FACADE fair accuracy (α = 2/3) in the last column"
                if metric == "accuracy"
                else ""
            )
            + ":",
            "",
            "| run | "
            + " | ".join(names)
            + (" | fair accuracy |" if metric == "accuracy" else " |"),
            "|" + "---|" * (len(names) + 1 + (metric == "accuracy")),
        ]
        for label, means in groups.items():
            fair = (
                fair_accuracy({g: [v] for g, v in means.items()}) if metric == "accuracy" else None
            )
            out.append(
                f"| {label} | "
                + " | ".join(fmt(means.get(g), metric) for g in names)
                + (f" | {fmt(fair, metric)} |" if metric == "accuracy" else " |")
            )
        if metric != "accuracy":
            fa = groups["FedAvg"]
            out.append("")
            for label, mc in groups.items():
                if label != "FedAvg":
                    out.append(
                        f"- {label}: MSE improvement over the global (FedAvg) model: "
                        + ", ".join(f"{g} {100 * (fa[g] - mc[g]) / fa[g]:.1f} %" for g in names)
                        + "."
                    )
        out.append("")
    for label, run in every.items():
        grouping = run["summary"]["grouping"]
        if label != "FedAvg" and grouping:
            out += [
                f"- {label}: final models ← data groups of the trainers holding them: "
                + "; ".join(f"`{m[:10]}` ← {', '.join(map(str, g))}" for m, g in grouping.items())
                + "."
            ]
    out.append("")
    plot = plot_pair(spec["name"], every, metric, docs / "results")
    out += [f"![{spec['name']}](results/{plot.name})", ""]
    discussion = docs / "discussion" / f"{spec['name']}.md"
    out += [
        discussion.read_text().strip() if discussion.exists() else "_Discussion not written yet._",
        "",
    ]
    return "\n".join(out), rows


def performance_section(runs_dir: Path) -> str:
    out = ["## Performance", ""]
    split_rows = []
    for run_dir in sorted(runs_dir.iterdir()):
        run = load_run(run_dir)
        if run is None:
            continue
        steady = [r for r in run["summary"]["rounds"] if r["round"] > 0]
        total = statistics.fmean(r["seconds"] for r in steady)
        parts = {c: statistics.fmean(r["split"][c] for r in steady) for c in CATEGORIES}
        split_rows.append(
            f"| {run_dir.name} | {run['summary']['config']['n_trainers']} | "
            f"{total:.1f} s | "
            + " | ".join(f"{100 * parts[c] / total:.0f} %" for c in CATEGORIES)
            + " |"
        )
    out += [
        "Round-time split per trainer (mean over rounds ≥ 1, share of the slowest "
        "trainer's round time; all trainers share this machine's 2 cores, so training "
        "time includes waiting for a core):",
        "",
        "| run | trainers | round | " + " | ".join(CATEGORIES) + " |",
        "|" + "---|" * (3 + len(CATEGORIES)),
        *split_rows,
        "",
    ]
    if GAS_SNAPSHOT.exists():
        gas = json.loads(GAS_SNAPSHOT.read_text())["per_trainer_round"]
        out += [
            "Gas per trainer per round, 21,000 base of each transaction included "
            "(`scripts/bench_gas.py`, protocol v2: two transactions a round): "
            + "; ".join(
                f"{kind} round {gas[kind]['total']:,} vs the thesis contracts "
                f"{thesis:,} (ratio {gas[kind]['total'] / thesis:.3f})"
                for kind, thesis in THESIS_PER_TRAINER_ROUND.items()
            )
            + ".",
            "",
        ]
    scaling = runs_dir.parent / "scaling" / "scaling.json"
    if scaling.exists():
        data = json.loads(scaling.read_text())
        out += [
            f"Growth with the number of trainers (`scripts/bench_scaling.py`: Fashion-MNIST "
            f"IID, {data['samples']} samples per trainer, {data['rounds']} rounds, rounds ≥ 1 "
            f"averaged; gas when every trainer aggregates all N updates; aggregation = "
            f"flatten + Algorithm 2 + FedAvg of N LeNet updates):",
            "",
            "| trainers | round time | training | evaluation | chain | storage | waiting "
            "| gas / trainer / round | aggregation |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for n, r in data["sizes"].items():
            s = r["split"]
            out.append(
                f"| {n} | {s['round']:.1f} s | "
                + " | ".join(
                    f"{100 * s[c] / s['round']:.0f} %"
                    for c in ("training", "evaluation", "chain", "storage", "waiting")
                )
                + f" | {r['gas_per_trainer_round']['total']:,} | "
                f"{r['aggregation_ms']['flatten_select_fedavg']:.1f} ms |"
            )
        out.append("")
    else:
        out += ["_Scaling not measured yet: `python scripts/bench_scaling.py`._", ""]
    discussion = Path("docs/discussion/performance.md")
    if discussion.exists():
        out += [discussion.read_text().strip(), ""]
    return "\n".join(out)


def keep_records(runs_dir: Path, target: Path) -> None:
    """Copy each finished run's small records (config, per-round table, summary) next to
    the report, so its figures can be checked without the run directories."""
    for run_dir in sorted(runs_dir.iterdir()):
        if (run_dir / "summary.json").exists():
            (target / run_dir.name).mkdir(parents=True, exist_ok=True)
            for name in ("config.json", "rounds.csv", "summary.json"):
                shutil.copyfile(run_dir / name, target / run_dir.name / name)


@click.command()
@click.option(
    "--runs",
    "runs_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/experiments"),
    show_default=True,
)
@click.option(
    "--out",
    "docs",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("docs"),
    show_default=True,
)
def main(runs_dir: Path, docs: Path) -> None:
    """Generate docs/RESULTS.md and docs/results/*.png from the run directories."""
    (docs / "results").mkdir(parents=True, exist_ok=True)
    keep_records(runs_dir, docs / "results" / "runs")
    sections, rows = [], []
    for spec in SCENARIOS:
        text, summary_rows = scenario_section(spec, runs_dir, docs)
        sections.append(text)
        rows += summary_rows
    intro = docs / "discussion" / "intro.md"
    report = [
        "# MCFL on chain: the paper's experiments, reproduced",
        "",
        intro.read_text().strip() if intro.exists() else "",
        "",
        "## Summary (final round)",
        "",
        "| scenario | run | worst | average | best | models at end |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "Accuracy in %, or MSE for the autoencoders (worst = highest MSE).",
        "",
        *sections,
        performance_section(runs_dir),
    ]
    (docs / "RESULTS.md").write_text("\n".join(report).rstrip() + "\n")
    print(f"written {docs / 'RESULTS.md'}")


if __name__ == "__main__":
    main()
