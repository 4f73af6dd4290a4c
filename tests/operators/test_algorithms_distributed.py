"""Distributed PageRank, BFS, SSSP and CC against scipy.sparse.csgraph (tdorch.md O3).

Every algorithm x placement (hash, hash+combiner, HubSplit) x P in {1, 2, 4} on a
small skewed graph with self-loops and multi-edges, on the engine's SimMesh
(threads of this process); the process meshes (zmq, torch) and the executors run
a few of the same cases in ``test_algorithms_distributed_mesh.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from strata.engine.mesh import run_sim
from strata.operators.algorithms.distributed import run_distributed
from strata.operators.algorithms.errors import AlgorithmError
from strata.operators.algorithms.placement import (
    Cut,
    Hash,
    HubSplit,
    Placement,
    edge_ranks,
    partition_rank,
)
from strata.storage.csr import CSRGraph

PLACEMENTS: list[Placement] = [Hash(), Hash(combiner=True), HubSplit()]
WORKERS = [1, 2, 4]


def skewed_graph(n: int = 400, m: int = 3000, seed: int = 0) -> CSRGraph:
    """Zipf sources (hubs), uniform destinations, integer weights 1-100; loops and
    multi-edges kept, a few isolated vertices at the end."""
    rng = np.random.default_rng(seed)
    src = np.minimum(rng.zipf(1.5, m) - 1, n - 11)
    dst = rng.integers(0, n - 10, m)
    weight = rng.integers(1, 101, m).astype(np.float64)
    return CSRGraph.from_edges(src, dst, n, edge_weight=weight)


def scipy_matrix(g: CSRGraph) -> sp.csr_matrix:
    """Weighted adjacency, multi-edges reduced to their minimum weight (pitfall 7)."""
    src, dst = g.to_coo()
    assert g.edge_weight is not None
    key = src * g.num_nodes + dst
    order = np.lexsort((g.edge_weight, key))
    first = np.concatenate(([True], key[order][1:] != key[order][:-1]))
    pick = order[first]
    return sp.csr_matrix(
        (g.edge_weight[pick], (src[pick], dst[pick])), shape=(g.num_nodes, g.num_nodes)
    )


def pagerank_oracle(g: CSRGraph, iterations: int, d: float = 0.85) -> np.ndarray:
    """float64 power iteration, multi-edges counted, dangling mass spread uniformly."""
    n = g.num_nodes
    src, dst = g.to_coo()
    outdeg = np.diff(g.indptr)
    m = sp.csr_matrix((1.0 / outdeg[src], (dst, src)), shape=(n, n))
    r = np.full(n, 1.0 / n)
    for _ in range(iterations):
        r = (1 - d) / n + d * (m @ r + r[outdeg == 0].sum() / n)
    return r


def cc_oracle(g: CSRGraph) -> np.ndarray:
    _, labels = csgraph.connected_components(
        scipy_matrix(g), directed=True, connection="weak"
    )
    smallest = np.full(labels.max() + 1, g.num_nodes)
    np.minimum.at(smallest, labels, np.arange(g.num_nodes))
    return smallest[labels]


GRAPH = skewed_graph()
SOURCE = 0  # the top hub


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("placement", PLACEMENTS, ids=lambda p: p.name)
def test_bfs_equals_scipy(placement: Placement, workers: int) -> None:
    dist, report = run_distributed(
        "bfs", GRAPH, workers, placement, launch=run_sim, source=SOURCE
    )
    expected = csgraph.shortest_path(
        scipy_matrix(GRAPH), unweighted=True, indices=SOURCE
    )
    np.testing.assert_array_equal(dist, np.where(np.isinf(expected), -1, expected))
    assert (
        report.supersteps == int(expected[np.isfinite(expected)].max()) + 1
    )  # + the empty one


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("placement", PLACEMENTS, ids=lambda p: p.name)
def test_sssp_equals_dijkstra(placement: Placement, workers: int) -> None:
    source = 7  # not a hub
    dist, _ = run_distributed(
        "sssp", GRAPH, workers, placement, launch=run_sim, source=source
    )
    np.testing.assert_array_equal(
        dist, csgraph.dijkstra(scipy_matrix(GRAPH), indices=source)
    )


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("placement", PLACEMENTS, ids=lambda p: p.name)
def test_cc_equals_scipy_weak_components(placement: Placement, workers: int) -> None:
    labels, _ = run_distributed("cc", GRAPH, workers, placement, launch=run_sim)
    np.testing.assert_array_equal(labels, cc_oracle(GRAPH))


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("placement", PLACEMENTS, ids=lambda p: p.name)
def test_pagerank_matches_power_iteration(placement: Placement, workers: int) -> None:
    ranks, report = run_distributed(
        "pagerank", GRAPH, workers, placement, launch=run_sim, iterations=20
    )
    assert report.supersteps == 20
    assert np.abs(ranks - pagerank_oracle(GRAPH, 20)).sum() <= 1e-9


def test_pagerank_tolerance_matches_networkx() -> None:
    nx = pytest.importorskip("networkx")
    g = skewed_graph(300, 2000, seed=4)
    src, dst = g.to_coo()
    # networkx's DiGraph keeps one copy of a multi-edge: compare on a simple graph.
    simple = CSRGraph.from_edges(*np.unique(np.stack([src, dst]), axis=1), g.num_nodes)
    graph = nx.DiGraph()
    graph.add_nodes_from(range(simple.num_nodes))
    graph.add_edges_from(zip(*(a.tolist() for a in simple.to_coo()), strict=True))
    expected = nx.pagerank(graph, alpha=0.85, tol=1e-10, max_iter=200)
    ranks, report = run_distributed(
        "pagerank", simple, 4, HubSplit(), launch=run_sim, iterations=200, tol=1e-10
    )
    assert report.supersteps < 200
    assert (
        np.abs(ranks - np.array([expected[v] for v in range(g.num_nodes)])).sum()
        <= 1e-6
    )


def test_hubsplit_spreads_hub_edges_and_pulls_the_hub() -> None:
    workers = 4
    where = edge_ranks(GRAPH, workers, HubSplit())
    hub_edges = where[GRAPH.indptr[SOURCE] : GRAPH.indptr[SOURCE + 1]]
    assert set(hub_edges.tolist()) == set(range(workers))
    cut = Cut.build(GRAPH, workers, HubSplit())
    layout = cut.layout
    parts = [partition_rank(GRAPH, workers, r, HubSplit(), cut) for r in range(workers)]
    owner = int(layout.owner[SOURCE])
    for part in parts:
        pulled = part.pull_ids[part.pull_ptr[owner] : part.pull_ptr[owner + 1]]
        assert (int(layout.local[SOURCE]) in pulled.tolist()) == (part.rank != owner)
    assert sum(p.num_edges for p in parts) == GRAPH.num_edges
    assert np.array_equal(
        np.sort(np.concatenate([p.own for p in parts])), np.arange(400)
    )
    # Hash placement keeps every edge at its source's owner: nothing is pulled.
    assert all(
        partition_rank(GRAPH, workers, r, Hash()).pull_ptr[-1] == 0 for r in range(4)
    )


def test_hubsplit_lowers_max_load_on_a_skewed_graph() -> None:
    g = skewed_graph(2000, 40_000, seed=1)
    _, hashed = run_distributed(
        "pagerank", g, 4, Hash(combiner=True), launch=run_sim, iterations=2
    )
    _, split = run_distributed(
        "pagerank", g, 4, HubSplit(), launch=run_sim, iterations=2
    )
    assert hashed.tasks_max_mean > 1.3
    assert split.tasks_max_mean < 1.1
    assert split.max_tasks < hashed.max_tasks


def test_combiner_sends_fewer_bytes() -> None:
    _, plain = run_distributed(
        "pagerank", GRAPH, 4, Hash(), launch=run_sim, iterations=3
    )
    _, combined = run_distributed(
        "pagerank", GRAPH, 4, Hash(combiner=True), launch=run_sim, iterations=3
    )
    assert combined.total_bytes < plain.total_bytes
    assert plain.to_dict()["ranks"][0]["tasks"] > 0


def test_empty_graph_and_placement_names() -> None:
    empty = CSRGraph.from_edges(np.zeros(0, np.int64), np.zeros(0, np.int64), 3)
    labels, _ = run_distributed("cc", empty, 2, "hash", launch=run_sim)
    assert labels.tolist() == [0, 1, 2]
    ranks, _ = run_distributed("pagerank", empty, 2, "hubsplit", launch=run_sim)
    np.testing.assert_allclose(ranks, 1 / 3, rtol=0, atol=1e-15)
    dist, _ = run_distributed(
        "bfs", empty, 2, "hash-combiner", launch=run_sim, source=1
    )
    assert dist.tolist() == [-1, 0, -1]


@pytest.mark.parametrize(
    ("algorithm", "kwargs", "message"),
    [
        ("bfs", {"source": 400}, "source"),
        ("sssp", {"source": -1}, "source"),
        ("walk", {}, "algorithm"),
        ("cc", {"workers": 0}, "workers"),
        ("cc", {"placement": "edge-balanced"}, "placement"),
    ],
)
def test_bad_input_is_refused(
    algorithm: str, kwargs: dict[str, object], message: str
) -> None:
    workers = int(kwargs.pop("workers", 2))  # type: ignore[call-overload]
    placement = str(kwargs.pop("placement", "hash"))
    with pytest.raises(AlgorithmError, match=message):
        run_distributed(algorithm, GRAPH, workers, placement, launch=run_sim, **kwargs)


def test_negative_weights_are_refused() -> None:
    g = CSRGraph.from_edges(
        np.array([0, 1]), np.array([1, 2]), 3, edge_weight=np.array([1.0, -2.0])
    )
    with pytest.raises(AlgorithmError, match="weights >= 0"):
        run_distributed("sssp", g, 2, "hash", launch=run_sim, source=0)
