"""Fused gather-aggregate: a sampled block's input rows reduced straight from the table.

The first layer of a sampled GNN aggregates *raw* input features, which carry no
gradient. Gathering every source row of the block into a ``[num_src, F]`` tensor and
then aggregating it reads each row twice and writes it once; this kernel reads the
feature table directly and writes only what the layer consumes:

* ``agg[i] = scale_i * sum_{e in row i} table[src_ids[indices[e]]]`` (``scale_i`` is
  ``1 / max(deg_i, 1)`` for a mean, 1 for a sum), and
* ``root[i] = table[src_ids[i]]``, the destination's own row (destinations come
  first among a block's sources).

The sum runs in edge order in float32 and the mean multiplies once by
``float32(1 / deg)``, the same rounding as :class:`~strata.operators.layers.Mean`'s
sum-then-scale. The kernel releases the GIL and is serial: it runs in a prefetch
thread beside the training step, which owns the other cores.

Examples:
    >>> import numpy as np
    >>> table = np.arange(8, dtype=np.float32).reshape(4, 2)
    >>> # 2 destinations (global 3, 0); dst 0 <- local {1, 2}, dst 1 <- local {0}
    >>> agg, root = gather_aggregate(
    ...     table, np.array([0, 2, 3]), np.array([1, 2, 0]), np.array([3, 0, 2]),
    ...     mean=True)
    >>> agg.tolist(), root.tolist()
    ([[2.0, 3.0], [6.0, 7.0]], [[6.0, 7.0], [0.0, 1.0]])
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from strata.operators.errors import OperatorError

__all__ = ["gather_aggregate"]

Array = npt.NDArray[np.generic]


@numba.njit(nogil=True, cache=True, fastmath={"contract"})
def _gather_aggregate(
    table: Array,
    indptr: Array,
    indices: Array,
    src_ids: Array,
    mean: bool,
    agg: Array,
    root: Array,
) -> None:  # pragma: no cover - numba
    num_dst = indptr.shape[0] - 1
    width = table.shape[1]
    for i in range(num_dst):
        row = agg[i]
        row[:] = 0
        start, end = indptr[i], indptr[i + 1]
        for e in range(start, end):
            src = table[src_ids[indices[e]]]
            for k in range(width):
                row[k] += src[k]
        if mean and end > start:
            # 1/deg in float64, rounded once to float32: Mean's row_scale.
            scale = np.float32(1.0 / (end - start))
            for k in range(width):
                row[k] *= scale
        if root.shape[0]:
            root[i, :] = table[src_ids[i]]


def gather_aggregate(
    table: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    src_ids: np.ndarray,
    *,
    mean: bool,
    with_root: bool = True,
    out: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Aggregate a block's input rows from the whole feature table in one pass.

    Args:
        table: float32 ``[num_nodes, F]`` (C-contiguous; a memory map is fine).
        indptr: int64 ``[num_dst + 1]`` CSR over the block's destinations.
        indices: int64 local source ids of the block's edges.
        src_ids: int64 global id of every local source (destinations first).
        mean: divide each sum by the destination's edge count (else a sum).
        with_root: also copy the destinations' own rows (else ``root`` is empty).
        out: preallocated ``(agg, root)`` float32 arrays to fill, or None.

    Returns:
        ``(agg, root)``: float32 ``[num_dst, F]`` each (``root`` is ``[0, F]``
        without ``with_root``).

    Raises:
        OperatorError: on a table that is not 2-D float32.
    """
    if table.ndim != 2 or table.dtype != np.float32:
        raise OperatorError.build(
            "table",
            "gather_aggregate",
            "a 2-D float32 array",
            f"{table.dtype} of shape {table.shape}",
        )
    num_dst, width = indptr.shape[0] - 1, table.shape[1]
    if out is None:
        agg = np.empty((num_dst, width), dtype=np.float32)
        root = np.empty((num_dst if with_root else 0, width), dtype=np.float32)
    else:
        agg, root = out
    _gather_aggregate(
        np.ascontiguousarray(table), indptr, indices, src_ids, mean, agg, root
    )
    return agg, root
