"""The weights book: peers' blobs decoded once, cached by least recent use."""

from __future__ import annotations

from dataclasses import replace

import torch

from mcfl_chain.algorithms.facade import head_choice, with_head
from mcfl_chain.algorithms.fedavg import fedavg
from mcfl_chain.dag.graph import ROOT_ID, ModelDAG, UpdateRecord, short_id
from mcfl_chain.dag.model_id import model_id, update_id
from mcfl_chain.dag.weights import SharedLRU, WeightsBook, check_published_weights
from mcfl_chain.learning.codec import encode_weights
from mcfl_chain.learning.models import create_model
from mcfl_chain.storage.cid import cid_for_bytes
from mcfl_chain.storage.errors import BlobNotFound, NoPeers

ARCH = "lenet-light"


def _book_with_updates(n: int, cache_size: int) -> tuple[WeightsBook, list[str]]:
    store: dict[str, bytes] = {}
    dag = ModelDAG()
    for uid in range(1, n + 1):
        blob = encode_weights(ARCH, create_model(ARCH, seed=uid).state_dict())
        cid = cid_for_bytes(blob)
        store[cid] = blob
        dag.add_update(
            UpdateRecord(
                update_id=uid,
                proposer="0x1",
                trainer_id=1,
                parent=ROOT_ID,
                round=0,
                cid=cid,
                num_samples=10,
            )
        )
    fetched: list[str] = []

    def fetch(cid: str) -> bytes:
        fetched.append(cid)
        if cid not in store:
            raise BlobNotFound(f"no blob {cid}")
        return store[cid]

    return WeightsBook(fetch, ARCH, dag, cache_size=cache_size), fetched


def test_a_recently_read_update_survives_eviction():
    # Prepare: a cache of two updates holding 1 and 2; 1 is read again, so 2 is the
    # least recently used when 3 comes in.
    book, fetched = _book_with_updates(3, cache_size=2)
    book.update(1)
    book.update(2)
    book.update(1)

    # Execute
    book.update(3)
    before = len(fetched)
    book.update(1)

    # Assert: 1 came from the cache (a FIFO cache would have evicted it and fetched again)
    assert len(fetched) == before == 3
    book.update(2)
    assert len(fetched) == 4


def _books_of_one_host() -> tuple[tuple[WeightsBook, list[str]], ...]:
    """Two books (and what each fetched) of the same network sharing their caches, as
    two trainers of one host do; the shared model cache is the first book's."""
    books = (_book_with_updates(2, cache_size=8), _book_with_updates(2, cache_size=8))
    updates, models = SharedLRU(8), SharedLRU(8)
    for book, _ in books:
        book.share_caches(updates, models)
    return books


def test_books_sharing_caches_decode_each_update_once():
    # Prepare: two readers of the same network (two trainers of one host)
    (first, fetched), (second, fetched_too) = _books_of_one_host()

    # Execute
    mine = first.update(1)
    theirs = second.update(1)

    # Assert: the second reader got the first one's decoded weights, fetching nothing
    assert theirs is mine and len(fetched) == 1 and fetched_too == []
    second.update(2)
    assert len(fetched_too) == 1


def test_an_aggregation_is_computed_once_per_host_and_is_the_models_rebuild():
    # Prepare: two trainers of one host aggregating the same two updates (rule 0)
    (first, _), (second, _) = _books_of_one_host()
    models = first._models
    good, _ = first.usable_updates([1, 2])
    key = model_id([ROOT_ID], [1, 2])

    # Execute
    mine = first.aggregated(key, [ROOT_ID], [1, 2], good)
    theirs = second.aggregated(key, [ROOT_ID], [1, 2], good)

    # Assert: computed once, and what FedAvg of the two gives; the model, once on chain,
    # is read from the same entry
    assert theirs is mine
    expected = fedavg([(1, 10, good[1]), (2, 10, good[2])])
    assert all(torch.equal(mine[k], expected[k]) for k in expected)
    assert models.lookup(key) is mine


def test_rejected_updates_are_remembered_not_fetched_again():
    # Prepare: update 1 names a CID no store holds.
    book, fetched = _book_with_updates(1, cache_size=2)
    book._dag.updates[1] = replace(book._dag.updates[1], cid=cid_for_bytes(b"missing"))

    # Execute
    good, bad = book.usable_updates([1])
    good2, bad2 = book.usable_updates([1])

    # Assert
    assert good == good2 == {} and set(bad) == set(bad2) == {1}
    assert "unreachable CID" in bad[1]
    assert len(fetched) == 1


def test_updates_missed_for_want_of_peers_are_read_ahead_together_and_fetched_again():
    # Prepare: two updates whose blobs exist, a reader whose node has no peer at first,
    # and a read-ahead hook that records what it is asked for.
    book, fetched = _book_with_updates(2, cache_size=4)
    inner, cut, batches = book._fetch, [True], []

    def fetch(cid: str) -> bytes:
        if cut[0]:
            raise NoPeers(f"your IPFS node has no peers: {cid} not fetched")
        return inner(cid)

    book._fetch = fetch
    book._prefetch = lambda cids: batches.append(list(cids))
    cids = [book._dag.updates[uid].cid for uid in (1, 2)]

    # Execute: read while cut off, then once the node reaches a peer again.
    good, bad = book.usable_updates([1, 2])
    cut[0] = False
    good_after, bad_after = book.usable_updates([1, 2])
    book.usable_updates([1, 2])

    # Assert: the cut cost both updates this time only (the reason is the reader's own,
    # not the blobs'); both were read ahead in one batch each time they were missing.
    assert good == {} and "has no peers" in bad[1] and set(bad) == {1, 2}
    assert set(good_after) == {1, 2} and bad_after == {}
    assert fetched == cids
    assert batches == [cids, cids]


def test_a_merge_is_the_fedavg_of_all_its_updates_whatever_their_parent():
    # Prepare: models P and Q; trainer 1 trained both, trainer 2 trained Q; a merge of
    # the three updates, weighted by their sample counts.
    p, q = sorted([bytes.fromhex("11" * 32), bytes.fromhex("22" * 32)])
    store: dict[str, bytes] = {}
    dag = ModelDAG()
    trained = {}
    for seed, (trainer, parent, samples) in enumerate(((1, p, 30), (1, q, 10), (2, q, 60)), 1):
        weights = create_model(ARCH, seed=seed).state_dict()
        blob = encode_weights(ARCH, weights)
        store[cid_for_bytes(blob)] = blob
        uid = update_id(trainer, parent, 1)
        trained[uid] = (samples, weights)
        dag.add_update(
            UpdateRecord(uid, f"0x{trainer}", trainer, parent, 1, cid_for_bytes(blob), samples)
        )
    ids = tuple(sorted(trained))
    merge = model_id((p, q), ids)
    dag.add_creation(merge, (p, q), 1, ids, 3, "0x1", None)
    dag.add_appended(merge, 1, 1, "0xt")
    book = WeightsBook(store.__getitem__, ARCH, dag)

    # Execute
    weights = book.model(merge)

    # Assert: bit for bit the network's FedAvg of the three, in ascending id order
    expected = fedavg([(uid, trained[uid][0], trained[uid][1]) for uid in ids])
    assert set(weights) == set(expected)
    assert all(torch.equal(weights[k], expected[k]) for k in expected)
    single = fedavg([(ids[0], trained[ids[0]][0], trained[ids[0]][1])])
    assert not all(torch.equal(weights[k], single[k]) for k in expected)


def test_a_multi_head_model_is_rebuilt_with_the_rule_its_architecture_names():
    # Prepare: two updates of a FACADE model on the root, one per head
    arch = "lenet-light-heads2"
    store: dict[str, bytes] = {}
    dag = ModelDAG()
    trained = {}
    for seed, (trainer, head) in enumerate(((1, 0), (2, 1)), 1):
        weights = with_head(create_model(arch, seed=seed).state_dict(), head)
        blob = encode_weights(arch, weights)
        store[cid_for_bytes(blob)] = blob
        uid = update_id(trainer, ROOT_ID, 0)
        trained[uid] = weights
        dag.add_update(
            UpdateRecord(uid, f"0x{trainer}", trainer, ROOT_ID, 0, cid_for_bytes(blob), 10)
        )
    ids = tuple(sorted(trained))
    merged = model_id((ROOT_ID,), ids)
    dag.add_creation(merged, (ROOT_ID,), 0, ids, 1, "0x1", None)
    dag.add_appended(merged, 0, 1, "0xt")
    book = WeightsBook(store.__getitem__, arch, dag)

    # Execute
    weights = book.model(merged)

    # Assert: each head is its chooser's alone, the core the mean of both
    assert book.rule.name == "per-head-fedavg"
    first, second = (trained[uid] for uid in ids)
    chooser = {head_choice(first): first, head_choice(second): second}
    for head in (0, 1):
        assert torch.equal(weights[f"heads.{head}.weight"], chooser[head][f"heads.{head}.weight"])
    core = fedavg([(uid, 10, trained[uid]) for uid in ids])["features.0.weight"]
    assert torch.equal(weights["features.0.weight"], core)


def test_published_weights_are_checked_against_their_rebuilt_bytes():
    # Prepare: two models on the root, the second one's published blob tampered with
    arch = "lenet-light-heads2"
    store: dict[str, bytes] = {}
    dag = ModelDAG()
    for trainer in (1, 2):
        weights = with_head(create_model(arch, seed=trainer).state_dict(), trainer - 1)
        blob = encode_weights(arch, weights)
        store[cid_for_bytes(blob)] = blob
        dag.add_update(
            UpdateRecord(
                update_id(trainer, ROOT_ID, 0), "0x1", trainer, ROOT_ID, 0, cid_for_bytes(blob), 5
            )
        )
    book = WeightsBook(store.__getitem__, arch, dag)
    for trainer, tamper in ((1, False), (2, True)):
        ids = (update_id(trainer, ROOT_ID, 0),)
        published = book.aggregate(list(ids), {ids[0]: book.update(ids[0])})
        if tamper:
            published = with_head(published, 1 - int(published["head_choice"]))
        blob = encode_weights(arch, published)
        store[cid_for_bytes(blob)] = blob
        model = model_id((ROOT_ID,), ids)
        dag.add_creation(model, (ROOT_ID,), 0, ids, trainer, "0x1", cid_for_bytes(blob))
        dag.add_appended(model, 0, trainer, "0xt")

    # Execute
    checked, problems = check_published_weights(dag, book, store.__getitem__, arch)

    # Assert
    tampered = dag.models[model_id((ROOT_ID,), (update_id(2, ROOT_ID, 0),))]
    assert checked == 1
    assert problems == [
        f"model {short_id(tampered.model_id)}: its published weights {tampered.weights_cid} "
        "are not the per-head-fedavg of its 1 updates"
    ]


def test_updates_of_earlier_rounds_are_forgotten_and_fetched_again_when_needed():
    # Prepare: updates 1-2 of round 0 and 3-4 of round 1, all read once
    book, fetched = _book_with_updates(4, cache_size=8)
    for uid in (3, 4):
        book._dag.updates[uid] = replace(book._dag.updates[uid], round=1)
    first, _ = book.usable_updates([1, 2, 3, 4])

    # Execute: round 1's aggregate phase opens
    dropped = book.forget_updates_before(1)

    # Assert: round 0's two are gone from the cache, round 1's stay; a later read of a
    # forgotten one fetches it again and gives the same weights
    assert dropped == 2
    fetched.clear()
    again, bad = book.usable_updates([1, 3, 4])
    assert bad == {} and len(fetched) == 1
    assert again[3] is first[3] and again[1] is not first[1]
    assert all(torch.equal(again[1][k], first[1][k]) for k in first[1])
    assert book.forget_updates_before(1) == 1  # the one fetched again, round 0's
