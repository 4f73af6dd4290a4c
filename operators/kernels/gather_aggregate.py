"""Fused gather-aggregate: a sampled layer's input rows reduced straight from the table.

The first layer of a sampled GNN aggregates *raw* input features, which carry no
gradient. Gathering every source row of the block into a ``[num_src, F]`` tensor and
then aggregating it reads each row twice and writes it once; this kernel reads the
feature table directly and writes only what the layer consumes:

* ``agg[i] = scale_i * sum_{e in row i} table[sources[e]]`` (``scale_i`` is
  ``1 / deg_i`` for a mean, 1 for a sum; rows without edges are zeros), and
* ``root[i] = table[dst_ids[i]]``, the destination's own row.

The sum runs in edge order in float32 and the mean multiplies once by
``float32(1 / deg)``, the same rounding as :class:`~strata.operators.layers.Mean`'s
sum-then-scale. Rows are random reads from a table larger than the caches, so the
kernel prefetches the row :data:`AHEAD` edges ahead (about a quarter less time on
the RMAT-18 benchmark). It releases the GIL and is serial: it runs in a prefetch
thread beside the training step, which owns the other cores.

Examples:
    >>> import numpy as np
    >>> table = np.arange(8, dtype=np.float32).reshape(4, 2)
    >>> # destination 3 <- {2, 0}; destination 0 <- {2}
    >>> agg, root = gather_aggregate(
    ...     table, np.array([0, 2, 3]), np.array([2, 0, 2]), np.array([3, 0]),
    ...     mean=True)
    >>> agg.tolist(), root.tolist()
    ([[2.0, 3.0], [4.0, 5.0]], [[6.0, 7.0], [0.0, 1.0]])
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import numpy.typing as npt
from llvmlite import ir  # type: ignore[import-untyped]
from numba.core import types
from numba.extending import intrinsic

from strata.operators.errors import OperatorError

__all__ = ["AHEAD", "gather_aggregate"]

Array = npt.NDArray[np.generic]

#: Prefetch distance in edges (measured best of 2, 4, 8, 16 on the RMAT-18 batch).
AHEAD = 8
#: float32 elements per 64-byte cache line.
_LINE = 16


def _prefetch_codegen(
    typingctx: Any, array: Any, index: Any
) -> Any:  # pragma: no cover
    """Hint the CPU to load ``array.flat[index]``'s cache line (never faults)."""
    signature = types.void(array, index)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        byte_ptr = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [byte_ptr, int32, int32, int32])
        name = "llvm.prefetch.p0"
        module = builder.module
        fn = module.globals.get(name) or ir.Function(module, fnty, name=name)
        address = builder.bitcast(builder.gep(data, [args[1]]), byte_ptr)
        # read (0), high temporal locality (3), data cache (1)
        builder.call(fn, [address, int32(0), int32(3), int32(1)])
        return context.get_dummy_value()

    return signature, codegen


_prefetch: Any = intrinsic(_prefetch_codegen)


@numba.njit(nogil=True, cache=True, fastmath={"contract"})
def _gather_aggregate(
    table: Array,
    indptr: Array,
    sources: Array,
    dst_ids: Array,
    mean: bool,
    agg: Array,
    root: Array,
) -> None:  # pragma: no cover - numba
    num_dst = indptr.shape[0] - 1
    num_edges = sources.shape[0]
    width = table.shape[1]
    flat = table.reshape(-1)
    for i in range(num_dst):
        row = agg[i]
        row[:] = 0
        start, end = indptr[i], indptr[i + 1]
        for e in range(start, end):
            if e + AHEAD < num_edges:
                base = sources[e + AHEAD] * width
                for c in range(0, width, _LINE):
                    _prefetch(flat, base + c)
                _prefetch(flat, base + width - 1)
            src = table[sources[e]]
            for k in range(width):
                row[k] += src[k]
        if mean and end > start:
            # 1/deg in float64, rounded once to float32: Mean's row_scale.
            scale = np.float32(1.0 / (end - start))
            for k in range(width):
                row[k] *= scale
        if root.shape[0]:
            root[i, :] = table[dst_ids[i]]


def gather_aggregate(
    table: np.ndarray,
    indptr: np.ndarray,
    sources: np.ndarray,
    dst_ids: np.ndarray,
    *,
    mean: bool,
    with_root: bool = True,
    out: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Aggregate a layer's input rows from the whole feature table in one pass.

    Args:
        table: float32 ``[num_nodes, F]``, C-contiguous (a memory map is fine).
        indptr: int64 ``[num_dst + 1]`` CSR over the destinations.
        sources: int64 global source id of every edge (a
            :class:`~strata.operators.samplers.Hop`'s ``sources``).
        dst_ids: int64 ``[num_dst]`` global ids of the destinations.
        mean: divide each sum by the destination's edge count (else a sum).
        with_root: also copy the destinations' own rows (else ``root`` is empty).
        out: preallocated ``(agg, root)`` float32 arrays to fill, or None.

    Returns:
        ``(agg, root)``: float32 ``[num_dst, F]`` each (``root`` is ``[0, F]``
        without ``with_root``).

    Raises:
        OperatorError: on a table that is not C-contiguous 2-D float32.
    """
    if table.ndim != 2 or table.dtype != np.float32 or not table.flags.c_contiguous:
        raise OperatorError.build(
            "table",
            "gather_aggregate",
            "a C-contiguous 2-D float32 array",
            f"{table.dtype} of shape {table.shape}",
        )
    num_dst, width = indptr.shape[0] - 1, table.shape[1]
    if out is None:
        agg = np.empty((num_dst, width), dtype=np.float32)
        root = np.empty((num_dst if with_root else 0, width), dtype=np.float32)
    else:
        agg, root = out
    _gather_aggregate(table, indptr, sources, dst_ids, mean, agg, root)
    return agg, root
