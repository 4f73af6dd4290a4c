"""Replay a ``Requests`` batch against running region servers (the harness side of A1).

:func:`replay` issues every request open-loop at ``arrival_s * s`` (``s`` the cluster's
time scale) from a client in its origin region, reads (``GET_ITEMS``: the items' raw
payloads, ``ItemSpace.item_bytes`` each) or writes (``PUT_ITEMS`` to every holder) them
through the real sockets and WAN shims, and reports each request like
:class:`~strata.storage.geo.twin.TwinResult`: unscaled latency, regions contacted, WAN
bytes, items served per origin x region. One loop drives every origin (one
:class:`~strata.storage.geo.client.Transport` with a shim per origin), so each
``origin -> region`` link is one FIFO, as in the twin.

Plans: for ``"pattern"`` semantics every plan (and for ``"traversal"`` every first
round) is computed before the clock starts, in the twin's order (arrival time, then
index), so a fresh seeded ``RandomRouter`` gives the twin's plans; later traversal
rounds are planned when the previous round completes. Latency runs from the scheduled
arrival (not the moment the loop got to it) to the last reply, so a lagging client
shows up as latency, as queueing would.

Examples:
    >>> import numpy as np
    >>> from strata.storage.geo.items import ItemSpace, Placement
    >>> from strata.storage.geo.routing import NearestRouter
    >>> from strata.storage.geo.server import RegionCluster
    >>> from strata.storage.geo.topology import uniform
    >>> from strata.storage.geo.workload import Requests
    >>> topo = uniform(2, 100.0, 1000.0)
    >>> space = ItemSpace(2, 0, np.array([64, 64], np.int32), np.array([0, 1], np.int8))
    >>> p = Placement.home_only(space)
    >>> two, zero, o = np.array([0, 2]), np.array([0]), np.array([0], np.int8)
    >>> req = Requests(o, np.array([False]), np.array([1], np.int8), two,
    ...                np.array([0, 1]), np.array([0, 1]), two, zero,
    ...                np.array([200.0]), np.array([0.0]))
    >>> with RegionCluster.start(topo, p, space, {}, time_scale=0.1) as cluster:
    ...     out = replay(cluster, req, NearestRouter(p, topo))
    >>> out.regions_contacted.tolist(), bool(out.latency_ms[0] >= 95.0)
    ([2], True)
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from strata.storage.geo.client import Reply, Transport
from strata.storage.geo.errors import GeoError
from strata.storage.geo.frames import Kind, items_batch, payload_batch
from strata.storage.geo.server import ClusterInfo, RegionCluster

__all__ = ["ReplayResult", "replay"]

Semantics = Literal["pattern", "traversal"]


@dataclass(frozen=True, eq=False)
class ReplayResult:
    """Per-request measurements of one replay (mirrors ``TwinResult``).

    ``latency_ms`` is unscaled (NaN for a request that failed or passed its
    deadline); ``wan_bytes`` counts frame bytes both ways on cross-region links;
    ``served_items[o, d]`` the items region ``d`` served to reads from origin ``o``.
    """

    latency_ms: np.ndarray
    regions_contacted: np.ndarray
    wan_bytes: np.ndarray
    is_write: np.ndarray
    origin: np.ndarray
    served_items: np.ndarray
    served_bytes: np.ndarray
    errors: tuple[str, ...]
    wall_s: float

    @property
    def served_by(self) -> np.ndarray:
        """Items served per (origin, serving region), like ``TwinResult.served_by``."""
        return self.served_items

    @property
    def failed(self) -> np.ndarray:
        """Requests that got no complete answer (error or deadline)."""
        return np.asarray(np.isnan(self.latency_ms), dtype=bool)


@dataclass(slots=True)
class _Open:
    """One request in flight."""

    index: int
    origin: int
    write: bool
    rounds: list[np.ndarray]
    round: int = 0
    start: float = 0.0
    waiting: set[int] = field(default_factory=set)
    contacted: set[int] = field(default_factory=set)


def replay(
    cluster: RegionCluster | ClusterInfo,
    requests: Any,
    router: Any,
    *,
    semantics: Semantics = "pattern",
    deadline_s: float = 30.0,
    lead_s: float = 0.05,
) -> ReplayResult:
    """Replay ``requests`` (a ``workload.Requests``) open-loop against ``cluster``.

    Args:
        cluster: running region servers (or their ``ClusterInfo``).
        requests: the batch; ``arrival_s`` are unscaled seconds.
        router: ``plan(origin, items)`` and ``write_plan(items)`` (a ``Router``).
        semantics: ``"pattern"`` (one round) or ``"traversal"`` (one per hop).
        deadline_s: wall seconds after its arrival that a request may take.
        lead_s: wall seconds between starting and the first arrival.

    Returns:
        A :class:`ReplayResult` in request order.
    """
    if semantics not in ("pattern", "traversal"):
        raise GeoError.build(
            "semantics", "replay", "'pattern' or 'traversal'", repr(semantics)
        )
    info = cluster.info if isinstance(cluster, RegionCluster) else cluster
    r = info.layout.num_regions
    n = int(requests.num_requests)
    origin = np.asarray(requests.origin, dtype=np.int64)
    if n and (origin.min() < 0 or origin.max() >= r):
        raise GeoError.build(
            "origin", "replay", f"regions 0..{r - 1}", str(int(origin.max()))
        )
    is_write = np.asarray(requests.is_write, dtype=bool)
    scale = info.time_scale
    order = np.lexsort((np.arange(n), np.asarray(requests.arrival_s)))
    sizes = np.asarray(info.layout.item_bytes, dtype=np.int64)

    def rounds_of(i: int) -> list[np.ndarray]:
        if semantics == "pattern" or is_write[i]:
            return [np.asarray(requests.items_of(i), dtype=np.int64)]
        return [np.asarray(x, dtype=np.int64) for x in requests.rounds_of(i)]

    # Plans before the clock starts, in the twin's order (see the module).
    first: dict[int, dict[int, np.ndarray]] = {}
    opened: dict[int, _Open] = {}
    for i in order.tolist():
        job = _Open(i, int(origin[i]), bool(is_write[i]), rounds_of(i))
        opened[i] = job
        first[i] = _plan(router, job, 0)

    latency = np.full(n, np.nan)
    contacted = np.zeros(n, dtype=np.int64)
    wan = np.zeros(n, dtype=np.int64)
    served_items = np.zeros((r, r), dtype=np.int64)
    served_bytes = np.zeros((r, r), dtype=np.int64)
    errors: list[str] = []
    owner: dict[int, tuple[int, int]] = {}  # request id -> (request index, region)
    live: dict[int, _Open] = {}
    deadlines: list[tuple[float, int]] = []

    with Transport(info, sorted(set(origin.tolist()))) as transport:
        transport.connect()
        transport.warm()
        t0 = time.perf_counter() + lead_s
        arrivals = t0 + np.asarray(requests.arrival_s, dtype=np.float64) * scale
        starts = [(float(arrivals[i]), i) for i in order.tolist()]
        heapq.heapify(starts)

        def send(job: _Open, plan: dict[int, np.ndarray], now: float) -> None:
            kind = Kind.PUT_ITEMS if job.write else Kind.GET_ITEMS
            for region, ids in plan.items():
                if ids.size == 0:
                    continue
                batch = (
                    payload_batch(ids, sizes[ids]) if job.write else items_batch(ids)
                )
                request, nbytes = transport.submit(
                    job.origin, region, kind, batch, now=now
                )
                owner[request] = (job.index, region)
                job.waiting.add(request)
                job.contacted.add(region)
                if region != job.origin:
                    wan[job.index] += nbytes

        def finish(job: _Open, at: float) -> None:
            latency[job.index] = (at - job.start) * 1e3 / (scale or 1.0)
            contacted[job.index] = len(job.contacted)
            del live[job.index]

        def on_reply(reply: Reply) -> None:
            index, region = owner.pop(reply.request, (-1, -1))
            job = live.get(index)
            if job is None:
                return  # the request already failed
            job.waiting.discard(reply.request)
            if region != job.origin:
                wan[index] += reply.nbytes
            if reply.error:
                errors.append(f"request {index}, region {region}: {reply.error}")
                contacted[index] = len(job.contacted)
                del live[index]
                return
            if not job.write and reply.batch is not None:
                count = reply.batch.num_rows
                served_items[job.origin, region] += count
                served_bytes[job.origin, region] += reply.nbytes
            if job.waiting:
                return
            job.round += 1
            if job.round < len(job.rounds):
                send(job, _plan(router, job, job.round), reply.arrived)
            else:
                finish(job, reply.arrived)

        while starts or live:
            now = time.perf_counter()
            while starts and starts[0][0] <= now:
                at, i = heapq.heappop(starts)
                job = opened.pop(i)
                job.start = at
                live[i] = job
                heapq.heappush(deadlines, (at + deadline_s, i))
                send(job, first.pop(i), at)
                if not job.waiting:
                    finish(job, at)
            while deadlines and deadlines[0][0] <= now:
                _, i = heapq.heappop(deadlines)
                job_ = live.pop(i, None)
                if job_ is not None:
                    errors.append(f"request {i}: no answer within {deadline_s} s")
                    contacted[i] = len(job_.contacted)
            until = min(
                starts[0][0] if starts else math.inf,
                deadlines[0][0] if deadlines else math.inf,
                now + 0.05,
            )
            for reply in transport.pump(until):
                on_reply(reply)
    return ReplayResult(
        latency_ms=latency,
        regions_contacted=contacted,
        wan_bytes=wan,
        is_write=is_write.copy(),
        origin=origin,
        served_items=served_items,
        served_bytes=served_bytes,
        errors=tuple(errors),
        wall_s=time.perf_counter() - t0,
    )


def _plan(router: Any, job: _Open, k: int) -> dict[int, np.ndarray]:
    items = job.rounds[k]
    plan = router.write_plan(items) if job.write else router.plan(job.origin, items)
    return {int(d): np.asarray(ids, dtype=np.int64) for d, ids in plan.items()}
