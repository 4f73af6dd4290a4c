"""k-way FM refinement and label-propagation coarsening.

Oracles: the cut recounted by numpy over the edge list, part weights recounted by
``np.bincount``, and the caps of ``strata.partition.metrics``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from strata.partition import MultilevelPartitioner
from strata.partition._graph import prepare
from strata.partition._rng import new_state
from strata.partition.coarsen import Clustering, CoarsenConfig, coarsen
from strata.partition.fm import fm_refine
from strata.partition.metrics import balance_cap
from strata.partition.refine import level_bounds, new_info
from strata.storage.generators import sbm


def _cut(graph, where: np.ndarray) -> int:
    src = np.repeat(np.arange(graph.num_nodes), np.diff(graph.xadj))
    return int((where[src] != where[graph.adjncy]).sum() // 2)


@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("edges", [False, True])
def test_fm_never_raises_the_cut_and_keeps_caps(k: int, edges: bool) -> None:
    g, _ = sbm(800, k, avg_degree=8, intra_fraction=0.8, seed=k)
    _, wg = prepare(g, k, None, "test")
    if edges:
        wg = wg.with_degree_constraint()
    rng = np.random.default_rng(0)
    where = (rng.permutation(wg.num_nodes) % k).astype(np.int32)  # balanced, bad
    info, cut = new_info(wg, where, k)
    cap = int(balance_cap(float(wg.vwgt.sum()), k, 0.05))
    cap2 = int(balance_cap(float(wg.vwgt2.sum()), k, 0.2)) if edges else 0
    bounds = level_bounds(info, cap, 0.05, None, cap2, 0.2 if edges else None)
    before = cut
    cap2_before = (
        np.bincount(where, weights=wg.vwgt2, minlength=k).max() if edges else 0
    )
    after = fm_refine(wg, info, bounds, cut, 4, 64, new_state(1))
    assert after == _cut(wg, info.where)  # the incremental cut is exact
    assert after < before
    assert np.bincount(info.where, minlength=k).max() <= cap
    if edges:
        degree_sums = np.bincount(info.where, weights=wg.vwgt2, minlength=k)
        assert degree_sums.max() <= max(cap2, cap2_before)
        assert np.array_equal(info.pwgts2, degree_sums.astype(np.int64))
    assert np.array_equal(info.pwgts, np.bincount(info.where, minlength=k))


def test_label_propagation_levels_keep_weight_and_edges() -> None:
    g, _ = sbm(2000, 8, avg_degree=10, intra_fraction=0.9, seed=0)
    _, wg = prepare(g, 8, None, "test")
    config = CoarsenConfig(clustering=Clustering.LABEL_PROPAGATION)
    levels = coarsen(wg, 8, config, new_state(0))
    assert len(levels) >= 2
    total_edges = wg.adjwgt.sum()
    for fine, coarse in itertools.pairwise(levels):
        assert fine.cmap is not None
        assert coarse.graph.vwgt.sum() == wg.vwgt.sum()
        # edge weight inside clusters disappears, the rest is kept
        src = np.repeat(np.arange(fine.graph.num_nodes), np.diff(fine.graph.xadj))
        crossing = fine.cmap[src] != fine.cmap[fine.graph.adjncy]
        assert coarse.graph.adjwgt.sum() == fine.graph.adjwgt[crossing].sum()
    assert levels[-1].graph.adjwgt.sum() <= total_edges


def test_label_propagation_partition_is_valid() -> None:
    g, _ = sbm(3000, 8, avg_degree=10, intra_fraction=0.9, seed=1)
    config = CoarsenConfig(clustering=Clustering.LABEL_PROPAGATION)
    p = MultilevelPartitioner(8, seed=0, coarsening=config).partition(g)
    assert np.bincount(p.assignment, minlength=8).max() <= balance_cap(3000, 8, 0.03)
    assert p.report.edge_cut_fraction < 0.5  # far below hash's 7/8


def test_vcycles_never_raise_the_cut() -> None:
    g, _ = sbm(3000, 8, avg_degree=10, intra_fraction=0.8, seed=2)
    one = MultilevelPartitioner(8, seed=4).partition(g).report
    more = MultilevelPartitioner(8, seed=4, vcycles=2).partition(g).report
    assert more.edge_cut <= one.edge_cut
    assert more.vertex_balance <= 1.03
