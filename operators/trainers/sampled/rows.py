"""Where each input row of a batch comes from: local table, cache, or its owner.

A :class:`RowRouter` serves one attribute (features or labels) for one rank of a
partitioned gang. ``gather(batch_index, input_ids)`` returns the rows in input
order: rows this rank owns from its local table, remote rows the cache holds from
the cache, and the misses with ONE ``fetcher.fetch`` per batch, grouped by owner;
then it offers the misses to the cache (``admit``: Belady's eviction). Every step
is a vectorised numpy or ``nogil`` numba kernel, so a prefetch thread can run it
beside training. The same router runs in the counter simulation
(:mod:`.simulate`) and in the gang trainer, so their counters mean the same.

Counters (:class:`RowCounters`, ``systems/rapidgnn.md`` §3.7) separate *miss*
traffic (on-demand fetches) from *fill* traffic (the cache's bulk fills);
``remote`` is their sum, the honest total (pitfall 6).

Examples:
    >>> import numpy as np
    >>> from strata.storage.features.traffic import InProcessOwners
    >>> from strata.operators.trainers.sampled.cache import NoCache
    >>> owner = np.array([0, 1, 0, 1])
    >>> table = np.arange(8, dtype=np.float32).reshape(4, 2)
    >>> fetcher = InProcessOwners({"x": table}, owner)
    >>> cache = NoCache(attr="x", owner=owner, rank=0, row_shape=(2,),
    ...                 dtype=np.float32)
    >>> router = RowRouter("x", owner, 0, table[owner == 0], fetcher, cache)
    >>> router.gather(0, np.array([3, 0, 1])).tolist()
    [[6.0, 7.0], [0.0, 1.0], [2.0, 3.0]]
    >>> c = router.snapshot()
    >>> c.local_rows, c.remote_accesses, c.miss
    (1, 2, Traffic(rows=2, bytes=32, requests=1))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from strata.operators.errors import OperatorError
from strata.operators.samplers.schedule import EpochSchedule
from strata.operators.trainers.sampled.cache import (
    RemoteRowCache,
    fetch_by_owner,
    scatter_rows,
)
from strata.storage.features.traffic import OwnerFetcher, Traffic

__all__ = ["RowCounters", "RowRouter"]


@dataclass(frozen=True, slots=True)
class RowCounters:
    """Rows of one rank over a span (an epoch), by where they came from.

    Attributes:
        local_rows: input rows read from the local table.
        remote_accesses: input rows owned by other ranks (``A``).
        cache_hits: remote accesses served by the cache.
        cache_misses: remote accesses fetched on demand.
        hit_rate: ``cache_hits / remote_accesses`` (0 when there were none).
        miss: traffic of the on-demand fetches.
        fill: traffic of the cache fills.
        remote: ``miss + fill``.
        coverage: cache rows over the epoch's distinct remote ids (``C / R``).
        once_fraction: distinct remote ids the epoch used once.
        cache_bytes: bytes of the cache's row buffers.
        batches: batches gathered.
    """

    local_rows: int
    remote_accesses: int
    cache_hits: int
    cache_misses: int
    hit_rate: float
    miss: Traffic
    fill: Traffic
    remote: Traffic
    coverage: float
    once_fraction: float
    cache_bytes: int
    batches: int

    def as_dict(self) -> dict[str, Any]:
        """Flat counters for a run report (``miss_rows``, ``fill_bytes``, ...)."""
        out: dict[str, Any] = {
            "local_rows": self.local_rows,
            "remote_accesses": self.remote_accesses,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "hit_rate": self.hit_rate,
            "coverage": self.coverage,
            "once_fraction": self.once_fraction,
            "cache_bytes": self.cache_bytes,
            "batches": self.batches,
        }
        for name in ("miss", "fill", "remote"):
            out.update(getattr(self, name).as_dict(name))
        return out


class RowRouter:
    """Gathers one attribute's input rows for one rank (see the module docs).

    Args:
        attr: the attribute (as the fetcher names it).
        owner: int array ``[num_nodes]``, the part of every vertex.
        rank: this rank's part.
        local_rows: this rank's rows, in ascending order of the ids it owns.
        fetcher: the other owners' rows.
        cache: the remote-row cache (:class:`~.cache.NoCache` for none).
    """

    def __init__(
        self,
        attr: str,
        owner: np.ndarray,
        rank: int,
        local_rows: np.ndarray,
        fetcher: OwnerFetcher,
        cache: RemoteRowCache,
    ) -> None:
        where = "RowRouter"
        self.attr = attr
        self.owner = np.asarray(owner)
        self.rank = int(rank)
        mine = self.owner == self.rank
        owned = int(np.count_nonzero(mine))
        self.local_rows = np.ascontiguousarray(local_rows)
        if self.local_rows.shape[0] != owned:
            raise OperatorError.build(
                "local_rows",
                where,
                f"{owned} rows (one per vertex of part {rank}, ascending id)",
                f"{self.local_rows.shape[0]} rows",
            )
        if (
            cache.row_shape != self.local_rows.shape[1:]
            or cache.dtype != self.local_rows.dtype
        ):
            raise OperatorError.build(
                "cache",
                where,
                f"rows of shape {self.local_rows.shape[1:]} and dtype "
                f"{self.local_rows.dtype}",
                f"shape {cache.row_shape}, dtype {cache.dtype}",
            )
        # Position of every owned vertex in local_rows (-1 elsewhere).
        dtype = np.int32 if owned < 2**31 else np.int64
        self._local_pos = np.where(mine, np.cumsum(mine) - 1, -1).astype(dtype)
        self.fetcher = fetcher
        self.cache = cache
        self._zero()

    def _zero(self) -> None:
        self._local = 0
        self._remote = 0
        self._batches = 0
        self._miss = Traffic()
        self._hits0 = self.cache.hits
        self._misses0 = self.cache.misses
        self._fill0 = self.cache.fill.snapshot()

    def reset(self) -> None:
        """Start a new span of counters (e.g. an epoch), fill included from now."""
        self._zero()

    def gather(self, batch_index: int, input_ids: np.ndarray) -> np.ndarray:
        """The rows of ``input_ids`` in their order (see the module docs)."""
        ids = np.asarray(input_ids, dtype=np.int64)
        out = np.empty((ids.size, *self.local_rows.shape[1:]), self.local_rows.dtype)
        pos: np.ndarray = np.asarray(self._local_pos[ids], dtype=np.int64)
        local = pos >= 0
        local_at = np.flatnonzero(local)
        scatter_rows(self.local_rows, pos[local_at], out, local_at)
        remote_at = np.flatnonzero(~local)
        remote_ids = ids[remote_at]
        hit = self.cache.lookup_into(batch_index, remote_ids, out, remote_at)
        miss_at = remote_at[~hit]
        miss_ids = ids[miss_at]
        traffic = fetch_by_owner(
            self.fetcher, self.attr, miss_ids, self.owner, out, miss_at
        )
        self._miss.add(traffic.rows, traffic.bytes, traffic.requests)
        if miss_ids.size:
            self.cache.admit(batch_index, miss_ids, out[miss_at])
        self._local += int(local_at.size)
        self._remote += int(remote_at.size)
        self._batches += 1
        return out

    def snapshot(self, schedule: EpochSchedule | None = None) -> RowCounters:
        """Counters since the last :meth:`reset`.

        ``schedule`` (the span's epoch) gives ``coverage`` and ``once_fraction``
        (0 without it).
        """
        hits = self.cache.hits - self._hits0
        misses = self.cache.misses - self._misses0
        miss = self._miss.snapshot()
        fill = self.cache.fill.snapshot() - self._fill0
        coverage = once = 0.0
        if schedule is not None:
            once = schedule.once_fraction
            if schedule.distinct_remote:
                coverage = (self.cache.capacity or 0) / schedule.distinct_remote
        return RowCounters(
            local_rows=self._local,
            remote_accesses=self._remote,
            cache_hits=hits,
            cache_misses=misses,
            hit_rate=hits / self._remote if self._remote else 0.0,
            miss=miss,
            fill=fill,
            remote=miss + fill,
            coverage=coverage,
            once_fraction=once,
            cache_bytes=self.cache.cache_bytes,
            batches=self._batches,
        )
