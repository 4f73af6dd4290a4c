"""The analytic twin (spec §3.5): a discrete-event simulator of reads and writes.

Each request is planned by the same router the region servers use; every message then
crosses its directed link under the shim's per-link FIFO rule
(:func:`strata.storage.geo.wan.link_schedule`, shared with the servers, so only the
transport differs). A read round sends one small request per serving region
(``header_bytes + id_bytes`` per item) and gets one reply with the items' bytes back;
the round ends when the last reply lands. Writes send the items to every holder and wait
for every acknowledgement. ``semantics="pattern"`` reads all items in one round (the
paper's model); ``"traversal"`` fetches one hop per round, so its latency is the sum of
the rounds (pitfall 6). Events run in time order (``heapq``), which makes the FIFO rule
exact for open-loop arrivals.

Latencies are reported unscaled (ms); ``time_scale`` only scales the simulated clock
like the servers' (spec §3.4), so results do not depend on it.

Examples:
    >>> import numpy as np
    >>> from strata.storage.geo.items import ItemSpace, Placement
    >>> from strata.storage.geo.routing import NearestRouter
    >>> from strata.storage.geo.topology import uniform
    >>> from strata.storage.geo.workload import Requests
    >>> topo = uniform(2, 100.0, 8.0)
    >>> space = ItemSpace(1, 0, np.array([1000], np.int32), np.array([1], np.int8))
    >>> p = Placement.home_only(space)
    >>> one, zero, slo = np.array([0, 1]), np.array([0]), np.array([200.0])
    >>> o, w, k = np.array([0], np.int8), np.array([False]), np.array([1], np.int8)
    >>> req = Requests(o, w, k, one, zero, one, one, zero, slo, 0.0 * zero)
    >>> router = NearestRouter(p, topo)
    >>> out = simulate(req, p, router, topo, space=space, header_bytes=0, id_bytes=0)
    >>> out.latency_ms.tolist(), out.regions_contacted.tolist()  # 100 + 8 kbit / 8 Mbps
    ([101.0], [1])
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Literal

import numpy as np

from strata.storage.geo.cost import (
    CostBreakdown,
    CostConfig,
    assoc_units,
    read_cost_usd,
    region_latency_ms,
    storage_cost_usd,
    write_cost_usd,
)
from strata.storage.geo.errors import GeoError
from strata.storage.geo.items import ItemSpace, Placement
from strata.storage.geo.routing import Router
from strata.storage.geo.topology import Topology
from strata.storage.geo.wan import link_schedule
from strata.storage.geo.workload import Requests

__all__ = ["HEADER_BYTES", "ID_BYTES", "TwinResult", "simulate"]

#: Message framing the twin assumes: a fixed header plus 8 bytes per requested id.
HEADER_BYTES = 32
ID_BYTES = 8

Semantics = Literal["pattern", "traversal"]
_SEND, _REPLY, _DONE = 0, 1, 2


@dataclass(frozen=True, eq=False)
class TwinResult:
    """Per-request outcome of a simulated run plus its cost for one billing window.

    ``served_items[o, d]`` / ``served_bytes[o, d]``: items and payload bytes that region
    ``d`` served to reads from origin ``o``. ``cost`` is C(S) for ``window_hours`` plus
    the requests' C(R), C(W), C(A) scaled from the test span to that window;
    ``request_cost`` is the requests' unscaled terms.
    """

    latency_ms: np.ndarray
    regions_contacted: np.ndarray
    wan_bytes: np.ndarray
    local_only: np.ndarray
    is_write: np.ndarray
    origin: np.ndarray
    slo_ms: np.ndarray
    assoc: np.ndarray
    served_items: np.ndarray
    served_bytes: np.ndarray
    storage_bytes: np.ndarray
    cost: CostBreakdown
    request_cost: CostBreakdown

    @property
    def served_by(self) -> np.ndarray:
        """Alias of ``served_items`` (origin x serving region)."""
        return self.served_items

    @property
    def reads(self) -> np.ndarray:
        """Bool mask of read requests."""
        return ~self.is_write

    @property
    def slo_violation(self) -> np.ndarray:
        """Bool per request: latency above its SLO."""
        out: np.ndarray = self.latency_ms > self.slo_ms
        return out


def _check(requests: Requests, placement: Placement, space: ItemSpace, r: int) -> None:
    where = "twin.simulate"
    if placement.holders.shape != (space.num_items,):
        raise GeoError.build(
            "placement", where, f"{space.num_items} items", str(placement.holders.shape)
        )
    if requests.num_requests and (
        int(requests.origin.min()) < 0 or int(requests.origin.max()) >= r
    ):
        raise GeoError.build(
            "origin",
            where,
            f"regions 0..{r - 1}",
            f"{int(requests.origin.min())}..{int(requests.origin.max())}",
        )
    if requests.items.size and (
        int(requests.items.min()) < 0 or int(requests.items.max()) >= space.num_items
    ):
        raise GeoError.build("items", where, f"ids < {space.num_items}", "out of range")


def simulate(
    requests: Requests,
    placement: Placement,
    router: Router,
    topology: Topology,
    *,
    space: ItemSpace,
    semantics: Semantics = "pattern",
    time_scale: float = 1.0,
    cost_config: CostConfig | None = None,
    header_bytes: int = HEADER_BYTES,
    id_bytes: int = ID_BYTES,
) -> TwinResult:
    """Simulate ``requests`` (open-loop, at their ``arrival_s``) and report each one."""
    if semantics not in ("pattern", "traversal"):
        raise GeoError.build(
            "semantics", "twin.simulate", "'pattern' or 'traversal'", repr(semantics)
        )
    if not time_scale > 0:
        raise GeoError.build("time_scale", "twin.simulate", "> 0", str(time_scale))
    cfg = cost_config or CostConfig()
    r = topology.num_regions
    _check(requests, placement, space, r)
    n = requests.num_requests
    rtt = topology.rtt_ms.tolist()
    bw = topology.bw_mbps.tolist()
    sizes = space.item_bytes
    free = [[0.0] * r for _ in range(r)]
    items_by_region = np.zeros((n, r), dtype=np.int64)
    bytes_by_region = np.zeros((n, r), dtype=np.int64)
    contacted = np.zeros((n, r), dtype=bool)
    wan = np.zeros(n, dtype=np.int64)
    start = np.asarray(requests.arrival_s, dtype=np.float64) * time_scale
    finish = np.zeros(n, dtype=np.float64)
    pending = np.zeros(n, dtype=np.int64)
    next_round = np.zeros(n, dtype=np.int64)
    write_usd = 0.0

    def rounds(i: int) -> list[np.ndarray]:
        if semantics == "pattern" or requests.is_write[i]:
            return [requests.items_of(i)]
        return requests.rounds_of(i)

    heap: list[tuple[float, int, int, int, int, int]] = []
    seq = 0
    for i in range(n):
        heap.append((float(start[i]), seq, _SEND, i, 0, 0))
        seq += 1
    heapq.heapify(heap)
    plans: dict[int, list[np.ndarray]] = {}
    while heap:
        now, _, kind, i, region, nbytes = heapq.heappop(heap)
        o = int(requests.origin[i])
        if kind == _SEND:
            if i not in plans:
                plans[i] = rounds(i)
            items = plans[i][int(next_round[i])]
            next_round[i] += 1
            if requests.is_write[i]:
                plan = router.write_plan(items)
                write_usd += write_cost_usd(o, items, placement, space, topology.prices)
            else:
                plan = router.plan(o, items)
            for d, ids in plan.items():
                if ids.size == 0:
                    continue
                payload = int(sizes[ids].sum())
                if requests.is_write[i]:
                    out_bytes, back_bytes = (
                        header_bytes + payload + id_bytes * ids.size,
                        0,
                    )
                else:
                    out_bytes, back_bytes = header_bytes + id_bytes * ids.size, payload
                    items_by_region[i, d] += ids.size
                    bytes_by_region[i, d] += payload
                contacted[i, d] = True
                free[o][d], at = link_schedule(
                    free[o][d], now, out_bytes, rtt[o][d], bw[o][d], time_scale
                )
                if d != o:
                    wan[i] += out_bytes + header_bytes + back_bytes
                pending[i] += 1
                heapq.heappush(heap, (at, seq, _REPLY, i, d, header_bytes + back_bytes))
                seq += 1
            if pending[i] == 0:
                heapq.heappush(heap, (now, seq, _DONE, i, 0, 0))
                seq += 1
        elif kind == _REPLY:
            free[region][o], at = link_schedule(
                free[region][o], now, nbytes, rtt[region][o], bw[region][o], time_scale
            )
            heapq.heappush(heap, (at, seq, _DONE, i, region, 0))
            seq += 1
        else:
            if pending[i] > 0:
                pending[i] -= 1
            if pending[i] == 0:
                if next_round[i] < len(plans[i]):
                    heapq.heappush(heap, (now, seq, _SEND, i, 0, 0))
                    seq += 1
                else:
                    finish[i] = now
                    del plans[i]
    latency = (finish - start) / time_scale * 1e3
    origin = requests.origin.astype(np.int64)
    reads = ~requests.is_write
    region_lat = region_latency_ms(topology, origin, bytes_by_region, contacted)
    assoc = np.where(
        reads, assoc_units(region_lat, contacted & reads[:, None], cfg), 0.0
    )
    read_usd = float(
        read_cost_usd(
            origin[reads],
            items_by_region[reads],
            bytes_by_region[reads],
            topology.prices,
        ).sum()
    )
    raw = CostBreakdown(
        0.0, read_usd, write_usd, float(assoc.sum()), float(assoc.sum()) * cfg.assoc_usd
    )
    span = float(requests.arrival_s.max()) if n else 0.0
    factor = cfg.window_hours * 3600.0 / span if span > 0 else 1.0
    scaled = raw.scaled(factor)
    storage = storage_cost_usd(placement, space, topology, cfg.window_hours)
    window = CostBreakdown(
        storage, scaled.read_usd, scaled.write_usd, scaled.assoc_units, scaled.assoc_usd
    )
    served_items = np.zeros((r, r), dtype=np.int64)
    served_bytes = np.zeros((r, r), dtype=np.int64)
    np.add.at(served_items, origin, items_by_region)
    np.add.at(served_bytes, origin, bytes_by_region)
    k = contacted.sum(axis=1)
    local = (k == 1) & contacted[np.arange(n), origin]
    return TwinResult(
        latency_ms=latency,
        regions_contacted=k.astype(np.int64),
        wan_bytes=wan,
        local_only=local,
        is_write=requests.is_write.copy(),
        origin=origin,
        slo_ms=np.asarray(requests.slo_ms, dtype=np.float64),
        assoc=assoc,
        served_items=served_items,
        served_bytes=served_bytes,
        storage_bytes=placement.storage_bytes(space, r),
        cost=window,
        request_cost=raw,
    )
