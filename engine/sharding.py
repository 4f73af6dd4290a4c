"""Route items of a keyed step to its shards, the same way on every executor.

A key is an Arrow column name (each record batch is split row-wise by the hash of
that column) or a function returning an ``int``, ``str`` or ``bytes`` key for a whole
item. Hashes are stable across processes and runs (no ``hash()``, whose string
hashing is salted per process): integers go through the splitmix64 finaliser,
strings and bytes through CRC-32 first.

Examples:
    >>> import pyarrow as pa
    >>> batch = pa.record_batch({"node": [0, 1, 2, 3, 4, 5], "w": [1.0] * 6})
    >>> pieces = split(batch, "node", 2)
    >>> sorted(len(piece) for _, piece in pieces)
    [3, 3]
    >>> split(7, lambda item: item, 3) == [(shard_of(7, 3), 7)]
    True
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

_MASK = (1 << 64) - 1
_C1 = 0xFF51AFD7ED558CCD
_C2 = 0xC4CEB9FE1A85EC53


class ShardKeyError(TypeError):
    """A key column is missing or has an unsupported type, or a key is not hashable."""

    def __init__(self, subject: str, expected: str, got: str) -> None:
        super().__init__(f"{subject}: expected {expected}, got {got}")
        self.subject = subject
        self.expected = expected
        self.got = got


def shard_of(key: object, shards: int) -> int:
    """Return the shard of one Python key (an ``int``, ``str``, ``bytes`` or tuple)."""
    return _hash(key) % shards


def split(
    item: Any, key: str | Callable[[Any], object], shards: int
) -> list[tuple[int, Any]]:
    """Split ``item`` into ``(shard, piece)`` pairs; empty pieces are left out."""
    if shards == 1:
        return [(0, item)]
    if callable(key):
        return [(shard_of(key(item), shards), item)]
    if isinstance(item, pa.RecordBatch | pa.Table):
        return _split_arrow(item, key, shards)
    if isinstance(item, dict) and key in item:
        return [(shard_of(item[key], shards), item)]
    raise ShardKeyError(
        f"key {key!r}",
        "an Arrow batch with that column, or a dict with that key",
        type(item).__qualname__,
    )


def hash_column(column: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.uint64]:
    """Return the stable 64-bit hash of every value of an integer or string column."""
    if column.null_count:
        raise ShardKeyError("key column", "no nulls", f"{column.null_count} nulls")
    kind = column.type
    if pa.types.is_integer(kind):
        values = column.to_numpy()
        return _mix(values.astype(np.uint64, copy=False))
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        crcs = [zlib.crc32(v.encode()) for v in column.to_pylist()]
        return _mix(np.asarray(crcs, dtype=np.uint64))
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        crcs = [zlib.crc32(v) for v in column.to_pylist()]
        return _mix(np.asarray(crcs, dtype=np.uint64))
    raise ShardKeyError("key column", "integers, strings or bytes", str(kind))


def _split_arrow(
    item: pa.RecordBatch | pa.Table, key: str, shards: int
) -> list[tuple[int, Any]]:
    if key not in item.schema.names:
        raise ShardKeyError(
            f"key column {key!r}", f"one of {item.schema.names}", "none"
        )
    owners = (hash_column(item.column(key)) % np.uint64(shards)).astype(np.intp)
    counts = np.bincount(owners, minlength=shards)
    if counts.max(initial=0) == len(owners):  # one shard owns everything: no copy
        return [(int(np.argmax(counts)), item)] if len(owners) else []
    # One stable gather groups the rows by shard; the pieces are zero-copy slices.
    order = np.argsort(owners, kind="stable")
    grouped = item.take(pa.array(order))
    pieces: list[tuple[int, Any]] = []
    offset = 0
    for shard, count in enumerate(counts.tolist()):
        if count:
            pieces.append((shard, grouped.slice(offset, count)))
        offset += count
    return pieces


def _hash(key: object) -> int:
    if isinstance(key, bool | int | np.integer):
        return _mix_int(int(key))
    if isinstance(key, str):
        return _mix_int(zlib.crc32(key.encode()))
    if isinstance(key, bytes):
        return _mix_int(zlib.crc32(key))
    if isinstance(key, tuple):
        combined = 0
        for part in key:
            combined = _mix_int(combined * 31 + _hash(part))
        return combined
    raise ShardKeyError("key", "an int, str, bytes or tuple", type(key).__qualname__)


def _mix_int(x: int) -> int:
    x &= _MASK
    x = ((x ^ (x >> 33)) * _C1) & _MASK
    x = ((x ^ (x >> 33)) * _C2) & _MASK
    return x ^ (x >> 33)


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    # Same function as _mix_int; uint64 array arithmetic wraps silently, as intended.
    shift = np.uint64(33)
    x = (x ^ (x >> shift)) * np.uint64(_C1)
    x = (x ^ (x >> shift)) * np.uint64(_C2)
    return x ^ (x >> shift)
