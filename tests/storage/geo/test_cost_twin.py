"""Cost model against hand-computed numbers; the twin against a hand-worked FIFO."""

from __future__ import annotations

import numpy as np
import pytest

from strata.storage.geo.cost import (
    CostBreakdown,
    CostConfig,
    assoc_units,
    read_cost_usd,
    region_latency_ms,
    request_latency_ms,
    storage_cost_usd,
    write_cost_usd,
)
from strata.storage.geo.errors import GeoError
from strata.storage.geo.items import ItemSpace, Placement
from strata.storage.geo.routing import NearestRouter
from strata.storage.geo.topology import Prices, table1, uniform
from strata.storage.geo.twin import simulate
from strata.storage.geo.workload import Requests


def test_latency_is_max_of_rtt_plus_transfer() -> None:
    topo = table1()
    served = np.array([[0.0, 0.0, 920_000.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    served[1, 4] = 4_200
    contacted = served > 0
    contacted[1, 2] = True  # a region contacted for 0 bytes still costs its RTT
    lat = region_latency_ms(topo, np.array([0, 2]), served, contacted)
    # USE <- LON: 80 ms + 8 * 920 kB / 92 Mbps = 80 + 80 ms.
    assert lat[0, 2] == pytest.approx(160.0)
    # LON <- BJS: 256 + 8 * 4200 / 42e3 = 256.8 ms; LON <- LON: 1 ms intra.
    assert lat[1, 4] == pytest.approx(256.8)
    assert lat[1, 2] == pytest.approx(1.0)
    assert request_latency_ms(lat).tolist() == pytest.approx([160.0, 256.8])
    units = assoc_units(lat, contacted, CostConfig(lambda1=0.5, lambda2=0.5))
    assert units[0] == pytest.approx(0.0)
    assert units[1] == pytest.approx(0.5 * 1 + 0.5 * (256.8 - 1.0) / 1.0)


def test_dollar_terms_by_hand() -> None:
    topo = table1(Prices(0.016, 0.10, 1.40, 0.043))
    space = ItemSpace(2, 0, np.array([500_000_000, 500_000_000]), np.array([0, 1]))
    p = Placement.home_only(space)
    p.add(2, np.array([0, 1]))
    # 2 GB stored for 730 h = one month at 0.016 $/GB-month.
    assert storage_cost_usd(p, space, topo, hours=730.0) == pytest.approx(2 * 0.016)
    # Reader USE gets item 0 locally and item 1 (0.5 GB) from USW: 2 GETs + 0.5 GB out.
    items = np.array([[1, 1, 0, 0, 0]])
    nbytes = np.array([[500_000_000, 500_000_000, 0, 0, 0]])
    cost = read_cost_usd(np.array([0]), items, nbytes, topo.prices)
    assert cost[0] == pytest.approx(2 * 0.10 / 1e6 + 0.5 * 0.043)
    # Writing item 0 from USW: a PUT at USW, then PUT + transfer to USE and LON.
    w = write_cost_usd(1, np.array([0]), p, space, topo.prices)
    assert w == pytest.approx(3 * 1.40 / 1e6 + 2 * 0.5 * 0.043)
    b = CostBreakdown(1.0, 2.0, 3.0, 10.0, 1e-5)
    assert b.dollars_usd == 6.0
    assert b.total_usd == pytest.approx(6.00001)


def _requests(
    origins: list[int],
    items: list[list[list[int]]],
    arrivals: list[float],
    writes: list[bool] | None = None,
) -> Requests:
    """Requests from per-request lists of hops (each a list of item ids)."""
    flat, round_sizes, rounds = [], [], []
    for hops in items:
        rounds.append(len(hops))
        for hop in hops:
            flat += hop
            round_sizes.append(len(hop))
    rr = np.concatenate([[0], np.cumsum(rounds)]).astype(np.int64)
    ri = np.concatenate([[0], np.cumsum(round_sizes)]).astype(np.int64)
    n = len(origins)
    return Requests(
        origin=np.array(origins, np.int8),
        is_write=np.array(writes or [False] * n),
        kind=np.ones(n, np.int8),
        indptr=ri[rr],
        items=np.array(flat, np.int64),
        request_rounds=rr,
        round_indptr=ri,
        source=np.zeros(n, np.int64),
        slo_ms=np.full(n, 115.0),
        arrival_s=np.array(arrivals),
    )


@pytest.mark.parametrize("scale", [1.0, 0.2])
def test_twin_two_request_fifo_by_hand(scale: float) -> None:
    # 2 regions, 100 ms / 8 Mbps. Item 0 (10 kB: 10 ms on the wire) lives at region 1.
    # r1 at t=0: request lands at 50 ms, reply leaves 50..60 ms, lands at 110 ms.
    # r2 at t=1 ms: lands at 51 ms but queues behind r1's reply on 1->0: 60..70 ms,
    # lands at 120 ms, so 119 ms after it was sent.
    topo = uniform(2, 100.0, 8.0)
    space = ItemSpace(1, 0, np.array([10_000]), np.array([1]))
    p = Placement.home_only(space)
    req = _requests([0, 0], [[[0]], [[0]]], [0.0, 0.001])
    out = simulate(
        req,
        p,
        NearestRouter(p, topo),
        topo,
        space=space,
        header_bytes=0,
        id_bytes=0,
        time_scale=scale,
    )
    assert out.latency_ms.tolist() == pytest.approx([110.0, 119.0])
    assert out.slo_violation.tolist() == [False, True]
    assert out.wan_bytes.tolist() == [10_000, 10_000]
    assert out.served_items.tolist() == [[0, 2], [0, 0]]
    assert out.regions_contacted.tolist() == [1, 1]
    assert out.local_only.tolist() == [False, False]


def test_twin_traversal_sums_rounds_and_writes_wait_for_all_holders() -> None:
    topo = uniform(3, 100.0, 8.0)
    space = ItemSpace(2, 0, np.array([0, 0]), np.array([1, 2]))
    p = Placement.home_only(space)
    p.add(0, np.array([1]))
    reads = _requests([0], [[[0], [1]]], [0.0])
    router = NearestRouter(p, topo)
    pattern = simulate(
        reads,
        p,
        router,
        topo,
        semantics="pattern",
        space=space,
        header_bytes=0,
        id_bytes=0,
    )
    traversal = simulate(
        reads,
        p,
        router,
        topo,
        semantics="traversal",
        space=space,
        header_bytes=0,
        id_bytes=0,
    )
    assert pattern.latency_ms.tolist() == pytest.approx([100.0])  # max(100, 1)
    assert traversal.latency_ms.tolist() == pytest.approx([101.0])  # 100 + 1
    assert pattern.regions_contacted.tolist() == [2]
    write = _requests([1], [[[1]]], [0.0], writes=[True])
    out = simulate(write, p, router, topo, space=space, header_bytes=0, id_bytes=0)
    assert out.latency_ms.tolist() == pytest.approx([100.0])  # to region 0 and 2
    assert out.cost.write_usd > 0
    assert out.cost.read_usd == 0


def test_twin_bad_inputs() -> None:
    topo = uniform(2, 100.0, 8.0)
    space = ItemSpace(1, 0, np.array([10]), np.array([1]))
    p = Placement.home_only(space)
    req = _requests([0], [[[0]]], [0.0])
    with pytest.raises(GeoError, match="semantics"):
        simulate(req, p, NearestRouter(p, topo), topo, space=space, semantics="bsp")  # type: ignore[arg-type]
    bad = _requests([3], [[[0]]], [0.0])
    with pytest.raises(GeoError, match="origin"):
        simulate(bad, p, NearestRouter(p, topo), topo, space=space)
