import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.storage import CSRGraph, DuplicatePolicy, GraphError, SelfLoopPolicy

# 0 ──▶ 1 ──▶ 2      TINY: 5 nodes, 5 edges, every in-degree 1
# ▲     │
# │     ▼
# 3 ◀── 4
TINY_SRC = np.array([0, 1, 1, 4, 3])
TINY_DST = np.array([1, 2, 4, 3, 0])


def test_tiny_graph_rows_and_degrees():
    g = CSRGraph.from_edges(TINY_SRC, TINY_DST)
    assert g.num_nodes == 5
    assert g.num_edges == 5
    assert g.indptr.tolist() == [0, 1, 3, 3, 4, 5]
    assert g.indices.tolist() == [1, 2, 4, 0, 3]
    assert g.indices.dtype == np.int32
    assert g.out_degree().tolist() == [1, 2, 0, 1, 1]
    assert g.in_degree().tolist() == [1, 1, 1, 1, 1]


edge_lists = st.integers(1, 30).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=120),
    )
)


@settings(max_examples=60, deadline=None)
@given(edge_lists)
def test_matches_scipy_and_transpose(case):
    n, edges = case
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    g = CSRGraph.from_edges(src, dst, num_nodes=n, keep_edge_ids=True)
    ref = sp.coo_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)).tocsr()
    dense = np.zeros((n, n))
    s, d = g.to_coo()
    np.add.at(dense, (s, d), 1)
    np.testing.assert_array_equal(dense, ref.toarray())
    # rows sorted, edge ids point back to the input edge
    for u in range(n):
        row = g.neighbors(u)
        assert np.all(np.diff(row) >= 0)
    np.testing.assert_array_equal(src[g.edge_ids], s)
    np.testing.assert_array_equal(dst[g.edge_ids], d)
    t = g.csc()
    ts, td = t.to_coo()
    dense_t = np.zeros((n, n))
    np.add.at(dense_t, (ts, td), 1)
    np.testing.assert_array_equal(dense_t, dense.T)
    assert t.csc() is g
    np.testing.assert_array_equal(g.in_degree(), ref.sum(axis=0).A1)


def test_policies():
    src = np.array([0, 0, 0, 1, 2])
    dst = np.array([1, 1, 0, 2, 2])
    w = np.array([1.0, 2.0, 5.0, 3.0, 4.0])
    g = CSRGraph.from_edges(
        src,
        dst,
        edge_weight=w,
        duplicates=DuplicatePolicy.SUM,
        self_loops=SelfLoopPolicy.REMOVE,
    )
    assert g.indices.tolist() == [1, 2]
    assert g.edge_weight.tolist() == [3.0, 3.0]
    g = CSRGraph.from_edges(
        src, dst, duplicates=DuplicatePolicy.REMOVE, self_loops=SelfLoopPolicy.ADD
    )
    s, d = g.to_coo()
    assert list(zip(s.tolist(), d.tolist(), strict=True)) == [
        (0, 0),
        (0, 1),
        (1, 1),
        (1, 2),
        (2, 2),
    ]
    sym = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2]), symmetrize=True)
    assert sym.is_symmetric()
    assert sym.num_edges == 4


def test_torch_views_are_zero_copy():
    g = CSRGraph.from_edges(TINY_SRC, TINY_DST)
    t = g.torch_indices()
    assert t.dtype == torch.int32
    assert t.data_ptr() == g.indices.ctypes.data
    assert not g.indices.flags.writeable


@pytest.mark.parametrize(
    ("src", "dst", "n", "match"),
    [
        ([0, -1], [1, 0], None, "expected ids >= 0, got -1 at position 1"),
        ([0, 5], [1, 0], 3, r"expected ids < num_nodes=3, got 5 at position 1"),
        ([0, 1], [1], None, "expected the same length as src"),
        ([0.5], [1.0], None, "expected an integer array"),
        ([], [], None, "expected num_nodes for an empty edge list"),
    ],
)
def test_bad_input_is_a_clear_error(src, dst, n, match):
    with pytest.raises(GraphError, match=match):
        CSRGraph.from_edges(np.array(src), np.array(dst), num_nodes=n)


def test_non_finite_weight_rejected():
    with pytest.raises(GraphError, match="finite weights"):
        CSRGraph.from_edges(
            np.array([0]), np.array([1]), edge_weight=np.array([np.nan])
        )


def test_empty_graph_with_nodes():
    g = CSRGraph.from_edges(
        np.array([], dtype=np.int64), np.array([], dtype=np.int64), 4
    )
    assert g.num_edges == 0
    assert g.in_degree().tolist() == [0, 0, 0, 0]
