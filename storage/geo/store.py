"""``GeoStore``: a feature store read through a router from the region servers.

A :class:`GeoStore` is a :class:`~strata.storage.features.FeatureStore` whose rows live
on the region servers of a :class:`~strata.storage.geo.server.RegionCluster`. A client
sits in one *origin* region. ``get(key, ids)`` asks the router for a plan
(``router.plan(origin, items)``: serving region -> items), sends one GET per region in
parallel (one DEALER each, delayed by the origin's WAN shim), and times the read with
``perf_counter`` from the first send to the last reply. ``write(key, ids, rows)`` (and
``put``) goes to *every* holder and returns only when all acknowledged (synchronous
replication; writes are timed apart from reads, pitfall 11).

Failure handling (a dead peer is an error, never a hang):

* **Reads** wait ``attempt_s`` for a region; then its items fail over to the nearest
  other live holder, if any. Whatever is still missing at ``deadline_s`` raises
  :class:`GeoReadError` naming the regions and the deadline. A region that timed out
  is avoided (when another holder exists) for ``suspect_s``.
* **Writes** need an ACK from every holder within ``deadline_s``; a holder that is
  down makes the write fail (:class:`GeoWriteError`, not acknowledged). The write
  that discovers a dead holder may already be applied by the live ones (there is no
  two-phase commit): callers retry a failed write until it is acknowledged, which
  makes every holder agree again. While a holder is suspected down, writes to its
  items are refused before anything is sent. An acknowledged write is on every
  holder's write-ahead log and is never lost, a killed and restarted server included.

Examples:
    >>> import numpy as np
    >>> from strata.storage.geo.topology import uniform
    >>> from strata.storage.geo.server import ClusterLayout, RegionCluster
    >>> layout = ClusterLayout.home_only(
    ...     uniform(2, 10.0, 1000.0), home=np.array([0, 1, 1]), item_bytes=[8] * 3
    ... )
    >>> x = np.arange(6, dtype=np.float32).reshape(3, 2)
    >>> class Home:  # serve every item from its only holder
    ...     def plan(self, origin, items):
    ...         home = np.where(items == 0, 0, 1)
    ...         return {r: items[home == r] for r in (0, 1) if (home == r).any()}
    >>> with RegionCluster(layout, {("node", "x"): x}, 0.1) as cluster:
    ...     with GeoStore(cluster.info, origin=0, router=Home()) as store:
    ...         store.get(("node", "x"), np.array([2, 0])).tolist()
    ...         ack = store.write(("node", "x"), [1], np.ones((1, 2), np.float32))
    ...         store.get(("node", "x"), np.array([1])).tolist()
    ...         store.stats.reads[0].regions
    [[4.0, 5.0], [0.0, 1.0]]
    [[1.0, 1.0]]
    (0, 1)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from strata.storage.errors import format_error
from strata.storage.features.gather import IdsLike, validate_ids
from strata.storage.features.store import (
    FeatureSchema,
    FeatureStore,
    Key,
    KeyLike,
    as_key,
    to_numpy,
)
from strata.storage.geo.client import Reply, Transport
from strata.storage.geo.errors import GeoError
from strata.storage.geo.frames import (
    Kind,
    batch_items,
    batch_rows,
    items_batch,
    rows_batch,
)
from strata.storage.geo.server import ClusterInfo, GeoKey, RegionCluster

__all__ = [
    "GeoReadError",
    "GeoReadStats",
    "GeoStats",
    "GeoStatsSummary",
    "GeoStore",
    "GeoStoreSpec",
    "GeoWriteError",
    "LatencySummary",
    "PlanRouter",
]


class PlanRouter(Protocol):
    """What a ``GeoStore`` needs of a router (``routing.Router``'s ``plan``)."""

    def plan(self, origin: int, items: np.ndarray) -> dict[int, np.ndarray]:
        """Serving region -> sorted, disjoint item ids covering ``items``."""
        ...


class GeoReadError(GeoError):
    """A read could not be served within its deadline (regions named)."""


class GeoWriteError(GeoError):
    """A write was not acknowledged by every holder (regions named); not acked."""


@dataclass(frozen=True, slots=True)
class GeoReadStats:
    """One read or write, as the client measured it.

    ``latency_s`` is scaled wall time (first send to last reply); ``latency_ms`` is
    the unscaled figure (divided by the time scale, spec §3.4). ``failovers``
    counts requests moved off a region that timed out or is suspected down.
    """

    latency_s: float
    latency_ms: float
    regions: tuple[int, ...]
    items: int
    bytes: int
    failovers: int = 0


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Percentiles (unscaled ms) and means over a list of :class:`GeoReadStats`."""

    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    mean_regions: float
    mean_bytes: float

    @classmethod
    def of(cls, stats: list[GeoReadStats]) -> LatencySummary:
        """Summarise ``stats`` (zeros when empty)."""
        if not stats:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        ms = np.array([s.latency_ms for s in stats])
        p50, p95, p99 = np.percentile(ms, [50, 95, 99])
        return cls(
            len(stats),
            float(p50),
            float(p95),
            float(p99),
            float(ms.mean()),
            float(np.mean([len(s.regions) for s in stats])),
            float(np.mean([s.bytes for s in stats])),
        )


@dataclass(frozen=True, slots=True)
class GeoStatsSummary:
    """Reads and writes summarised apart; items served per region."""

    origin: int
    reads: LatencySummary
    writes: LatencySummary
    items_by_region: tuple[int, ...]
    failovers: int


@dataclass(slots=True)
class GeoStats:
    """Every read and write one store made (append-only)."""

    origin: int
    num_regions: int
    reads: list[GeoReadStats] = field(default_factory=list)
    writes: list[GeoReadStats] = field(default_factory=list)
    items_by_region: list[int] = field(default_factory=list)

    def summary(self) -> GeoStatsSummary:
        """Percentiles of reads and writes, apart (pitfall 11)."""
        by_region = self.items_by_region or [0] * self.num_regions
        return GeoStatsSummary(
            self.origin,
            LatencySummary.of(self.reads),
            LatencySummary.of(self.writes),
            tuple(by_region),
            sum(s.failovers for s in self.reads),
        )


@dataclass(frozen=True)
class GeoStoreSpec:
    """A picklable recipe for a ``GeoStore`` (each trainer rank opens its own)."""

    info: ClusterInfo
    origin: int
    router: Any
    deadline_s: float = 10.0
    attempt_s: float | None = None

    def open(self) -> GeoStore:
        """Connect a new store (close it when done)."""
        return GeoStore(
            self.info,
            self.origin,
            self.router,
            deadline_s=self.deadline_s,
            attempt_s=self.attempt_s,
        )


def _torch_dtype(dtype: str) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=np.dtype(dtype))).dtype


class GeoStore(FeatureStore):
    """Feature rows read from region servers through a router (see the module).

    Thread-safe (one lock serialises the exchanges); not picklable: pass a
    :class:`GeoStoreSpec` to other processes and open a store there.

    Args:
        cluster: a running ``RegionCluster`` or its ``ClusterInfo``.
        origin: the region this client sits in.
        router: ``plan(origin, items) -> {region: items}`` (a ``routing.Router``).
        deadline_s: the most one read or write may take (wall seconds).
        attempt_s: how long a read waits on one region before failing over
            (default half the deadline).
        suspect_s: how long a region that timed out is avoided.
        warmup: ping every region once at open (the first message on a new
            connection pays its handshake; a down region is only noted).
    """

    def __init__(
        self,
        cluster: ClusterInfo | RegionCluster,
        origin: int,
        router: PlanRouter,
        *,
        deadline_s: float = 10.0,
        attempt_s: float | None = None,
        suspect_s: float = 5.0,
        warmup: bool = True,
    ) -> None:
        info = cluster.info if isinstance(cluster, RegionCluster) else cluster
        regions = info.layout.num_regions
        where = "GeoStore"
        if not (isinstance(origin, int | np.integer) and 0 <= int(origin) < regions):
            raise GeoError.build(
                "origin", where, f"a region 0..{regions - 1}", repr(origin)
            )
        if not deadline_s > 0:
            raise GeoError.build("deadline_s", where, "> 0 seconds", str(deadline_s))
        self.info = info
        self.origin = int(origin)
        self.router = router
        self.deadline_s = float(deadline_s)
        self.attempt_s = float(attempt_s) if attempt_s else self.deadline_s / 2
        self.suspect_s = float(suspect_s)
        self.stats = GeoStats(self.origin, regions, items_by_region=[0] * regions)
        self._suspect: dict[int, float] = {}
        self._holders = info.layout.holders
        order = np.argsort(info.layout.rtt_ms[self.origin], kind="stable")
        self._by_rtt = [int(r) for r in order]
        # One lock around every exchange: a trainer's prefetch thread and its
        # evaluation may read at once, and zmq sockets are not thread-safe.
        self._lock = threading.RLock()
        self._transport = Transport(info, [self.origin])
        self._transport.connect()
        if warmup:
            self.ping(self.attempt_s)
        self._keys = {Key(k.group, k.attr): (i, k) for i, k in enumerate(info.keys)}

    # ---------------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Close the sockets (idempotent)."""
        with self._lock:
            self._transport.close()

    def __enter__(self) -> GeoStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def region_name(self, region: int) -> str:
        """``"<index> (<name>)"`` for messages."""
        return f"{region} ({self.info.layout.regions[region]})"

    def ping(self, timeout_s: float | None = None) -> dict[int, float | None]:
        """Round trip (unscaled ms) to every region; None for one that did not answer.

        Not recorded in :attr:`stats`.
        """
        with self._lock:
            return self._ping(timeout_s)

    def _ping(self, timeout_s: float | None) -> dict[int, float | None]:
        start = time.perf_counter()
        until = start + (self.deadline_s if timeout_s is None else timeout_s)
        pending = {
            self._transport.submit(self.origin, r, Kind.PING, None, 0, start)[0]: r
            for r in range(self.info.layout.num_regions)
        }
        out: dict[int, float | None] = dict.fromkeys(pending.values())
        scale = self.info.time_scale or 1.0
        while pending and time.perf_counter() < until:
            for reply in self._transport.pump(until):
                region = pending.pop(reply.request, -1)
                if region >= 0 and not reply.error:
                    out[region] = (reply.arrived - start) * 1e3 / scale
        return out

    # ---------------------------------------------------------------- FeatureStore
    def _schema(self) -> dict[Key, FeatureSchema]:
        return {
            key: FeatureSchema(_torch_dtype(k.dtype), (k.num_rows, *k.row_shape))
            for key, (_, k) in self._keys.items()
        }

    def _get_all(self, key: Key) -> torch.Tensor:
        _, k = self._keys[key]
        return self.get(key, np.arange(k.num_rows, dtype=np.int64))

    def _gather(self, key: Key, ids: np.ndarray, out: torch.Tensor) -> torch.Tensor:
        index, k = self._keys[key]
        items, inverse = np.unique(
            ids.astype(np.int64) + k.item_offset, return_inverse=True
        )
        rows = np.empty((items.size, k.row_bytes), dtype=np.uint8)
        if items.size:
            with self._lock:
                self._read(index, k, items, rows)
        target = out.numpy().reshape(ids.shape[0], -1).view(np.uint8)
        np.take(
            rows,
            inverse.reshape(-1),
            axis=0,
            out=target.reshape(ids.shape[0], k.row_bytes),
        )
        return out

    def _put(self, key: Key, array: np.ndarray) -> None:
        entry = self._keys.get(key)
        if entry is None:
            raise GeoError.build(
                "key",
                f"GeoStore.put({key})",
                f"one of the cluster's keys {sorted(str(k) for k in self._keys)}",
                str(key),
                "the servers' keys are fixed when the cluster starts",
            )
        self.write(key, np.arange(array.shape[0], dtype=np.int64), array)

    # ---------------------------------------------------------------- reads
    def _plan(self, items: np.ndarray) -> tuple[dict[int, np.ndarray], int]:
        """The router's plan, moved off suspected regions; how many parts moved."""
        plan = self.router.plan(self.origin, items)
        covered = sum(int(np.asarray(v).size) for v in plan.values())
        if covered != items.size:
            raise GeoError.build(
                "plan",
                f"GeoStore (origin {self.region_name(self.origin)})",
                f"regions covering the {items.size} requested items exactly once",
                f"{covered} items in the plan",
            )
        now = time.perf_counter()
        self._suspect = {r: t for r, t in self._suspect.items() if t > now}
        if not self._suspect:
            return {int(r): np.asarray(v, dtype=np.int64) for r, v in plan.items()}, 0
        out: dict[int, list[np.ndarray]] = {}
        moves = 0
        for region, part in plan.items():
            part = np.asarray(part, dtype=np.int64)
            if int(region) in self._suspect:
                moved, stay = self._reroute(part, set(self._suspect))
                for r, got in moved.items():
                    out.setdefault(r, []).append(got)
                moves += len(moved)
                if stay.size:
                    out.setdefault(int(region), []).append(stay)
            else:
                out.setdefault(int(region), []).append(part)
        return {r: np.sort(np.concatenate(v)) for r, v in out.items()}, moves

    def _reroute(
        self, items: np.ndarray, avoid: set[int]
    ) -> tuple[dict[int, np.ndarray], np.ndarray]:
        """Nearest holder of each item outside ``avoid``; the items that have none."""
        mask = self._holders[items].copy()
        for r in avoid:
            mask &= ~np.uint32(1 << r)
        moved: dict[int, np.ndarray] = {}
        left = np.ones(items.size, dtype=bool)
        for r in self._by_rtt:
            take = left & ((mask >> np.uint32(r)) & np.uint32(1)).astype(bool)
            if take.any():
                moved[r] = items[take]
                left &= ~take
        return moved, items[left]

    def _read(self, index: int, k: GeoKey, items: np.ndarray, rows: np.ndarray) -> None:
        plan, moved = self._plan(items)
        start = time.perf_counter()
        deadline = start + self.deadline_s
        # request -> (region, its items, when it was sent)
        pending: dict[int, tuple[int, np.ndarray, float]] = {}
        regions: list[int] = []
        timed_out: set[int] = set()
        nbytes, failovers = 0, moved
        for region, part in plan.items():
            if part.size == 0:
                continue  # a router may name a region with nothing to serve
            request, _ = self._transport.submit(
                self.origin, region, Kind.GET_ROWS, items_batch(part), index, start
            )
            pending[request] = (region, part, start)
            regions.append(region)
        try:
            while pending:
                now = time.perf_counter()
                if now >= deadline:
                    raise self._read_timeout(pending, items.size)
                expiry = min(t0 + self.attempt_s for _, _, t0 in pending.values())
                for reply in self._transport.pump(min(deadline, expiry)):
                    got = pending.pop(reply.request, None)
                    if got is None:
                        continue  # a late answer to a request that failed over
                    self._suspect.pop(reply.region, None)
                    nbytes += reply.nbytes
                    self._fill(reply, k, items, got[1], rows)
                now = time.perf_counter()
                for request, (region, part, t0) in list(pending.items()):
                    if now < t0 + self.attempt_s or region in timed_out:
                        continue
                    timed_out.add(region)
                    self._suspect[region] = now + self.suspect_s
                    others, stay = self._reroute(part, set(self._suspect) | timed_out)
                    if stay.size:
                        continue  # no other holder: keep waiting until the deadline
                    del pending[request]
                    for r, got_items in others.items():
                        new, _ = self._transport.submit(
                            self.origin,
                            r,
                            Kind.GET_ROWS,
                            items_batch(got_items),
                            index,
                            now,
                        )
                        pending[new] = (r, got_items, now)
                        regions.append(r)
                        failovers += 1
        finally:
            for region in timed_out:
                self._transport.reset(region)
        latency = time.perf_counter() - start
        self.stats.reads.append(
            self._stat(latency, regions, items.size, nbytes, failovers)
        )

    def _fill(
        self,
        reply: Reply,
        k: GeoKey,
        items: np.ndarray,
        asked: np.ndarray,
        rows: np.ndarray,
    ) -> None:
        where = f"GeoStore read from region {self.region_name(reply.region)}"
        if reply.error or reply.batch is None:
            raise GeoReadError.build(
                "reply", where, "rows", reply.error or "an empty reply"
            )
        got = batch_items(reply.batch)
        if not np.array_equal(got, asked):
            raise GeoReadError.build(
                "reply",
                where,
                f"rows of the {asked.size} asked items",
                f"{got.size} other items",
            )
        rows[np.searchsorted(items, got)] = batch_rows(reply.batch, k.row_bytes)
        self.stats.items_by_region[reply.region] += got.size

    def _read_timeout(
        self, pending: Mapping[int, tuple[int, np.ndarray, float]], total: int
    ) -> GeoReadError:
        missing = sorted({self.region_name(r) for r, _, _ in pending.values()})
        count = sum(p.size for _, p, _ in pending.values())
        return GeoReadError(
            format_error(
                "read",
                f"GeoStore (origin {self.region_name(self.origin)})",
                f"every region to answer within the deadline of {self.deadline_s} s",
                f"no reply from region(s) {', '.join(missing)} "
                f"for {count} of {total} items",
                "no other live holder of those items; is the region server down?",
            )
        )

    def _stat(
        self,
        latency: float,
        regions: list[int],
        items: int,
        nbytes: int,
        failovers: int,
    ) -> GeoReadStats:
        scale = self.info.time_scale
        ms = latency * 1e3 / scale if scale > 0 else latency * 1e3
        return GeoReadStats(
            latency, ms, tuple(dict.fromkeys(regions)), items, nbytes, failovers
        )

    # ---------------------------------------------------------------- writes
    def write(
        self, key: KeyLike, ids: IdsLike, rows: torch.Tensor | np.ndarray
    ) -> GeoReadStats:
        """Write ``rows`` at ``ids`` of ``key`` on every holder; return once all acked.

        Raises:
            FeatureError/GeoError: unknown key, bad ids, duplicate ids, or rows of the
                wrong dtype or shape.
            GeoWriteError: a holder did not acknowledge within ``deadline_s`` (the
                write is then not acknowledged; see the module on partial writes).
        """
        key = as_key(key)
        schema = self._lookup(key, "GeoStore.write")
        where = f"GeoStore.write({key})"
        ids_array = validate_ids(ids, schema.num_rows, where).astype(np.int64)
        if np.unique(ids_array).size != ids_array.size:
            raise GeoError.build(
                "ids",
                where,
                "distinct ids",
                f"{ids_array.size - np.unique(ids_array).size} duplicates",
            )
        array = to_numpy(rows, "rows", where)
        index, k = self._keys[key]
        expected = (ids_array.size, *k.row_shape)
        if array.dtype != np.dtype(k.dtype) or array.shape != expected:
            raise GeoError.build(
                "rows",
                where,
                f"{np.dtype(k.dtype)} rows of shape {expected}",
                f"{array.dtype} {array.shape}",
            )
        order = np.argsort(ids_array)
        items = ids_array[order] + k.item_offset
        row_bytes = (
            np.ascontiguousarray(array[order])
            .reshape(ids_array.size, -1)
            .view(np.uint8)
            .reshape(ids_array.size, k.row_bytes)
        )
        with self._lock:
            return self._write(Kind.PUT_ROWS, index, items, row_bytes)

    def _write(
        self, kind: Kind, index: int, items: np.ndarray, row_bytes: np.ndarray
    ) -> GeoReadStats:
        start = time.perf_counter()
        deadline = start + self.deadline_s
        holders = self._holders[items]
        targets = [
            (region, mine)
            for region in range(self.info.layout.num_regions)
            if (
                mine := ((holders >> np.uint32(region)) & np.uint32(1)).astype(bool)
            ).any()
        ]
        down = [r for r, _ in targets if self._suspect.get(r, 0.0) > start]
        if down:
            # Known down: refuse before sending, so no holder applies a write that
            # cannot be acknowledged.
            raise GeoWriteError(
                format_error(
                    "write",
                    f"GeoStore (origin {self.region_name(self.origin)})",
                    "every holder reachable",
                    "holder(s) "
                    + ", ".join(self.region_name(r) for r in down)
                    + " timed out in the last "
                    + f"{self.suspect_s} s (suspected down)",
                    "the write was NOT sent and is NOT acknowledged; retry later",
                )
            )
        pending: dict[int, int] = {}
        regions: list[int] = []
        for region, mine in targets:
            batch = rows_batch(items[mine], row_bytes[mine])
            request, _ = self._transport.submit(
                self.origin, region, kind, batch, index, start
            )
            pending[request] = region
            regions.append(region)
        failed: list[str] = []
        nbytes = 0
        while pending and time.perf_counter() < deadline:
            for reply in self._transport.pump(deadline):
                region = pending.pop(reply.request, -1)
                if region < 0:
                    continue
                nbytes += reply.nbytes
                if (
                    reply.error
                    or reply.header is None
                    or reply.header.kind is not Kind.ACK
                ):
                    failed.append(
                        f"{self.region_name(region)}: {reply.error or 'no ACK'}"
                    )
        if pending or failed:
            for region in set(pending.values()):
                self._transport.reset(region)
                self._suspect[region] = time.perf_counter() + self.suspect_s
            late = [
                f"{self.region_name(r)}: no ACK within the deadline "
                f"of {self.deadline_s} s"
                for r in sorted(set(pending.values()))
            ]
            raise GeoWriteError.build(
                "write",
                f"GeoStore (origin {self.region_name(self.origin)})",
                "an ACK from every holder "
                f"({', '.join(self.region_name(r) for r in regions)})",
                "; ".join(failed + late),
                "the write is NOT acknowledged; holders that applied it keep it",
            )
        stat = self._stat(time.perf_counter() - start, regions, items.size, nbytes, 0)
        self.stats.writes.append(stat)
        return stat

    def __repr__(self) -> str:
        keys = sorted(str(k) for k in self._keys)
        return f"GeoStore(origin={self.region_name(self.origin)}, keys={keys})"
