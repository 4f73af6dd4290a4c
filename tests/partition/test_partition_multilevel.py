import numpy as np
import pymetis
import pytest

from strata.partition.baselines import MetisReference, RandomPartitioner
from strata.partition.metrics import balance_cap
from strata.partition.multilevel import MultilevelPartitioner
from strata.storage import CSRGraph

SEEDS = tuple(range(1, 12))


def _metis_median(graph, k, seeds=SEEDS):
    return np.median(
        [MetisReference(k, seed=s).partition(graph).report.edge_cut for s in seeds]
    )


def _ours_median(graph, k, seeds=SEEDS, **kw):
    return np.median(
        [
            MultilevelPartitioner(k, seed=s, **kw).partition(graph).report.edge_cut
            for s in seeds
        ]
    )


def test_ring_is_cut_k_times():
    src = np.arange(400)
    ring = CSRGraph.from_edges(src, (src + 1) % 400)
    for k in (2, 4, 8):
        p = MultilevelPartitioner(k, seed=0).partition(ring)
        assert p.report.edge_cut == k
        assert max(p.report.part_sizes) <= balance_cap(400, k, 0.03)


@pytest.mark.parametrize("k", [2, 4, 8])
def test_quality_close_to_pymetis(community, geometric, k):
    # Small graphs: a cut of ~200 edges varies +-20% across seeds for both
    # partitioners, so the unit test allows 1.15x; the 1.10x bar is checked at
    # benchmark scale (benchmarks/partition).
    assert pymetis is not None
    for graph in (community, geometric):
        assert _ours_median(graph, k) <= 1.15 * _metis_median(graph, k)


def test_planted_blocks_are_recovered(community):
    # 8 blocks, 85% of edges inside: the planted partition cuts ~15% of edges
    p = MultilevelPartitioner(8, seed=0).partition(community)
    assert p.report.edge_cut_fraction < 0.17


@pytest.mark.parametrize("k", [2, 3, 5, 16])
def test_balance_cap_holds(grid, powerlaw, k):
    for graph in (grid, powerlaw):
        p = MultilevelPartitioner(k, seed=1).partition(graph)
        assert max(p.report.part_sizes) <= balance_cap(graph.num_nodes, k, 0.03)
        assert p.assignment.min() >= 0
        assert p.assignment.max() < k


def test_same_seed_same_assignment(community):
    a = MultilevelPartitioner(4, seed=7).partition(community).assignment
    b = MultilevelPartitioner(4, seed=7).partition(community).assignment
    c = MultilevelPartitioner(4, seed=8).partition(community).assignment
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_isolated_vertices_fill_light_parts(powerlaw):
    degree = np.diff(powerlaw.indptr)
    assert (degree == 0).sum() > 100  # RMAT makes isolated vertices
    p = MultilevelPartitioner(4, seed=0).partition(powerlaw)
    assert max(p.report.part_sizes) <= balance_cap(powerlaw.num_nodes, 4, 0.03)
    random_cut = RandomPartitioner(4).partition(powerlaw).report.edge_cut
    assert p.report.edge_cut < 0.9 * random_cut


def test_node_weights_are_balanced(grid):
    w = np.ones(grid.num_nodes)
    w[:30] = 20.0  # the first grid row is heavy
    p = MultilevelPartitioner(4, seed=0).partition(grid, node_weights=w)
    sizes = np.bincount(p.assignment, weights=w, minlength=4)
    assert sizes.max() <= balance_cap(w.sum(), 4, 0.03)
    assert p.report.vertex_balance == pytest.approx(sizes.max() * 4 / w.sum())


def test_heavy_edges_stay_uncut():
    # two 10-cliques joined by 10 light edges; one clique's internal edges are heavy
    src, dst, wgt = [], [], []
    for base in (0, 10):
        for i in range(10):
            for j in range(i + 1, 10):
                src.append(base + i)
                dst.append(base + j)
                wgt.append(100.0)
    for i in range(10):
        src.append(i)
        dst.append(10 + (i + 3) % 10)
        wgt.append(1.0)
    g = CSRGraph.from_edges(
        np.array(src), np.array(dst), 20, edge_weight=np.array(wgt), symmetrize=True
    )
    p = MultilevelPartitioner(2, seed=0).partition(g)
    assert p.report.edge_cut == 10.0
    assert p.report.edge_cut_fraction == pytest.approx(10 / (90 * 100 + 10))


def test_k_equal_one_and_k_equal_n(ring8):
    assert MultilevelPartitioner(1).partition(ring8).assignment.tolist() == [0] * 8
    p = MultilevelPartitioner(8).partition(ring8)
    assert sorted(p.assignment.tolist()) == list(range(8))


def test_report_fields(community):
    p = MultilevelPartitioner(4, seed=0).partition(community)
    r = p.report
    assert r.method == "metis"
    assert set(r.phase_seconds) == {"coarsen", "initial", "refine"}
    assert r.num_edges == community.num_edges // 2
    assert r.imbalance == r.vertex_balance <= 1.03
    assert r.replication_factor > 1.0
    assert r.config["k"] == 4
    assert r.to_dict()["imbalance"] == r.vertex_balance
