import networkx as nx
import numpy as np
import pytest
from partition_helpers import from_networkx

from strata.partition.metrics import (
    as_undirected_simple,
    balance,
    balance_cap,
    edge_balance,
    edge_cut,
    halo_sizes,
    is_simple_symmetric,
    replication_factor,
    undirected_edges,
    vertex_cut_replication,
)
from strata.storage import CSRGraph


def test_ring_cut_balance_halo(ring8):
    a = np.array([0, 0, 0, 0, 1, 1, 1, 1], dtype=np.int32)
    assert edge_cut(ring8, a) == 2.0  # {3,4} and {7,0}, each counted once
    assert balance(a, 2) == 1.0
    assert halo_sizes(ring8, a, 2).tolist() == [2, 2]  # part 0 sees 4 and 7
    assert replication_factor(ring8, a, 2) == 1.5
    assert edge_balance(ring8, a, 2) == 1.0


def test_cut_matches_networkx_on_a_grid(grid):
    nxg = nx.grid_2d_graph(30, 30)
    nxg = nx.convert_node_labels_to_integers(nxg)
    a = np.random.default_rng(0).integers(0, 4, grid.num_nodes).astype(np.int32)
    expected = (
        sum(nx.cut_size(nxg, np.flatnonzero(a == p).tolist()) for p in range(4)) / 2
    )
    assert edge_cut(grid, a) == expected


def test_as_undirected_simple_drops_loops_and_duplicates():
    g = CSRGraph.from_edges(np.array([0, 0, 1, 2, 2]), np.array([1, 1, 1, 0, 3]))
    s = as_undirected_simple(g)
    assert not is_simple_symmetric(g)
    assert is_simple_symmetric(s)
    assert s.to_coo()[0].tolist() == [0, 0, 1, 2, 2, 3]
    assert s.indices.tolist() == [1, 2, 0, 0, 3, 2]
    assert as_undirected_simple(s) is s  # already simple: no copy


def test_weighted_directed_edges_sum_both_directions():
    g = CSRGraph.from_edges(
        np.array([0, 1, 1]), np.array([1, 0, 2]), edge_weight=np.array([2.0, 3.0, 1.0])
    )
    a = np.array([0, 1, 1], dtype=np.int32)
    assert edge_cut(g, a) == 5.0  # w({0,1}) = 2 + 3


def test_balance_with_weights_and_mask():
    a = np.array([0, 0, 1, 1], dtype=np.int32)
    assert balance(a, 2, np.array([3.0, 1.0, 1.0, 1.0])) == pytest.approx(4 / 3)
    assert balance(a, 2, mask=np.array([True, False, True, True])) == pytest.approx(
        4 / 3
    )
    assert balance_cap(100, 8, 0.03) == 13.0  # ceil(12.5) beats floor(12.875)
    assert balance_cap(1000, 8, 0.03) == 128.0


def test_halo_sizes_brute_force(community):
    a = np.random.default_rng(1).integers(0, 5, community.num_nodes).astype(np.int32)
    src, dst = community.to_coo()
    for p in range(5):
        inside = a == p
        expected = np.unique(dst[inside[src] & ~inside[dst]]).size
        assert halo_sizes(community, a, 5)[p] == expected


def test_vertex_cut_replication_brute_force():
    g = from_networkx(nx.karate_club_graph())
    u, v = undirected_edges(g)
    parts = np.random.default_rng(0).integers(0, 3, u.size).astype(np.int32)
    holders = [set() for _ in range(g.num_nodes)]
    for x, y, p in zip(u, v, parts, strict=True):
        holders[x].add(p)
        holders[y].add(p)
    expected = sum(len(h) for h in holders) / sum(1 for h in holders if h)
    assert vertex_cut_replication(u, v, parts, g.num_nodes, 3) == pytest.approx(
        expected
    )
