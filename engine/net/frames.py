"""Typed messages of numpy arrays as zmq frames: a fixed binary header, raw buffers.

A message is ``[header, buffer_0, ..., buffer_{k-1}]``. The header is a small
little-endian struct, then one descriptor per array; every array's bytes travel as
a frame of their own, so a sender hands numpy's memory to zmq (``copy=False``) and
a receiver views the frame's memory with ``np.frombuffer``: no copy on either side,
and no pickle anywhere (nothing received can make a process run code).

====================  =========================================================
field                 layout
====================  =========================================================
fixed header          ``<4sBBHQQ``: magic ``b"STRN"``, version, kind, number of
                      arrays, two u64 tags (e.g. ``(epoch, batch)``)
per array             ``<BB``: dtype code, ndim; then ``ndim`` u64 dimensions
====================  =========================================================

Decoding checks everything before it trusts anything (magic, version, kind, the
array count, each dtype code and ndim, that the descriptors fill the header
exactly, each buffer's length against its shape, and the total bytes against
:class:`FrameLimits`); a malformed message raises :class:`FrameError` naming what
was wrong.

Examples:
    >>> import numpy as np
    >>> frames = encode(Kind.DATA, (3, 7), [np.arange(4), np.zeros((2, 0), "f4")])
    >>> message = decode(frames)
    >>> message.kind, message.tag, message.arrays[0].tolist(), message.arrays[1].shape
    (<Kind.DATA: 1>, (3, 7), [0, 1, 2, 3], (2, 0))
    >>> decode([b"nope"])
    Traceback (most recent call last):
    ...
    strata.engine.net.frames.FrameError: header in frames: expected at least 24 \
bytes, got 4. Hint: ...
"""

from __future__ import annotations

import enum
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from strata.engine.errors import format_where

Buffer = Any  # bytes, memoryview, zmq.Frame: anything with the buffer protocol

MAGIC = b"STRN"
VERSION = 1
_FIXED = struct.Struct("<4sBBHQQ")
_ARRAY = struct.Struct("<BB")
_DIM = struct.Struct("<Q")
_WHERE = "frames"
_HINT = "the peer is not a Strata engine channel of this version, or the data was cut"

#: dtype code on the wire <-> numpy dtype (little-endian, fixed width).
_DTYPES: tuple[np.dtype[Any], ...] = tuple(
    np.dtype(name).newbyteorder("<")
    for name in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
        "uint64", "float16", "float32", "float64", "complex64", "complex128",
    )
)  # fmt: skip
_CODES = {dtype: code for code, dtype in enumerate(_DTYPES)}


class Kind(enum.IntEnum):
    """What a message is: data, or the end of a stream."""

    DATA = 1
    END = 2


class FrameError(ValueError):
    """A message is malformed or over its limits (raised by encode and decode)."""

    @classmethod
    def build(
        cls, subject: str, expected: str, got: str, hint: str = _HINT
    ) -> FrameError:
        """Create the error in the project template."""
        return cls(format_where(subject, _WHERE, expected, got, hint))


@dataclass(frozen=True, slots=True)
class FrameLimits:
    """Bounds on one message, checked by both ends.

    Attributes:
        max_arrays: Most arrays in one message.
        max_ndim: Most dimensions of one array.
        max_bytes: Most bytes of all arrays of one message together.
    """

    max_arrays: int = 64
    max_ndim: int = 8
    max_bytes: int = 1 << 30

    def __post_init__(self) -> None:
        for name in ("max_arrays", "max_ndim", "max_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(format_where(name, "FrameLimits", ">= 0", repr(value)))
        if self.max_arrays > 0xFFFF or self.max_ndim > 0xFF:
            raise ValueError(
                format_where(
                    "max_arrays, max_ndim",
                    "FrameLimits",
                    "<= 65535 and <= 255 (their header fields)",
                    f"{self.max_arrays}, {self.max_ndim}",
                )
            )


@dataclass(frozen=True, slots=True)
class Message:
    """One decoded message.

    Attributes:
        kind: :class:`Kind` of the message.
        tag: Two unsigned integers the sender chose (e.g. ``(epoch, batch)``).
        arrays: The arrays, views of the received frames (no copy); writable
            when the frames are (a received zmq frame belongs to its receiver).
        nbytes: Bytes of every frame, header included.
    """

    kind: Kind
    tag: tuple[int, int]
    arrays: tuple[np.ndarray, ...]
    nbytes: int


def encode(
    kind: Kind,
    tag: tuple[int, int],
    arrays: Sequence[np.ndarray] = (),
    limits: FrameLimits = FrameLimits(),
) -> list[Buffer]:
    """Return the frames of one message (arrays are not copied when contiguous).

    Raises:
        FrameError: Too many arrays or dimensions, too many bytes, a dtype the
            wire does not carry, or a tag outside ``[0, 2**64)``.
    """
    if len(arrays) > limits.max_arrays:
        raise FrameError.build(
            "arrays", f"at most {limits.max_arrays}", str(len(arrays)), _LIMIT_HINT
        )
    if not all(0 <= t < 1 << 64 for t in tag) or len(tag) != 2:
        raise FrameError.build("tag", "two integers in [0, 2**64)", repr(tag), "")
    parts = [_FIXED.pack(MAGIC, VERSION, int(kind), len(arrays), *tag)]
    buffers: list[Buffer] = []
    total = 0
    for i, array in enumerate(arrays):
        code = _CODES.get(array.dtype.newbyteorder("<"))
        if code is None:
            raise FrameError.build(
                f"arrays[{i}].dtype",
                "a fixed-width numeric or bool dtype",
                str(array.dtype),
                "convert the array first (objects and strings never cross the wire)",
            )
        if array.ndim > limits.max_ndim:
            raise FrameError.build(
                f"arrays[{i}].ndim",
                f"at most {limits.max_ndim}",
                str(array.ndim),
                _LIMIT_HINT,
            )
        # ascontiguousarray makes a 0-d array 1-d: keep the shape
        contiguous = np.ascontiguousarray(array, dtype=_DTYPES[code]).reshape(
            array.shape
        )
        total += contiguous.nbytes
        if total > limits.max_bytes:
            raise FrameError.build(
                "message bytes",
                f"at most {limits.max_bytes}",
                f"{total} or more",
                _LIMIT_HINT,
            )
        parts.append(_ARRAY.pack(code, contiguous.ndim))
        shape: tuple[int, ...] = contiguous.shape
        parts.extend(_DIM.pack(dim) for dim in shape)
        # A 0-d or empty array still gets its (possibly empty) frame.
        buffers.append(
            contiguous.reshape(-1).view(np.uint8) if contiguous.size else b""
        )
    return [b"".join(parts), *buffers]


_LIMIT_HINT = "split the data over several messages, or raise FrameLimits"


def decode(frames: Sequence[Buffer], limits: FrameLimits = FrameLimits()) -> Message:
    """Inverse of :func:`encode`; the arrays are views of ``frames`` (no copy).

    Raises:
        FrameError: The message is malformed or over ``limits``; names the field.
    """
    if not frames:
        raise FrameError.build("message", "a header frame", "no frames")
    header = memoryview(_buffer(frames[0])).cast("B")
    nbytes = header.nbytes
    if header.nbytes < _FIXED.size:
        raise FrameError.build(
            "header", f"at least {_FIXED.size} bytes", str(header.nbytes)
        )
    magic, version, kind_code, count, tag_a, tag_b = _FIXED.unpack_from(header, 0)
    if magic != MAGIC:
        raise FrameError.build("magic", repr(MAGIC), repr(bytes(magic)))
    if version != VERSION:
        raise FrameError.build("version", str(VERSION), str(version))
    if kind_code not in Kind.__members__.values():
        raise FrameError.build(
            "kind", f"one of {[int(k) for k in Kind]}", str(kind_code)
        )
    if count > limits.max_arrays:
        raise FrameError.build(
            "arrays", f"at most {limits.max_arrays}", str(count), _LIMIT_HINT
        )
    if len(frames) != count + 1:
        raise FrameError.build(
            "frames", f"{count + 1} (the header and {count} buffers)", str(len(frames))
        )
    offset = _FIXED.size
    arrays = []
    total = 0
    for i in range(count):
        if offset + _ARRAY.size > header.nbytes:
            raise FrameError.build(
                "header", f"a descriptor for array {i}", "the header ended"
            )
        code, ndim = _ARRAY.unpack_from(header, offset)
        offset += _ARRAY.size
        if code >= len(_DTYPES):
            raise FrameError.build(
                f"arrays[{i}].dtype", f"a code < {len(_DTYPES)}", str(code)
            )
        if ndim > limits.max_ndim:
            raise FrameError.build(
                f"arrays[{i}].ndim",
                f"at most {limits.max_ndim}",
                str(ndim),
                _LIMIT_HINT,
            )
        if offset + ndim * _DIM.size > header.nbytes:
            raise FrameError.build(
                "header", f"{ndim} dimensions for array {i}", "the header ended"
            )
        shape = tuple(
            _DIM.unpack_from(header, offset + d * _DIM.size)[0] for d in range(ndim)
        )
        offset += ndim * _DIM.size
        dtype = _DTYPES[code]
        size = math.prod(shape) * dtype.itemsize
        total += size
        if total > limits.max_bytes:
            raise FrameError.build(
                "message bytes",
                f"at most {limits.max_bytes}",
                f"{total} or more",
                _LIMIT_HINT,
            )
        data = memoryview(_buffer(frames[i + 1])).cast("B")
        nbytes += data.nbytes
        if data.nbytes != size:
            raise FrameError.build(
                f"arrays[{i}] buffer",
                f"{size} bytes ({dtype.name} of shape {shape})",
                f"{data.nbytes} bytes",
            )
        array = np.frombuffer(data, dtype=dtype) if size else np.empty(0, dtype)
        array = array.reshape(shape)
        arrays.append(array)
    if offset != header.nbytes:
        raise FrameError.build(
            "header",
            f"{offset} bytes (the descriptors of {count} arrays)",
            f"{header.nbytes}",
        )
    return Message(Kind(kind_code), (tag_a, tag_b), tuple(arrays), nbytes)


def _buffer(frame: Buffer) -> Buffer:
    """The buffer of a zmq frame (``copy=False`` receive), or the object itself."""
    return getattr(frame, "buffer", frame)
