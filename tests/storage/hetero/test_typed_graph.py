"""TypedGraph, RelationCSR and typed feature groups against brute force."""

import doctest
import importlib
from collections import Counter

import numpy as np
import pytest
import torch

from strata.storage import FeatureError, GraphError, Key
from strata.storage.hetero import (
    Relation,
    RelationCSR,
    TypedGraph,
    check_typed_features,
    gather_typed,
    typed_feature_store,
)

# users 0..3, items 0..2        user 3 and item 2 have no interactions
#   u0 ─feed─▶ i0   u0 ─feed─▶ i1   u1 ─feed─▶ i0 (twice: a parallel edge)
#   u2 ─search─▶ i1                 i0 ─co─▶ i1 (0.5)   i1 ─co─▶ i0 (0.25)
FEED = Relation("user", "engaged_feed", "item")
SEARCH = Relation("user", "engaged_search", "item")
CO = Relation("item", "co_engaged", "item")
NUM_NODES = {"user": 4, "item": 3}
EDGES = {
    FEED: (np.array([0, 1, 0, 1]), np.array([1, 0, 0, 0])),
    SEARCH: (np.array([2]), np.array([1])),
    CO: (np.array([0, 1]), np.array([1, 0]), np.array([0.5, 0.25])),
}


def tiny() -> TypedGraph:
    return TypedGraph.from_edges(EDGES, NUM_NODES)


def edge_multiset(csr: RelationCSR) -> Counter:
    """(src, dst[, weight]) of every edge, from the CSR."""
    dst = csr.dst_index()
    if csr.weights is None:
        return Counter(zip(csr.indices.tolist(), dst.tolist(), strict=True))
    return Counter(
        zip(csr.indices.tolist(), dst.tolist(), csr.weights.tolist(), strict=True)
    )


def test_from_edges_matches_the_edge_lists():
    g = tiny()
    assert g.node_types == ("item", "user")
    assert list(g.relations) == [CO, FEED, SEARCH]  # sorted
    assert dict(g.num_nodes) == {"item": 3, "user": 4}
    for rel, (src, dst, *w) in EDGES.items():
        csr = g.relations[rel]
        assert csr.indptr.dtype == np.int64
        assert csr.indices.dtype == np.int64
        assert csr.num_dst == NUM_NODES[rel.dst]
        expected = zip(
            src.tolist(), dst.tolist(), *(x.tolist() for x in w), strict=True
        )
        assert edge_multiset(csr) == Counter(expected)
        assert g.num_edges(rel) == len(src)
    # rows sorted by destination, then source
    assert g.relations[FEED].indptr.tolist() == [0, 3, 4, 4]
    assert g.relations[FEED].indices.tolist() == [0, 1, 1, 0]
    assert g.num_edges() == 7
    assert g.relations_into("item") == (CO, FEED, SEARCH)
    assert g.relations_into("user") == ()
    assert str(FEED) == "user-engaged_feed->item"


def test_random_graph_rows_equal_brute_force():
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 50, 400), rng.integers(0, 30, 400)
    rel = Relation("a", "r", "b")
    g = TypedGraph.from_edges({rel: (src, dst)}, {"a": 50, "b": 30})
    csr = g.relations[rel]
    for v in range(30):
        row = csr.indices[csr.indptr[v] : csr.indptr[v + 1]]
        assert row.tolist() == sorted(src[dst == v].tolist())


def test_with_reverse_transposes_and_keeps_weights():
    g = tiny().with_reverse(FEED, "fed_by").with_reverse(CO, "co_rev")
    rev = g.relations[Relation("item", "fed_by", "user")]
    assert rev.num_dst == 4
    flipped = Counter((d, s) for s, d in edge_multiset(g.relations[FEED]).elements())
    assert edge_multiset(rev) == flipped
    co_rev = g.relations[Relation("item", "co_rev", "item")]
    assert edge_multiset(co_rev) == Counter({(1, 0, 0.5): 1, (0, 1, 0.25): 1})
    assert g.relations_into("user") == (Relation("item", "fed_by", "user"),)
    with pytest.raises(GraphError, match="a relation not yet in the graph"):
        g.with_reverse(FEED, "fed_by")


def test_empty_relation_and_type_without_nodes():
    rel = Relation("user", "r", "item")
    g = TypedGraph.from_edges(
        {rel: (np.array([], dtype=np.int64), np.array([], dtype=np.int64))},
        {"user": 0, "item": 2},
    )
    assert g.relations[rel].indptr.tolist() == [0, 0, 0]
    assert g.num_edges(rel) == 0


@pytest.mark.parametrize(
    ("edges", "num_nodes", "match"),
    [
        ({FEED: (np.array([4]), np.array([0]))}, NUM_NODES, r"source ids in \[0, 4\)"),
        ({FEED: (np.array([0]), np.array([3]))}, NUM_NODES, "destination ids"),
        ({FEED: (np.array([-1]), np.array([0]))}, NUM_NODES, "-1 at position 0"),
        ({FEED: (np.array([0, 1]), np.array([0]))}, NUM_NODES, "1 ids"),
        ({FEED: (np.array([0.5]), np.array([0]))}, NUM_NODES, "integer ids"),
        ({FEED: (np.array([0]), np.array([0]))}, {"user": 4}, "dst type of relation"),
        ({FEED: (np.array([0]), np.array([0]))}, {"user": -1, "item": 1}, ">= 0"),
        (
            {FEED: (np.array([0]), np.array([0]), np.array([np.nan]))},
            NUM_NODES,
            "finite",
        ),
        ({FEED: (np.array([0]), np.array([0]), np.ones(2))}, NUM_NODES, "one per edge"),
        (
            {("user", "", "item"): (np.array([0]), np.array([0]))},
            NUM_NODES,
            "non-empty",
        ),
        ({FEED: [np.array([0]), np.array([0])]}, NUM_NODES, r"\(src_ids, dst_ids\)"),
    ],
)
def test_bad_edges_get_clear_errors(edges, num_nodes, match):
    with pytest.raises(GraphError, match=match):
        TypedGraph.from_edges(edges, num_nodes)


def test_error_names_the_relation_and_position():
    with pytest.raises(GraphError) as info:
        TypedGraph.from_edges({SEARCH: (np.array([0, 9]), np.array([0, 0]))}, NUM_NODES)
    message = str(info.value)
    assert "user-engaged_search->item" in message
    assert "9 at position 1" in message


def test_constructor_checks_csr_against_node_counts():
    csr = RelationCSR(np.array([0, 1, 2]), np.array([0, 5]))
    with pytest.raises(GraphError, match="3 CSR rows"):
        TypedGraph({"user": 6, "item": 3}, {FEED: csr})
    with pytest.raises(GraphError, match=r"source ids of relation .* in \[0, 4\)"):
        TypedGraph({"user": 4, "item": 2}, {FEED: csr})
    with pytest.raises(GraphError, match="int64"):
        RelationCSR(np.array([0, 1], dtype=np.int32), np.array([0]))
    with pytest.raises(GraphError, match="non-decreasing"):
        RelationCSR(np.array([0, 2, 1]), np.array([0]))
    with pytest.raises(GraphError, match="one of"):
        tiny().csr(Relation("item", "nope", "user"))


def test_typed_feature_groups():
    g = tiny()
    x = {"user": torch.arange(8.0).reshape(4, 2), "item": torch.ones(3, 5)}
    store = typed_feature_store({t: {"x": v} for t, v in x.items()}, graph=g)
    assert store.get(Key("user", "x"), [3]).tolist() == [[6.0, 7.0]]
    rows = gather_typed(store, {"user": np.array([1, 0]), "item": np.array([2])})
    assert rows["user"].tolist() == [[2.0, 3.0], [0.0, 1.0]]
    assert tuple(rows["item"].shape) == (1, 5)
    check_typed_features(store, g, attrs=("x",))
    with pytest.raises(FeatureError, match=r"item/y is missing.*user/y is missing"):
        check_typed_features(store, g, attrs=("y",))
    bad = {"user": {"x": torch.zeros(3, 2)}, "item": {"x": torch.zeros(2, 1)}}
    with pytest.raises(FeatureError) as info:
        typed_feature_store(bad, graph=g)
    # every mismatch at once
    assert "user/x has 3 rows" in str(info.value)
    assert "item/x has 2 rows" in str(info.value)
    # groups that are not node types are not checked
    check_typed_features(typed_feature_store({"edge": {"w": torch.zeros(9)}}), g)


@pytest.mark.parametrize(
    "name",
    [
        "strata.storage.hetero.relation",
        "strata.storage.hetero.typed_graph",
        "strata.storage.hetero.features",
    ],
)
def test_doctests(name):
    result = doctest.testmod(
        importlib.import_module(name), optionflags=doctest.ELLIPSIS
    )
    assert result.failed == 0
    assert result.attempted > 0


def test_graph_pickles_with_its_arrays():
    import pickle

    g = tiny()
    back = pickle.loads(pickle.dumps(g))
    assert dict(back.num_nodes) == dict(g.num_nodes)
    for rel, csr in g.relations.items():
        np.testing.assert_array_equal(back.relations[rel].indices, csr.indices)
        np.testing.assert_array_equal(back.relations[rel].indptr, csr.indptr)
    assert back.relations[CO].weights.tolist() == g.relations[CO].weights.tolist()
    with pytest.raises(TypeError):
        g.relations[CO] = g.relations[FEED]  # read-only views
