"""G0: the temporal split leaks nothing into the graph, co-engagement or features."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from strata.operators.recsys.features import build_features
from strata.operators.recsys.graph import CO_ENGAGED, build_typed_graph, co_engagement
from strata.operators.recsys.split import temporal_split, train_pairs
from strata.operators.recsys.synth import SynthConfig, synth_interactions
from strata.storage.hetero import TypedGraph

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CFG = SynthConfig(num_users=300, num_items=150)


def _edges(graph: TypedGraph) -> dict[str, set[tuple[int, int]]]:
    out = {}
    for rel, csr in graph.relations.items():
        dst = np.repeat(np.arange(csr.indptr.shape[0] - 1), np.diff(csr.indptr))
        out[str(rel)] = set(zip(csr.indices.tolist(), dst.tolist(), strict=True))
    return out


def test_split_is_temporal_and_disjoint() -> None:
    inter = synth_interactions(CFG, 0)
    split = temporal_split(inter)
    assert (
        split.train.shape[0] + split.val.shape[0] + split.test.shape[0]
        == inter.num_interactions
    )
    assert inter.timestamp[split.train].max() <= inter.timestamp[split.val].min()
    assert inter.timestamp[split.val].max() <= inter.timestamp[split.test].min()
    parts = [set(p.tolist()) for p in (split.train, split.val, split.test)]
    assert not (parts[0] & parts[1])
    assert not (parts[1] & parts[2])
    assert not (parts[0] & parts[2])
    # Eval users: >= 1 train and >= 1 test interaction.
    train_users = set(inter.user[split.train].tolist())
    test_users = set(inter.user[split.test].tolist())
    assert set(split.eval_users.tolist()) == train_users & test_users


def test_no_validation_or_test_pair_among_graph_edges() -> None:
    inter = synth_interactions(CFG, 0)
    split = temporal_split(inter)
    graph = build_typed_graph(split)
    held_out = np.concatenate([split.val, split.test])
    held = set(
        zip(inter.user[held_out].tolist(), inter.item[held_out].tolist(), strict=True)
    )
    edges = _edges(graph)
    engaged = set().union(*(e for name, e in edges.items() if "-engaged_" in name))
    reverse = set().union(*(e for name, e in edges.items() if "-rev_engaged_" in name))
    assert not (engaged & held)
    assert not ({(u, i) for i, u in reverse} & held)
    u, i = train_pairs(split)
    assert engaged == set(zip(u.tolist(), i.tolist(), strict=True))


def test_graph_and_features_ignore_everything_but_train() -> None:
    # Scramble every validation and test interaction (other items, labels): the
    # graph, co-engagement counts, popularity and feature statistics must not move.
    inter = synth_interactions(CFG, 0)
    split = temporal_split(inter)
    rng = np.random.default_rng(5)
    held_out = np.concatenate([split.val, split.test])
    item = inter.item.copy()
    item[held_out] = rng.integers(0, inter.num_items, held_out.shape[0])
    scrambled = replace(split, inter=replace(inter, item=item))
    a, b = build_typed_graph(split), build_typed_graph(scrambled)
    assert _edges(a) == _edges(b)
    np.testing.assert_array_equal(a.csr(CO_ENGAGED).weights, b.csr(CO_ENGAGED).weights)
    fa, fb = build_features(split), build_features(scrambled)
    np.testing.assert_array_equal(fa.user, fb.user)
    np.testing.assert_array_equal(fa.item, fb.item)
    np.testing.assert_array_equal(
        fa.item_popularity,
        np.bincount(inter.item[split.train], minlength=inter.num_items),
    )


def test_co_engagement_is_top_cosine_of_train_histories() -> None:
    inter = synth_interactions(CFG, 1)
    split = temporal_split(inter)
    u, i = train_pairs(split)
    src, dst, w = co_engagement(u, i, inter.num_users, inter.num_items, top=10)
    a = np.zeros((inter.num_users, inter.num_items))
    a[u, i] = 1.0
    co = a.T @ a
    n = np.diag(co).copy()
    cosine = co / np.sqrt(np.outer(n, n) + (np.outer(n, n) == 0))
    np.fill_diagonal(cosine, 0.0)
    for item in range(0, inter.num_items, 7):
        mine = dst == item
        expected = cosine[item][cosine[item] > 0]
        assert mine.sum() == min(10, expected.shape[0])
        top = np.sort(expected)[::-1][: mine.sum()]
        np.testing.assert_allclose(np.sort(w[mine])[::-1], top, rtol=1e-6)
        np.testing.assert_allclose(w[mine], cosine[item, src[mine]], rtol=1e-6)


def test_repeated_pairs_keep_their_first_occurrence() -> None:
    inter = synth_interactions(SynthConfig(num_users=50, num_items=40), 0)
    doubled = replace(
        inter,
        user=np.concatenate([inter.user, inter.user]),
        item=np.concatenate([inter.item, inter.item]),
        timestamp=np.concatenate([inter.timestamp, inter.timestamp + 10**9]),
        label=None,
    )
    split = temporal_split(doubled)
    assert split.report.duplicates_dropped == inter.num_interactions
    kept = np.concatenate([split.train, split.val, split.test])
    assert kept.max() < inter.num_interactions  # the later copies are dropped
