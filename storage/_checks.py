"""Shared input checks: the non-finite feature policy.

Policy (documented for every writer of features): floating-point arrays containing
NaN or +-inf are **rejected** by default, with the first offending position in the
message, because a NaN feature silently poisons every aggregate it reaches. Callers
that store such values on purpose (missing-value markers) pass
``allow_nonfinite=True``. Integer and bool arrays are always finite.

Examples:
    >>> import numpy as np
    >>> first_nonfinite(np.array([[1.0, 2.0], [3.0, np.inf]]))
    (1, 1)
    >>> first_nonfinite(np.arange(4)) is None
    True
"""

from __future__ import annotations

import numpy as np

_CHUNK_ELEMENTS = 1 << 22  # bounded temporary memory on huge feature tables


def first_nonfinite(array: np.ndarray) -> tuple[int, ...] | None:
    """Index of the first NaN/inf element (row-major), or None if all are finite."""
    if array.dtype.kind not in "fc" or array.size == 0:
        return None
    rows = array.shape[0]
    per_row = max(1, array.size // max(rows, 1))
    step = max(1, _CHUNK_ELEMENTS // per_row)
    for start in range(0, rows, step):
        block = array[start : start + step]
        bad = ~np.isfinite(block)
        if bad.any():
            flat = int(np.argmax(bad.reshape(-1)))
            index = np.unravel_index(flat, block.shape)
            return (start + int(index[0]), *(int(i) for i in index[1:]))
    return None


def describe_nonfinite(array: np.ndarray, index: tuple[int, ...]) -> str:
    """Render ``value at row r, column c`` for an error message."""
    value = array[index]
    where = f"row {index[0]}"
    if len(index) > 1:
        where += f", column {', '.join(str(i) for i in index[1:])}"
    return f"{value} at {where}"
