"""How many bytes an item occupies, so channels can bound memory in bytes.

Arrow data, numpy arrays and torch tensors report their buffer sizes; containers add
up their members (sampled beyond a few dozen); other objects count a small constant,
which keeps streams of small Python objects bounded by the item limit instead.

Every item is sized as it leaves a step, so the common types take one dictionary
lookup by exact type and one attribute or C call (well under a microsecond); only
other types walk the ``isinstance`` chain. Arrow's own ``nbytes`` is exact for
slices but costs several microseconds (it walks every buffer range), so an Arrow
item whose buffers total at most :data:`ARROW_EXACT_ABOVE` bytes is charged those
buffers' total instead (one C call): the memory it keeps alive, each buffer counted
once; for an item that is not a slice that is ``nbytes`` up to buffer padding.
Larger items get the exact figure, so a small slice of a big table is not charged
the whole table.

Examples:
    >>> import numpy as np
    >>> nbytes(np.zeros(1000, dtype=np.float32))
    4000
    >>> nbytes({"x": np.zeros(10, dtype=np.int64), "n": 3})
    208
    >>> import pyarrow as pa
    >>> table = pa.table({"x": np.arange(100_000)})
    >>> nbytes(table), nbytes(table.slice(0, 10))
    (800000, 80)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

#: The size charged for an object whose footprint is unknown or small.
SMALL = 64
#: Arrow items whose buffers total more than this are sized exactly (see above).
ARROW_EXACT_ABOVE = 1 << 16
_SAMPLE = 32
_ARROW = (pa.RecordBatch, pa.Table, pa.Array, pa.ChunkedArray)


def _arrow(item: Any) -> int:
    total: int = item.get_total_buffer_size()
    if total <= ARROW_EXACT_ABOVE:
        return total
    return int(item.nbytes)


def _buffer(item: Any) -> int:
    return int(item.nbytes)


def _tensor(item: Any) -> int:
    return int(item.element_size() * item.nelement())


def _small(item: Any) -> int:
    return SMALL


def _text(item: Any) -> int:
    return SMALL + len(item)


def _mapping(item: Any) -> int:
    return SMALL + _sum_sampled(list(item.values()))


def _sequence(item: Any) -> int:
    return SMALL + _sum_sampled(item)


#: Sizers by exact type: the fast path. Subclasses and other types take the
#: ``isinstance`` chain in :func:`_slow`, which registers the types it can.
_BY_TYPE: dict[type, Callable[[Any], int]] = {
    np.ndarray: _buffer,
    pa.RecordBatch: _arrow,
    pa.Table: _arrow,
    pa.ChunkedArray: _arrow,
    bytes: len,
    bytearray: len,
    str: _text,
    dict: _mapping,
    list: _sequence,
    tuple: _sequence,
    int: _small,
    float: _small,
    bool: _small,
    type(None): _small,
}


def nbytes(item: object) -> int:
    """Return the (estimated) size of ``item`` in bytes."""
    sizer = _BY_TYPE.get(type(item))
    if sizer is not None:
        return sizer(item)
    return _slow(item)


def _slow(item: object) -> int:
    kind = type(item)
    if isinstance(item, np.ndarray | np.generic):
        _BY_TYPE[kind] = _buffer  # numpy scalar types, ndarray subclasses
        return int(item.nbytes)
    if isinstance(item, _ARROW):
        _BY_TYPE[kind] = _arrow  # the many pa.Array subclasses
        return _arrow(item)
    torch = sys.modules.get("torch")  # never import torch just to measure
    if torch is not None and isinstance(item, torch.Tensor):
        if kind is torch.Tensor or kind is torch.nn.Parameter:
            _BY_TYPE[kind] = _tensor
        return _tensor(item)
    if isinstance(item, bytes | bytearray):
        return len(item)
    if isinstance(item, str):
        return _text(item)
    if isinstance(item, Mapping):
        return _mapping(item)
    if isinstance(item, list | tuple):
        return _sequence(item)
    return SMALL


def _sum_sampled(values: list[object] | tuple[object, ...]) -> int:
    if len(values) <= _SAMPLE:
        return sum(nbytes(v) for v in values)
    step = len(values) / _SAMPLE
    sample = sum(nbytes(values[int(i * step)]) for i in range(_SAMPLE))
    return sample * len(values) // _SAMPLE
