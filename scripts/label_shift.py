"""How much of a classifier run's deployed figures is the label mix (exploratory).

Takes a finished run directory whose blob store was kept (``mcfl-chain simulate`` keeps
it; the campaigns delete it) and, for every trainer, the model it deployed in the last
round, and prints that model's accuracy on the trainer's test split as recorded, then
with its output bias fitted to the trainer's label mix on (at most 512 of) its training
samples, as MCFL-plus's ``--plus-calibrate`` does
(:func:`mcfl_chain.algorithms.calibration.fit_class_bias`). The test split is never fitted
on. Where the second figure is far above the first, the model's features served the
trainer and its label mix did not: what a personalising baseline such as Ditto gains
there, a ten-number correction may gain too.

Usage: python scripts/label_shift.py RUN_DIR
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import click
import torch

from mcfl_chain.algorithms.calibration import CALIBRATION_SAMPLES, fit_class_bias
from mcfl_chain.learning.codec import decode_weights
from mcfl_chain.learning.models import create_model, model_kind
from mcfl_chain.learning.scenario import build_trainer_data
from mcfl_chain.simulation.adversarial import data_specs_of
from mcfl_chain.simulation.report import read_metrics
from mcfl_chain.storage import open_storage


@click.command(help=__doc__)
@click.argument(
    "run_dir", type=click.Path(exists=True, file_okay=False, dir_okay=True, path_type=Path)
)
def main(run_dir: Path) -> None:
    for needed in ("config.json", "metrics.jsonl", "dag.json", "blobs"):
        if not (run_dir / needed).exists():
            raise click.ClickException(
                f"{run_dir} has no {needed}: give a finished run directory whose blobs were "
                "kept (mcfl-chain simulate keeps them)"
            )
    config = json.loads((run_dir / "config.json").read_text())
    net = create_model(config["arch"], seed=0)
    if model_kind(net) != "classifier":
        raise click.ClickException(f"{config['arch']} is not a classifier: no label mix to fit")
    lines = [
        line
        for line in read_metrics([run_dir / "metrics.jsonl"])
        if not line.get("adversary") and line.get("accuracy") is not None
    ]
    last = max(int(line["round"]) for line in lines)
    deployed = {int(x["trainer_index"]): x for x in lines if int(x["round"]) == last}
    cids = {
        m["id"]: m.get("weights_cid")
        for m in json.loads((run_dir / "dag.json").read_text())["models"]
    }
    specs = data_specs_of(config)
    store = open_storage(f"local:{run_dir / 'blobs'}")
    net.eval()
    recorded, fitted = [], []
    click.echo(f"{run_dir.name}, round {last}: accuracy on each trainer's test split, %")
    for index in sorted(deployed):
        data = build_trainer_data(specs[index])
        cid = cids.get(deployed[index]["model"])
        if not cid:
            raise click.ClickException(
                f"model {deployed[index]['model']} has no weights in dag.json"
            )
        net.load_state_dict(decode_weights(store.get(cid), config["arch"]))
        with torch.inference_mode():
            train_logits = net(data.train_x[:CALIBRATION_SAMPLES])
            test_logits = net(data.test_x)
        shift = fit_class_bias(train_logits, data.train_y[:CALIBRATION_SAMPLES])
        recorded.append(100 * float(deployed[index]["accuracy"]))
        fitted.append(100 * float(((test_logits + shift).argmax(1) == data.test_y).float().mean()))
        click.echo(f"trainer {index}: as deployed {recorded[-1]:.1f}, bias fitted {fitted[-1]:.1f}")
    click.echo(
        f"mean over trainers: as deployed {statistics.fmean(recorded):.1f}, "
        f"with the bias fitted to each trainer's label mix {statistics.fmean(fitted):.1f}"
    )


if __name__ == "__main__":
    main()
