"""Placement invariants, SLO sinking on real RTT (pitfall 3) and the baselines."""

from __future__ import annotations

import numpy as np
import pytest

from strata.storage.csr import CSRGraph
from strata.storage.geo.cost import CostConfig
from strata.storage.geo.items import ItemSpace, Placement, popcount32
from strata.storage.geo.layers import LayerTree
from strata.storage.geo.placement import (
    GeoPlaceConfig,
    full_replication,
    geolayer_place,
    hash_layout,
    random_k,
    single_primary,
    top_k,
)
from strata.storage.geo.topology import table1
from strata.storage.geo.workload import (
    GeoWorkload,
    GeoWorkloadConfig,
    synthetic_workload,
)

TOPO = table1()
TREE = LayerTree.build(TOPO)


@pytest.fixture(scope="module")
def small() -> GeoWorkload:
    return synthetic_workload(TOPO, GeoWorkloadConfig.small(), seed=3)


def test_geolayer_invariants_home_budget_determinism(small: GeoWorkload) -> None:
    w = small
    cfg = GeoPlaceConfig(replica_budget=0.5)
    a = geolayer_place(w.history, w.space, w.graph, TREE, TOPO, cfg)
    b = geolayer_place(w.history, w.space, w.graph, TREE, TOPO, cfg)
    a.check(w.space)  # every home bit set
    assert np.array_equal(a.holders, b.holders)  # deterministic per seed
    home = Placement.home_only(w.space).storage_bytes(w.space, 5)
    extra = a.storage_bytes(w.space, 5) - home
    assert np.all(extra <= 0.5 * home + 1e-9)  # budget respected per region
    assert extra.sum() > 0
    assert (a.holders >> np.uint32(5)).max() == 0  # only 5 region bits


def _one_pattern(
    reader: int, home: int, slo_ms: float
) -> tuple[ItemSpace, CSRGraph, object]:
    """A pattern (u, edge, v) homed at ``home``, read 3 times by ``reader``."""
    from strata.storage.geo.workload import Requests

    graph = CSRGraph.from_edges(np.array([0]), np.array([1]), 4)
    # Vertices 2 and 3 are homed at the reader, so its replica budget is not zero.
    homes = np.array([home, home, reader, reader, home])
    space = ItemSpace(4, 1, np.array([100, 100, 100, 100, 32]), homes)
    n = 3
    req = Requests(
        origin=np.full(n, reader, np.int8),
        is_write=np.zeros(n, bool),
        kind=np.ones(n, np.int8),
        indptr=np.arange(0, 3 * n + 1, 3),
        items=np.tile([0, 4, 1], n),
        request_rounds=np.arange(0, 2 * n + 1, 2),
        round_indptr=np.array([0, 1, 3, 4, 6, 7, 9]),
        source=np.zeros(n, np.int64),
        slo_ms=np.full(n, slo_ms),
        arrival_s=np.arange(n, dtype=float),
    )
    return space, graph, req


def test_slo_sinking_uses_real_rtt_inside_a_cluster() -> None:
    # Pitfall 3: LON reads a pattern homed at USW (136 ms, yet both in cluster A).
    # With a 100 ms SLO the pattern must be copied to LON, with assoc and gain off.
    cost_off = GeoPlaceConfig(
        precache=False, replica_budget=10.0, cost=CostConfig(assoc_usd=0.0)
    )
    space, graph, req = _one_pattern(reader=2, home=1, slo_ms=100.0)
    p = geolayer_place(req, space, graph, TREE, TOPO, cost_off)  # type: ignore[arg-type]
    assert p.holds(2)[[0, 1, 4]].all()
    # The copy goes to the reader itself, not to USE (also in cluster A).
    assert not p.holds(0)[[0, 1, 4]].any()


def test_gain_test_replicates_when_it_pays() -> None:
    # Same 200 ms case with the default association weight: the penalty saved wins.
    space, graph, req = _one_pattern(reader=2, home=1, slo_ms=200.0)
    cfg = GeoPlaceConfig(precache=False, replica_budget=10.0)
    p = geolayer_place(req, space, graph, TREE, TOPO, cfg)  # type: ignore[arg-type]
    assert p.holds(2)[[0, 1, 4]].all()


def test_baselines(small: GeoWorkload) -> None:
    w = small
    r3 = random_k(w.space, 5, 3, seed=1)
    r3.check(w.space)
    assert (popcount32(r3.holders) == 3).all()
    assert np.array_equal(r3.holders, random_k(w.space, 5, 3, seed=1).holders)
    t3 = top_k(w.history, w.space, 5, 3)
    t3.check(w.space)
    assert popcount32(t3.holders).max() <= 3
    full = full_replication(w.space, 5)
    assert (popcount32(full.holders) == 5).all()
    sp, single = single_primary(w.space, w.graph, 0)
    single.check(sp)
    assert (sp.home == 0).all()
    hs, hp = hash_layout(w.space, w.graph, 5)
    hp.check(hs)
    assert np.bincount(hs.home[: hs.num_vertices], minlength=5).min() > 300
    # An edge lives with its source vertex.
    src = np.repeat(np.arange(w.graph.num_nodes), np.diff(w.graph.indptr))
    assert np.array_equal(hs.home[hs.num_vertices :], hs.home[src])


def test_top_k_picks_the_heaviest_readers() -> None:
    from strata.storage.geo.workload import Requests

    space = ItemSpace(1, 0, np.array([10]), np.array([0]))
    origins = [3, 3, 3, 4, 4, 2]
    n = len(origins)
    req = Requests(
        np.array(origins, np.int8),
        np.zeros(n, bool),
        np.ones(n, np.int8),
        np.arange(n + 1),
        np.zeros(n, np.int64),
        np.arange(n + 1),
        np.arange(n + 1),
        np.zeros(n, np.int64),
        np.full(n, 100.0),
        np.zeros(n),
    )
    assert top_k(req, space, 5, 3).holders.tolist() == [0b11001]  # home 0, then 3, 4
