"""Feature servers: one partition's rows served over pyzmq, in a thread or a process.

A :class:`FeatureServer` answers the frames of :mod:`~strata.storage.features.wire`
on one ROUTER socket (loopback TCP by default): GET (rows of global ids), SCHEMA,
PING and STATS. A global id maps to its local row by a binary search of the sorted
``owned_ids``; rows are gathered into a reused buffer and sent without a copy. A
bad request (ids not owned, a malformed or oversized frame) gets an ERROR reply
naming the problem, and the server serves on. With a
:class:`~strata.storage.features.network.NetworkModel`, each reply is held back by
its simulated delay (in a queue, so latencies of concurrent requests overlap).

:class:`FeatureServerGroup` runs one server *process* per partition, its tables in
shared memory (so a trainer can read its own partition's rows in place). The
children import numpy and pyzmq only, never torch (they start in a fresh
interpreter that skips the package ``__init__`` files), exit when their parent
dies, and :meth:`FeatureServerGroup.close` removes every process and segment.

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

import contextlib
import heapq
import json
import math
import os
import secrets
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from multiprocessing import shared_memory
from pathlib import Path
from typing import IO, Any

import numpy as np
import zmq

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

__all__ = ["FeatureServer", "FeatureServerGroup", "attach_partition", "query_stats"]

_TICK_S = 0.05  # how often a serve loop checks for stop / parent death
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
        self._due: list[tuple[float, int, list[Any], _Slot | None]] = []
        self._seq = 0

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
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        if stop_fd is not None:
            poller.register(stop_fd, zmq.POLLIN)
        while not self._stop.is_set() and not (should_stop and should_stop()):
            wait = _TICK_S
            if self._due:
                wait = min(wait, max(0.0, self._due[0][0] - time.perf_counter()))
            events = dict(poller.poll(math.ceil(wait * 1000)))
            if stop_fd is not None and stop_fd in events:
                return
            if sock in events:
                for _ in range(64):  # drain a burst before sending due replies
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    self._answer(sock, frames)
            self._send_due(sock)

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
            self._seq += 1
            heapq.heappush(self._due, (arrived + delay, self._seq, reply, slot))
        else:
            self._send(sock, reply, slot)

    def _send_due(self, sock: zmq.Socket[Any]) -> None:
        now = time.perf_counter()
        while self._due and self._due[0][0] <= now:
            _, _, reply, slot = heapq.heappop(self._due)
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


# --------------------------------------------------------------- server processes
# The child's first lines: register stand-ins for the package modules so that
# importing this file does not run the package ``__init__`` files (which import
# torch); submodules still load from the real folders.
_BOOT = """
import json, sys, types
spec = json.loads(sys.argv[1])
for name, path in spec["packages"]:
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules.setdefault(name, module)
from strata.storage.features.server import _child_main
_child_main(spec)
"""


def _packages() -> list[tuple[str, str]]:
    here = Path(__file__).resolve().parent
    return [
        ("strata", str(here.parent.parent)),
        ("strata.storage", str(here.parent)),
        ("strata.storage.features", str(here)),
    ]


def attach_partition(
    layout: Mapping[str, Any],
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Map one partition's shared segments read-only, in any process.

    Args:
        layout: :meth:`FeatureServerGroup.layout` of the partition (JSON-able).

    Returns:
        ``(owned_ids, tables)``; row ``i`` of each table is vertex ``owned_ids[i]``.
    """

    def mapped(segment: str, dtype: str, shape: list[int]) -> np.ndarray:
        if int(np.prod(shape)) == 0:
            return np.empty(shape, dtype=dtype)
        # /dev/shm is where Linux keeps POSIX shared memory: a plain file map
        # leaves the segment's lifetime to the group (no resource tracker here).
        return np.memmap(
            f"/dev/shm/{segment}", dtype=dtype, mode="r", shape=tuple(shape)
        )

    ids = layout["ids"]
    owned = mapped(ids["segment"], "int64", [ids["rows"]])
    tables = {
        t["attr"]: mapped(t["segment"], t["dtype"], t["shape"])
        for t in layout["tables"]
    }
    return owned, tables


def _child_main(spec: Mapping[str, Any]) -> None:
    """Entry of a server process: serve until stdin closes or the parent dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    parent = os.getppid()
    owned, tables = attach_partition(spec["layout"])
    latency, bandwidth = spec["network"] or (0.0, float("inf"))
    server = FeatureServer(
        tables,
        owned,
        spec["layout"]["partition"],
        endpoint=spec["endpoint"],
        name=spec["name"],
        network=NetworkModel(latency, bandwidth) if spec["network"] else None,
        max_request_ids=spec["limits"][0],
        max_frame_bytes=spec["limits"][1],
    )
    endpoint = server.bind()
    ready = {"endpoint": endpoint, "pid": os.getpid(), "torch": "torch" in sys.modules}
    sys.stdout.write(json.dumps(ready) + "\n")
    sys.stdout.flush()
    try:
        server.serve(lambda: os.getppid() != parent, stop_fd=sys.stdin.fileno())
    finally:
        server.close()


@dataclass(slots=True)
class _GroupState:
    """What a group must release, kept apart from it for the finalizer."""

    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[int, IO[bytes]] = field(default_factory=dict)
    segments: list[shared_memory.SharedMemory] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)  # of ipc:// endpoints


def _shutdown(state: _GroupState, grace_s: float = 2.0) -> None:
    """Stop every child (ask, terminate, kill), then unlink every segment."""
    for proc in state.procs.values():
        if proc.stdin is not None:
            # A byte (or EOF) on stdin asks the child to stop; the byte also works
            # when a forked process still holds the pipe open.
            with contextlib.suppress(OSError):
                proc.stdin.write(b"\n")
                proc.stdin.flush()
            with contextlib.suppress(OSError):
                proc.stdin.close()
    for action in (None, "terminate", "kill"):
        deadline = time.monotonic() + grace_s
        for proc in state.procs.values():
            if proc.poll() is None and action is not None:
                with contextlib.suppress(OSError):
                    getattr(proc, action)()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
    for proc in state.procs.values():
        if proc.stdout is not None:
            proc.stdout.close()
    for log in state.logs.values():
        log.close()
    state.procs.clear()
    state.logs.clear()
    for segment in state.segments:
        with contextlib.suppress(FileNotFoundError):
            segment.unlink()
    state.segments.clear()
    for folder in state.folders:
        shutil.rmtree(folder, ignore_errors=True)
    state.folders.clear()


class FeatureServerGroup:
    """One :class:`FeatureServer` process per partition, tables in shared memory.

    Args:
        tables: full arrays by attribute name (row ``v`` is vertex ``v``).
        owner: the partition of each vertex (ints ``>= 0``).
        network: a simulated link for every server.
        name: prefix of the servers' names (``<name>-p<part>``).
        startup_timeout_s: deadline for every server to report ready.
        num_parts: partitions (default ``owner.max() + 1``); one without rows
            still gets a (empty) server.
        max_request_ids: each server's limit on ids per request.
        max_frame_bytes: each server's limit on bytes per frame.
        transport: ``"tcp"`` (loopback, default) or ``"ipc"`` (Unix sockets in a
            private folder; about 25% faster for large replies on one machine).

    Attributes:
        endpoints: ``{part: endpoint}``; ``pids``: ``{part: pid}``;
        names: ``{part: server name}`` (for ``RemoteFeatureStore(names=...)``);
        owner: the ``owner`` array; num_parts: the number of partitions.

    Raises:
        FeatureError: on bad input, or a server that fails to start in time (its
            stderr is quoted); nothing is left behind.
    """

    def __init__(
        self,
        tables: Mapping[str, np.ndarray],
        owner: np.ndarray,
        *,
        network: NetworkModel | None = None,
        name: str = "features",
        startup_timeout_s: float = 30.0,
        num_parts: int | None = None,
        max_request_ids: int = MAX_REQUEST_IDS,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        transport: str = "tcp",
    ) -> None:
        where = f"FeatureServerGroup {name!r}"
        if transport not in ("tcp", "ipc"):
            raise FeatureError.build(
                "transport", where, "'tcp' or 'ipc'", repr(transport)
            )
        owner = np.asarray(owner)
        if (
            owner.ndim != 1
            or owner.dtype.kind not in "iu"
            or (owner.size and owner.min() < 0)
        ):
            raise FeatureError.build(
                "owner",
                where,
                "a 1-D array of partitions >= 0",
                f"{owner.dtype} {owner.shape}",
            )
        parts = (
            int(num_parts) if num_parts is not None else int(owner.max(initial=-1)) + 1
        )
        if owner.size and owner.max() >= parts:
            raise FeatureError.build(
                "owner", where, f"partitions < num_parts={parts}", str(int(owner.max()))
            )
        self.name = name
        self.owner = owner
        self.num_parts = parts
        self.names = {p: f"{name}-p{p}" for p in range(parts)}
        self.endpoints: dict[int, str] = {}
        self.pids: dict[int, int] = {}
        self.imports_torch: dict[int, bool] = {}
        self._state = _GroupState()
        self._finalizer = weakref.finalize(self, _shutdown, self._state)
        try:
            self._layouts = self._share(tables, owner, where)
            self._start(
                network,
                (int(max_request_ids), int(max_frame_bytes)),
                startup_timeout_s,
                transport,
            )
        except BaseException:
            self.close()
            raise

    def _share(
        self, tables: Mapping[str, np.ndarray], owner: np.ndarray, where: str
    ) -> list[dict[str, Any]]:
        arrays = {}
        for attr, table in tables.items():
            array = np.asarray(table)
            if array.ndim == 0 or array.shape[0] != owner.shape[0]:
                raise FeatureError.build(
                    f"table {attr!r}",
                    where,
                    f"{owner.shape[0]} rows",
                    f"shape {array.shape}",
                )
            dtype_code(array.dtype)
            arrays[attr] = array
        order = np.argsort(owner, kind="stable")
        bounds = np.concatenate(
            [[0], np.cumsum(np.bincount(owner, minlength=self.num_parts))]
        )
        token = f"sfs_{os.getpid()}_{secrets.token_hex(4)}"
        layouts = []
        for part in range(self.num_parts):
            ids = order[bounds[part] : bounds[part + 1]].astype(np.int64)
            layout: dict[str, Any] = {"partition": part, "tables": []}
            arange = np.arange(ids.size)
            layout["ids"] = {
                "segment": self._segment(f"{token}_{part}_ids", ids, arange),
                "rows": ids.size,
            }
            for i, (attr, array) in enumerate(sorted(arrays.items())):
                layout["tables"].append(
                    {
                        "attr": attr,
                        "segment": self._segment(f"{token}_{part}_{i}", array, ids),
                        "dtype": array.dtype.str,
                        "shape": [ids.size, *array.shape[1:]],
                    }
                )
            layouts.append(layout)
        return layouts

    def _segment(self, name: str, data: np.ndarray, rows: np.ndarray) -> str:
        """A new segment holding ``data[rows]`` (gathered in place, no temporary)."""
        shape = (rows.size, *data.shape[1:])
        nbytes = data.dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        segment = shared_memory.SharedMemory(
            name=name, create=True, size=max(1, nbytes)
        )
        self._state.segments.append(segment)
        view: np.ndarray = np.ndarray(shape, dtype=data.dtype, buffer=segment.buf)
        np.take(data, rows, axis=0, out=view)
        del view
        segment.close()  # children and attach() map the file; we only unlink it
        return name

    def _start(
        self,
        network: NetworkModel | None,
        limits: tuple[int, int],
        timeout_s: float,
        transport: str,
    ) -> None:
        packages = _packages()
        folder = ""
        if transport == "ipc":
            folder = tempfile.mkdtemp(prefix="strata-features-")
            self._state.folders.append(folder)
        for part in range(self.num_parts):
            spec = {
                "packages": packages,
                "layout": self._layouts[part],
                "endpoint": f"ipc://{folder}/p{part}"
                if folder
                else "tcp://127.0.0.1:0",
                "name": self.names[part],
                "network": [network.latency_s, network.bandwidth_Bps]
                if network
                else None,
                "limits": list(limits),
            }
            log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _shutdown)
            self._state.logs[part] = log
            self._state.procs[part] = subprocess.Popen(
                [sys.executable, "-c", _BOOT, json.dumps(spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            for part, proc in self._state.procs.items():
                assert proc.stdout is not None
                selector.register(proc.stdout, selectors.EVENT_READ, part)
            while len(self.endpoints) < self.num_parts:
                left = deadline - time.monotonic()
                events = selector.select(left) if left > 0 else []
                if not events:
                    missing = sorted(set(self._state.procs) - set(self.endpoints))
                    self._fail(missing[0], f"no ready message within {timeout_s} s")
                for key, _ in events:
                    part = key.data
                    line = self._state.procs[part].stdout.readline()  # type: ignore[union-attr]
                    if not line:
                        self._fail(part, "the process exited before it was ready")
                    ready = json.loads(line)
                    self.endpoints[part] = ready["endpoint"]
                    self.pids[part] = ready["pid"]
                    self.imports_torch[part] = ready["torch"]
                    selector.unregister(key.fileobj)
        self.endpoints = dict(sorted(self.endpoints.items()))
        self.pids = dict(sorted(self.pids.items()))

    def _fail(self, part: int, got: str) -> None:
        log = self._state.logs[part]
        log.seek(0)
        tail = log.read()[-2000:].decode("utf-8", errors="replace").strip()
        raise FeatureError.build(
            "startup",
            f"feature server {self.names[part]} (partition {part})",
            "a server ready to serve",
            got,
            f"its stderr: {tail}" if tail else None,
        )

    # ----------------------------------------------------------------- access
    def layout(self, part: int) -> dict[str, Any]:
        """Partition ``part``'s segments (JSON-able, for :func:`attach_partition`)."""
        return self._layouts[part]

    def attach(self, part: int) -> dict[str, np.ndarray]:
        """Partition ``part``'s tables, mapped read-only, in owned-id order."""
        return attach_partition(self._layouts[part])[1]

    def owned_ids(self, part: int) -> np.ndarray:
        """Sorted global ids partition ``part`` owns."""
        return attach_partition(self._layouts[part])[0]

    def served(self, part: int, timeout_s: float = 5.0) -> Traffic:
        """Server ``part``'s served counters, asked over the wire (STATS)."""
        return query_stats(self.endpoints[part], timeout_s)[0]

    def refused(self, part: int, timeout_s: float = 5.0) -> int:
        """How many requests server ``part`` refused (ERROR replies)."""
        return query_stats(self.endpoints[part], timeout_s)[1]

    def kill(self, part: int) -> None:
        """Kill server ``part`` (SIGKILL; for failure tests); its segments stay."""
        proc = self._state.procs[part]
        proc.kill()
        proc.wait(10)

    def alive(self, part: int) -> bool:
        """Whether server ``part``'s process is running."""
        proc = self._state.procs.get(part)
        return proc is not None and proc.poll() is None

    @property
    def segments(self) -> list[str]:
        """Names of the shared-memory segments this group created (under /dev/shm)."""
        return [s.name for s in self._state.segments]

    def close(self) -> None:
        """Stop every server process and unlink every segment (idempotent)."""
        self._finalizer()

    def __enter__(self) -> FeatureServerGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
