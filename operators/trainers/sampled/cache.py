"""Caches of remote feature rows, chosen from the epoch schedule (RapidGNN).

A worker of a partitioned gang reads the rows it owns from its local table and the
others from their owners. Because the epoch's batches are known in advance
(:class:`~strata.operators.samplers.schedule.EpochSchedule`), a cache can hold
the remote rows the epoch will use most. Every policy keeps one interface:

* ``fill_pending(schedule, fetcher)`` prepares the cache for ``schedule``'s epoch
  (it may run in the background during the previous epoch), ``swap()`` makes it
  the active one at the epoch boundary;
* ``lookup(batch_index, ids) -> (hit_mask, rows_of_hits)`` serves a batch's
  remote ids (binary search in a numba ``nogil`` kernel; ``lookup_into`` writes
  the rows straight into the caller's array), ``admit(batch_index, ids, rows)``
  offers it the rows of the misses once fetched.

Policies (:class:`CachePolicy`, ``systems/rapidgnn.md`` §3.3):

* ``frequency``: the ``C`` remote ids with the highest epoch count (ties to the
  lower id, counts ``>= min_count``), double-buffered: the next epoch's hot set is
  filled into the *pending* buffer, rows already in the *active* one copied
  locally, the rest fetched with one bulk request per owner (counted in
  :attr:`RemoteRowCache.fill`). Both buffers are allocated at capacity:
  ``cache_bytes = 2 C row_bytes``.
* ``degree``: the static top-degree remote vertices of this rank, fetched once.
* ``belady``: offline-optimal eviction over the schedule's accesses: after each
  batch it keeps the ``C`` ids (cached or just fetched) whose next use comes
  first. Within an epoch, the most hits of any cache filled from misses; no
  fill traffic.
* ``none``: capacity 0.

``capacity`` is a row count (int) or a fraction of the first planned epoch's
distinct remote ids (float in ``(0, 1]``), fixed from then on
(:func:`resolve_capacity`).

Examples:
    >>> import numpy as np
    >>> from strata.storage.features.traffic import InProcessOwners
    >>> owner = np.array([0, 0, 1, 1, 1, 1])
    >>> table = np.arange(12, dtype=np.float32).reshape(6, 2)
    >>> fetcher = InProcessOwners({"x": table}, owner)
    >>> cache = make_cache("frequency", 2, attr="x", owner=owner, rank=0,
    ...                    row_shape=(2,), dtype=np.float32)
    >>> cache.fill_pending(_toy_schedule([[2, 3], [3, 4], [3, 4, 5]]), fetcher)
    >>> cache.swap()
    >>> hit, rows = cache.lookup(0, np.array([2, 3, 4]))
    >>> hit.tolist(), rows.tolist()
    ([False, True, True], [[6.0, 7.0], [8.0, 9.0]])
    >>> cache.fill  # ids 3 and 4, one request to owner 1
    Traffic(rows=2, bytes=32, requests=1)
"""

from __future__ import annotations

import enum
import itertools
import math
import threading
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from strata.operators.errors import OperatorError, as_enum
from strata.operators.samplers.schedule import EpochSchedule
from strata.storage._types import Int64Array
from strata.storage.features.traffic import OwnerFetcher, Traffic, payload_bytes

__all__ = [
    "BeladyCache",
    "CachePolicy",
    "DegreeCache",
    "FrequencyCache",
    "NoCache",
    "RemoteRowCache",
    "fetch_by_owner",
    "find_sorted",
    "make_cache",
    "resolve_capacity",
    "scatter_rows",
]

_NEVER = np.int64(np.iinfo(np.int64).max)


class CachePolicy(enum.Enum):
    """Which remote rows a cache holds (see the module docs)."""

    FREQUENCY = "frequency"
    DEGREE = "degree"
    BELADY = "belady"
    NONE = "none"


def resolve_capacity(cache: int | float, distinct_remote: int) -> int:
    """Cache rows for ``cache`` rows (int) or a fraction of ``distinct_remote``.

    Examples:
        >>> resolve_capacity(0.5, 1001), resolve_capacity(300, 1001)
        (501, 300)
    """
    where = "resolve_capacity"
    if isinstance(cache, bool) or not isinstance(cache, (int, float, np.integer)):
        raise OperatorError.build(
            "cache", where, "rows (int) or a fraction (float)", repr(cache)
        )
    if isinstance(cache, (int, np.integer)):
        if cache < 0:
            raise OperatorError.build("cache", where, "rows >= 0", str(cache))
        return int(cache)
    if not 0.0 <= cache <= 1.0:
        raise OperatorError.build(
            "cache",
            where,
            "a fraction in [0, 1] of the distinct remote ids",
            str(cache),
            "give an int for a row count",
        )
    return math.floor(cache * distinct_remote + 0.5)


# ------------------------------------------------------------------------- kernels


@numba.njit(cache=True, nogil=True)
def _find(sorted_ids: np.ndarray, query: np.ndarray) -> np.ndarray:
    out = np.empty(query.shape[0], dtype=np.int64)
    n = sorted_ids.shape[0]
    for i in range(query.shape[0]):
        q = query[i]
        lo = 0
        hi = n
        while lo < hi:
            mid = (lo + hi) >> 1
            if sorted_ids[mid] < q:
                lo = mid + 1
            else:
                hi = mid
        out[i] = lo if lo < n and sorted_ids[lo] == q else -1
    return out


@numba.njit(cache=True, nogil=True)
def _scatter(
    src: np.ndarray, src_idx: np.ndarray, dst: np.ndarray, dst_idx: np.ndarray
) -> None:
    width = src.shape[1]
    for i in range(src_idx.shape[0]):
        s = src_idx[i]
        d = dst_idx[i]
        for j in range(width):
            dst[d, j] = src[s, j]


def find_sorted(sorted_ids: np.ndarray, query: np.ndarray) -> Int64Array:
    """Position of every query id in ``sorted_ids``, -1 where absent (nogil)."""
    out: Int64Array = _find(
        np.ascontiguousarray(sorted_ids, dtype=np.int64),
        np.ascontiguousarray(query, dtype=np.int64),
    )
    return out


def _as_2d(array: np.ndarray) -> np.ndarray:
    return array.reshape(array.shape[0], -1)


def scatter_rows(
    src: np.ndarray, src_idx: np.ndarray, dst: np.ndarray, dst_idx: np.ndarray
) -> None:
    """``dst[dst_idx] = src[src_idx]`` row by row, in a ``nogil`` kernel.

    ``src`` and ``dst`` must be C-contiguous with the same dtype and row shape.
    """
    if src_idx.size == 0:
        return
    _scatter(
        _as_2d(src),
        np.ascontiguousarray(src_idx, dtype=np.int64),
        _as_2d(dst),
        np.ascontiguousarray(dst_idx, dtype=np.int64),
    )


def fetch_by_owner(
    fetcher: OwnerFetcher,
    attr: str,
    ids: np.ndarray,
    owner: np.ndarray,
    out: np.ndarray,
    out_idx: np.ndarray,
) -> Traffic:
    """Fetch the rows of ``ids`` with ONE ``fetcher.fetch`` grouped by owner.

    Row ``ids[i]`` is written to ``out[out_idx[i]]``. Returns the traffic of the
    call by the payload rule of :mod:`strata.storage.features.traffic`, one
    request per owner (a fetcher that splits an oversized request into frames
    counts more in its own :attr:`~OwnerFetcher.traffic`).
    """
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return Traffic()
    parts = owner[ids]
    order = np.argsort(parts, kind="stable")
    sorted_parts = parts[order]
    cuts = np.flatnonzero(np.diff(sorted_parts)) + 1
    bounds = np.concatenate([[0], cuts, [ids.size]])
    groups = {int(sorted_parts[s]): order[s:e] for s, e in itertools.pairwise(bounds)}
    got = fetcher.fetch(attr, {o: ids[pos] for o, pos in groups.items()})
    for o, pos in groups.items():
        rows = np.ascontiguousarray(got[o], dtype=out.dtype)
        scatter_rows(rows, np.arange(pos.size), out, out_idx[pos])
    width = int(out.dtype.itemsize * math.prod(out.shape[1:]))
    return Traffic(int(ids.size), payload_bytes(int(ids.size), width), len(groups))


# -------------------------------------------------------------------------- caches


class RemoteRowCache:
    """The interface every cache policy keeps (see the module docs).

    Args:
        capacity: rows (int) or a fraction of the first epoch's distinct remote
            ids (float); resolved by the first :meth:`plan`.
        attr: the attribute the rows belong to (passed to the fetcher).
        owner: int array ``[num_nodes]``, the part of every vertex.
        rank: this worker's part.
        row_shape: shape of one row (``(d,)`` for features, ``()`` for labels).
        dtype: row dtype.

    Attributes:
        hits: remote accesses served by the cache (cumulative).
        misses: remote accesses not served (cumulative).
        fill: traffic of filling the cache (cumulative).
    """

    policy = CachePolicy.NONE
    buffers = 1

    def __init__(
        self,
        capacity: int | float,
        *,
        attr: str,
        owner: np.ndarray,
        rank: int,
        row_shape: Sequence[int],
        dtype: Any,
    ) -> None:
        resolve_capacity(capacity, 0)  # validates
        self._capacity_spec = capacity
        self.capacity: int | None = (
            int(capacity) if isinstance(capacity, (int, np.integer)) else None
        )
        self.attr = attr
        self.owner = np.asarray(owner)
        self.rank = int(rank)
        self.row_shape = tuple(int(s) for s in row_shape)
        self.dtype = np.dtype(dtype)
        self.hits = 0
        self.misses = 0
        self.fill = Traffic()
        self._lock = threading.Lock()

    @property
    def row_bytes(self) -> int:
        """Bytes of one row."""
        return int(self.dtype.itemsize * math.prod(self.row_shape))

    @property
    def cache_bytes(self) -> int:
        """Bytes of the row buffers, allocated at capacity."""
        return self.buffers * (self.capacity or 0) * self.row_bytes

    def _resolve(self, schedule: EpochSchedule) -> int:
        if self.capacity is None:
            self.capacity = resolve_capacity(
                self._capacity_spec, schedule.distinct_remote
            )
        return self.capacity

    def _empty_rows(self, count: int) -> np.ndarray:
        return np.empty((count, *self.row_shape), dtype=self.dtype)

    def plan(self, schedule: EpochSchedule) -> Int64Array:
        """The sorted ids this policy would hold at the start of ``schedule``."""
        self._resolve(schedule)
        return np.empty(0, dtype=np.int64)

    def fill_pending(self, schedule: EpochSchedule, fetcher: OwnerFetcher) -> None:
        """Prepare the cache for ``schedule``'s epoch (active after :meth:`swap`)."""
        self.plan(schedule)

    def swap(self) -> None:
        """Make the prepared epoch the active one (at the epoch boundary)."""

    def held_ids(self) -> Int64Array:
        """Sorted ids the active cache holds now."""
        return np.empty(0, dtype=np.int64)

    def lookup(
        self, batch_index: int, ids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(hit_mask, rows of the hits in order)`` for a batch's remote ids."""
        ids = np.asarray(ids, dtype=np.int64)
        rows = self._empty_rows(ids.size)
        hit = self.lookup_into(batch_index, ids, rows, np.arange(ids.size))
        return hit, rows[hit]

    def lookup_into(
        self, batch_index: int, ids: np.ndarray, out: np.ndarray, out_pos: np.ndarray
    ) -> np.ndarray:
        """Serve ``ids`` like :meth:`lookup`, writing in place; return the hit mask.

        The row of hit ``ids[i]`` goes to ``out[out_pos[i]]`` (no intermediate
        copy: the router passes its output array).
        """
        self.misses += int(np.asarray(ids).size)
        return np.zeros(np.asarray(ids).size, dtype=bool)

    def admit(self, batch_index: int, ids: np.ndarray, rows: np.ndarray) -> None:
        """Offer the fetched rows of the batch's misses (no-op unless Belady)."""

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(capacity={self.capacity}, attr={self.attr!r}, "
            f"rank={self.rank}, hits={self.hits}, misses={self.misses})"
        )


class NoCache(RemoteRowCache):
    """Capacity 0: every remote access is fetched on demand."""

    def __init__(self, capacity: int | float = 0, **kwargs: Any) -> None:
        super().__init__(0, **kwargs)


class _StaticCache(RemoteRowCache):
    """A cache whose content is fixed for an epoch: sorted ids + aligned rows."""

    def __init__(self, capacity: int | float, **kwargs: Any) -> None:
        super().__init__(capacity, **kwargs)
        self._ids: Int64Array = np.empty(0, dtype=np.int64)
        self._rows = self._empty_rows(0)

    def held_ids(self) -> Int64Array:
        """See :meth:`RemoteRowCache.held_ids`."""
        return self._ids

    def lookup_into(
        self, batch_index: int, ids: np.ndarray, out: np.ndarray, out_pos: np.ndarray
    ) -> np.ndarray:
        """See :meth:`RemoteRowCache.lookup_into`."""
        ids = np.asarray(ids, dtype=np.int64)
        # Under the lock: fill_pending takes it before writing the other buffer,
        # so it never overwrites rows a lookup started before a swap still reads.
        with self._lock:
            pos = find_sorted(self._ids, ids)
            hit = pos >= 0
            scatter_rows(self._rows, pos[hit], out, out_pos[hit])
        found = int(np.count_nonzero(hit))
        self.hits += found
        self.misses += int(ids.size) - found
        return hit


class FrequencyCache(_StaticCache):
    """The ``C`` most used remote ids of each epoch, double-buffered.

    Args:
        min_count: an id must be used by at least this many batches of the epoch
            (default 2: an id used once saves no row by being cached).
        keep_held: rank by rows saved given what the active buffer holds: an id
            it holds is worth its count (copying it is free), another its count
            minus one (its fill); held ids need a count of 1 only. Off by
            default (the spec's ranking by count alone).
        **kwargs: see :class:`RemoteRowCache`.
    """

    policy = CachePolicy.FREQUENCY
    buffers = 2

    def __init__(
        self,
        capacity: int | float,
        min_count: int = 2,
        keep_held: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(capacity, **kwargs)
        self.min_count = int(min_count)
        self.keep_held = bool(keep_held)
        self._buffers: list[np.ndarray] = []
        self._pending_ids: Int64Array | None = None
        self._pending_rows: np.ndarray | None = None

    def plan(self, schedule: EpochSchedule) -> Int64Array:
        """See :meth:`RemoteRowCache.plan`."""
        capacity = self._resolve(schedule)
        ids, counts = schedule.count_ids, schedule.counts
        if not self.keep_held:
            keep = counts >= self.min_count
            ids, counts = ids[keep], counts[keep]
            order = np.lexsort((ids, -counts))[:capacity]
            return np.sort(ids[order])
        with self._lock:
            held = find_sorted(self._ids, ids) >= 0
        value = counts - (~held).astype(np.int64)  # a held id costs no fill
        keep = held | (counts >= self.min_count)
        ids, counts, value = ids[keep], counts[keep], value[keep]
        order = np.lexsort((ids, -counts, -value))[:capacity]
        return np.sort(ids[order])

    def fill_pending(self, schedule: EpochSchedule, fetcher: OwnerFetcher) -> None:
        """See :meth:`RemoteRowCache.fill_pending`."""
        hot = self.plan(schedule)
        capacity = self.capacity or 0
        if not self._buffers:  # both buffers at capacity, once (spec R6)
            self._buffers = [self._empty_rows(capacity), self._empty_rows(capacity)]
        with self._lock:
            active_ids, active_rows = self._ids, self._rows
        target = next(b for b in self._buffers if b is not active_rows.base)
        pending = target[: hot.size]
        pos = find_sorted(active_ids, hot)
        have = pos >= 0
        scatter_rows(active_rows, pos[have], pending, np.flatnonzero(have))
        need = np.flatnonzero(~have)
        traffic = fetch_by_owner(
            fetcher, self.attr, hot[need], self.owner, pending, need
        )
        self.fill.add(traffic.rows, traffic.bytes, traffic.requests)
        self._pending_ids, self._pending_rows = hot, pending

    def swap(self) -> None:
        """See :meth:`RemoteRowCache.swap`."""
        if self._pending_ids is None or self._pending_rows is None:
            return
        with self._lock:
            self._ids, self._rows = self._pending_ids, self._pending_rows
        self._pending_ids = self._pending_rows = None


class DegreeCache(_StaticCache):
    """The static top-degree remote vertices of this rank, fetched once.

    Args:
        degree: int array ``[num_nodes]``; for a sampler that picks in-neighbours,
            a vertex's out-degree (how many destinations can draw it).
        **kwargs: see :class:`RemoteRowCache`.
    """

    policy = CachePolicy.DEGREE

    def __init__(self, capacity: int | float, degree: np.ndarray, **kwargs: Any):
        super().__init__(capacity, **kwargs)
        self.degree = np.asarray(degree)
        self._filled = False
        self._pending: tuple[Int64Array, np.ndarray] | None = None

    def plan(self, schedule: EpochSchedule) -> Int64Array:
        """See :meth:`RemoteRowCache.plan`."""
        capacity = self._resolve(schedule)
        if self._filled:
            return self._ids
        remote = np.flatnonzero(self.owner != self.rank)
        order = np.lexsort((remote, -self.degree[remote]))[:capacity]
        return np.sort(remote[order]).astype(np.int64)

    def fill_pending(self, schedule: EpochSchedule, fetcher: OwnerFetcher) -> None:
        """See :meth:`RemoteRowCache.fill_pending`."""
        if self._filled:
            return
        ids = self.plan(schedule)
        rows = self._empty_rows(ids.size)
        traffic = fetch_by_owner(
            fetcher, self.attr, ids, self.owner, rows, np.arange(ids.size)
        )
        self.fill.add(traffic.rows, traffic.bytes, traffic.requests)
        self._pending = (ids, rows)
        self._filled = True

    def swap(self) -> None:
        """See :meth:`RemoteRowCache.swap`."""
        if self._pending is not None:
            with self._lock:
                self._ids, self._rows = self._pending
            self._pending = None


def _next_use(schedule: EpochSchedule) -> tuple[Int64Array, Int64Array]:
    """Per access (CSR position), the batch of the id's next access, else NEVER.

    Also the first batch using each of ``schedule.count_ids``.
    """
    ids = schedule.remote_ids
    batch = np.repeat(
        np.arange(schedule.num_batches, dtype=np.int64),
        np.diff(schedule.remote_offsets),
    )
    order = np.lexsort((batch, ids))
    nxt = np.full(ids.size, _NEVER, dtype=np.int64)
    same = ids[order[1:]] == ids[order[:-1]]
    nxt[order[:-1][same]] = batch[order[1:][same]]
    starts = np.ones(ids.size, dtype=bool)
    starts[1:] = ~same
    first = batch[order[starts]]
    return nxt, first


class BeladyCache(RemoteRowCache):
    """Offline-optimal eviction over the schedule, filled from misses only.

    After batch ``b`` it keeps, among the ids it held and the ids batch ``b``
    read, the ``C`` whose next use comes first (ties to the lower id); ids not
    used again this epoch are kept last, when room is left, for the next epoch.
    Within an epoch no cache filled from misses hits more (tested against an
    exhaustive search). It bounds neither a prefetched cache's hit rate (the
    frequency cache can hit an id's first access) nor, across epochs, the rows
    of a static cache whose one-off fill is amortised.
    """

    policy = CachePolicy.BELADY

    def __init__(self, capacity: int | float, **kwargs: Any) -> None:
        super().__init__(capacity, **kwargs)
        self._ids: Int64Array = np.empty(0, dtype=np.int64)
        self._slots: Int64Array = np.empty(0, dtype=np.int64)
        self._next: Int64Array = np.empty(0, dtype=np.int64)
        self._rows = self._empty_rows(0)
        self._schedule: EpochSchedule | None = None
        self._pending: tuple[EpochSchedule, Int64Array, Int64Array] | None = None
        self._nxt: Int64Array = np.empty(0, dtype=np.int64)

    def held_ids(self) -> Int64Array:
        """See :meth:`RemoteRowCache.held_ids`."""
        return self._ids

    def fill_pending(self, schedule: EpochSchedule, fetcher: OwnerFetcher) -> None:
        """See :meth:`RemoteRowCache.fill_pending`."""
        capacity = self._resolve(schedule)
        if self._rows.shape[0] != capacity:
            self._rows = self._empty_rows(capacity)
        nxt, first = _next_use(schedule)
        self._pending = (schedule, nxt, first)

    def swap(self) -> None:
        """See :meth:`RemoteRowCache.swap`."""
        if self._pending is None:
            return
        schedule, nxt, first = self._pending
        self._schedule, self._nxt, self._pending = schedule, nxt, None
        pos = find_sorted(schedule.count_ids, self._ids)
        self._next = np.where(pos >= 0, first[pos], _NEVER)

    def lookup_into(
        self, batch_index: int, ids: np.ndarray, out: np.ndarray, out_pos: np.ndarray
    ) -> np.ndarray:
        """See :meth:`RemoteRowCache.lookup_into`."""
        ids = np.asarray(ids, dtype=np.int64)
        pos = find_sorted(self._ids, ids)
        hit = pos >= 0
        scatter_rows(self._rows, self._slots[pos[hit]], out, out_pos[hit])
        found = int(np.count_nonzero(hit))
        self.hits += found
        self.misses += int(ids.size) - found
        return hit

    def admit(self, batch_index: int, ids: np.ndarray, rows: np.ndarray) -> None:
        """See :meth:`RemoteRowCache.admit`."""
        schedule = self._schedule
        capacity = self.capacity or 0
        if schedule is None or capacity == 0:
            return
        ids = np.asarray(ids, dtype=np.int64)
        start = int(schedule.remote_offsets[batch_index])
        batch_ids = schedule.remote(batch_index)
        batch_next = self._nxt[start : start + batch_ids.size]
        # Ids the batch read that the cache holds: their next use moves on.
        held = find_sorted(self._ids, batch_ids)
        self._next[held[held >= 0]] = batch_next[held >= 0]
        at = find_sorted(batch_ids, ids)
        if (at < 0).any():
            bad = int(ids[np.flatnonzero(at < 0)[0]])
            raise OperatorError.build(
                "ids",
                f"BeladyCache.admit (epoch {schedule.epoch}, batch {batch_index})",
                "remote ids of the scheduled batch",
                f"id {bad}",
            )
        cand_ids = np.concatenate([self._ids, ids])
        cand_next = np.concatenate([self._next, batch_next[at]])
        new = np.concatenate([np.zeros(self._ids.size, bool), np.ones(ids.size, bool)])
        keep = np.lexsort((cand_ids, cand_next))[:capacity]
        is_new = new[keep]
        kept_old = keep[~is_new]
        kept_new = keep[is_new] - self._ids.size
        free = np.setdiff1d(
            np.arange(capacity, dtype=np.int64), self._slots[kept_old], True
        )
        new_slots = free[: kept_new.size]
        scatter_rows(np.ascontiguousarray(rows), kept_new, self._rows, new_slots)
        slots = np.empty(keep.size, dtype=np.int64)
        slots[~is_new] = self._slots[kept_old]
        slots[is_new] = new_slots
        order = np.argsort(cand_ids[keep], kind="stable")
        self._ids = cand_ids[keep][order]
        self._next = cand_next[keep][order]
        self._slots = slots[order]


def make_cache(
    policy: CachePolicy | str,
    capacity: int | float,
    *,
    attr: str,
    owner: np.ndarray,
    rank: int,
    row_shape: Sequence[int],
    dtype: Any,
    degree: np.ndarray | None = None,
    min_count: int = 2,
    keep_held: bool = False,
) -> RemoteRowCache:
    """The cache of ``policy`` (``degree`` is required for the degree policy)."""
    kind = as_enum(CachePolicy, policy, "cache_policy", "make_cache")
    common: dict[str, Any] = {
        "attr": attr,
        "owner": owner,
        "rank": rank,
        "row_shape": row_shape,
        "dtype": dtype,
    }
    if kind is CachePolicy.FREQUENCY:
        return FrequencyCache(
            capacity, min_count=min_count, keep_held=keep_held, **common
        )
    if kind is CachePolicy.DEGREE:
        if degree is None:
            raise OperatorError.build(
                "degree", "make_cache", "a degree array for policy 'degree'", "None"
            )
        return DegreeCache(capacity, degree=degree, **common)
    if kind is CachePolicy.BELADY:
        return BeladyCache(capacity, **common)
    return NoCache(0, **common)


def _toy_schedule(batches: list[list[int]]) -> EpochSchedule:
    """A schedule of given remote ids per batch (for examples and tests)."""
    parts = [np.unique(np.asarray(b, dtype=np.int64)) for b in batches]
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([p.size for p in parts], out=offsets[1:])
    ids = np.concatenate(parts) if parts else np.empty(0, np.int64)
    count_ids, counts = np.unique(ids, return_counts=True)
    sizes = np.diff(offsets)
    return EpochSchedule(
        epoch=0,
        rank=0,
        seeds=tuple(np.empty(0, np.int64) for _ in parts),
        remote_ids=ids,
        remote_offsets=offsets,
        digests=np.zeros(len(parts), dtype=np.uint64),
        num_inputs=sizes,
        num_local=np.zeros(len(parts), dtype=np.int64),
        count_ids=count_ids,
        counts=counts.astype(np.int64),
        schedule_s=0.0,
    )
