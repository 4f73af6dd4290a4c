"""The synthetic workload of spec §3.7: mix, homophily, structure, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from strata.storage.geo.errors import GeoError
from strata.storage.geo.topology import table1, uniform
from strata.storage.geo.workload import (
    KIND_ONE_HOP,
    KIND_TWO_HOP,
    KIND_WALK,
    KIND_WRITE,
    GeoWorkloadConfig,
    synthetic_workload,
)


def test_workload_shape_and_mix() -> None:
    cfg = GeoWorkloadConfig(num_vertices=3000, history_ops=4000, test_ops=1000)
    w = synthetic_workload(table1(), cfg, seed=1)
    h = w.history
    src = np.repeat(np.arange(w.graph.num_nodes), np.diff(w.graph.indptr))
    same = w.vertex_home[src] == w.vertex_home[w.graph.indices]
    assert 0.75 < same.mean() < 0.85  # regional homophily 0.8
    assert abs(h.is_write.mean() - 0.1) < 0.02
    reads = h.kind[~h.is_write]
    for kind, share in ((KIND_ONE_HOP, 0.3), (KIND_TWO_HOP, 0.3), (KIND_WALK, 0.4)):
        assert abs((reads == kind).mean() - share) < 0.04
    away = h.origin != w.vertex_home[h.source]
    assert abs(away.mean() - 0.3) < 0.03
    assert w.mutable[h.source[h.is_write]].all()
    assert set(np.unique(h.slo_ms).tolist()) == {100.0, 200.0}
    sizes = np.diff(h.indptr)
    assert sizes.max() <= cfg.max_items
    assert (sizes[h.kind == KIND_WRITE] == 1).all()
    vb = w.space.item_bytes[: w.space.num_vertices]
    assert vb.min() >= 64
    assert vb.max() <= 256
    assert (w.space.item_bytes[w.space.num_vertices :] == 32).all()
    assert np.all(np.diff(w.test.arrival_s) > 0)


def test_requests_are_hops_of_real_edges() -> None:
    w = synthetic_workload(table1(), GeoWorkloadConfig.small(), seed=2)
    h, v = w.history, w.space.num_vertices
    for i in range(0, 300):
        items = h.items_of(i)
        assert np.unique(items).size == items.size
        rounds = h.rounds_of(i)
        assert rounds[0].tolist() == [h.source[i]]
        assert np.array_equal(np.concatenate(rounds), items)
        edges = items[items >= v] - v
        src = np.searchsorted(w.graph.indptr, edges, side="right") - 1
        # every edge item starts at a vertex of the request
        assert np.isin(src, items[items < v]).all()
    sub = h.subset(np.array([5, 2]))
    assert np.array_equal(sub.items_of(0), h.items_of(5))
    assert [r.tolist() for r in sub.rounds_of(1)] == [
        r.tolist() for r in h.rounds_of(2)
    ]


def test_deterministic_and_test_set_differs() -> None:
    a = synthetic_workload(table1(), GeoWorkloadConfig.small(), seed=4)
    b = synthetic_workload(table1(), GeoWorkloadConfig.small(), seed=4)
    assert np.array_equal(a.history.items, b.history.items)
    assert np.array_equal(a.test.arrival_s, b.test.arrival_s)
    assert not np.array_equal(a.history.source[:500], a.test.source[:500])


def test_bad_config() -> None:
    with pytest.raises(GeoError, match="regions"):
        synthetic_workload(uniform(3, 70.0, 90.0), GeoWorkloadConfig.small())
    with pytest.raises(GeoError, match="write_fraction"):
        synthetic_workload(
            table1(), GeoWorkloadConfig(num_vertices=100, write_fraction=2.0)
        )
