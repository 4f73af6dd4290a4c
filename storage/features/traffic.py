"""Rows fetched from their owners: the contract every partitioned feature source keeps.

A partitioned feature store splits a table's rows between *owners* (partition ``r``
owns the rows ``owner == r``). A trainer asks an :class:`OwnerFetcher` for the rows
of several owners at once, ``fetch(attr, {owner: ids})``: the network client
(:class:`~strata.storage.features.remote.RemoteFeatureStore`, one request per owner,
all owners served concurrently) and the in-process stand-in of simulations
(:class:`InProcessOwners`) keep the same contract and count the same way, so a
simulation's counters equal a networked run's.

Traffic is counted three ways (``systems/rapidgnn.md`` §2): **rows**, **bytes** and
**requests**. A request for ``n`` ids of rows ``row_bytes`` wide costs
:func:`payload_bytes` ``= 8 n + n row_bytes`` (the id list out, the rows back;
fixed-size headers are not counted), and one request message per owner per
frame. Both ends of a connection apply the same rule, so a server's counters equal
the sum of its clients'.

Examples:
    >>> import numpy as np
    >>> table = np.arange(12, dtype=np.float32).reshape(6, 2)
    >>> owners = InProcessOwners({"x": table}, owner=np.array([0, 0, 1, 1, 2, 2]))
    >>> rows = owners.fetch("x", {1: np.array([3, 2]), 2: np.array([5])})
    >>> rows[1].tolist(), rows[2].tolist()
    ([[6.0, 7.0], [4.0, 5.0]], [[10.0, 11.0]])
    >>> owners.traffic
    Traffic(rows=3, bytes=48, requests=2)
    >>> owners.fetch("x", {1: np.array([0])})
    Traceback (most recent call last):
    ...
    strata.storage.errors.FeatureError: ids in owner 1 of 'x': expected ids owned \
by partition 1, got id 0 (owned by partition 0) at position 0.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from strata.storage.errors import FeatureError

__all__ = [
    "InProcessOwners",
    "OwnerFetcher",
    "Traffic",
    "check_owned",
    "payload_bytes",
]

#: Bytes of one id on the wire (int64).
ID_BYTES = 8


def payload_bytes(num_ids: int, row_bytes: int) -> int:
    """Counted bytes of one request for ``num_ids`` rows of ``row_bytes`` each."""
    return num_ids * (ID_BYTES + row_bytes)


@dataclass(slots=True)
class Traffic:
    """Rows, bytes and requests moved (one direction of accounting, see module).

    Mutable and thread-safe to add to (:meth:`add` takes a lock), since a
    prefetch thread and a cache-fill thread may fetch at the same time.
    """

    rows: int = 0
    bytes: int = 0
    requests: int = 0

    def add(self, rows: int, nbytes: int, requests: int = 1) -> None:
        """Count one (or ``requests``) request(s) of ``rows`` rows and ``nbytes``."""
        with _LOCK:
            self.rows += int(rows)
            self.bytes += int(nbytes)
            self.requests += int(requests)

    def snapshot(self) -> Traffic:
        """A copy of the counters now."""
        with _LOCK:
            return Traffic(self.rows, self.bytes, self.requests)

    def __sub__(self, other: Traffic) -> Traffic:
        return Traffic(
            self.rows - other.rows,
            self.bytes - other.bytes,
            self.requests - other.requests,
        )

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(
            self.rows + other.rows,
            self.bytes + other.bytes,
            self.requests + other.requests,
        )

    def as_dict(self, prefix: str) -> dict[str, int]:
        """``{prefix_rows, prefix_bytes, prefix_requests}`` for a run report."""
        return {
            f"{prefix}_rows": self.rows,
            f"{prefix}_bytes": self.bytes,
            f"{prefix}_requests": self.requests,
        }


_LOCK = threading.Lock()


@runtime_checkable
class OwnerFetcher(Protocol):
    """Fetches rows of one attribute from their owners (see the module docs).

    ``fetch(attr, {owner: ids})`` returns ``{owner: rows}`` with ``rows[i]`` the
    row of ``ids[i]`` (a numpy array ``[len(ids), *row_shape]``), sends one
    request per owner (more only when a request would exceed the frame limit),
    and adds to :attr:`traffic`. Ids an owner does not own raise
    :class:`~strata.storage.errors.FeatureError` naming the owner and the id.
    """

    traffic: Traffic

    def fetch(
        self, attr: str, ids_by_owner: Mapping[int, np.ndarray]
    ) -> dict[int, np.ndarray]:
        """The rows of ``ids_by_owner[o]`` from owner ``o``, for every ``o``."""
        ...

    def row_bytes(self, attr: str) -> int:
        """Bytes of one row of ``attr``."""
        ...


def check_owned(owner: np.ndarray, part: int, ids: np.ndarray, where: str) -> None:
    """Raise :class:`FeatureError` unless every id is in range and owned by ``part``."""
    n = owner.shape[0]
    bad = np.flatnonzero((ids < 0) | (ids >= n))
    if bad.size:
        i = int(bad[0])
        raise FeatureError.build(
            "ids", where, f"ids in [0, {n})", f"id {int(ids[i])} at position {i}"
        )
    wrong = np.flatnonzero(owner[ids] != part)
    if wrong.size:
        i = int(wrong[0])
        raise FeatureError.build(
            "ids",
            where,
            f"ids owned by partition {part}",
            f"id {int(ids[i])} (owned by partition {int(owner[ids[i]])}) "
            f"at position {i}",
        )


class InProcessOwners:
    """Every owner's rows in this process: a simulation's :class:`OwnerFetcher`.

    Args:
        tables: full arrays by attribute name (row ``v`` is vertex ``v``).
        owner: int array, the partition owning each row.
    """

    def __init__(self, tables: Mapping[str, np.ndarray], owner: np.ndarray) -> None:
        self._tables = dict(tables)
        self._owner = np.asarray(owner)
        self.traffic = Traffic()

    def row_bytes(self, attr: str) -> int:
        """Bytes of one row of ``attr``."""
        table = self._tables[attr]
        return int(table.dtype.itemsize * np.prod(table.shape[1:], dtype=np.int64))

    def fetch(
        self, attr: str, ids_by_owner: Mapping[int, np.ndarray]
    ) -> dict[int, np.ndarray]:
        """The rows of each owner's ids, counted as one request per owner."""
        if attr not in self._tables:
            raise FeatureError.build(
                "attr", "InProcessOwners", f"one of {sorted(self._tables)}", repr(attr)
            )
        table, width = self._tables[attr], self.row_bytes(attr)
        out: dict[int, np.ndarray] = {}
        for part, ids in ids_by_owner.items():
            ids = np.asarray(ids, dtype=np.int64)
            if ids.size == 0:
                out[part] = table[:0]
                continue
            check_owned(self._owner, part, ids, f"owner {part} of {attr!r}")
            out[part] = table[ids]
            self.traffic.add(ids.size, payload_bytes(ids.size, width))
        return out
