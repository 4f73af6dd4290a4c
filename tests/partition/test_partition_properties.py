"""Hypothesis properties shared by every vertex partitioner."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata.partition.baselines import RandomPartitioner
from strata.partition.book import build_book
from strata.partition.grem import GremPartitioner
from strata.partition.metrics import balance_cap
from strata.partition.multilevel import MultilevelPartitioner
from strata.partition.streaming import FennelPartitioner, LDGPartitioner
from strata.storage import CSRGraph
from strata.storage.generators import sbm

CAPPED = [
    MultilevelPartitioner,
    LDGPartitioner,
    FennelPartitioner,
    GremPartitioner,
    RandomPartitioner,
]
SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def graphs_and_k(draw):
    n = draw(st.integers(2, 60))
    m = draw(st.integers(1, 4 * n))
    src = np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)))
    dst = np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)))
    keep = src != dst
    if not keep.any():
        src, dst = np.array([0]), np.array([1])
    else:
        src, dst = src[keep], dst[keep]
    k = draw(st.integers(1, n))
    seed = draw(st.integers(0, 2**16))
    return CSRGraph.from_edges(src, dst, n), k, seed


@SETTINGS
@given(case=graphs_and_k(), which=st.sampled_from(CAPPED))
def test_every_node_assigned_once_within_the_cap(case, which):
    graph, k, seed = case
    p = which(k, seed=seed).partition(graph)
    a = p.assignment
    assert a.shape == (graph.num_nodes,)
    assert a.dtype == np.int32
    assert a.min() >= 0
    assert a.max() < k
    assert sum(p.report.part_sizes) == graph.num_nodes
    assert max(p.report.part_sizes) <= balance_cap(graph.num_nodes, k, 0.03)


@SETTINGS
@given(
    blocks=st.integers(2, 6),
    k=st.sampled_from([2, 3, 4]),
    seed=st.integers(0, 1000),
    which=st.sampled_from([MultilevelPartitioner, GremPartitioner, FennelPartitioner]),
)
def test_cut_no_worse_than_random_on_community_graphs(blocks, k, seed, which):
    graph, _ = sbm(60 * blocks, blocks, avg_degree=8, intra_fraction=0.85, seed=seed)
    ours = (
        which(k, seed=seed, passes=3)
        if which is FennelPartitioner
        else which(k, seed=seed)
    )
    cut = ours.partition(graph).report.edge_cut
    assert cut <= RandomPartitioner(k, seed=seed).partition(graph).report.edge_cut


@SETTINGS
@given(case=graphs_and_k(), hops=st.integers(0, 2))
def test_book_halos_equal_brute_force(case, hops):
    graph, k, seed = case
    p = RandomPartitioner(k, seed=seed).partition(graph)
    book = build_book(graph, p, halo_hops=hops)
    src, dst = graph.to_coo()
    for part in range(k):
        reach = p.assignment == part
        for _ in range(hops):  # one in-hop: sources of edges into the set
            reach = reach | np.isin(np.arange(graph.num_nodes), src[reach[dst]])
        expected = np.flatnonzero(reach & (p.assignment != part))
        assert np.array_equal(book.halo(part), expected)
        ids = np.concatenate([book.owned_ids(part), book.halo(part)])
        assert np.array_equal(book.to_global(part, book.to_local(part, ids)), ids)
