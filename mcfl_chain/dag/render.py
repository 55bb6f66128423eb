"""The model DAG for people: one JSON document, a text tree by round, Graphviz DOT.

:func:`dag_document` is the single description every view draws from (``mcfl-chain
dag --format json`` prints it, the explorer serves it). Update ids are decimal strings
and model ids 0x-hex, as in :meth:`ModelDAG.to_json`, because browsers read JSON
numbers as 53-bit floats.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from rich.text import Text
from rich.tree import Tree

from mcfl_chain.dag.graph import ROOT_ID, ModelDAG

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


def dag_document(
    dag: ModelDAG, *, network: dict[str, Any], status: dict[str, Any], trainers: dict[str, str]
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
        ``quorum``, ``trainers``, ``block``.
    trainers
        Trainer token id (decimal string) → holder address.

    Returns
    -------
    dict
        ``network``, ``status``, ``models`` (each with ``children``, ``state``,
        ``fork`` and its ``aggregations`` as (aggregator, tx) pairs), ``updates``,
        ``trainers`` (id, address, counts, votes of the current phase) and ``rounds``
        (models and updates per round).
    """
    base = dag.to_json()
    current = status.get("round") if status.get("started") else None
    states = model_states(dag, current)
    children: dict[bytes, list[str]] = defaultdict(list)
    for model in dag.models.values():
        for parent in model.parents:
            children[parent].append(_hex(model.model_id))
    models = []
    for entry, model in zip(base["models"], dag.models.values(), strict=True):
        kids = children.get(model.model_id, [])
        txs = model.tx_hashes + [""] * (len(model.aggregators) - len(model.tx_hashes))
        models.append(
            {
                **entry,
                "state": states[model.model_id],
                "children": kids,
                "fork": len(kids) > 1,
                "merge": model.is_merge,
                "aggregations": [
                    {"aggregator": a, "tx": t} for a, t in zip(model.aggregators, txs, strict=True)
                ],
            }
        )
    models.sort(key=lambda m: (-1 if m["round"] is None else m["round"], m["block"], m["id"]))
    return {
        "network": network,
        "status": status,
        "models": models,
        "updates": base["updates"],
        "trainers": _trainers(dag, status, trainers),
        "rounds": _rounds(dag),
        "phases": base["phases"],
    }


def _trainers(
    dag: ModelDAG, status: dict[str, Any], holders: dict[str, str]
) -> list[dict[str, Any]]:
    proposals = Counter(u.proposer for u in dag.updates.values())
    aggregations = Counter(a for m in dag.models.values() for a in m.aggregators)
    phase = PHASE_NAMES.index(status["phase"]) if status.get("phase") in PHASE_NAMES else None
    voted = {
        v["trainer"]: v
        for v in dag.votes
        if status.get("started") and v["round"] == status.get("round") and v["phase"] == phase
    }
    ids = {address: int(token) for token, address in holders.items()}
    for vote in dag.votes:
        ids.setdefault(vote["trainer"], int(vote["trainerId"]))
    addresses = set(ids) | set(proposals) | set(aggregations)
    rows = [
        {
            "address": a,
            "trainer_id": ids.get(a),
            "updates": proposals[a],
            "aggregations": aggregations[a],
            "voted": a in voted,
            "vote_counted": bool(voted[a]["counted"]) if a in voted else None,
        }
        for a in addresses
    ]
    return sorted(rows, key=lambda r: (r["trainer_id"] is None, r["trainer_id"] or 0, r["address"]))


def _rounds(dag: ModelDAG) -> list[dict[str, Any]]:
    numbers = sorted(
        {u.round for u in dag.updates.values()}
        | {m.round for m in dag.models.values() if m.round is not None}
    )
    out = []
    for r in numbers:
        updates = [u for u in dag.updates.values() if u.round == r]
        out.append(
            {
                "round": r,
                "models": len(dag.models_of_round(r)),
                "updates": len(updates),
                "trainers": len({u.proposer for u in updates}),
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


def text_tree(document: dict[str, Any], details: bool = True) -> Tree:
    """A rich tree: the network, then each round and the models it appended.

    Parameters
    ----------
    document
        A :func:`dag_document`.
    details
        Show under each model its full id, weights CID, updates (proposer, CID,
        samples, tx) and aggregators (with tx); otherwise one line per model.
    """
    net, status = document["network"], document["status"]
    where = (
        f"round {status['round']} {status['phase']} ({status['votes']}/{status['quorum']} votes)"
        if status.get("started")
        else "rounds not started"
    )
    tree = Tree(
        Text.assemble(
            ("MCFL network ", "bold"),
            f"task {net.get('task')}  chain "
            f"{net.get('chain_id')}  blocks {net.get('from_block')}.."
            f"{net.get('last_block')}  {where}  {status.get('trainers')} "
            f"trainers  {len(document['models'])} models  "
            f"{len(document['updates'])} updates",
        )
    )
    updates = {u["id"]: u for u in document["updates"]}
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
            _add_model(branch, model, updates, details)
    return tree


def _add_model(
    branch: Tree, model: dict[str, Any], updates: dict[str, dict[str, Any]], details: bool
) -> None:
    flags = [model["state"]] + [f for f in ("fork", "merge") if model.get(f)]
    parents = model.get("parents") or [model["parent"]]
    label = Text.assemble(
        (model["short"], _STATE_STYLE[model["state"]]),
        f"  {'parents' if len(parents) > 1 else 'parent'} "
        f"{', '.join(_short(p) for p in parents)}  popularity {model['popularity']}  "
        f"{len(model['updates'])} updates  {len(model['children'])} children  ",
        (" ".join(flags), "italic"),
    )
    node = branch.add(label)
    if not details:
        return
    node.add(f"id {model['id']}")
    node.add(f"weights {model['weights_cid'] or 'not published'}")
    if model["updates"]:
        ups = node.add("updates")
        for uid in model["updates"]:
            u = updates.get(uid)
            if u is None:
                ups.add(f"#{uid} (proposed before the block range read)")
            else:
                ups.add(
                    f"#{short_update_id(uid)}  by {u['proposer']}  {u['num_samples']} "
                    f"samples  cid {u['cid']}  tx {u['tx_hash']}"
                )
    if model["aggregations"]:
        aggs = node.add("aggregators")
        for a in model["aggregations"]:
            aggs.add(f"{a['aggregator']}  tx {a['tx']}")


# -- Graphviz --------------------------------------------------------------------------

_DOT_FILL = {ROOT: "#dddddd", FRONTIER: "#b7e4c7", INNER: "#cfe2ff", DEAD: "#f5c2c7"}


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(document: dict[str, Any]) -> str:
    """Graphviz DOT: models by round left to right, edges parent → child labelled with
    the updates aggregated, line width by popularity, dead branches dashed."""
    lines = [
        "digraph mcfl {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="monospace"];',
        '  edge [fontname="monospace", fontsize=10];',
    ]
    by_round: dict[int | None, list[dict[str, Any]]] = defaultdict(list)
    for model in document["models"]:
        by_round[model["round"]].append(model)
    for round_ in sorted(by_round, key=lambda r: -1 if r is None else r):
        name = "genesis" if round_ is None else f"round {round_}"
        lines.append(f"  subgraph {_dot_quote('cluster_' + name)} {{")
        lines.append(f'    label={_dot_quote(name)}; style=dashed; color="#999999";')
        for m in by_round[round_]:
            label = f"{m['short']}\\npopularity {m['popularity']}"
            style = '"rounded,filled,dashed"' if m["state"] == DEAD else '"rounded,filled"'
            lines.append(
                f'    {_dot_quote(m["id"])} [label="{label}", style={style}, '
                f'fillcolor="{_DOT_FILL[m["state"]]}", '
                f"tooltip={_dot_quote(m['id'])}];"
            )
        lines.append("  }")
    known = {m["id"] for m in document["models"]}
    for m in document["models"]:
        width = 1 + min(m["popularity"], 8) * 0.5
        dashed = ", style=dashed" if m["state"] == DEAD else ""
        for parent in m.get("parents") or [m["parent"]]:
            if parent is None or parent not in known:
                continue
            lines.append(
                f"  {_dot_quote(parent)} -> {_dot_quote(m['id'])} "
                f'[label="{len(m["updates"])} updates", penwidth={width:g}{dashed}];'
            )
    lines.append("}")
    return "\n".join(lines) + "\n"
