"""Single-process graph algorithms against scipy.sparse.csgraph and networkx.

Oracle conventions (tdorch.md §8 pitfall 7): networkx's dangling rule and tolerance
for PageRank, multi-edges reduced to their minimum weight before scipy's dijkstra,
weak components on directed input, labels canonicalised to the smallest id.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from strata.operators.algorithms import (
    AlgorithmError,
    bfs,
    connected_components,
    pagerank,
    sssp,
)
from strata.operators.algorithms.kernels import (
    gather_sum,
    pagerank_update,
    relax_min,
    scatter_sum,
)
from strata.storage import CSRGraph, DuplicatePolicy
from strata.storage.generators import rmat
from strata.storage.generators.zipf import zipf_source_graph


def random_graph(
    n: int, m: int, seed: int, *, weights: bool = False
) -> tuple[CSRGraph, np.ndarray, np.ndarray, np.ndarray | None]:
    """A directed multigraph with self-loops and isolated vertices (the raw edges)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    dst[: m // 10] = src[: m // 10]  # self-loops
    src = np.concatenate([src, src[: m // 5]])  # repeated edges
    dst = np.concatenate([dst, dst[: m // 5]])
    w = rng.integers(1, 101, src.size).astype(np.float64) if weights else None
    g = CSRGraph.from_edges(src, dst, n, edge_weight=w)
    return g, src, dst, w


GRAPHS = [(50, 120, 0), (300, 900, 1), (1000, 2500, 2), (400, 4000, 3)]


def scipy_matrix(g: CSRGraph, values: np.ndarray | None = None) -> sp.csr_matrix:
    data = np.ones(g.num_edges) if values is None else values
    return sp.csr_matrix((data, g.indices, g.indptr), shape=(g.num_nodes,) * 2)


def canonical(labels: np.ndarray) -> np.ndarray:
    """Relabel components by their smallest member."""
    first = np.full(labels.max() + 1, labels.size)
    np.minimum.at(first, labels, np.arange(labels.size))
    return first[labels]


@pytest.mark.parametrize(("n", "m", "seed"), GRAPHS)
def test_bfs_matches_scipy(n: int, m: int, seed: int) -> None:
    g, *_ = random_graph(n, m, seed)
    a = scipy_matrix(g)
    for source in (0, n // 2, int(np.argmax(g.out_degree()))):
        want = csgraph.shortest_path(a, unweighted=True, indices=source)
        want = np.where(np.isinf(want), -1, want).astype(np.int64)
        result = bfs(g, source)
        np.testing.assert_array_equal(result.values, want)
        assert result.iterations == int(want.max()) + 1


@pytest.mark.parametrize(("n", "m", "seed"), GRAPHS)
def test_sssp_matches_dijkstra_exactly(n: int, m: int, seed: int) -> None:
    g, src, dst, w = random_graph(n, m, seed, weights=True)
    assert w is not None
    # scipy sums duplicate entries: keep each pair's minimum weight first.
    order = np.lexsort((w, dst, src))
    first = np.ones(order.size, dtype=bool)
    first[1:] = (src[order][1:] != src[order][:-1]) | (
        dst[order][1:] != dst[order][:-1]
    )
    keep = order[first]
    a = sp.csr_matrix((w[keep], (src[keep], dst[keep])), shape=(n, n))
    for source in (0, n - 1, int(np.argmax(g.out_degree()))):
        want = csgraph.dijkstra(a, indices=source)
        got = sssp(g, source).values
        np.testing.assert_array_equal(got, want)


def test_sssp_float_weights_and_explicit_weights() -> None:
    g, _, _, _ = random_graph(200, 800, 7)
    w = np.random.default_rng(0).random(g.num_edges) * 3.0
    dense = np.full((200, 200), np.inf)
    s, d = g.to_coo()
    np.minimum.at(dense, (s, d), w)
    want = csgraph.dijkstra(
        sp.csr_matrix(np.where(np.isinf(dense), 0, dense)), indices=3
    )
    np.testing.assert_allclose(sssp(g, 3, weights=w).values, want, rtol=1e-12)


@pytest.mark.parametrize(("n", "m", "seed"), GRAPHS)
def test_cc_matches_scipy_weak(n: int, m: int, seed: int) -> None:
    g, *_ = random_graph(n, m, seed)
    count, labels = csgraph.connected_components(
        scipy_matrix(g), directed=True, connection="weak"
    )
    result = connected_components(g)
    np.testing.assert_array_equal(result.values, canonical(labels))
    assert result.extra["components"] == count


def test_cc_on_rmat_matches_scipy() -> None:
    g = rmat(12, 4, seed=3)
    _, labels = csgraph.connected_components(
        scipy_matrix(g), directed=True, connection="weak"
    )
    np.testing.assert_array_equal(connected_components(g).values, canonical(labels))


@pytest.mark.parametrize(("n", "m", "seed"), GRAPHS)
def test_pagerank_matches_networkx_digraph(n: int, m: int, seed: int) -> None:
    g, src, dst, _ = random_graph(n, m, seed)
    nxg = nx.DiGraph()  # one edge per pair; self-loops kept
    nxg.add_nodes_from(range(n))
    nxg.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
    want = nx.pagerank(nxg, alpha=0.85, tol=1e-6)
    result = pagerank(g, damping=0.85, tol=1e-6)
    expected = np.array([want[v] for v in range(n)])
    assert np.abs(result.values - expected).sum() <= 1e-6
    assert result.extra["converged"]


def power_iteration(g: CSRGraph, iterations: int, d: float = 0.85) -> np.ndarray:
    """Float64 scipy power iteration on the deduplicated graph (same rule)."""
    n = g.num_nodes
    simple = CSRGraph.from_edges(*g.to_coo(), n, duplicates=DuplicatePolicy.REMOVE)
    a = scipy_matrix(simple)
    deg = simple.out_degree()
    inv = np.zeros(n)
    inv[deg > 0] = 1.0 / deg[deg > 0]
    x = np.full(n, 1.0 / n)
    for _ in range(iterations):
        x = (1 - d) / n + d * (a.T @ (x * inv) + x[deg == 0].sum() / n)
    return x


@pytest.mark.parametrize(("n", "m", "seed"), GRAPHS)
def test_pagerank_fixed_iterations_matches_power_iteration(
    n: int, m: int, seed: int
) -> None:
    g, *_ = random_graph(n, m, seed)
    result = pagerank(g, iterations=20)
    assert result.iterations == 20
    assert np.abs(result.values - power_iteration(g, 20)).sum() <= 1e-9


def test_pagerank_on_rmat_symmetrised_matches_power_iteration() -> None:
    g = rmat(12, 8, seed=1, symmetrize=True)
    assert (
        np.abs(pagerank(g, iterations=20).values - power_iteration(g, 20)).sum() <= 1e-9
    )


def test_pagerank_is_independent_of_thread_count() -> None:
    import numba

    g, *_ = random_graph(1000, 5000, 4)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = pagerank(g, iterations=10).values
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one, pagerank(g, iterations=10).values)


# ---------------------------------------------------------------- bad input


def test_source_not_in_graph() -> None:
    g, *_ = random_graph(10, 20, 0)
    for fn in (bfs, sssp):
        with pytest.raises(
            AlgorithmError, match=r"source in (bfs|sssp).*\[0, 10\).*got 10"
        ):
            fn(g, 10)
        with pytest.raises(AlgorithmError, match="got -1"):
            fn(g, -1)


def test_negative_weight_names_the_first_bad_edge() -> None:
    g = CSRGraph.from_edges(
        np.array([0, 1, 2]),
        np.array([1, 2, 0]),
        edge_weight=np.array([1.0, -2.0, -3.0]),
    )
    with pytest.raises(AlgorithmError, match=r"-2.0 on edge 1 -> 2 .*2 such edges"):
        sssp(g, 0)
    ids = np.array([100, 200, 300])
    with pytest.raises(AlgorithmError, match=r"edge 200 -> 300"):
        sssp(g, 0, node_ids=ids)
    with pytest.raises(AlgorithmError, match="finite weights"):
        sssp(g, 0, weights=np.array([1.0, np.nan, 1.0]))


def test_empty_graph() -> None:
    g = CSRGraph.from_edges(np.array([], np.int64), np.array([], np.int64), 0)
    assert pagerank(g).values.size == 0
    assert connected_components(g).values.size == 0
    with pytest.raises(AlgorithmError, match="the graph is empty"):
        bfs(g, 0)


def test_graph_without_edges() -> None:
    g = CSRGraph.from_edges(np.array([], np.int64), np.array([], np.int64), 4)
    np.testing.assert_allclose(pagerank(g).values, 0.25)
    assert bfs(g, 2).values.tolist() == [-1, -1, 0, -1]
    assert sssp(g, 1).values.tolist() == [np.inf, 0.0, np.inf, np.inf]
    assert connected_components(g).values.tolist() == [0, 1, 2, 3]


def test_self_loops_and_multi_edges() -> None:
    # 0 -> 1 twice, 1 -> 1 (loop), 1 -> 2, 2 -> 0 (weights 5, 1, 7, 2, 1)
    src, dst = np.array([0, 0, 1, 1, 2]), np.array([1, 1, 1, 2, 0])
    g = CSRGraph.from_edges(src, dst, edge_weight=np.array([5.0, 1.0, 7.0, 2.0, 1.0]))
    assert sssp(g, 0).values.tolist() == [0.0, 1.0, 3.0]  # min weight per pair
    assert bfs(g, 0).values.tolist() == [0, 1, 2]
    nxg = nx.DiGraph(list(zip(src.tolist(), dst.tolist(), strict=True)))
    want = nx.pagerank(nxg, tol=1e-12, weight=None)
    got = pagerank(g, tol=1e-12).values
    assert np.abs(got - np.array([want[v] for v in range(3)])).sum() <= 1e-9


def test_bad_pagerank_parameters() -> None:
    g, *_ = random_graph(10, 20, 0)
    with pytest.raises(AlgorithmError, match="damping"):
        pagerank(g, damping=1.5)
    with pytest.raises(AlgorithmError, match="iterations"):
        pagerank(g, iterations=0)
    with pytest.raises(AlgorithmError, match="tol"):
        pagerank(g, tol=0.0)


# ---------------------------------------------------------------- shared kernels


def test_superstep_kernels_match_scipy() -> None:
    g, *_ = random_graph(300, 1500, 5, weights=True)
    assert g.edge_weight is not None
    rng = np.random.default_rng(1)
    values = rng.random(g.num_nodes)
    a = scipy_matrix(g)
    np.testing.assert_allclose(gather_sum(g.indptr, g.indices, values), a @ values)
    out = np.zeros(g.num_nodes)
    rows = np.arange(g.num_nodes)
    scatter_sum(g.indptr, g.indices, rows, values, out)
    np.testing.assert_allclose(out, a.T @ values)
    # Bellman-Ford by relax_min supersteps equals dijkstra.
    w = g.edge_weight.astype(np.float64)
    best = np.full(g.num_nodes, np.inf)
    best[0] = 0.0
    frontier = np.array([0])
    while frontier.size:
        frontier = relax_min(g.indptr, g.indices, w, frontier, best[frontier], 0, best)
    np.testing.assert_array_equal(best, sssp(g, 0).values)
    # pagerank_update: one step of the rule, with its L1 change.
    new = np.empty(g.num_nodes)
    change = pagerank_update(values, values, 0.5, 0.85, g.num_nodes, new)
    np.testing.assert_allclose(new, 0.15 / 300 + 0.85 * (values + 0.5 / 300))
    assert change == pytest.approx(np.abs(new - values).sum())


def test_zipf_source_graph_is_seeded_deduplicated_and_skewed() -> None:
    g = zipf_source_graph(1 << 12, 40_000, alpha=1.2, seed=5)
    again = zipf_source_graph(1 << 12, 40_000, alpha=1.2, seed=5)
    np.testing.assert_array_equal(g.indices, again.indices)
    simple = CSRGraph.from_edges(
        *g.to_coo(), g.num_nodes, duplicates=DuplicatePolicy.REMOVE
    )
    assert simple.num_edges == g.num_edges
    assert g.out_degree().max() / g.num_edges > 0.1
