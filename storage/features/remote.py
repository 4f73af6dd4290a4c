"""The client of the feature servers: a :class:`FeatureStore` whose rows live remotely.

:class:`RemoteFeatureStore` talks to one
:class:`~strata.storage.features.server.FeatureServer` per partition. It is both an
:class:`~strata.storage.features.traffic.OwnerFetcher` (``fetch(attr, {owner: ids})``)
and a :class:`~strata.storage.features.store.FeatureStore` (``get(key, ids)``):

* ``fetch`` sends every owner's request first (one DEALER socket per owner), then
  collects the replies by request id under one overall deadline, so all owners
  serve at once. A request bigger than the frame limit is split into several frames
  (each counted as a request). A missed deadline raises
  :class:`FeatureServerTimeout` naming the server, partition, endpoint and timeout;
  the sockets are then rebuilt, and late replies are dropped by request id.
* ``get`` reads this partition's own rows from ``local_tables`` (counted as
  ``local_rows``, no traffic), deduplicates the rest and fetches them.
* :attr:`traffic` counts rows, bytes and requests exactly as the servers do.

Each thread gets its own sockets (zmq sockets are not thread-safe), so a prefetch
thread and a cache-fill thread may fetch at the same time.

Examples:
    >>> import numpy as np
    >>> from strata.storage.features.server import FeatureServer
    >>> x = np.arange(12, dtype=np.float32).reshape(6, 2)
    >>> owner = np.array([0, 1, 0, 1, 0, 1])
    >>> with FeatureServer({"x": x[1::2]}, np.array([1, 3, 5]), 1) as server:
    ...     with RemoteFeatureStore({1: server.endpoint}, owner, local_part=0,
    ...                             local_tables={"x": x[0::2]}) as store:
    ...         rows = store.get(("node", "x"), [5, 0, 5])
    ...         traffic, local = store.traffic, store.local_rows
    >>> rows.tolist()
    [[10.0, 11.0], [0.0, 1.0], [10.0, 11.0]]
    >>> traffic, local
    (Traffic(rows=1, bytes=16, requests=1), 1)
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import zmq

from strata.storage.errors import FeatureError
from strata.storage.features.gather import torch_dtype_of
from strata.storage.features.store import FeatureSchema, FeatureStore, Key
from strata.storage.features.traffic import Traffic, check_owned, payload_bytes
from strata.storage.features.wire import (
    MAX_FRAME_BYTES,
    MAX_REQUEST_IDS,
    ZERO_COPY_BYTES,
    Header,
    Kind,
    Limits,
    SchemaEntry,
    decode,
    decode_schema,
    dtype_code,
    encode_header,
)

if TYPE_CHECKING:
    from strata.storage.features.server_group import FeatureServerGroup

__all__ = ["FeatureServerTimeout", "RemoteFeatureStore"]

_REQUEST_IDS = itertools.count(1)  # process-wide, so late replies never match


def _ms(seconds: float) -> int:
    """A poll timeout in whole milliseconds, rounded up (0 only when due)."""
    return max(0, int(np.ceil(seconds * 1000)))


class FeatureServerTimeout(FeatureError):
    """A feature server did not answer within the client's timeout."""


@dataclass(frozen=True, slots=True)
class _Attr:
    """One attribute as every server serves it."""

    ids: dict[int, int]  # attribute id on each owner's server
    dtype: np.dtype[Any]
    row_shape: tuple[int, ...]
    num_rows: int

    @property
    def row_bytes(self) -> int:
        return int(self.dtype.itemsize * int(np.prod(self.row_shape, dtype=np.int64)))


@dataclass(slots=True)
class _Pending:
    """An outstanding request: whose, and where its rows go."""

    owner: int
    count: int
    out: np.ndarray | None  # (rows, row_bytes) uint8 slice to fill; None: keep reply


class RemoteFeatureStore(FeatureStore):
    """Rows served by one feature server per partition (see the module).

    Args:
        endpoints: ``{partition: endpoint}`` of every remote owner.
        owner: the partition of each vertex (row ``v`` is vertex ``v``).
        local_part: this process's partition, read from ``local_tables``.
        local_tables: this partition's rows by attribute, in owned-id order.
        group: the key group served (``get(Key(group, attr), ids)``).
        timeout_s: one deadline for a whole ``fetch`` (all owners).
        max_request_ids: most ids per frame (the server's limit applies too).
        max_frame_bytes: most bytes per frame (the server's limit applies too).
        names: server names for errors (default ``p<partition>``).
    """

    def __init__(
        self,
        endpoints: Mapping[int, str],
        owner: np.ndarray,
        *,
        local_part: int | None = None,
        local_tables: Mapping[str, np.ndarray] | None = None,
        group: str = "node",
        timeout_s: float = 30.0,
        max_request_ids: int = MAX_REQUEST_IDS,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        names: Mapping[int, str] | None = None,
    ) -> None:
        where = "RemoteFeatureStore"
        self._owner = np.ascontiguousarray(owner)
        if (
            self._owner.ndim != 1
            or self._owner.dtype.kind not in "iu"
            or (self._owner.size and self._owner.min() < 0)
        ):
            raise FeatureError.build(
                "owner",
                where,
                "a 1-D array of partitions >= 0",
                f"{self._owner.dtype} {self._owner.shape}",
            )
        self._endpoints = {int(p): e for p, e in endpoints.items()}
        self._names = {p: (names or {}).get(p, f"p{p}") for p in self._endpoints}
        self._group = group
        self._timeout_s = float(timeout_s)
        self._limits = Limits(int(max_request_ids), int(max_frame_bytes))
        self._local_part = local_part
        self._local = {
            k: np.ascontiguousarray(v) for k, v in (local_tables or {}).items()
        }
        self._local_ids = np.empty(0, dtype=np.int64)
        self._local_row = np.empty(0, dtype=np.int64)  # global id -> local row
        if local_part is not None and local_tables is not None:
            self._local_ids = np.flatnonzero(self._owner == local_part)
            # A dense map (4 or 8 bytes a vertex, like ``owner``) beats a binary
            # search of random ids by 3-5x.
            index = np.int32 if self._owner.shape[0] < 2**31 else np.int64
            self._local_row = np.full(self._owner.shape[0], -1, dtype=index)
            self._local_row[self._local_ids] = np.arange(self._local_ids.size)
            for attr, table in self._local.items():
                if table.ndim == 0 or table.shape[0] != self._local_ids.shape[0]:
                    raise FeatureError.build(
                        f"local table {attr!r}",
                        where,
                        f"{self._local_ids.shape[0]} rows (partition {local_part})",
                        f"shape {table.shape}",
                    )
        parts = set(np.flatnonzero(np.bincount(self._owner)).tolist())
        missing = sorted(
            parts - set(self._endpoints) - ({local_part} if self._local else set())
        )
        if missing:
            raise FeatureError.build(
                "endpoints",
                where,
                f"an endpoint for every partition {sorted(parts)}",
                f"none for {missing}",
            )
        self.traffic = Traffic()
        self._local_count = Traffic()
        self._attrs: dict[str, _Attr] | None = None
        self._server_limits: dict[int, Limits] = {}
        self._lock = threading.Lock()
        self._threads = threading.local()
        self._sockets: list[zmq.Socket[Any]] = []
        self._closed = False

    @classmethod
    def of_group(
        cls,
        group: FeatureServerGroup,
        *,
        local_part: int | None = None,
        **options: Any,
    ) -> RemoteFeatureStore:
        """A client of every server of ``group`` in this process.

        With ``local_part``, that partition's rows are read from the group's shared
        memory in place (no traffic). ``options`` go to the constructor.
        """
        local = group.attach(local_part) if local_part is not None else None
        return cls(
            group.endpoints,
            group.owner,
            local_part=local_part,
            local_tables=local,
            names=group.names,
            **options,
        )

    # --------------------------------------------------------------- counters
    @property
    def local_rows(self) -> int:
        """Rows ``get`` read from ``local_tables`` (no traffic)."""
        return self._local_count.rows

    def row_bytes(self, attr: str) -> int:
        """Bytes of one row of ``attr``."""
        return self._attr(attr).row_bytes

    # ---------------------------------------------------------------- sockets
    def _socket(self, part: int) -> zmq.Socket[Any]:
        if self._closed:
            raise FeatureError.build(
                "store", "RemoteFeatureStore", "an open store", "a closed one"
            )
        sockets: dict[int, zmq.Socket[Any]] = self._threads.__dict__.setdefault(
            "sockets", {}
        )
        if part not in sockets:
            sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(self._endpoints[part])
            sockets[part] = sock
            with self._lock:
                self._sockets.append(sock)
        return sockets[part]

    def _reset(self, part: int) -> None:
        """Drop this thread's socket to ``part`` (after a timeout: a fresh start)."""
        sock = self._threads.__dict__.get("sockets", {}).pop(part, None)
        if sock is not None:
            with self._lock:
                self._sockets.remove(sock)
            sock.close(linger=0)

    def close(self) -> None:
        """Close every socket of every thread (idempotent)."""
        with self._lock:
            self._closed = True
            for sock in self._sockets:
                sock.close(linger=0)
            self._sockets.clear()

    def __enter__(self) -> RemoteFeatureStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _where(self, part: int) -> str:
        return (
            f"feature server {self._names.get(part, f'p{part}')}, partition {part}, "
            f"{self._endpoints.get(part, 'no endpoint')}"
        )

    # ------------------------------------------------------------ round trips
    def _exchange(
        self, messages: dict[int, tuple[int, list[Any], _Pending]]
    ) -> dict[int, tuple[Header, memoryview]]:
        """Send ``{request: (owner, frames, pending)}``, collect every reply.

        One deadline covers sending and receiving. Replies to other request ids
        (late ones from an earlier call) are dropped. The first ERROR reply is raised
        after the others arrive (so both ends keep counting the same).
        """
        deadline = time.monotonic() + self._timeout_s
        poller = zmq.Poller()
        for request, (part, frames, _) in messages.items():
            sock = self._socket(part)
            poller.register(sock, zmq.POLLIN)
            # pyzmq's zero-copy send costs more than copying a small body.
            copy = memoryview(frames[-1]).nbytes < ZERO_COPY_BYTES
            try:
                sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=copy)
            except zmq.Again:
                if not sock.poll(_ms(deadline - time.monotonic()), zmq.POLLOUT):
                    self._timeout({messages[request][0]})
                sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=copy)
        waiting = {r: m[0] for r, m in messages.items()}
        replies: dict[int, tuple[Header, memoryview]] = {}
        error: FeatureError | None = None
        big = Limits(1 << 62, 1 << 62)  # replies are bounded by what we asked for
        while waiting:
            left = deadline - time.monotonic()
            events = poller.poll(_ms(left)) if left > 0 else []
            if not events:
                self._timeout(set(waiting.values()))
            for sock, _ in events:
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    header, body = decode(frames, big)
                    part = waiting.pop(header.request, -1)
                    if part < 0:
                        continue  # a late reply to an abandoned request
                    if header.kind is Kind.ERROR and error is None:
                        message = bytes(body).decode("utf-8", errors="replace")
                        error = FeatureError(f"{message} ({self._where(part)})")
                    replies[header.request] = (header, body)
        if error is not None:
            raise error
        return replies

    def _timeout(self, parts: set[int]) -> None:
        for part in parts:
            self._reset(part)
        first = min(parts)
        raise FeatureServerTimeout.build(
            "reply",
            self._where(first),
            f"a reply within timeout_s={self._timeout_s} s",
            "none"
            + (
                f" (also none from partitions {sorted(parts - {first})})"
                if len(parts) > 1
                else ""
            ),
            "the feature server may have died or be overloaded",
        )

    def _ensure_schema(self) -> dict[str, _Attr]:
        with self._lock:
            if self._attrs is not None:
                return self._attrs
        messages = {}
        for part in self._endpoints:
            request = next(_REQUEST_IDS)
            frames: list[Any] = [encode_header(Header(Kind.SCHEMA, 0, request))]
            messages[request] = (part, frames, _Pending(part, 0, None))
        replies = self._exchange(messages)
        tables: dict[str, dict[int, tuple[int, SchemaEntry]]] = {}
        for request, (header, body) in replies.items():
            part = messages[request][0]
            if header.code != part:
                raise FeatureError.build(
                    "partition",
                    self._where(part),
                    f"the server of partition {part}",
                    f"the server of partition {header.code}",
                )
            entries, limits = decode_schema(body, header.count)
            self._server_limits[part] = limits
            for i, entry in enumerate(entries):
                tables.setdefault(entry.name, {})[part] = (i, entry)
        if self._local_part is not None and self._local:
            for name, table in self._local.items():
                entry = SchemaEntry(name, table.dtype, table.shape[1:], table.shape[0])
                tables.setdefault(name, {})[self._local_part] = (-1, entry)
        attrs = {
            name: self._merge(name, by_part) for name, by_part in sorted(tables.items())
        }
        with self._lock:
            self._attrs = attrs
        return attrs

    def _merge(self, name: str, by_part: dict[int, tuple[int, SchemaEntry]]) -> _Attr:
        first = next(iter(by_part.values()))[1]
        for part, (_, entry) in by_part.items():
            if (entry.dtype, entry.row_shape) != (first.dtype, first.row_shape):
                raise FeatureError.build(
                    f"attribute {name!r}",
                    self._where(part),
                    f"{first.dtype} rows of shape {first.row_shape} (as other servers)",
                    f"{entry.dtype} rows of shape {entry.row_shape}",
                )
        rows = sum(entry.num_rows for _, entry in by_part.values())
        if rows != self._owner.shape[0]:
            raise FeatureError.build(
                f"attribute {name!r}",
                "RemoteFeatureStore",
                f"{self._owner.shape[0]} rows over all partitions (len(owner))",
                f"{rows} rows from partitions {sorted(by_part)}",
            )
        ids = {p: i for p, (i, _) in by_part.items() if i >= 0}
        return _Attr(ids, first.dtype, first.row_shape, rows)

    def _attr(self, attr: str) -> _Attr:
        attrs = self._ensure_schema()
        if attr not in attrs:
            raise FeatureError.build(
                "attr", "RemoteFeatureStore", f"one of {sorted(attrs)}", repr(attr)
            )
        return attrs[attr]

    # ------------------------------------------------------------------ fetch
    def fetch(
        self, attr: str, ids_by_owner: Mapping[int, np.ndarray]
    ) -> dict[int, np.ndarray]:
        """The rows of ``ids_by_owner[o]`` from owner ``o``, all owners at once.

        Rows of the local partition (with ``local_tables``) are read in place and
        counted in :attr:`local_rows`. Raises :class:`FeatureError` for ids an owner
        does not own (the server's message) and :class:`FeatureServerTimeout` when
        the replies miss the deadline.
        """
        meta = self._attr(attr)
        width = meta.row_bytes
        out: dict[int, np.ndarray] = {}
        messages: dict[int, tuple[int, list[Any], _Pending]] = {}
        for part, ids_any in ids_by_owner.items():
            ids = np.ascontiguousarray(ids_any, dtype=np.int64)
            if ids.size == 0:
                out[part] = np.empty((0, *meta.row_shape), dtype=meta.dtype)
            elif part == self._local_part and attr in self._local:
                out[part] = self._read_local(attr, ids, checked=False)
            elif part not in meta.ids:
                raise FeatureError.build(
                    "owner",
                    f"RemoteFeatureStore.fetch({attr!r})",
                    f"one of the partitions {sorted(meta.ids)}",
                    str(part),
                )
            else:
                step = self._frame_ids(part, width)
                if ids.size <= step:
                    messages.update(self._requests(part, meta, ids, None))
                else:
                    rows = np.empty((ids.size, *meta.row_shape), dtype=meta.dtype)
                    out[part] = rows
                    flat = rows.reshape(ids.size, -1).view(np.uint8)
                    for start in range(0, ids.size, step):
                        chunk = ids[start : start + step]
                        messages.update(
                            self._requests(
                                part, meta, chunk, flat[start : start + chunk.size]
                            )
                        )
        for request, (header, body) in (
            self._exchange(messages).items() if messages else []
        ):
            pending = messages[request][2]
            if (
                header.count != pending.count
                or header.row_bytes != width
                or body.nbytes != pending.count * width
            ):
                raise FeatureError.build(
                    "reply",
                    self._where(pending.owner),
                    f"{pending.count} rows of {width} bytes",
                    f"{header.count} rows of {header.row_bytes} bytes "
                    f"in {body.nbytes} bytes",
                )
            self.traffic.add(pending.count, payload_bytes(pending.count, width))
            if pending.out is not None:
                pending.out[...] = np.frombuffer(body, dtype=np.uint8).reshape(
                    pending.out.shape
                )
                continue
            rows = np.frombuffer(body, dtype=meta.dtype).reshape(
                pending.count, *meta.row_shape
            )
            if rows.ctypes.data % meta.dtype.alignment:
                rows = rows.copy()  # torch needs aligned rows
            out[pending.owner] = rows
        return out

    def _frame_ids(self, part: int, width: int) -> int:
        server = self._server_limits.get(part, self._limits)
        return min(self._limits.ids_per_frame(width), server.ids_per_frame(width))

    def _requests(
        self, part: int, meta: _Attr, ids: np.ndarray, out: np.ndarray | None
    ) -> dict[int, tuple[int, list[Any], _Pending]]:
        request = next(_REQUEST_IDS)
        header = Header(
            Kind.GET,
            meta.ids[part],
            request,
            dtype_code(meta.dtype),
            ids.size,
            meta.row_bytes,
        )
        return {
            request: (part, [encode_header(header), ids], _Pending(part, ids.size, out))
        }

    def _read_local(self, attr: str, ids: np.ndarray, checked: bool) -> np.ndarray:
        """Rows of ids this partition owns, from ``local_tables`` (no traffic)."""
        if not checked:
            part = int(self._local_part)  # type: ignore[arg-type]
            check_owned(self._owner, part, ids, f"local partition {part} of {attr!r}")
        self._local_count.add(ids.size, 0, 0)
        rows: np.ndarray = self._local[attr][self._local_row[ids]]
        return rows

    # ------------------------------------------------------- FeatureStore hooks
    def _schema(self) -> dict[Key, FeatureSchema]:
        return {
            Key(self._group, name): FeatureSchema(
                torch_dtype_of(a.dtype), (a.num_rows, *a.row_shape)
            )
            for name, a in self._ensure_schema().items()
        }

    def _get_all(self, key: Key) -> torch.Tensor:
        schema = self._lookup(key, "RemoteFeatureStore.get")
        return self.get(key, np.arange(schema.num_rows, dtype=np.int64))

    def _gather(self, key: Key, ids: np.ndarray, out: torch.Tensor) -> torch.Tensor:
        target = out.numpy()
        ids = ids.astype(np.int64, copy=False)
        owners = self._owner[ids].astype(np.int64)
        remote = np.arange(ids.size)
        if self._local_part is not None and key.attr in self._local:
            here = owners == self._local_part
            target[here] = self._read_local(key.attr, ids[here], checked=True)
            remote = np.flatnonzero(~here)
        if remote.size == 0:
            return out
        # One sort by (owner, id) groups the ids by owner and finds duplicates;
        # each distinct id is fetched once and written straight to its first
        # position, and duplicates copy that row afterwards.
        keys = owners[remote] * self._owner.shape[0] + ids[remote]
        perm = np.argsort(keys)  # equal keys are one id: any order will do
        keys = keys[perm]
        first = np.ones(keys.size, dtype=bool)
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
        dest = remote[perm]
        unique_keys, lead = keys[first], dest[first]
        unique_owner, unique_ids = np.divmod(unique_keys, self._owner.shape[0])
        parts = np.flatnonzero(np.diff(unique_owner, prepend=-1, append=-1)).tolist()
        spans = {
            int(unique_owner[a]): slice(a, b) for a, b in itertools.pairwise(parts)
        }
        rows = self.fetch(key.attr, {p: unique_ids[span] for p, span in spans.items()})
        for part, span in spans.items():
            target[lead[span]] = rows[part]
        if not first.all():
            group = np.cumsum(first) - 1
            target[dest[~first]] = target[lead[group[~first]]]
        return out

    def _put(self, key: Key, array: np.ndarray) -> None:
        raise FeatureError.build(
            "put",
            f"RemoteFeatureStore ({key})",
            "a writable store",
            "a read-only remote one",
            "give the tables to FeatureServerGroup (or FeatureServer) instead",
        )

    def __repr__(self) -> str:
        parts = sorted(self._endpoints)
        return f"RemoteFeatureStore(partitions={parts}, group={self._group!r})"
