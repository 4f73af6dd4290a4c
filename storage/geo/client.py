"""The client side of the region servers: one DEALER per (origin, region), one loop.

A :class:`Transport` carries requests from one or more origin regions to the region
servers of a :class:`~strata.storage.geo.server.ClusterInfo`. Each origin has its own
:class:`~strata.storage.geo.wan.DelayShim`, so a request leaves only when the
``origin -> region`` link's FIFO allows (spec §3.4: every process delays its own
outbound sends). :meth:`Transport.submit` books a send; :meth:`Transport.pump` sends
what is due and returns the replies that arrived, never blocking past its deadline.
``GeoStore`` uses one origin; ``replay`` drives every origin from one loop.

Not thread-safe: one thread owns a transport.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import zmq

from strata.storage._delayed import poll_ms
from strata.storage.geo.frames import GeoWireError, Header, Kind, decode, encode
from strata.storage.geo.server import ClusterInfo
from strata.storage.geo.wan import DelayShim

__all__ = ["Reply", "Transport"]


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer: its request, the serving region, the decoded frames or an error."""

    request: int
    origin: int
    region: int
    header: Header | None
    batch: pa.RecordBatch | None
    nbytes: int
    arrived: float  # perf_counter seconds
    error: str = ""


class Transport:
    """DEALER sockets and shims for ``origins`` over a running cluster.

    Args:
        info: the cluster (endpoints, links, time scale).
        origins: the regions this client sends from.
    """

    def __init__(self, info: ClusterInfo, origins: Sequence[int]) -> None:
        self.info = info
        regions = info.layout.num_regions
        self._ctx: zmq.Context[Any] = zmq.Context.instance()
        self._shims = {
            o: DelayShim.from_matrices(
                info.layout.rtt_ms, info.layout.bw_mbps, o, info.time_scale
            )
            for o in origins
        }
        self._sockets: dict[tuple[int, int], zmq.Socket[Any]] = {}
        self._owner: dict[zmq.Socket[Any], tuple[int, int]] = {}
        self._poller = zmq.Poller()
        self._due: list[tuple[float, int, int, int, list[Any]]] = []
        self._ids = itertools.count(1)
        self._regions = regions

    def _socket(self, origin: int, region: int) -> zmq.Socket[Any]:
        sock = self._sockets.get((origin, region))
        if sock is None:
            sock = self._ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(self.info.endpoints[region])
            self._sockets[(origin, region)] = sock
            self._owner[sock] = (origin, region)
            self._poller.register(sock, zmq.POLLIN)
        return sock

    def connect(self) -> None:
        """Open every (origin, region) socket now, so no read pays a TCP connect."""
        for origin in self._shims:
            for region in range(self._regions):
                self._socket(origin, region)

    def warm(self, timeout_s: float = 10.0) -> int:
        """Ping every (origin, region) pair and wait for the answers.

        The first message on a connection pays its handshake; a replay calls this
        before its clock starts. Returns how many pairs answered.
        """
        until = time.perf_counter() + timeout_s
        pending = {
            self.submit(o, r, Kind.PING, None)[0]
            for o in self._shims
            for r in range(self._regions)
        }
        total = len(pending)
        while pending and time.perf_counter() < until:
            for reply in self.pump(until):
                pending.discard(reply.request)
        for shim in self._shims.values():
            shim.reset()  # the pings' link bookings are not part of the run
        return total - len(pending)

    def reset(self, region: int) -> None:
        """Drop every socket to ``region`` and its queued messages.

        Called after a timeout, so a restarted server never sees stale requests.
        """
        for (origin, r), sock in list(self._sockets.items()):
            if r == region:
                self._poller.unregister(sock)
                del self._owner[sock]
                del self._sockets[(origin, r)]
                sock.close(linger=0)
        self._due = [d for d in self._due if d[3] != region]
        heapq.heapify(self._due)

    def submit(
        self,
        origin: int,
        region: int,
        kind: Kind,
        batch: pa.RecordBatch | None,
        key: int = 0,
        now: float | None = None,
    ) -> tuple[int, int]:
        """Book one request; returns ``(request id, bytes sent)``."""
        request = next(self._ids)
        head = Header(
            kind, origin, request, batch.num_rows if batch else 0, key, origin
        )
        frames = encode(head, batch)
        nbytes = sum(memoryview(f).nbytes for f in frames)
        sent = time.perf_counter() if now is None else now
        at = self._shims[origin].schedule(region, nbytes, sent)
        heapq.heappush(self._due, (at, request, origin, region, frames))
        return request, nbytes

    def next_due(self) -> float:
        """When the next booked send leaves (inf when none)."""
        return self._due[0][0] if self._due else math.inf

    def _send_due(self) -> None:
        now = time.perf_counter()
        while self._due and self._due[0][0] <= now:
            _, _, origin, region, frames = heapq.heappop(self._due)
            self._socket(origin, region).send_multipart(frames, copy=False)

    def pump(self, until: float) -> list[Reply]:
        """Send what is due and collect replies until one arrives or ``until``."""
        while True:
            self._send_due()
            now = time.perf_counter()
            wait = min(until, self.next_due()) - now
            events = self._poller.poll(poll_ms(wait)) if self._sockets else []
            if not events and not self._sockets and wait > 0:
                time.sleep(min(wait, 0.05))
            replies = [r for sock, _ in events for r in self._drain(sock)]
            if replies or time.perf_counter() >= until:
                self._send_due()
                return replies

    def _drain(self, sock: zmq.Socket[Any]) -> list[Reply]:
        origin, region = self._owner[sock]
        out: list[Reply] = []
        while True:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return out
            arrived = time.perf_counter()
            nbytes = sum(f.buffer.nbytes for f in frames)
            try:
                header, batch = decode(frames)
                out.append(
                    Reply(
                        header.request, origin, region, header, batch, nbytes, arrived
                    )
                )
            except GeoWireError as error:
                head = getattr(error, "header", None)
                request = head.request if head is not None else -1
                out.append(
                    Reply(
                        request, origin, region, head, None, nbytes, arrived, str(error)
                    )
                )

    def close(self) -> None:
        """Close every socket (idempotent)."""
        for sock in self._sockets.values():
            sock.close(linger=0)
        self._sockets.clear()
        self._owner.clear()
        self._poller = zmq.Poller()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
