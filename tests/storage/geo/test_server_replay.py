"""replay(): the harness side of A1 agrees with the twin on everything but timing."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest

from strata.storage.geo.items import Placement
from strata.storage.geo.replay import replay
from strata.storage.geo.routing import NearestRouter, RandomRouter
from strata.storage.geo.server import RegionCluster
from strata.storage.geo.topology import Topology, table1
from strata.storage.geo.twin import simulate
from strata.storage.geo.workload import (
    GeoWorkload,
    GeoWorkloadConfig,
    synthetic_workload,
)

pytestmark = pytest.mark.multiprocess

# Three of Table I's regions (USE, USW, LON): fewer server processes to start.
_T1 = table1()
TOPO = Topology(_T1.regions[:3], _T1.rtt_ms[:3, :3], _T1.bw_mbps[:3, :3])


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[GeoWorkload, Placement, RegionCluster]]:
    cfg = dataclasses.replace(GeoWorkloadConfig.small(), regions=3)
    wl = synthetic_workload(TOPO, cfg, seed=0)
    placement = Placement.home_only(wl.space)
    for r in range(TOPO.num_regions):  # a few replicas, so routing has choices
        placement.add(r, np.arange(r, wl.space.num_vertices, 7))
    with RegionCluster.start(TOPO, placement, wl.space, {}, time_scale=0.05) as c:
        yield wl, placement, c


@pytest.mark.parametrize("semantics", ["pattern", "traversal"])
def test_replay_serves_what_the_twin_plans(
    world: tuple[GeoWorkload, Placement, RegionCluster], semantics: str
) -> None:
    wl, placement, cluster = world
    req = wl.test.subset(np.arange(60))
    # Spread arrivals out: this test checks plans and bytes, not queueing.
    req = dataclasses.replace(req, arrival_s=req.arrival_s * 5.0)
    twin = simulate(
        req,
        placement,
        RandomRouter(placement, seed=5),
        TOPO,
        space=wl.space,
        semantics=semantics,  # type: ignore[arg-type]
    )
    out = replay(cluster, req, RandomRouter(placement, seed=5), semantics=semantics)  # type: ignore[arg-type]
    assert out.errors == ()
    assert not out.failed.any()
    np.testing.assert_array_equal(out.is_write, req.is_write)
    if semantics == "pattern":  # same seeded plans, in the same order
        np.testing.assert_array_equal(out.regions_contacted, twin.regions_contacted)
        np.testing.assert_array_equal(out.served_by, twin.served_by)
    else:  # every item of every read is served exactly once
        reads = np.flatnonzero(~req.is_write)
        assert out.served_by.sum() == sum(req.items_of(i).size for i in reads)
    # A loose lower bound only (no timing in unit tests): nothing beats the model
    # by more than scheduling noise.
    assert np.all(out.latency_ms >= 0.9 * twin.latency_ms - 1.0)


def test_replay_nearest_router_and_bad_input(
    world: tuple[GeoWorkload, Placement, RegionCluster],
) -> None:
    wl, placement, cluster = world
    req = wl.test.subset(np.arange(20))
    router = NearestRouter(placement, TOPO)
    out = replay(cluster, req, router)
    twin = simulate(req, placement, router, TOPO, space=wl.space)
    np.testing.assert_array_equal(out.regions_contacted, twin.regions_contacted)
    np.testing.assert_array_equal(out.served_by, twin.served_by)
    assert ((out.wan_bytes > 0) == (twin.wan_bytes > 0)).all()
    with pytest.raises(Exception, match="semantics"):
        replay(cluster, req, router, semantics="both")  # type: ignore[arg-type]
