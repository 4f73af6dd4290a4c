"""How many bytes an item occupies, so channels can bound memory in bytes.

Arrow data, numpy arrays and torch tensors report their buffer sizes; containers add
up their members (sampled beyond a few dozen); other objects count a small constant,
which keeps streams of small Python objects bounded by the item limit instead.

Examples:
    >>> import numpy as np
    >>> nbytes(np.zeros(1000, dtype=np.float32))
    4000
    >>> nbytes({"x": np.zeros(10, dtype=np.int64), "n": 3})
    208
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

import numpy as np
import pyarrow as pa

#: The size charged for an object whose footprint is unknown or small.
SMALL = 64
_SAMPLE = 32
_ARROW = (pa.RecordBatch, pa.Table, pa.Array, pa.ChunkedArray)


def nbytes(item: object) -> int:
    """Return the (estimated) size of ``item`` in bytes."""
    if isinstance(item, np.ndarray | np.generic):
        return int(item.nbytes)
    if isinstance(item, _ARROW):
        return int(item.nbytes)
    torch = sys.modules.get("torch")  # never import torch just to measure
    if torch is not None and isinstance(item, torch.Tensor):
        return int(item.element_size() * item.nelement())
    if isinstance(item, bytes | bytearray):
        return len(item)
    if isinstance(item, str):
        return SMALL + len(item)
    if isinstance(item, Mapping):
        return SMALL + _sum_sampled(list(item.values()))
    if isinstance(item, list | tuple):
        return SMALL + _sum_sampled(item)
    return SMALL


def _sum_sampled(values: list[object] | tuple[object, ...]) -> int:
    if len(values) <= _SAMPLE:
        return sum(nbytes(v) for v in values)
    step = len(values) / _SAMPLE
    sample = sum(nbytes(values[int(i * step)]) for i in range(_SAMPLE))
    return sample * len(values) // _SAMPLE
