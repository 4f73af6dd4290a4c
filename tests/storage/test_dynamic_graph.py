import doctest
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import strata.storage.dynamic.features
import strata.storage.dynamic.graph
from strata.storage.csr import CSRGraph
from strata.storage.dynamic import CompactionPolicy, DynamicGraph, NodeFeatureTable
from strata.storage.errors import FeatureError, GraphError
from strata.storage.updates import UpdateKind, edge_updates, make_updates

K = UpdateKind
DIM = 2


class Oracle:
    """Brute force: a multiset of edges, applied one update at a time."""

    def __init__(self, n, src, dst):
        self.n = n
        self.edges = Counter(zip(src.tolist(), dst.tolist(), strict=True))
        self.dropped = 0
        self.features = {}

    def apply(self, ops):
        for kind, a, b in ops:
            if kind == K.ADD_EDGE:
                self.edges[(a, b)] += 1
                self.n = max(self.n, a + 1, b + 1)
            elif kind == K.REMOVE_EDGE:
                if self.edges[(a, b)] > 0:
                    self.edges[(a, b)] -= 1
                else:
                    self.dropped += 1
            else:
                self.n = max(self.n, a + 1)
                if kind == K.SET_FEATURE:
                    self.features[a] = [float(b), float(a)]

    def coo(self):
        pairs = sorted(self.edges.elements())
        return (
            np.array([p[0] for p in pairs], dtype=np.int64),
            np.array([p[1] for p in pairs], dtype=np.int64),
        )


def batch_from(ops):
    kind = np.array([o[0] for o in ops], np.int8)
    a = np.array([o[1] for o in ops], np.int64)
    b = np.array([o[2] for o in ops], np.int64)
    feature = np.stack([b, a], axis=1).astype(np.float32)
    return make_updates(kind, src=a, dst=b, node=a, feature=feature, event_time=0)


MAX_ID = 12
ops = st.tuples(
    st.sampled_from(
        [K.ADD_EDGE] * 4 + [K.REMOVE_EDGE] * 3 + [K.ADD_NODE, K.SET_FEATURE]
    ),
    st.integers(0, MAX_ID),
    st.integers(0, MAX_ID),
)
streams = st.tuples(
    st.integers(0, 8),  # initial nodes
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=30),
    st.lists(
        st.tuples(st.lists(ops, min_size=1, max_size=25), st.sampled_from("nncs")),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 20),  # auto-compaction threshold (pairs in the delta)
)


def check_against(g, oracle):
    n = oracle.n
    assert g.num_nodes == n
    src, dst = oracle.coo()
    assert g.num_edges == src.size
    assert g.dropped_deletes == oracle.dropped
    got_src, got_dst = g.edges()
    np.testing.assert_array_equal(got_src, src)
    np.testing.assert_array_equal(got_dst, dst)
    ref = CSRGraph.from_edges(src, dst, num_nodes=n)
    nodes = np.arange(n)
    indptr, indices = g.out_adjacency(nodes)
    np.testing.assert_array_equal(indptr, ref.indptr)
    np.testing.assert_array_equal(indices, ref.indices)
    indptr, indices = g.in_adjacency(nodes[::-1])  # any order of rows
    csc = ref.csc()
    rows = [
        csc.indices[csc.indptr[v] : csc.indptr[v + 1]].tolist() for v in nodes[::-1]
    ]
    assert [indices[indptr[i] : indptr[i + 1]].tolist() for i in range(n)] == rows
    np.testing.assert_array_equal(g.out_degree(), ref.out_degree())
    np.testing.assert_array_equal(g.in_degree(), ref.in_degree())
    if n:
        u = np.arange(n).repeat(n)
        v = np.tile(np.arange(n), n)
        expected = [
            oracle.edges[(a, b)] for a, b in zip(u.tolist(), v.tolist(), strict=True)
        ]
        assert g.multiplicity(u, v).tolist() == expected
    return ref


@settings(max_examples=150, deadline=None)
@given(streams)
def test_random_streams_match_a_multiset_oracle(stream):
    n0, edges, batches, threshold = stream
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    n0 = max([n0, *(src + 1), *(dst + 1)])
    base = CSRGraph.from_edges(src, dst, num_nodes=n0)
    policy = CompactionPolicy(ratio=0.0, min_delta=threshold)
    g = DynamicGraph(base, policy=policy)
    feats = NodeFeatureTable(DIM)
    oracle = Oracle(n0, src, dst)
    for batch_ops, action in batches:
        batch = batch_from(batch_ops)
        before_edges = g.num_edges
        report = g.apply(batch)
        feats.apply(batch)
        oracle.apply(batch_ops)
        assert report.added_edges - report.removed_edges == g.num_edges - before_edges
        ref = check_against(g, oracle)
        assert g.delta_size <= max(threshold, 0) or not policy.auto
        # a checkpoint round trip gives the same graph, and snapshots it exactly
        copy = DynamicGraph.from_state(g.state(), policy=policy)
        check_against(copy, oracle)
        snap = copy.snapshot()
        np.testing.assert_array_equal(snap.indptr, ref.indptr)
        np.testing.assert_array_equal(snap.indices, ref.indices)
        if action == "c":
            g.compact()
            assert g.delta_size == 0
        elif action == "s":
            assert g.snapshot().num_edges == ref.num_edges
        for node, value in oracle.features.items():
            assert feats.get(np.array([node])).tolist() == [value]
        assert sorted(np.flatnonzero(feats.has_feature)) == sorted(oracle.features)


def test_order_within_a_batch_decides_dropped_deletes():
    g = DynamicGraph(num_nodes=2)
    kinds = np.array([K.REMOVE_EDGE, K.ADD_EDGE, K.ADD_EDGE, K.REMOVE_EDGE], np.int8)
    one = np.zeros(4, np.int64)
    report = g.apply(make_updates(kinds, src=one, dst=one + 1, event_time=0))
    assert (report.added_edges, report.removed_edges, report.dropped_deletes) == (
        2,
        1,
        1,
    )
    assert g.multiplicity([0], [1]).tolist() == [1]
    report = g.remove_edges([0, 0, 0], [1, 1, 1])
    assert (report.removed_edges, report.dropped_deletes) == (1, 2)
    assert g.num_edges == 0
    assert g.dropped_deletes == 3


def test_growth_and_neighbours_of_new_nodes():
    g = DynamicGraph(CSRGraph.from_edges(np.array([0]), np.array([1])))
    report = g.add_edges([5, 1], [0, 5])
    assert report.added_nodes == 4
    assert g.num_nodes == 6
    assert g.out_neighbors(5).tolist() == [0]
    assert g.in_neighbors(5).tolist() == [1]
    assert g.in_neighbors(0).tolist() == [5]
    assert list(g.add_nodes(2)) == [6, 7]
    assert g.out_degree([7]).tolist() == [0]
    assert g.snapshot().num_nodes == 8


def test_compaction_policy_triggers_and_state_is_plain_arrays():
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 100, (2, 1000))
    g = DynamicGraph(
        CSRGraph.from_edges(src, dst, 100), policy=CompactionPolicy(0.05, min_delta=10)
    )
    compactions = 0
    for _ in range(10):
        s, d = rng.integers(0, 100, (2, 20))
        compactions += g.add_edges(s, d).compacted
    assert compactions >= 3
    state = g.state()
    assert all(isinstance(v, np.ndarray) for v in state.values())
    bad = dict(state, delta_keys=state["delta_keys"][::-1].copy())
    if state["delta_keys"].size > 1:
        with pytest.raises(GraphError, match="delta_keys"):
            DynamicGraph.from_state(bad)
    with pytest.raises(GraphError, match="missing"):
        DynamicGraph.from_state({"indptr": state["indptr"]})


def test_unsorted_base_rows_are_accepted():
    base = CSRGraph(
        indptr=np.array([0, 2, 2], np.int64), indices=np.array([1, 0], np.int32),
        num_nodes=2,
    )  # fmt: skip
    g = DynamicGraph(base)
    g.remove_edges([0], [0])
    assert g.out_neighbors(0).tolist() == [1]


def test_bad_input_leaves_the_graph_unchanged():
    g = DynamicGraph(CSRGraph.from_edges(np.array([0]), np.array([1])))
    with pytest.raises(GraphError, match="-1 at row 1"):
        g.apply(edge_updates(np.array([0, -1]), np.array([1, 1]), event_time=0))
    bad = make_updates(np.array([7], np.int8), event_time=0)
    with pytest.raises(GraphError, match="kind"):
        g.apply(bad)
    with pytest.raises(GraphError, match="ids in"):
        g.apply(edge_updates(np.array([2**31]), np.array([1]), event_time=0))
    with pytest.raises(GraphError, match=r"ids in \[0, 2\)"):
        g.out_neighbors(2)
    assert g.num_edges == 1
    assert g.num_nodes == 2
    feats = NodeFeatureTable(3)
    with pytest.raises(FeatureError, match="width 3"):
        feats.apply(make_updates(np.array([K.SET_FEATURE]), node=[0],
                                 feature=np.ones((1, 2)), event_time=0))  # fmt: skip
    with pytest.raises(FeatureError, match="shape"):
        feats.set(np.array([0]), np.ones((1, 2)))


def test_feature_table_state_round_trip():
    t = NodeFeatureTable(2)
    t.set(np.array([4, 1, 4]), np.array([[1, 2], [3, 4], [5, 6]]))
    back = NodeFeatureTable.from_state(t.state())
    np.testing.assert_array_equal(back.values, t.values)
    np.testing.assert_array_equal(back.has_feature, [False, True, False, False, True])
    assert back.get(np.array([4])).tolist() == [[5.0, 6.0]]


@pytest.mark.parametrize(
    "module", [strata.storage.dynamic.graph, strata.storage.dynamic.features]
)
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0
