"""The model DAG for people: one JSON document, a text tree by round, Graphviz DOT.

:func:`dag_document` is the single description every view draws from (``mcfl-chain
dag --format json`` prints it, the explorer serves it). Update ids are decimal strings
and model ids 0x-hex, as in :meth:`ModelDAG.to_json`, because browsers read JSON
numbers as 53-bit floats.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from rich.text import Text
from rich.tree import Tree

from mcfl_chain.dag.graph import ROOT_ID, ModelDAG
from mcfl_chain.dag.trainers import TrainerInfo

PHASE_NAMES = ("PROPOSE", "AGGREGATE")

# What a model is in the picture of the network (the explorer colours by it).
ROOT, FRONTIER, INNER, DEAD = "root", "frontier", "inner", "dead"


def _hex(value: bytes) -> str:
    return "0x" + value.hex()


def model_states(dag: ModelDAG, current_round: int | None) -> dict[bytes, str]:
    """Each model's place: root, frontier (a candidate of ``current_round``), inner (has
    children) or dead (no child although later rounds appended models).

    ``current_round`` None (rounds not started, or unknown) takes the round after the
    last one that appended models, so the newest models are the frontier.
    """
    rounds = [m.round for m in dag.models.values() if m.round is not None]
    if current_round is None:
        current_round = max(rounds) + 1 if rounds else 0
    frontier = {m.model_id for m in dag.candidates(current_round)}
    parents = {p for m in dag.models.values() for p in m.parents}
    states = {}
    for model_id in dag.models:
        if model_id == ROOT_ID:
            states[model_id] = ROOT
        elif model_id in frontier:
            states[model_id] = FRONTIER
        elif model_id in parents:
            states[model_id] = INNER
        else:
            states[model_id] = DEAD
    return states


def holders(dag: ModelDAG, trainers: Mapping[int, TrainerInfo]) -> dict[int, dict[str, Any]]:
    """Trainer id → ``{"holder", "exited"}`` for every trainer the DAG or the map names.

    ``holder`` is the address holding the token now, or the last one that held it when
    the trainer exited; without a transfer read for that id (a block range starting
    later, a worker's log), the address of its latest proposal, else None.
    """
    out: dict[int, dict[str, Any]] = {}
    for update in sorted(dag.updates.values(), key=lambda u: (u.block, u.round)):
        out[update.trainer_id] = {"holder": update.proposer, "exited": False}
    ids = {t for m in dag.models.values() for t in m.aggregator_ids}
    ids |= {int(v["trainer_id"]) for v in dag.votes}
    for tid in ids - out.keys():
        out[tid] = {"holder": None, "exited": False}
    for tid, info in trainers.items():
        out[tid] = {"holder": info.last_holder, "exited": info.exited}
    return dict(sorted(out.items()))


def dag_document(
    dag: ModelDAG,
    *,
    network: dict[str, Any],
    status: dict[str, Any],
    trainers: Mapping[int, TrainerInfo],
) -> dict[str, Any]:
    """Everything known about the network as one plain-JSON document.

    Parameters
    ----------
    dag
        The DAG rebuilt from events.
    network
        Static facts (chain id, contract addresses, task, the block range read...).
    status
        The round state views: ``started``, ``round``, ``phase`` (name), ``votes``,
        ``quorum``, ``voters``, ``trainers``, ``block``, ``deadline``.
    trainers
        Trainer id → :class:`~mcfl_chain.dag.trainers.TrainerInfo` (the ``Trainers``
        token transfers).

    Returns
    -------
    dict
        ``network``, ``status``; ``models`` (:meth:`ModelDAG.to_json`'s entries plus
        ``children``, ``state``, ``fork``, ``merge`` and ``aggregations``: one
        ``{"trainer_id", "holder", "exited", "tx"}`` per accepted aggregation, the
        creation first); ``updates`` (with ``trainer_id`` and ``proposer``, the address
        that sent it); ``trainers`` (one row per trainer id: ``holder`` (None once
        exited), ``address`` (the holder, or the last one), ``holders``, ``exited``,
        blocks, counts of updates and aggregations, its vote in the current phase);
        ``rounds`` (models and updates per round) and ``phases``.
    """
    base = dag.to_json()
    current = status.get("round") if status.get("started") else None
    states = model_states(dag, current)
    who = holders(dag, trainers)
    children: dict[bytes, list[str]] = defaultdict(list)
    for model in dag.models.values():
        for parent in model.parents:
            children[parent].append(_hex(model.model_id))
    models = []
    for entry, model in zip(base["models"], dag.models.values(), strict=True):
        kids = children.get(model.model_id, [])
        models.append(
            {
                **entry,
                "state": states[model.model_id],
                "children": kids,
                "fork": len(kids) > 1,
                "merge": model.is_merge,
                "aggregations": [
                    {"trainer_id": tid, **who.get(tid, {"holder": None, "exited": False}), "tx": tx}
                    for tid, tx in zip(model.aggregator_ids, model.tx_hashes, strict=True)
                ],
            }
        )
    models.sort(
        key=lambda m: (
            -1 if m["round"] is None else m["round"],
            m["index"] if m["index"] is not None else -1,
            m["block"],
            m["id"],
        )
    )
    return {
        "network": network,
        "status": status,
        "models": models,
        "updates": base["updates"],
        "trainers": _trainers(dag, status, trainers, who),
        "rounds": _rounds(dag),
        "phases": base["phases"],
    }


def _trainers(
    dag: ModelDAG,
    status: dict[str, Any],
    trainers: Mapping[int, TrainerInfo],
    who: dict[int, dict[str, Any]],
) -> list[dict[str, Any]]:
    proposals = Counter(u.trainer_id for u in dag.updates.values())
    aggregations = Counter(t for m in dag.models.values() for t in m.aggregator_ids)
    phase = PHASE_NAMES.index(status["phase"]) if status.get("phase") in PHASE_NAMES else None
    voted = {
        int(v["trainer_id"]): v
        for v in dag.votes
        if status.get("started") and v["round"] == status.get("round") and v["phase"] == phase
    }
    rows = []
    for tid, known in who.items():
        info = trainers.get(tid)
        rows.append(
            {
                "trainer_id": tid,
                "address": known["holder"],
                "holder": None if known["exited"] else known["holder"],
                "holders": list(info.holders) if info else [],
                "exited": known["exited"],
                "registered_block": info.registered_block if info else None,
                "exited_block": info.exited_block if info else None,
                "updates": proposals[tid],
                "aggregations": aggregations[tid],
                "voted": tid in voted,
                "vote_counted": bool(voted[tid]["counted"]) if tid in voted else None,
            }
        )
    return rows


def _rounds(dag: ModelDAG) -> list[dict[str, Any]]:
    numbers = sorted(
        {u.round for u in dag.updates.values()}
        | {m.round for m in dag.models.values() if m.round is not None}
    )
    out = []
    for r in numbers:
        updates = [u for u in dag.updates.values() if u.round == r]
        models = dag.models_of_round(r)
        out.append(
            {
                "round": r,
                "models": len(models),
                "merges": sum(m.is_merge for m in models),
                "updates": len(updates),
                "trainers": len({u.trainer_id for u in updates}),
            }
        )
    return out


# -- text -----------------------------------------------------------------------------

_STATE_STYLE = {ROOT: "bold", FRONTIER: "bold green", INNER: "cyan", DEAD: "dim red"}


def _short(model_id: str | None) -> str:
    if model_id is None:
        return "-"
    return "root" if int(model_id, 16) == 0 else model_id[2:10]


def short_update_id(update_id: str) -> str:
    """An update id (a 78-digit decimal hash) cut to its first 10 digits for display."""
    return update_id if len(update_id) <= 12 else update_id[:10] + "…"


def trainer_label(trainer_id: int, holder: str | None, exited: bool = False) -> str:
    """``#3 0xAbC…`` : a trainer id and the address holding it (or that held it last)."""
    where = holder or "holder unknown"
    return f"#{trainer_id} {where}" + (" (exited)" if exited else "")


def text_tree(document: dict[str, Any], details: bool = True) -> Tree:
    """A rich tree: the network, then each round and the models it created.

    Parameters
    ----------
    document
        A :func:`dag_document`.
    details
        Show under each model its full id, creation index, weights CID, updates
        (trainer, CID, samples, tx) and aggregations (trainer id and holder, tx), and
        the trainers at the end; otherwise one line per model.
    """
    net, status = document["network"], document["status"]
    where = (
        f"round {status['round']} {status['phase']} ({status['votes']}/{status['quorum']} votes)"
        if status.get("started")
        else "rounds not started"
    )
    merges = sum(1 for m in document["models"] if m.get("merge"))
    tree = Tree(
        Text.assemble(
            ("MCFL network ", "bold"),
            f"task {net.get('task')}  chain "
            f"{net.get('chain_id')}  blocks {net.get('from_block')}.."
            f"{net.get('last_block')}  {where}  {status.get('trainers')} "
            f"trainers  {len(document['models'])} models ({merges} merges)  "
            f"{len(document['updates'])} updates",
        )
    )
    updates = {u["id"]: u for u in document["updates"]}
    trainers = {t["trainer_id"]: t for t in document["trainers"]}
    by_round: dict[int | None, list[dict[str, Any]]] = defaultdict(list)
    for model in document["models"]:
        by_round[model["round"]].append(model)
    for round_ in sorted(by_round, key=lambda r: -1 if r is None else r):
        if round_ is None:
            branch = tree.add(Text("genesis", style="bold"))
        else:
            info = next((r for r in document["rounds"] if r["round"] == round_), None)
            extra = f"  ({info['updates']} updates by {info['trainers']} trainers)" if info else ""
            branch = tree.add(Text(f"round {round_}{extra}", style="bold"))
        for model in by_round[round_]:
            _add_model(branch, model, updates, trainers, details)
    if details and document["trainers"]:
        node = tree.add(Text("trainers", style="bold"))
        for t in document["trainers"]:
            history = t["holders"][:-1]
            node.add(
                f"{trainer_label(t['trainer_id'], t['address'], t['exited'])}  "
                f"{t['updates']} updates  {t['aggregations']} aggregations"
                + (f"  held before by {', '.join(history)}" if history else "")
            )
    return tree


def _add_model(
    branch: Tree,
    model: dict[str, Any],
    updates: dict[str, dict[str, Any]],
    trainers: dict[int, dict[str, Any]],
    details: bool,
) -> None:
    flags = [model["state"]] + [f for f in ("fork", "merge") if model.get(f)]
    parents = model["parents"]
    if model["index"] is None:
        lineage = "parents unknown (created before the blocks read)"
    else:
        lineage = f"{'parents' if len(parents) > 1 else 'parent'} " + (
            ", ".join(_short(p) for p in parents) or "-"
        )
    by = " ".join(f"#{a['trainer_id']}" for a in model["aggregations"])
    label = Text.assemble(
        (model["short"], _STATE_STYLE[model["state"]]),
        f"  {lineage}  popularity {model['popularity']}  "
        f"{len(model['updates'])} updates  {len(model['children'])} children  "
        + (f"by {by}  " if by else ""),
        (" ".join(flags), "italic"),
    )
    node = branch.add(label)
    if not details:
        return
    node.add(f"id {model['id']}")
    if model["index"] is not None:
        node.add(f"creation index {model['index']}")
    node.add(f"weights {model['weights_cid'] or 'not published'}")
    if model["updates"]:
        ups = node.add("updates")
        for uid in model["updates"]:
            u = updates.get(uid)
            if u is None:
                ups.add(f"#{uid} (proposed before the block range read)")
                continue
            trainer = trainers.get(u["trainer_id"], {})
            sent_by = "" if u["proposer"] == trainer.get("address") else f" sent by {u['proposer']}"
            by_trainer = trainer_label(
                u["trainer_id"], trainer.get("address"), trainer.get("exited", False)
            )
            ups.add(
                f"{short_update_id(uid)}  trainer {by_trainer}{sent_by}"
                + (f"  from {_short(u['parent'])}" if model.get("merge") else "")
                + f"  {u['num_samples']} samples  cid {u['cid']}  tx {u['tx_hash']}"
            )
    if model["aggregations"]:
        aggs = node.add("aggregators")
        for a in model["aggregations"]:
            aggs.add(f"{trainer_label(a['trainer_id'], a['holder'], a['exited'])}  tx {a['tx']}")


# -- Graphviz --------------------------------------------------------------------------

_DOT_FILL = {ROOT: "#dddddd", FRONTIER: "#b7e4c7", INNER: "#cfe2ff", DEAD: "#f5c2c7"}
MERGE_COLOUR = "#8e44ad"


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(document: dict[str, Any]) -> str:
    """Graphviz DOT: models by round left to right, one edge from each parent labelled
    with the updates trained from it, line width by popularity, merges purple with a
    double border, dead branches dashed."""
    lines = [
        "digraph mcfl {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="monospace"];',
        '  edge [fontname="monospace", fontsize=10];',
    ]
    parent_of = {u["id"]: u["parent"] for u in document["updates"]}
    by_round: dict[int | None, list[dict[str, Any]]] = defaultdict(list)
    for model in document["models"]:
        by_round[model["round"]].append(model)
    for round_ in sorted(by_round, key=lambda r: -1 if r is None else r):
        name = "genesis" if round_ is None else f"round {round_}"
        lines.append(f"  subgraph {_dot_quote('cluster_' + name)} {{")
        lines.append(f'    label={_dot_quote(name)}; style=dashed; color="#999999";')
        for m in by_round[round_]:
            by = " ".join(f"#{a['trainer_id']}" for a in m["aggregations"])
            label = f"{m['short']}\\npopularity {m['popularity']}" + (f"\\nby {by}" if by else "")
            style = '"rounded,filled,dashed"' if m["state"] == DEAD else '"rounded,filled"'
            merge = f', peripheries=2, color="{MERGE_COLOUR}"' if m.get("merge") else ""
            lines.append(
                f'    {_dot_quote(m["id"])} [label="{label}", style={style}, '
                f'fillcolor="{_DOT_FILL[m["state"]]}"{merge}, '
                f"tooltip={_dot_quote(m['id'])}];"
            )
        lines.append("  }")
    known = {m["id"] for m in document["models"]}
    for m in document["models"]:
        width = 1 + min(m["popularity"], 8) * 0.5
        dashed = ", style=dashed" if m["state"] == DEAD else ""
        colour = f', color="{MERGE_COLOUR}"' if m.get("merge") else ""
        for parent in m["parents"]:
            if parent not in known:
                continue
            if m.get("merge"):
                n = sum(1 for u in m["updates"] if parent_of.get(u) == parent)
                text = f"{n} of {len(m['updates'])} updates"
            else:
                text = f"{len(m['updates'])} updates"
            lines.append(
                f"  {_dot_quote(parent)} -> {_dot_quote(m['id'])} "
                f"[label={_dot_quote(text)}, penwidth={width:g}{dashed}{colour}];"
            )
    lines.append("}")
    return "\n".join(lines) + "\n"
