"""The feature servers' frame format: a fixed typed header, then raw bytes.

Every message between a :class:`~strata.storage.features.remote.RemoteFeatureStore`
and a :class:`~strata.storage.features.server.FeatureServer` is one zmq multipart
message of a 32-byte little-endian :data:`HEADER` frame and at most one body frame:

======== ===== ===========================================================
field    type  meaning
======== ===== ===========================================================
magic    4s    ``b"SFS1"``
version  u8    :data:`VERSION`
kind     u8    a :class:`Kind`
code     u16   attribute id (GET), status (ERROR), partition (SCHEMA reply)
request  u64   request id, echoed by the reply
dtype    u8    a dtype code (:data:`DTYPE_CODES`), 0 when there are no rows
count    u64   ids (GET), rows (REPLY), entries (SCHEMA, STATS), bytes (ERROR)
row      u32   bytes of one row (GET, REPLY)
======== ===== ===========================================================

Bodies are raw: GET carries ``count`` int64 ids, REPLY ``count`` contiguous rows,
ERROR a UTF-8 message, SCHEMA a fixed binary table (:func:`encode_schema`) and
STATS four u64 counters. Nothing is pickled or evaluated. :func:`decode` checks a
message against :class:`Limits` and raises :class:`FrameError` naming what is wrong
(bad magic, version, kind, truncated body, count mismatch, oversized), which a
server answers with an ERROR reply before serving on.

Examples:
    >>> import numpy as np
    >>> ids = np.array([4, 1], dtype=np.int64)
    >>> frames = [encode_header(Header(Kind.GET, 0, 7, 8, 2, 12)), ids.tobytes()]
    >>> header, body = decode(frames, Limits())
    >>> header.kind.name, header.request, header.count
    ('GET', 7, 2)
    >>> np.frombuffer(body, dtype=np.int64).tolist()
    [4, 1]
    >>> decode([b"XXXX" + bytes(28)], Limits())
    Traceback (most recent call last):
    ...
    strata.storage.features.wire.FrameError: frame header in feature frame decoder: \
expected magic b'SFS1', got b'XXXX'.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from strata.storage.errors import FeatureError

__all__ = [
    "DTYPE_CODES",
    "HEADER",
    "MAGIC",
    "MAX_FRAME_BYTES",
    "MAX_REQUEST_IDS",
    "VERSION",
    "ZERO_COPY_BYTES",
    "ErrorCode",
    "FrameError",
    "Header",
    "Kind",
    "Limits",
    "SchemaEntry",
    "decode",
    "decode_schema",
    "dtype_code",
    "dtype_of",
    "encode_header",
    "encode_schema",
    "error_frames",
]

MAGIC = b"SFS1"
VERSION = 1
#: magic, version, kind, code, request id, dtype, 3 pad bytes, count, row bytes.
HEADER = struct.Struct("<4sBBHQB3xQI")
#: Default limits: ids in one GET, bytes in one body frame.
MAX_REQUEST_IDS = 1 << 22
MAX_FRAME_BYTES = 64 << 20
#: Bodies from this size on are sent without a copy (pyzmq's zero-copy send has a
#: fixed cost that only large bodies repay).
ZERO_COPY_BYTES = 1 << 20
_WHERE = "feature frame decoder"


class FrameError(FeatureError):
    """A frame does not follow the format (or exceeds a limit).

    ``oversized`` tells a limit apart from a malformed frame (the ERROR status).
    """

    oversized = False


def _oversized(error: Exception) -> FrameError:
    assert isinstance(error, FrameError)
    error.oversized = True
    return error


class Kind(enum.IntEnum):
    """What a message is."""

    GET = 1
    SCHEMA = 2
    REPLY = 3
    ERROR = 4
    PING = 5
    STATS = 6


class ErrorCode(enum.IntEnum):
    """Status of an ERROR reply: why a request was refused."""

    BAD_FRAME = 1
    NOT_OWNED = 2
    UNKNOWN_ATTR = 3
    OVERSIZED = 4
    BAD_REQUEST = 5
    INTERNAL = 6


#: Dtype codes on the wire (stable: append only).
DTYPE_CODES: dict[str, int] = {
    "bool": 1,
    "uint8": 2,
    "int8": 3,
    "int16": 4,
    "int32": 5,
    "int64": 6,
    "float16": 7,
    "float32": 8,
    "float64": 9,
    "uint16": 10,
    "uint32": 11,
    "uint64": 12,
}
_DTYPES = {code: np.dtype(name) for name, code in DTYPE_CODES.items()}


def dtype_code(dtype: Any) -> int:
    """The wire code of a numpy dtype (native little-endian kinds only)."""
    name = np.dtype(dtype).name
    if name not in DTYPE_CODES or np.dtype(dtype).byteorder == ">":
        raise FeatureError.build(
            "dtype", "feature frame encoder", f"one of {sorted(DTYPE_CODES)}", name
        )
    return DTYPE_CODES[name]


def dtype_of(code: int) -> np.dtype[Any]:
    """The numpy dtype of a wire code."""
    if code not in _DTYPES:
        raise FrameError.build(
            "dtype code", _WHERE, f"one of {sorted(_DTYPES)}", str(code)
        )
    return _DTYPES[code]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds a server or client enforces on one request and one frame.

    Args:
        max_request_ids: most ids in one GET frame.
        max_frame_bytes: most bytes in one body frame (ids out or rows back).
    """

    max_request_ids: int = MAX_REQUEST_IDS
    max_frame_bytes: int = MAX_FRAME_BYTES

    def ids_per_frame(self, row_bytes: int) -> int:
        """Most ids one GET may carry so that neither its ids nor its rows overflow."""
        return max(
            1, min(self.max_request_ids, self.max_frame_bytes // max(8, row_bytes))
        )


@dataclass(frozen=True, slots=True)
class Header:
    """The decoded fixed header of a message (see the module table)."""

    kind: Kind
    code: int
    request: int
    dtype: int = 0
    count: int = 0
    row_bytes: int = 0


def encode_header(header: Header) -> bytes:
    """The 32 header bytes of ``header``."""
    return HEADER.pack(
        MAGIC,
        VERSION,
        int(header.kind),
        header.code,
        header.request,
        header.dtype,
        header.count,
        header.row_bytes,
    )


def error_frames(request: int, code: ErrorCode, message: str) -> list[bytes]:
    """An ERROR reply: header plus the UTF-8 message."""
    body = message.encode("utf-8", errors="replace")
    return [encode_header(Header(Kind.ERROR, int(code), request, 0, len(body))), body]


def _view(frame: Any) -> memoryview:
    return frame.buffer if hasattr(frame, "buffer") else memoryview(frame)


def decode(frames: Sequence[Any], limits: Limits) -> tuple[Header, memoryview]:
    """Check and split one message (bytes or zmq frames) into header and body.

    Raises:
        FrameError: naming the first problem; a header that decodes is attached as
            the error's ``header`` attribute so a reply can echo its request id.
    """
    if not frames or len(frames) > 2:
        raise FrameError.build(
            "frames", _WHERE, "a header and at most one body", f"{len(frames)} frames"
        )
    raw = _view(frames[0])
    if raw.nbytes != HEADER.size:
        raise FrameError.build(
            "frame header", _WHERE, f"{HEADER.size} bytes", f"{raw.nbytes} bytes"
        )
    magic, version, kind, code, request, dtype, count, row = HEADER.unpack(raw)
    if magic != MAGIC:
        raise FrameError.build("frame header", _WHERE, f"magic {MAGIC!r}", repr(magic))
    if version != VERSION:
        raise FrameError.build(
            "frame header", _WHERE, f"version {VERSION}", f"version {version}"
        )
    if kind not in Kind._value2member_map_:
        raise FrameError.build(
            "frame header", _WHERE, f"a kind in {[k.name for k in Kind]}", str(kind)
        )
    header = Header(Kind(kind), code, request, dtype, count, row)
    body = _view(frames[1]) if len(frames) == 2 else memoryview(b"")
    try:
        _check_body(header, body.nbytes, limits)
    except FrameError as error:
        error.header = header  # type: ignore[attr-defined]
        raise
    return header, body


def _check_body(header: Header, nbytes: int, limits: Limits) -> None:
    if nbytes > limits.max_frame_bytes:
        raise _oversized(
            FrameError.build(
                "frame body",
                _WHERE,
                f"at most {limits.max_frame_bytes} bytes (oversized)",
                f"{nbytes} bytes",
            )
        )
    if header.kind is not Kind.GET:
        return
    if header.count > limits.max_request_ids:
        raise _oversized(
            FrameError.build(
                "id count",
                _WHERE,
                f"at most {limits.max_request_ids} ids per request (oversized)",
                f"{header.count} ids",
                "split the request into several frames",
            )
        )
    if header.count * header.row_bytes > limits.max_frame_bytes:
        raise _oversized(
            FrameError.build(
                "reply size",
                _WHERE,
                f"at most {limits.max_frame_bytes} bytes of rows (oversized)",
                f"{header.count} rows of {header.row_bytes} bytes",
                "split the request into several frames",
            )
        )
    if nbytes % 8:
        raise FrameError.build(
            "id body", _WHERE, "whole int64 ids", f"{nbytes} bytes (truncated body)"
        )
    if nbytes // 8 != header.count:
        raise FrameError.build(
            "id body",
            _WHERE,
            f"{header.count} ids as the header's count says",
            f"{nbytes // 8} ids (count mismatch)",
        )


# ------------------------------------------------------------------ schema table
_LIMITS = struct.Struct("<QQ")
_ENTRY = struct.Struct("<HBB")
_DIM = struct.Struct("<Q")


@dataclass(frozen=True, slots=True)
class SchemaEntry:
    """One served attribute: name, dtype, row shape and rows owned."""

    name: str
    dtype: np.dtype[Any]
    row_shape: tuple[int, ...]
    num_rows: int

    @property
    def row_bytes(self) -> int:
        """Bytes of one row."""
        return int(self.dtype.itemsize * int(np.prod(self.row_shape, dtype=np.int64)))


def encode_schema(entries: Sequence[SchemaEntry], limits: Limits) -> bytes:
    """A SCHEMA body: the server's limits, then one record per attribute.

    Each record is ``u16 name length, u8 dtype code, u8 ndim, name, ndim u64 dims,
    u64 rows owned``; attribute ids are the records' positions.
    """
    parts = [_LIMITS.pack(limits.max_request_ids, limits.max_frame_bytes)]
    for entry in entries:
        name = entry.name.encode("utf-8")
        parts.append(
            _ENTRY.pack(len(name), dtype_code(entry.dtype), len(entry.row_shape))
        )
        parts.append(name)
        parts.extend(_DIM.pack(d) for d in (*entry.row_shape, entry.num_rows))
    return b"".join(parts)


def decode_schema(
    body: memoryview | bytes, count: int
) -> tuple[list[SchemaEntry], Limits]:
    """Read a SCHEMA body of ``count`` records (see :func:`encode_schema`)."""
    data = bytes(body)
    try:
        max_ids, max_bytes = _LIMITS.unpack_from(data, 0)
        pos, entries = _LIMITS.size, []
        for _ in range(count):
            size, code, ndim = _ENTRY.unpack_from(data, pos)
            pos += _ENTRY.size
            name = data[pos : pos + size].decode("utf-8")
            pos += size
            dims = [_DIM.unpack_from(data, pos + 8 * i)[0] for i in range(ndim + 1)]
            pos += 8 * (ndim + 1)
            entries.append(
                SchemaEntry(name, dtype_of(code), tuple(dims[:-1]), dims[-1])
            )
    except (struct.error, UnicodeDecodeError) as error:
        raise FrameError.build(
            "schema body", _WHERE, f"{count} well-formed records", str(error)
        ) from error
    if pos != len(data):
        raise FrameError.build(
            "schema body", _WHERE, f"{pos} bytes", f"{len(data)} bytes (count mismatch)"
        )
    return entries, Limits(max_ids, max_bytes)
