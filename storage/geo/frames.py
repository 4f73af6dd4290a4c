"""The region servers' frame format: a fixed binary header, then an Arrow IPC body.

Every message between a client and a region server (spec §3.4) is one zmq multipart
message of a 28-byte little-endian :data:`HEADER` frame and at most one body frame:

======== ===== ============================================================
field    type  meaning
======== ===== ============================================================
magic    4s    ``b"SGEO"``
version  u8    :data:`VERSION`
kind     u8    a :class:`Kind`
origin   u8    the requesting client's region (echoed by the reply)
sender   u8    the region (or client origin) that sent this frame
key      u16   the feature key's index in the cluster schema (rows kinds)
status   u16   0, or an :class:`ErrorCode` on ERROR
request  u64   request id, echoed by the reply
count    u64   items in the body (GET/PUT/ROWS/ITEMS), items written (ACK)
======== ===== ============================================================

Bodies are one Arrow IPC stream holding one record batch (``item`` int64, plus
``value`` fixed-size-list<uint8> rows or ``payload`` binary), or a UTF-8 message on
ERROR. Nothing is pickled. :func:`decode` raises :class:`GeoWireError` naming what
is wrong (magic, version, kind, count mismatch).

Examples:
    >>> import numpy as np
    >>> batch = items_batch(np.array([4, 1]))
    >>> frames = encode(Header(Kind.GET_ITEMS, origin=2, request=7, count=2), batch)
    >>> header, body = decode(frames)
    >>> header.kind.name, header.origin, header.request
    ('GET_ITEMS', 2, 7)
    >>> body.column("item").to_pylist()
    [4, 1]
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from strata.storage.geo.errors import GeoError

__all__ = [
    "HEADER",
    "MAGIC",
    "VERSION",
    "ErrorCode",
    "GeoWireError",
    "Header",
    "Kind",
    "batch_items",
    "batch_payload_bytes",
    "batch_rows",
    "decode",
    "encode",
    "error_frames",
    "items_batch",
    "payload_batch",
    "rows_batch",
]

MAGIC = b"SGEO"
VERSION = 1
HEADER = struct.Struct("<4sBBBBHHQQ")


class GeoWireError(GeoError):
    """A region-server frame is malformed, or a server answered with an error."""


class Kind(enum.IntEnum):
    """Message kinds; a request's reply kind is named beside it."""

    GET_ROWS = 1  # body: item ids -> ROWS
    ROWS = 2  # body: item ids + value rows
    GET_ITEMS = 3  # body: item ids -> ITEMS (raw item payloads, replay)
    ITEMS = 4  # body: item ids + payload
    PUT_ROWS = 5  # body: item ids + value rows -> ACK
    PUT_ITEMS = 6  # body: item ids + payload -> ACK
    ACK = 7
    PING = 8  # -> PONG
    PONG = 9
    ERROR = 10  # body: UTF-8 message


class ErrorCode(enum.IntEnum):
    """Why a server refused a request (the ERROR frame's ``status``)."""

    BAD_FRAME = 1
    BAD_REQUEST = 2
    NOT_HELD = 3
    INTERNAL = 4


@dataclass(frozen=True, slots=True)
class Header:
    """One decoded header (see the module's table)."""

    kind: Kind
    origin: int = 0
    request: int = 0
    count: int = 0
    key: int = 0
    sender: int = 0
    status: int = 0


def _encode_header(h: Header) -> bytes:
    return HEADER.pack(
        MAGIC,
        VERSION,
        int(h.kind),
        h.origin,
        h.sender,
        h.key,
        h.status,
        h.request,
        h.count,
    )


def _ipc(batch: pa.RecordBatch) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def encode(header: Header, batch: pa.RecordBatch | None = None) -> list[Any]:
    """The frames of one message: the header, then the batch as Arrow IPC."""
    if batch is None:
        return [_encode_header(header)]
    return [_encode_header(header), _ipc(batch)]


def error_frames(
    request: int, origin: int, sender: int, code: ErrorCode, message: str
) -> list[Any]:
    """An ERROR reply carrying ``message``."""
    head = Header(Kind.ERROR, origin, request, 0, sender=sender, status=int(code))
    return [_encode_header(head), message.encode("utf-8")]


def _buffer(frame: Any) -> memoryview:
    return memoryview(frame.buffer if hasattr(frame, "buffer") else frame)


def decode(frames: Sequence[Any]) -> tuple[Header, pa.RecordBatch | None]:
    """Check and decode one message; ERROR replies raise :class:`GeoWireError`."""
    where = "geo frame decoder"
    if not 1 <= len(frames) <= 2:
        raise GeoWireError.build("frames", where, "1 or 2 frames", str(len(frames)))
    head = _buffer(frames[0])
    if head.nbytes != HEADER.size:
        raise GeoWireError.build(
            "header", where, f"{HEADER.size} bytes", f"{head.nbytes}"
        )
    magic, version, kind, origin, sender, key, status, request, count = HEADER.unpack(
        head
    )
    if magic != MAGIC:
        raise GeoWireError.build("header", where, f"magic {MAGIC!r}", repr(magic))
    if version != VERSION:
        raise GeoWireError.build("header", where, f"version {VERSION}", str(version))
    try:
        kind_ = Kind(kind)
    except ValueError:
        raise GeoWireError.build(
            "header", where, "a known message kind", str(kind)
        ) from None
    header = Header(kind_, origin, request, count, key, sender, status)
    if kind_ is Kind.ERROR:
        text = (
            bytes(_buffer(frames[1])).decode("utf-8", "replace")
            if len(frames) > 1
            else ""
        )
        error = GeoWireError(text or f"region server error {status}")
        error.header = header  # type: ignore[attr-defined]
        raise error
    if len(frames) == 1:
        return header, None
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(_buffer(frames[1])))
        batch = reader.read_next_batch()
    except (pa.ArrowInvalid, StopIteration) as error:
        raise GeoWireError.build(
            "body", where, "one Arrow IPC record batch", repr(error)
        ) from None
    if batch.num_rows != count or "item" not in batch.schema.names:
        raise GeoWireError.build(
            "body",
            where,
            f"{count} rows with an 'item' column",
            f"{batch.num_rows} rows, columns {batch.schema.names}",
        )
    return header, batch


# ------------------------------------------------------------------- batches
def items_batch(items: np.ndarray) -> pa.RecordBatch:
    """A batch of item ids only (GET requests)."""
    ids = pa.array(np.ascontiguousarray(items, dtype=np.int64))
    return pa.RecordBatch.from_arrays([ids], names=["item"])


def rows_batch(items: np.ndarray, rows: np.ndarray) -> pa.RecordBatch:
    """Item ids and one fixed-width byte row each (``rows`` is (n, row_bytes) uint8)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    width = rows.shape[1] if rows.ndim == 2 else 0
    values = pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), width)
    ids = pa.array(np.ascontiguousarray(items, dtype=np.int64))
    return pa.RecordBatch.from_arrays([ids, values], names=["item", "value"])


def payload_batch(items: np.ndarray, sizes: np.ndarray) -> pa.RecordBatch:
    """Item ids and a zero-filled binary payload of ``sizes[i]`` bytes each."""
    sizes = np.asarray(sizes, dtype=np.int64)
    offsets = np.zeros(sizes.size + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    data = pa.py_buffer(bytes(int(offsets[-1])))
    payload = pa.Array.from_buffers(
        pa.binary(), sizes.size, [None, pa.py_buffer(offsets.tobytes()), data]
    )
    ids = pa.array(np.ascontiguousarray(items, dtype=np.int64))
    return pa.RecordBatch.from_arrays([ids, payload], names=["item", "payload"])


def batch_items(batch: pa.RecordBatch) -> np.ndarray:
    """The ``item`` column as an int64 numpy array."""
    column = batch.column(batch.schema.get_field_index("item"))
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)


def batch_rows(batch: pa.RecordBatch, row_bytes: int) -> np.ndarray:
    """The ``value`` column as an (n, row_bytes) uint8 array (a view where possible)."""
    index = batch.schema.get_field_index("value")
    if index < 0:
        raise GeoWireError.build(
            "body", "geo frame decoder", "a 'value' column", str(batch.schema.names)
        )
    column = batch.column(index)
    flat = column.flatten().to_numpy(zero_copy_only=False)
    if flat.size != batch.num_rows * row_bytes:
        raise GeoWireError.build(
            "value rows",
            "geo frame decoder",
            f"{batch.num_rows} rows of {row_bytes} bytes",
            f"{flat.size} bytes",
        )
    return np.asarray(flat, dtype=np.uint8).reshape(batch.num_rows, row_bytes)


def batch_payload_bytes(batch: pa.RecordBatch) -> np.ndarray:
    """Bytes of each item's payload (the ``payload`` column's lengths)."""
    index = batch.schema.get_field_index("payload")
    if index < 0:
        raise GeoWireError.build(
            "body", "geo frame decoder", "a 'payload' column", str(batch.schema.names)
        )
    offsets = np.frombuffer(batch.column(index).buffers()[1], dtype=np.int32)
    start = batch.column(index).offset
    return np.diff(offsets[start : start + batch.num_rows + 1]).astype(np.int64)
