"""Two balance constraints (vertices and edges) and the edge balance in every report.

Oracles: part weights and degree sums recounted by plain Python loops over the
assignment, caps from the definition in ``strata.partition.metrics``, and the cut
from networkx (``nx.cut_size`` summed over parts).
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from strata.partition import (
    GremPartitioner,
    MultilevelPartitioner,
    PartitionError,
    resolve,
)
from strata.partition.backends import (
    KahipPartitioner,
    PymetisPartitioner,
    backend_available,
)
from strata.partition.metrics import as_undirected_simple
from strata.storage import CSRGraph
from strata.storage.generators import rmat, sbm


def _graphs() -> dict[str, CSRGraph]:
    """Random graphs with skewed degrees (edge balance differs from vertex balance)."""
    power = nx.barabasi_albert_graph(1500, 4, seed=3)
    src, dst = (np.array(x) for x in zip(*power.edges(), strict=True))
    return {
        "rmat": as_undirected_simple(rmat(11, 8, seed=1, symmetrize=True)),
        "sbm": sbm(1200, 6, avg_degree=10, intra_fraction=0.8, seed=2)[0],
        "barabasi": CSRGraph.from_edges(src, dst, 1500, symmetrize=True),
    }


GRAPHS = _graphs()


def _cap(total: float, k: int, eps: float) -> float:
    return max(math.ceil(total / k), math.floor((1 + eps) * total / k))


def _brute_force(graph: CSRGraph, a: np.ndarray, k: int) -> tuple[list[int], list[int]]:
    """Vertices and degree sums per part, by loops over the adjacency."""
    g = as_undirected_simple(graph)
    sizes = [0] * k
    degrees = [0] * k
    for v in range(g.num_nodes):
        sizes[int(a[v])] += 1
        degrees[int(a[v])] += int(g.indptr[v + 1] - g.indptr[v])
    return sizes, degrees


def _nx_cut(graph: CSRGraph, a: np.ndarray, k: int) -> float:
    g = as_undirected_simple(graph)
    src, dst = g.to_coo()
    nxg = nx.Graph()
    nxg.add_nodes_from(range(g.num_nodes))
    nxg.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
    parts = [set(np.flatnonzero(a == p).tolist()) for p in range(k)]
    return sum(nx.cut_size(nxg, parts[p]) for p in range(k)) / 2


def _check_both(
    graph: CSRGraph, a: np.ndarray, k: int, eps: float, eps2: float
) -> None:
    sizes, degrees = _brute_force(graph, a, k)
    assert sum(sizes) == graph.num_nodes
    assert max(sizes) <= _cap(sum(sizes), k, eps)
    assert max(degrees) <= _cap(sum(degrees), k, eps2)


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("k", [4, 8])
def test_multilevel_honours_both_caps(name: str, k: int) -> None:
    graph = GRAPHS[name]
    for seed in (0, 1):
        p = MultilevelPartitioner(k, 0.03, seed=seed, edge_imbalance=0.10).partition(
            graph
        )
        _check_both(graph, p.assignment, k, 0.03, 0.10)
        sizes, degrees = _brute_force(graph, p.assignment, k)
        assert p.report.edge_balance == pytest.approx(max(degrees) * k / sum(degrees))
        assert p.report.vertex_balance == pytest.approx(max(sizes) * k / sum(sizes))
        assert p.report.edge_cut == _nx_cut(graph, p.assignment, k)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_grem_honours_both_caps(name: str) -> None:
    graph = GRAPHS[name]
    k = 8
    p = GremPartitioner(k, 0.03, seed=1, edge_imbalance=0.10).partition(graph)
    _check_both(graph, p.assignment, k, 0.03, 0.10)
    assert p.report.edge_cut == _nx_cut(graph, p.assignment, k)
    assert "degrees" in p.report.phase_seconds


def test_edge_constraint_lowers_edge_balance_on_power_law() -> None:
    """Without the constraint RMAT's dense core crowds one part; with it, no part."""
    graph = GRAPHS["rmat"]
    free = MultilevelPartitioner(8, seed=0).partition(graph).report
    held = MultilevelPartitioner(8, seed=0, edge_imbalance=0.10).partition(graph)
    assert free.edge_balance > 1.5
    assert held.report.edge_balance <= 1.10 + 1e-9
    # the cut pays for it, but stays below hash's 1 - 1/k
    assert held.report.edge_cut_fraction < 1 - 1 / 8


def test_weighted_vertices_with_edge_constraint() -> None:
    """Node weights are the first constraint, degrees the second."""
    graph = GRAPHS["sbm"]
    rng = np.random.default_rng(0)
    weights = rng.integers(1, 5, graph.num_nodes).astype(np.float64)
    k = 4
    p = MultilevelPartitioner(k, 0.05, seed=0, edge_imbalance=0.10).partition(
        graph, node_weights=weights
    )
    per_part = np.bincount(p.assignment, weights=weights, minlength=k)
    assert per_part.max() <= _cap(weights.sum(), k, 0.05)
    _, degrees = _brute_force(graph, p.assignment, k)
    assert max(degrees) <= _cap(sum(degrees), k, 0.10)


def test_same_seed_same_assignment() -> None:
    graph = GRAPHS["barabasi"]
    for make in (
        lambda: MultilevelPartitioner(4, seed=3, edge_imbalance=0.05),
        lambda: GremPartitioner(4, seed=3, edge_imbalance=0.05),
    ):
        a = make().partition(graph).assignment
        b = make().partition(graph).assignment
        assert np.array_equal(a, b)


@pytest.mark.parametrize("bad", [-0.1, float("nan")])
def test_bad_edge_imbalance_is_refused(bad: float) -> None:
    with pytest.raises(PartitionError, match="edge_imbalance"):
        MultilevelPartitioner(4, edge_imbalance=bad)
    with pytest.raises(PartitionError, match="edge_imbalance"):
        GremPartitioner(4, edge_imbalance=bad)


def test_resolve_passes_edge_imbalance_or_refuses() -> None:
    ml, backend = resolve("multilevel", k=4, edge_imbalance=0.1)
    assert backend == "strata-multilevel"
    assert isinstance(ml, MultilevelPartitioner)
    assert ml.edge_imbalance == 0.1
    grem, _ = resolve("grem", k=4, edge_imbalance=0.1)
    assert isinstance(grem, GremPartitioner)
    assert grem.edge_imbalance == 0.1
    with pytest.raises(PartitionError, match="edge_imbalance"):
        resolve("ldg", k=4, edge_imbalance=0.1)


@pytest.mark.parametrize("backend", ["pymetis", "kahip"])
def test_backends_report_edge_balance(backend: str) -> None:
    if not backend_available(backend):
        pytest.skip(f"{backend} not installed")
    graph = GRAPHS["rmat"]
    k = 4
    partitioner = (
        PymetisPartitioner(k, seed=1) if backend == "pymetis" else KahipPartitioner(k)
    )
    p = partitioner.partition(graph)
    _, degrees = _brute_force(graph, p.assignment, k)
    assert p.report.edge_balance == pytest.approx(max(degrees) * k / sum(degrees))
    assert p.report.edge_cut == _nx_cut(graph, p.assignment, k)


def test_pymetis_ncon2_reports_what_it_reached() -> None:
    if not backend_available("pymetis"):
        pytest.skip("pymetis not installed")
    graph = GRAPHS["sbm"]
    p = PymetisPartitioner(4, seed=1, edge_imbalance=0.1).partition(graph)
    _, degrees = _brute_force(graph, p.assignment, 4)
    assert p.report.edge_balance == pytest.approx(max(degrees) * 4 / sum(degrees))
