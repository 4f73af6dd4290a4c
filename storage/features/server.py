"""Feature servers: one partition's rows served over pyzmq, in a thread or a process.

A :class:`FeatureServer` answers the frames of :mod:`~strata.storage.features.wire`
on one ROUTER socket (loopback TCP by default): GET (rows of global ids), SCHEMA,
PING and STATS. A global id maps to its local row by a binary search of the sorted
``owned_ids``; rows are gathered into a reused buffer and sent without a copy. A
bad request (ids not owned, a malformed or oversized frame) gets an ERROR reply
naming the problem, and the server serves on. With a
:class:`~strata.storage.features.network.NetworkModel`, each reply is held back by
its simulated delay (in a queue, so latencies of concurrent requests overlap).

:class:`~strata.storage.features.server_group.FeatureServerGroup` runs one
server *process* per partition.

Examples:
    >>> import numpy as np
    >>> from strata.storage.features.wire import Header, Kind, decode, encode_header
    >>> import zmq
    >>> x = np.arange(8, dtype=np.float32).reshape(4, 2)   # rows of vertices 1,3,5,7
    >>> with FeatureServer({"x": x}, np.array([1, 3, 5, 7]), partition=1) as server:
    ...     sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
    ...     _ = sock.connect(server.endpoint)
    ...     ids = np.array([7, 3], dtype=np.int64)
    ...     sock.send_multipart([encode_header(Header(Kind.GET, 0, 1, 8, 2, 8)), ids])
    ...     header, body = decode(sock.recv_multipart(), server.limits)
    ...     sock.close(linger=0)
    >>> np.frombuffer(body, dtype=np.float32).reshape(2, 2).tolist()
    [[6.0, 7.0], [2.0, 3.0]]
    >>> server.served
    Traffic(rows=2, bytes=32, requests=1)
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zmq

from strata.storage._delayed import DelayedReplies, serve_router
from strata.storage.errors import FeatureError
from strata.storage.features.network import NetworkModel
from strata.storage.features.traffic import Traffic, payload_bytes
from strata.storage.features.wire import (
    MAX_FRAME_BYTES,
    MAX_REQUEST_IDS,
    ZERO_COPY_BYTES,
    ErrorCode,
    FrameError,
    Header,
    Kind,
    Limits,
    SchemaEntry,
    decode,
    dtype_code,
    encode_header,
    encode_schema,
    error_frames,
)

__all__ = ["FeatureServer", "query_stats"]

_STATS = struct.Struct("<QQQQ")


class _Refused(FeatureError):
    """A request the server answers with an ERROR reply of status ``code``."""

    code = ErrorCode.BAD_REQUEST


def _refuse(code: ErrorCode, *parts: str) -> _Refused:
    error = _Refused.build(*parts)
    assert isinstance(error, _Refused)
    error.code = code
    return error


@dataclass(slots=True, eq=False)  # identity, not the buffers, tells slots apart
class _Slot:
    """A reply buffer, busy while held for a delayed send or tracked by zmq."""

    buf: np.ndarray
    tracker: zmq.MessageTracker | None = None
    held: bool = False

    def free(self) -> bool:
        return not self.held and (self.tracker is None or self.tracker.done)


@dataclass(slots=True)
class _BufferPool:
    """Reply buffers reused across requests (never while zmq still reads one)."""

    keep: int = 4
    slots: list[_Slot] = field(default_factory=list)

    def acquire(self, nbytes: int) -> _Slot:
        for slot in self.slots:
            if slot.buf.nbytes >= nbytes and slot.free():
                slot.held = True
                return slot
        free = [s for s in self.slots if s.free()]
        if len(self.slots) >= self.keep and free:
            self.slots.remove(min(free, key=lambda s: s.buf.nbytes))
        size = 1 << max(16, (nbytes - 1).bit_length())
        slot = _Slot(np.empty(size, dtype=np.uint8), held=True)
        self.slots.append(slot)
        return slot


class FeatureServer:
    """Serves the rows one partition owns on a ROUTER socket (see the module).

    Args:
        tables: arrays by attribute name; row ``i`` is vertex ``owned_ids[i]``.
        owned_ids: sorted, distinct global ids this partition owns.
        partition: this partition's number (named in errors, sent in SCHEMA).
        endpoint: zmq address to bind; port 0 picks a free port (see
            :attr:`endpoint` after :meth:`start`).
        name: the server's name in errors (default ``features-p<partition>``).
        network: a simulated link delaying every reply.
        max_request_ids: most ids one GET may carry.
        max_frame_bytes: most bytes of one body frame.
    """

    def __init__(
        self,
        tables: Mapping[str, np.ndarray],
        owned_ids: np.ndarray,
        partition: int,
        *,
        endpoint: str = "tcp://127.0.0.1:0",
        name: str = "",
        network: NetworkModel | None = None,
        max_request_ids: int = MAX_REQUEST_IDS,
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        self.partition = int(partition)
        self.name = name or f"features-p{self.partition}"
        self.limits = Limits(int(max_request_ids), int(max_frame_bytes))
        self.network = network
        self._bind_to = endpoint
        self.endpoint = endpoint
        where = f"FeatureServer {self.name}"
        self._owned = np.ascontiguousarray(owned_ids, dtype=np.int64)
        if (
            self._owned.ndim != 1
            or np.any(self._owned[1:] <= self._owned[:-1])
            or (self._owned.size and self._owned[0] < 0)
        ):
            raise FeatureError.build(
                "owned_ids",
                where,
                "sorted distinct 1-D ids >= 0",
                f"shape {owned_ids.shape}",
            )
        self._entries: list[SchemaEntry] = []
        self._rows: list[np.ndarray] = []  # each table as (rows, row_bytes) uint8
        for attr in sorted(tables):
            table = np.ascontiguousarray(tables[attr])
            if table.ndim == 0 or table.shape[0] != self._owned.shape[0]:
                raise FeatureError.build(
                    f"table {attr!r}",
                    where,
                    f"{self._owned.shape[0]} rows (one per owned id)",
                    f"shape {table.shape}",
                )
            dtype_code(table.dtype)  # refuse a dtype the wire cannot name
            entry = SchemaEntry(attr, table.dtype, table.shape[1:], table.shape[0])
            self._entries.append(entry)
            self._rows.append(table.reshape(table.shape[0], -1).view(np.uint8))
        # Global id -> local row. A dense map is 5-15x faster than a binary search
        # of random ids; it is used while no bigger than the tables (or 64 MiB).
        self._index: np.ndarray | None = None
        span = int(self._owned[-1]) + 1 if self._owned.size else 0
        table_bytes = sum(r.nbytes for r in self._rows)
        if 0 < span < 2**31 and 4 * span <= max(table_bytes, 1 << 26):
            self._index = np.full(span, -1, dtype=np.int32)
            self._index[self._owned] = np.arange(self._owned.size, dtype=np.int32)
        self.served = Traffic()
        self.refused = 0
        self._socket: zmq.Socket[Any] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._pool = _BufferPool()
        self._replies: DelayedReplies[tuple[list[Any], _Slot | None]] = DelayedReplies()

    # ---------------------------------------------------------------- lifecycle
    def bind(self) -> str:
        """Bind the socket (no serving yet); returns the resolved endpoint."""
        if self._socket is None:
            sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.ROUTER)
            sock.setsockopt(zmq.LINGER, 0)
            # A hard guard on memory: a bigger frame drops the connection (smaller
            # limit violations get an ERROR reply from decode()).
            sock.setsockopt(zmq.MAXMSGSIZE, self.limits.max_frame_bytes + 4096)
            sock.bind(self._bind_to)
            self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
            self._socket = sock
        return self.endpoint

    def start(self) -> FeatureServer:
        """Bind and serve from a daemon thread until :meth:`close`."""
        if self._thread is None:
            self.bind()
            self._thread = threading.Thread(
                target=self.serve, name=self.name, daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def __enter__(self) -> FeatureServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ serving
    def serve(
        self,
        should_stop: Callable[[], bool] | None = None,
        stop_fd: int | None = None,
    ) -> None:
        """Serve until :meth:`close`, ``should_stop()`` or EOF on ``stop_fd``."""
        sock = self._socket
        assert sock is not None, "bind() before serve()"
        serve_router(
            sock,
            lambda frames: self._answer(sock, frames),
            self._replies,
            lambda held: self._send(sock, *held),
            should_stop=lambda: (
                self._stop.is_set() or bool(should_stop and should_stop())
            ),
            stop_fd=stop_fd,
        )

    def _answer(self, sock: zmq.Socket[Any], frames: list[zmq.Frame]) -> None:
        arrived = time.perf_counter()
        request, slot = 0, None
        try:
            header, body = decode(frames[1:], self.limits)
            request = header.request
            reply, slot, nbytes = self._reply(header, body)
        except FeatureError as error:
            self.refused += 1
            code = ErrorCode.BAD_REQUEST
            if isinstance(error, FrameError):
                code = ErrorCode.OVERSIZED if error.oversized else ErrorCode.BAD_FRAME
                request = getattr(error, "header", Header(Kind.ERROR, 0, 0)).request
            elif isinstance(error, _Refused):
                code = error.code
            reply, nbytes = error_frames(request, code, str(error)), 0
        except Exception as error:  # a bug must not take the server down
            self.refused += 1
            message = f"internal error in feature server {self.name}: {error!r}"
            reply, nbytes = error_frames(request, ErrorCode.INTERNAL, message), 0
        reply = [frames[0].bytes, *reply]  # the identity, as bytes (tracked send)
        delay = self.network.delay(nbytes) if self.network else 0.0
        if delay > 0:
            self._replies.hold(arrived + delay, (reply, slot))
        else:
            self._send(sock, reply, slot)

    def _send(
        self, sock: zmq.Socket[Any], reply: list[Any], slot: _Slot | None
    ) -> None:
        body = memoryview(reply[-1]).nbytes if len(reply) > 2 else 0
        if slot is None or body < ZERO_COPY_BYTES:
            sock.send_multipart(reply)  # copied: cheaper than tracking a small body
            if slot is not None:
                slot.tracker, slot.held = None, False
        else:
            tracker = sock.send_multipart(reply, copy=False, track=True)
            slot.tracker, slot.held = tracker, False

    def _reply(
        self, header: Header, body: memoryview
    ) -> tuple[list[Any], _Slot | None, int]:
        """Reply frames (after the identity), the buffer they use, counted bytes."""
        if header.kind is Kind.GET:
            return self._get(header, body)
        if header.kind is Kind.SCHEMA:
            schema = encode_schema(self._entries, self.limits)
            head = Header(
                Kind.REPLY, self.partition, header.request, 0, len(self._entries)
            )
            return [encode_header(head), schema], None, 0
        if header.kind is Kind.STATS:
            s = self.served.snapshot()
            stats = _STATS.pack(s.rows, s.bytes, s.requests, self.refused)
            head = Header(Kind.REPLY, self.partition, header.request, 0, 4)
            return [encode_header(head), stats], None, 0
        if header.kind is Kind.PING:
            head = Header(Kind.REPLY, self.partition, header.request)
            return [encode_header(head)], None, 0
        raise _refuse(
            ErrorCode.BAD_REQUEST,
            "request kind",
            self._where(),
            "GET, SCHEMA, STATS or PING",
            header.kind.name,
        )

    def _where(self) -> str:
        return f"feature server {self.name} (partition {self.partition})"

    def _local_rows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Local rows of global ``ids``, and the positions of ids not owned."""
        if self._index is not None:
            local = self._index.take(ids, mode="clip")  # clip: checked below
            return local, np.flatnonzero(
                (local < 0) | (ids < 0) | (ids >= self._index.size)
            )
        if self._owned.shape[0] == 0:
            return np.zeros_like(ids), np.arange(ids.shape[0])
        local = np.searchsorted(self._owned, ids)
        np.minimum(local, self._owned.shape[0] - 1, out=local)
        return local, np.flatnonzero(self._owned[local] != ids)

    def _get(
        self, header: Header, body: memoryview
    ) -> tuple[list[Any], _Slot | None, int]:
        if header.code >= len(self._entries):
            raise _refuse(
                ErrorCode.UNKNOWN_ATTR,
                "attribute id",
                self._where(),
                f"an id < {len(self._entries)} ({[e.name for e in self._entries]})",
                str(header.code),
            )
        entry, rows = self._entries[header.code], self._rows[header.code]
        if (
            header.dtype != dtype_code(entry.dtype)
            or header.row_bytes != entry.row_bytes
        ):
            raise _refuse(
                ErrorCode.BAD_REQUEST,
                f"rows of {entry.name!r}",
                self._where(),
                f"{entry.dtype} rows of {entry.row_bytes} bytes",
                f"dtype code {header.dtype}, rows of {header.row_bytes} bytes",
            )
        ids = np.frombuffer(body, dtype="<i8")
        n, width = ids.shape[0], entry.row_bytes
        local, bad = self._local_rows(ids)
        if bad.size:
            i = int(bad[0])
            raise _refuse(
                ErrorCode.NOT_OWNED,
                "ids",
                self._where(),
                f"ids owned by partition {self.partition}",
                f"id {int(ids[i])} (not owned) at position {i}",
                "route each id to the server of its owner",
            )
        slot = self._pool.acquire(n * width)
        out = slot.buf[: n * width].reshape(n, width)
        try:
            np.take(rows, local, axis=0, out=out, mode="clip")
        except BaseException:
            slot.held = False
            raise
        nbytes = payload_bytes(n, width)
        self.served.add(n, nbytes)
        head = Header(Kind.REPLY, 0, header.request, header.dtype, n, width)
        return [encode_header(head), out.data], slot, nbytes


def query_stats(endpoint: str, timeout_s: float = 5.0) -> tuple[Traffic, int]:
    """Ask a server for its counters: (served traffic, refused requests)."""
    sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(endpoint)
        sock.send(encode_header(Header(Kind.STATS, 0, 1)))
        if not sock.poll(int(timeout_s * 1000)):
            raise FeatureError.build(
                "stats reply",
                f"feature server at {endpoint}",
                f"a reply within {timeout_s} s",
                "none",
            )
        header, body = decode(sock.recv_multipart(), Limits())
        if header.kind is not Kind.REPLY:
            raise FeatureError(bytes(body).decode("utf-8", errors="replace"))
        rows, nbytes, requests, refused = _STATS.unpack(body)
        return Traffic(rows, nbytes, requests), refused
    finally:
        sock.close(linger=0)
