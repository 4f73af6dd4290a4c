"""Region servers (spec §3.4): one process per region, a pyzmq ROUTER on 127.0.0.1.

A :class:`RegionServer` holds the items its region keeps (home data and replicas),
loaded from Arrow IPC tables the cluster writes (per feature key: the held item ids
and one byte row each; :meth:`RegionServer.tables` gives them back as Arrow tables)
and kept as numpy arrays so writes update rows in place; plus the raw item payload
sizes (``ItemSpace.item_bytes``) that :mod:`~strata.storage.geo.replay` reads, and
the directory (every item's holder bitmask, named in errors). It answers GET and PUT
frames (:mod:`~strata.storage.geo.frames`) and delays every outbound reply through
its own :class:`~strata.storage.geo.wan.DelayShim`, so a reply to origin ``o`` leaves
after the ``region -> o`` link's FIFO allows.

Writes are durable against a killed process: a PUT is appended to the region's
write-ahead log (a plain file in the cluster folder) before it is acknowledged, and a
restarted server replays that log over its initial tables. So an acknowledged write
(acknowledged by *every* holder, see ``GeoStore.write``) survives ``kill(region)`` and
``restart(region)``.

:class:`RegionCluster` starts the processes (fresh interpreters that skip the package
``__init__`` files, so they never import torch), reusing the feature servers' process
group bookkeeping (:mod:`strata.storage.features.server_group`).

Examples:
    >>> import numpy as np
    >>> from strata.storage.geo.topology import uniform
    >>> from strata.storage.geo.server import ClusterLayout, RegionCluster
    >>> layout = ClusterLayout.home_only(
    ...     uniform(2, 10.0, 1000.0), home=np.array([0, 1, 1]), item_bytes=[64] * 3
    ... )
    >>> x = np.arange(6, dtype=np.float32).reshape(3, 2)
    >>> with RegionCluster(layout, {("node", "x"): x}, time_scale=0.1) as cluster:
    ...     cluster.alive(0), cluster.alive(1), len(cluster.info.endpoints)
    (True, True, 2)
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import struct
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Protocol

import numpy as np
import pyarrow as pa
import zmq

from strata.storage import _spawn
from strata.storage._delayed import DelayedReplies, serve_router
from strata.storage.errors import format_error
from strata.storage.geo.errors import GeoError
from strata.storage.geo.frames import (
    ErrorCode,
    GeoWireError,
    Header,
    Kind,
    batch_items,
    batch_payload_bytes,
    batch_rows,
    decode,
    encode,
    error_frames,
    items_batch,
    payload_batch,
    rows_batch,
)
from strata.storage.geo.wan import DelayShim

__all__ = [
    "ClusterInfo",
    "ClusterLayout",
    "GeoKey",
    "RegionCluster",
    "RegionServer",
]

_WAL_RECORD = struct.Struct("<BHQ")  # kind, key, body bytes


# ------------------------------------------------------------------ layout
class _NotHeld(GeoError):
    """A request named items this region does not hold (ERROR code NOT_HELD)."""


class _TopologyLike(Protocol):
    @property
    def regions(self) -> tuple[str, ...]: ...
    @property
    def rtt_ms(self) -> np.ndarray: ...
    @property
    def bw_mbps(self) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class GeoKey:
    """One feature tensor of the cluster: its key, dtype, shape and item offset.

    Row ``r`` of key ``(group, attr)`` is item ``item_offset + r`` (vertex rows are
    items ``0..V-1``, edge rows items ``V..V+E-1``, as in ``ItemSpace``).
    """

    group: str
    attr: str
    dtype: str  # numpy dtype string, e.g. "<f4"
    row_shape: tuple[int, ...]
    num_rows: int
    item_offset: int

    @property
    def row_bytes(self) -> int:
        """Bytes of one row."""
        return int(np.dtype(self.dtype).itemsize * math.prod(self.row_shape))


@dataclass(frozen=True)
class ClusterLayout:
    """What a cluster serves: regions, links, and which region holds which item.

    Built from the contract's types with :meth:`of` (a ``Topology``, a
    ``Placement`` and an ``ItemSpace``), or from raw arrays (tests, doctests).
    ``holders`` is a uint32 bitmask per item (bit ``r`` set: region ``r`` holds it).
    """

    regions: tuple[str, ...]
    rtt_ms: np.ndarray
    bw_mbps: np.ndarray
    holders: np.ndarray
    item_bytes: np.ndarray
    num_vertices: int

    def __post_init__(self) -> None:
        where = "ClusterLayout"
        r = len(self.regions)
        if not 1 <= r <= 32:
            raise GeoError.build("regions", where, "1..32 regions", str(r))
        for name in ("rtt_ms", "bw_mbps"):
            m = np.asarray(getattr(self, name))
            if m.shape != (r, r):
                raise GeoError.build(name, where, f"shape ({r}, {r})", str(m.shape))
        h = np.asarray(self.holders)
        if h.ndim != 1 or h.dtype != np.uint32:
            raise GeoError.build(
                "holders", where, "a 1-D uint32 bitmask", f"{h.dtype} {h.shape}"
            )
        if h.size and (int(h.max()) >> r) != 0:
            raise GeoError.build(
                "holders", where, f"bits of regions 0..{r - 1} only", hex(int(h.max()))
            )
        if h.size and np.any(h == 0):
            item = int(np.flatnonzero(h == 0)[0])
            raise GeoError.build(
                "holders", where, "a holder per item", f"none for item {item}"
            )
        if np.asarray(self.item_bytes).shape != h.shape:
            raise GeoError.build(
                "item_bytes",
                where,
                f"{h.size} sizes",
                str(np.asarray(self.item_bytes).shape),
            )

    @classmethod
    def of(cls, topology: _TopologyLike, placement: Any, space: Any) -> ClusterLayout:
        """From a ``Topology``, a ``Placement`` (``.holders``) and an ``ItemSpace``."""
        return cls(
            tuple(topology.regions),
            np.asarray(topology.rtt_ms, dtype=np.float64),
            np.asarray(topology.bw_mbps, dtype=np.float64),
            np.array(placement.holders, dtype=np.uint32),  # a copy: placements mutate
            np.asarray(space.item_bytes, dtype=np.int64),
            int(space.num_vertices),
        )

    @classmethod
    def home_only(
        cls,
        topology: _TopologyLike,
        home: Sequence[int] | np.ndarray,
        item_bytes: Sequence[int] | np.ndarray,
        num_vertices: int | None = None,
    ) -> ClusterLayout:
        """Every item held by its home region only (``home[i]``)."""
        home_ = np.asarray(home, dtype=np.int64)
        return cls(
            tuple(topology.regions),
            np.asarray(topology.rtt_ms, dtype=np.float64),
            np.asarray(topology.bw_mbps, dtype=np.float64),
            (np.uint32(1) << home_.astype(np.uint32)).astype(np.uint32),
            np.asarray(item_bytes, dtype=np.int64),
            int(home_.size if num_vertices is None else num_vertices),
        )

    @property
    def num_regions(self) -> int:
        """How many regions."""
        return len(self.regions)


@dataclass(frozen=True)
class ClusterInfo:
    """What a client needs to reach a running cluster (picklable, for other ranks)."""

    endpoints: tuple[str, ...]
    layout: ClusterLayout
    keys: tuple[GeoKey, ...]
    time_scale: float

    def key_index(self, group: str, attr: str) -> int:
        """The index of key ``(group, attr)`` in :attr:`keys` (-1 when absent)."""
        for i, k in enumerate(self.keys):
            if (k.group, k.attr) == (group, attr):
                return i
        return -1


# ------------------------------------------------------------------ the server
def _read_ipc(path: Path) -> pa.Table:
    with pa.memory_map(str(path), "r") as source:
        return pa.ipc.open_file(source).read_all()


def _write_ipc(path: Path, table: pa.Table) -> None:
    """Atomic: a temp file in the same folder, then a rename."""
    tmp = path.with_suffix(".tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    os.replace(tmp, path)


class RegionServer:
    """One region's held items on a ROUTER socket; replies leave through the shim.

    Args:
        region: this region's index.
        folder: the cluster folder holding ``r<region>_k<key>.arrow`` (rows),
            ``r<region>_items.arrow`` (payload sizes), ``directory.arrow`` (every
            item's holder bitmask) and the write-ahead log.
        keys: the cluster's feature keys (row widths).
        rtt_ms, bw_mbps: the (R, R) link matrices; time_scale: the factor ``s``.
        endpoint: zmq address to bind (port 0 picks one).
    """

    def __init__(
        self,
        region: int,
        folder: Path,
        keys: Sequence[GeoKey],
        rtt_ms: np.ndarray,
        bw_mbps: np.ndarray,
        time_scale: float,
        endpoint: str = "tcp://127.0.0.1:0",
    ) -> None:
        self.region = int(region)
        self.keys = tuple(keys)
        self.shim = DelayShim.from_matrices(rtt_ms, bw_mbps, self.region, time_scale)
        self._bind_to = endpoint
        self.endpoint = endpoint
        self._held: list[np.ndarray] = []  # per key: sorted held item ids
        self._rows: list[np.ndarray] = []  # per key: (held, row_bytes) uint8
        for k in range(len(self.keys)):
            table = _read_ipc(folder / f"r{self.region}_k{k}.arrow")
            batch = table.combine_chunks().to_batches()
            items = batch_items(batch[0]) if batch else np.empty(0, dtype=np.int64)
            rows = (
                batch_rows(batch[0], self.keys[k].row_bytes).copy()
                if batch
                else np.empty((0, self.keys[k].row_bytes), dtype=np.uint8)
            )
            self._held.append(items)
            self._rows.append(rows)
        sizes = _read_ipc(folder / f"r{self.region}_items.arrow")
        self._items = np.asarray(sizes.column("item").to_numpy(), dtype=np.int64)
        self._sizes = np.asarray(sizes.column("bytes").to_numpy(), dtype=np.int64)
        # The directory: every item's holder bitmask (for errors that name holders).
        directory = _read_ipc(folder / "directory.arrow").column("holders")
        self.directory = np.asarray(directory.to_numpy(), dtype=np.uint32)
        self.item_versions = np.zeros(self._items.size, dtype=np.int64)
        self._wal_path = folder / f"r{self.region}.wal"
        self.replayed = self._replay_wal()
        self._warm()
        self._wal = os.open(
            self._wal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
        )
        self._socket: zmq.Socket[Any] | None = None
        self._replies: DelayedReplies[list[Any]] = DelayedReplies()

    def _warm(self) -> None:
        """Run every reply path once on no items before serving.

        pyarrow and numpy load code on first use; without this the first request
        of each kind pays ~100 ms, which shows up as a latency outlier.
        """
        empty = np.empty(0, dtype=np.int64)
        for kind, key in [(Kind.GET_ITEMS, 0)] + [
            (Kind.GET_ROWS, k) for k in range(len(self.keys))
        ]:
            header, batch = decode(encode(Header(kind, key=key), items_batch(empty)))
            decode(self._reply(header, batch, None))

    # -------------------------------------------------------------- the log
    def _replay_wal(self) -> int:
        """Apply every complete logged PUT (a torn tail was never acknowledged)."""
        if not self._wal_path.exists():
            return 0
        data = self._wal_path.read_bytes()
        at, applied = 0, 0
        while at + _WAL_RECORD.size <= len(data):
            kind, key, size = _WAL_RECORD.unpack_from(data, at)
            end = at + _WAL_RECORD.size + size
            if end > len(data):
                break
            body = data[at + _WAL_RECORD.size : end]
            header = Header(Kind(kind), key=key, count=-1)
            reader = pa.ipc.open_stream(pa.py_buffer(body))
            self._apply(header, reader.read_next_batch())
            at, applied = end, applied + 1
        return applied

    def _log(self, header: Header, body: Any) -> None:
        view = memoryview(body.buffer if hasattr(body, "buffer") else body)
        record = _WAL_RECORD.pack(int(header.kind), header.key, view.nbytes)
        os.write(self._wal, record + bytes(view))  # one append: all or a torn tail

    # ---------------------------------------------------------------- serving
    def bind(self) -> str:
        """Bind the ROUTER socket; returns the resolved endpoint."""
        if self._socket is None:
            sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.ROUTER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.bind(self._bind_to)
            self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
            self._socket = sock
        return self.endpoint

    def close(self) -> None:
        """Close the socket and the log (idempotent)."""
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None
        if self._wal >= 0:
            os.close(self._wal)
            self._wal = -1

    def serve(self, should_stop: Any = None, stop_fd: int | None = None) -> None:
        """Serve until ``should_stop()`` or a byte/EOF on ``stop_fd``."""
        sock = self._socket
        assert sock is not None, "bind() before serve()"
        serve_router(
            sock,
            self._answer,
            self._replies,
            lambda reply: sock.send_multipart(reply),
            should_stop=lambda: bool(should_stop and should_stop()),
            stop_fd=stop_fd,
        )

    def _answer(self, frames: list[zmq.Frame]) -> None:
        origin, request = 0, 0
        try:
            if len(frames) < 2:
                raise GeoWireError.build(
                    "frames", self._where(), "a header frame", "none"
                )
            header, batch = decode(frames[1:])
            origin, request = header.origin, header.request
            if origin >= self.shim.num_regions:
                raise GeoWireError.build(
                    "origin",
                    self._where(),
                    f"a region 0..{self.shim.num_regions - 1}",
                    str(origin),
                )
            reply = self._reply(header, batch, frames[2] if len(frames) > 2 else None)
        except GeoError as error:
            code = ErrorCode.BAD_REQUEST
            if isinstance(error, GeoWireError):
                code = ErrorCode.BAD_FRAME
            elif isinstance(error, _NotHeld):
                code = ErrorCode.NOT_HELD
            reply = error_frames(request, origin, self.region, code, str(error))
        except Exception as error:  # a bug must not take the server down
            message = f"internal error in region server {self.region}: {error!r}"
            reply = error_frames(
                request, origin, self.region, ErrorCode.INTERNAL, message
            )
        nbytes = sum(memoryview(f).nbytes for f in reply)
        deliver_at = self.shim.schedule(
            min(origin, self.shim.num_regions - 1), nbytes, time.perf_counter()
        )
        self._replies.hold(deliver_at, [frames[0].bytes, *reply])

    def _where(self) -> str:
        return f"region server {self.region}"

    def _positions(self, held: np.ndarray, items: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(held, items)
        pos = np.minimum(pos, max(held.size - 1, 0))
        # an empty request is always held: a region may hold nothing at all
        bad = items.size > 0 and (
            held.size == 0 or not np.array_equal(held[pos], items)
        )
        if bad:
            missing = items if held.size == 0 else items[held[pos] != items]
            raise _NotHeld(
                format_error(
                    "items",
                    self._where(),
                    "items this region holds",
                    f"{missing.size} not held, e.g. {self._describe(missing[:3])}",
                    "route reads with a Router over the cluster's placement",
                )
            )
        return pos

    def _describe(self, items: np.ndarray) -> str:
        """``item 7 (held by regions [0, 2])`` from the directory, for errors."""
        out = []
        for item in items.tolist():
            if not 0 <= item < self.directory.size:
                out.append(f"item {item} (beyond the {self.directory.size} items)")
                continue
            mask = int(self.directory[item])
            regions = [r for r in range(self.shim.num_regions) if mask >> r & 1]
            out.append(f"item {item} (held by regions {regions})")
        return ", ".join(out)

    def _key(self, key: int) -> GeoKey:
        if not 0 <= key < len(self.keys):
            raise GeoError.build(
                "key", self._where(), f"a key index 0..{len(self.keys) - 1}", str(key)
            )
        return self.keys[key]

    def _reply(
        self, header: Header, batch: pa.RecordBatch | None, body: Any
    ) -> list[Any]:
        kind = header.kind
        back = Header  # reply headers echo origin and request
        if kind is Kind.PING:
            return encode(
                back(Kind.PONG, header.origin, header.request, sender=self.region)
            )
        if batch is None:
            raise GeoError.build(
                "body", self._where(), f"a body for {kind.name}", "none"
            )
        items = batch_items(batch)
        if kind is Kind.GET_ROWS:
            self._key(header.key)
            pos = self._positions(self._held[header.key], items)
            rows = self._rows[header.key][pos]
            head = back(
                Kind.ROWS,
                header.origin,
                header.request,
                items.size,
                header.key,
                self.region,
            )
            return encode(head, rows_batch(items, rows))
        if kind is Kind.GET_ITEMS:
            pos = self._positions(self._items, items)
            head = back(
                Kind.ITEMS,
                header.origin,
                header.request,
                items.size,
                sender=self.region,
            )
            return encode(head, payload_batch(items, self._sizes[pos]))
        if kind in (Kind.PUT_ROWS, Kind.PUT_ITEMS):
            self._apply(header, batch)  # validates before anything is logged
            self._log(header, body)
            head = back(
                Kind.ACK,
                header.origin,
                header.request,
                items.size,
                header.key,
                self.region,
            )
            return encode(head)
        raise GeoError.build(
            "request kind",
            self._where(),
            "GET_ROWS, GET_ITEMS, PUT_ROWS, PUT_ITEMS or PING",
            kind.name,
        )

    def _apply(self, header: Header, batch: pa.RecordBatch) -> None:
        items = batch_items(batch)
        if header.kind is Kind.PUT_ROWS:
            key = self._key(header.key)
            pos = self._positions(self._held[header.key], items)
            self._rows[header.key][pos] = batch_rows(batch, key.row_bytes)
        else:
            pos = self._positions(self._items, items)
            batch_payload_bytes(batch)  # a payload column is required
            self.item_versions[pos] += 1

    def tables(self) -> dict[int, pa.Table]:
        """This region's rows per key index, as Arrow tables (item, value)."""
        return {
            k: pa.Table.from_batches([rows_batch(self._held[k], self._rows[k])])
            for k in range(len(self.keys))
        }


def _child_main(spec: Mapping[str, Any]) -> None:
    """Entry of a region process: serve until stdin closes or the parent dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    parent = os.getppid()
    keys = [GeoKey(k[0], k[1], k[2], tuple(k[3]), k[4], k[5]) for k in spec["keys"]]
    server = RegionServer(
        spec["region"],
        Path(spec["folder"]),
        keys,
        np.asarray(spec["rtt_ms"]),
        np.asarray(spec["bw_mbps"]),
        spec["time_scale"],
        spec["endpoint"],
    )
    endpoint = server.bind()
    _spawn.serve_as_child(server, endpoint, parent, replayed=server.replayed)


# ------------------------------------------------------------------ the cluster
#: The module a region server's child process runs (its ``_child_main``).
_MODULE = "strata.storage.geo.server"


def _as_key(key: Any) -> tuple[str, str]:
    if hasattr(key, "group") and hasattr(key, "attr"):
        return str(key.group), str(key.attr)
    if (
        isinstance(key, tuple)
        and len(key) == 2
        and all(isinstance(k, str) for k in key)
    ):
        return key[0], key[1]
    raise GeoError.build(
        "table key", "RegionCluster.start", "a Key or (group, attr)", repr(key)
    )


class RegionCluster(_spawn.ServerProcesses):
    """One :class:`RegionServer` process per region (use :meth:`start`).

    Attributes:
        info: a picklable :class:`ClusterInfo` for clients (``GeoStore(info, ...)``).
        pids: ``{region: pid}`` of the running processes.
    """

    def __init__(
        self,
        layout: ClusterLayout,
        tables: Mapping[Any, np.ndarray],
        time_scale: float = 0.2,
        *,
        startup_timeout_s: float = 30.0,
    ) -> None:
        """Start a cluster from a raw :class:`ClusterLayout` (see :meth:`start`)."""
        self._layout = layout
        self._time_scale = float(time_scale)
        if not (math.isfinite(self._time_scale) and self._time_scale >= 0):
            raise GeoError.build(
                "time_scale",
                "RegionCluster.start",
                "a finite value >= 0",
                str(time_scale),
            )
        super().__init__()
        self._folder = Path(tempfile.mkdtemp(prefix="strata-geo-"))
        self._state.folders.append(str(self._folder))
        self._timeout = float(startup_timeout_s)
        self.pids: dict[int, int] = {}
        self._endpoints: dict[int, str] = {}
        self._keys: tuple[GeoKey, ...] = ()
        try:
            self._keys = self._write_tables(tables)
            for region in range(layout.num_regions):
                self._launch(region, "tcp://127.0.0.1:0")
            self._await_ready(list(range(layout.num_regions)))
        except BaseException:
            self.close()
            raise

    @classmethod
    def start(
        cls,
        topology: _TopologyLike,
        placement: Any,
        space: Any,
        tables: Mapping[Any, np.ndarray],
        time_scale: float = 0.2,
        *,
        startup_timeout_s: float = 30.0,
    ) -> RegionCluster:
        """Write each region's held rows to a private folder and start the servers.

        Args:
            topology: the regions and their links (a ``Topology``).
            placement: who holds what (a ``Placement``: ``.holders``, copied).
            space: the items (an ``ItemSpace``: ``num_vertices``, ``item_bytes``).
            tables: full feature arrays by key (``Key`` or ``(group, attr)``); row
                ``r`` of group ``"edge"`` is item ``num_vertices + r``, of any other
                group item ``r``.
            time_scale: the factor ``s`` on every delay (spec §3.4).
            startup_timeout_s: deadline for every server to report ready.

        Raises:
            GeoError: bad tables (rows beyond the item space, unsupported dtype), a
                server that fails to start in time (its stderr quoted).
        """
        layout = ClusterLayout.of(topology, placement, space)
        return cls(layout, tables, time_scale, startup_timeout_s=startup_timeout_s)

    @property
    def info(self) -> ClusterInfo:
        """Endpoints, layout, keys and time scale (for ``GeoStore``)."""
        return ClusterInfo(
            tuple(self._endpoints[r] for r in range(self._layout.num_regions)),
            self._layout,
            self._keys,
            self._time_scale,
        )

    @property
    def layout(self) -> ClusterLayout:
        """The regions, links and holders this cluster serves."""
        return self._layout

    def _write_tables(self, tables: Mapping[Any, np.ndarray]) -> tuple[GeoKey, ...]:
        where = "RegionCluster.start"
        lay = self._layout
        items_total = lay.holders.size
        keys: list[GeoKey] = []
        arrays: list[np.ndarray] = []
        for raw_key in sorted(tables, key=lambda k: _as_key(k)):
            group, attr = _as_key(raw_key)
            array = np.ascontiguousarray(np.asarray(tables[raw_key]))
            if array.ndim == 0 or array.dtype.kind not in "biuf":
                raise GeoError.build(
                    f"table {group}/{attr}",
                    where,
                    "a bool/int/float array, rows first",
                    f"{array.dtype} {array.shape}",
                )
            offset = lay.num_vertices if group == "edge" else 0
            if offset + array.shape[0] > items_total:
                raise GeoError.build(
                    f"table {group}/{attr}",
                    where,
                    f"at most {items_total - offset} rows (items from {offset})",
                    f"{array.shape[0]} rows",
                )
            key = GeoKey(
                group,
                attr,
                array.dtype.str,
                tuple(array.shape[1:]),
                array.shape[0],
                offset,
            )
            keys.append(key)
            arrays.append(
                array.reshape(array.shape[0], -1)
                .view(np.uint8)
                .reshape(array.shape[0], key.row_bytes)
            )
        for region in range(lay.num_regions):
            bit = np.uint32(1) << np.uint32(region)
            for k, (key, rows) in enumerate(zip(keys, arrays, strict=True)):
                held = np.flatnonzero(
                    lay.holders[key.item_offset : key.item_offset + key.num_rows] & bit
                )
                batch = rows_batch(held + key.item_offset, rows[held])
                _write_ipc(
                    self._folder / f"r{region}_k{k}.arrow",
                    pa.Table.from_batches([batch]),
                )
            held = np.flatnonzero(lay.holders & bit).astype(np.int64)
            sizes = pa.table(
                {
                    "item": held,
                    "bytes": np.asarray(lay.item_bytes, dtype=np.int64)[held],
                }
            )
            _write_ipc(self._folder / f"r{region}_items.arrow", sizes)
        directory = pa.table({"holders": np.asarray(lay.holders, dtype=np.uint32)})
        _write_ipc(self._folder / "directory.arrow", directory)
        return tuple(keys)

    def _launch(self, region: int, endpoint: str) -> None:
        spec = {
            "packages": _spawn.package_paths("geo"),
            "region": region,
            "folder": str(self._folder),
            "keys": [
                [k.group, k.attr, k.dtype, list(k.row_shape), k.num_rows, k.item_offset]
                for k in self._keys
            ],
            "rtt_ms": self._layout.rtt_ms.tolist(),
            "bw_mbps": self._layout.bw_mbps.tolist(),
            "time_scale": self._time_scale,
            "endpoint": endpoint,
        }
        old = self._state.logs.pop(region, None)
        if old is not None:
            old.close()
        log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by shutdown)
        self._state.logs[region] = log
        self._state.procs[region] = _spawn.start_child(_MODULE, spec, log)

    def _await_ready(self, regions: list[int]) -> None:
        procs = {region: self._state.procs[region] for region in regions}
        ready = _spawn.await_ready(procs, self._timeout, self._fail)
        for region, message in ready.items():
            self._endpoints[region] = message["endpoint"]
            self.pids[region] = message["pid"]

    def _fail(self, region: int, got: str) -> NoReturn:
        where = f"region server {region} ({self._layout.regions[region]})"
        raise _spawn.startup_error(GeoError, where, got, self._state.logs[region])

    def _check_region(self, region: int, where: str) -> int:
        if not 0 <= int(region) < self._layout.num_regions:
            raise GeoError.build(
                "region", where, f"0..{self._layout.num_regions - 1}", str(region)
            )
        return int(region)

    def kill(self, region: int) -> None:
        """SIGKILL region ``region``'s server (failure tests); its log stays."""
        self._kill(self._check_region(region, "RegionCluster.kill"))

    def restart(self, region: int) -> None:
        """Start region ``region`` again on its old endpoint (killing it if alive).

        It replays its write-ahead log, so acknowledged writes survive.
        """
        region = self._check_region(region, "RegionCluster.restart")
        proc = self._state.procs[region]
        if proc.poll() is None:
            self.kill(region)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._launch(region, self._endpoints[region])
        self._await_ready([region])

    def alive(self, region: int) -> bool:
        """Whether region ``region``'s process is running."""
        return self._alive(self._check_region(region, "RegionCluster.alive"))
