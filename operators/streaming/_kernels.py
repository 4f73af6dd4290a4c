"""Gather-scatter kernels of the streaming layers (numba, CPU; private).

The hot operation of a flush is ``target[dst[i]] += source[rows[i]]``: a changed
source's message delta added to each of its out-edges' destinations. Doing it in
one compiled loop never materialises the ``[edges, d]`` gathered rows, and beats
``torch.index_add_`` on float64 by an order of magnitude on CPU (measured: 6.4M
float64 adds take ~120 ms with ``index_add_``, a few ms here).

The kernels run on numba's threads (``numba.get_num_threads()``; the torch
baselines use their own). The scatters are bound by random accesses to the target
rows, so several threads help by keeping more misses in flight: thread ``p`` owns
the target rows ``t % parts == p`` and applies their contributions in input order.
Each row is thus summed in the same order whatever the thread count, so results
are deterministic and equal to a serial loop's.

A 64-wide float64 row is 8 cache lines and its add loop is long enough to fill the
core's reorder window, so the hardware keeps only a row or two of misses in flight.
The loops therefore prefetch the row :data:`_AHEAD` contributions ahead
(``llvm.prefetch``, a hint that never faults): ~15% less CPU per RMAT-18 layer-2
scatter, same sums bit for bit.

Examples:
    >>> import numpy as np
    >>> target = np.zeros((2, 2))
    >>> gather_scatter_add(target, np.array([1, 1]), np.eye(2), np.array([0, 1]))
    >>> target.tolist()
    [[0.0, 0.0], [1.0, 1.0]]
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: Below this many rows a kernel runs serially, outside any parallel region. A
#: scatter of a B=100 flush on RMAT-18 (~150k rows, ~5 ms) ran 3x slower on two
#: threads than on one on the shared 2-core benchmark machine: every fork and join
#: waits for a descheduled worker, and the pool's spinning workers then slow the
#: serial numpy work that follows. Only big flushes are worth the pool.
_PARALLEL_MIN = 1 << 20

#: How many contributions ahead the scatters prefetch their target row.
_AHEAD = 8

#: float64 elements per 64-byte cache line.
_LINE = 8


@intrinsic
def _prefetch(typingctx, arr, row, col):  # type: ignore[no-untyped-def]
    """Hint the cache line holding ``arr[row, col]`` (2-D, C order) for writing."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(  # type: ignore[no-untyped-call]
            context, builder, aryty, ary, [args[1], args[2]], wraparound=False
        )
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32])
        fn = cgutils.get_or_insert_function(  # type: ignore[no-untyped-call]
            builder.module, fnty, "llvm.prefetch.p0"
        )
        # rw=1 (write), locality=3 (keep in all levels), cache type=1 (data)
        flags = [ir.Constant(i32, 1), ir.Constant(i32, 3), ir.Constant(i32, 1)]
        builder.call(fn, [builder.bitcast(ptr, cgutils.voidptr_t), *flags])
        return context.get_dummy_value()

    return types.void(arr, row, col), codegen


@numba.njit(cache=True, nogil=True, inline="always")
def _prefetch_row(arr: np.ndarray, row: int) -> None:  # pragma: no cover - compiled
    for j in range(0, arr.shape[1], _LINE):
        _prefetch(arr, row, j)  # type: ignore[call-arg]  # numba fills typingctx


def _threads(size: int) -> int:
    """Threads for ``size`` rows of work.

    One (no parallel region at all) below :data:`_PARALLEL_MIN`, where a fork and
    join of the thread pool costs more than the work, and far more on a busy
    machine, where a descheduled worker holds the join up.
    """
    return numba.get_num_threads() if size >= _PARALLEL_MIN else 1


def gather_scatter_add(
    target: np.ndarray, dst: np.ndarray, source: np.ndarray, rows: np.ndarray
) -> None:
    """``target[dst[i]] += source[rows[i]]`` for every ``i``, in order per row."""
    parts = _threads(dst.shape[0])
    kernel = _scatter_add if parts > 1 else _scatter_add_serial
    kernel(target, dst, source, rows, parts)


def gather_scatter_max(
    target: np.ndarray, dst: np.ndarray, source: np.ndarray, rows: np.ndarray
) -> None:
    """``target[dst[i]] = max(target[dst[i]], source[rows[i]])`` elementwise."""
    parts = _threads(dst.shape[0])
    kernel = _scatter_max if parts > 1 else _scatter_max_serial
    kernel(target, dst, source, rows, parts)


def _scatter_add_body(
    target: np.ndarray,
    dst: np.ndarray,
    source: np.ndarray,
    rows: np.ndarray,
    parts: int,
) -> None:  # pragma: no cover - compiled
    width = target.shape[1]
    n = dst.shape[0]
    for p in numba.prange(parts):
        for i in range(n):
            if i + _AHEAD < n and dst[i + _AHEAD] % parts == p:
                _prefetch_row(target, dst[i + _AHEAD])
            t = dst[i]
            if t % parts != p:
                continue
            s = rows[i]
            for j in range(width):
                target[t, j] += source[s, j]


_scatter_add = numba.njit(cache=True, nogil=True, parallel=True)(_scatter_add_body)
_scatter_add_serial = numba.njit(cache=True, nogil=True)(_scatter_add_body)


def _scatter_max_body(
    target: np.ndarray,
    dst: np.ndarray,
    source: np.ndarray,
    rows: np.ndarray,
    parts: int,
) -> None:  # pragma: no cover - compiled
    width = target.shape[1]
    n = dst.shape[0]
    for p in numba.prange(parts):
        for i in range(n):
            if i + _AHEAD < n and dst[i + _AHEAD] % parts == p:
                _prefetch_row(target, dst[i + _AHEAD])
            t = dst[i]
            if t % parts != p:
                continue
            s = rows[i]
            for j in range(width):
                value = source[s, j]
                if value > target[t, j]:
                    target[t, j] = value


_scatter_max = numba.njit(cache=True, nogil=True, parallel=True)(_scatter_max_body)
_scatter_max_serial = numba.njit(cache=True, nogil=True)(_scatter_max_body)


@numba.njit(cache=True, nogil=True)
def scatter_count(
    target: np.ndarray, dst: np.ndarray, counts: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``target[dst[i]] += counts[i]`` for every ``i``."""
    for i in range(dst.shape[0]):
        target[dst[i]] += counts[i]


#: Modes of :func:`read_linear`.
READ_SUM, READ_MEAN, READ_GCN = 0, 1, 2


def read_linear(
    out: np.ndarray,
    ids: np.ndarray,
    agg: np.ndarray,
    counts: np.ndarray,
    root: np.ndarray,
    bias: np.ndarray,
    mode: int,
    loop_weight: float,
    relu: bool,
) -> None:
    """Outputs of linear rules for ``ids`` in one pass (no temporaries).

    ``mode``: :data:`READ_SUM` (``S + b + R``), :data:`READ_MEAN` (``S / n + b +
    R``, 0 where ``n == 0``) or :data:`READ_GCN` (``s S + w s^2 R + b`` with
    ``s = (n + w)^-1/2``); then ReLU when ``relu``.
    """
    kernel = _read_linear if _threads(ids.shape[0]) > 1 else _read_linear_serial
    kernel(out, ids, agg, counts, root, bias, mode, loop_weight, relu)


def _read_linear_body(
    out: np.ndarray,
    ids: np.ndarray,
    agg: np.ndarray,
    counts: np.ndarray,
    root: np.ndarray,
    bias: np.ndarray,
    mode: int,
    loop_weight: float,
    relu: bool,
) -> None:  # pragma: no cover - compiled
    width = out.shape[1]
    m = ids.shape[0]
    for i in numba.prange(m):  # rows are independent
        if i + _AHEAD < m:  # (prange hands each thread a contiguous block)
            _prefetch_row(agg, ids[i + _AHEAD])
            _prefetch_row(root, ids[i + _AHEAD])
        v = ids[i]
        n = counts[v]
        a = 1.0
        c = 1.0
        if mode == READ_MEAN:
            a = 1.0 / n if n > 0 else 0.0
        elif mode == READ_GCN:
            a = (n + loop_weight) ** -0.5
            c = loop_weight * a * a
        for j in range(width):
            value = a * agg[v, j] + c * root[v, j] + bias[j]
            if relu and value < 0.0:
                value = 0.0
            out[i, j] = value


_read_linear = numba.njit(cache=True, nogil=True, parallel=True)(_read_linear_body)
_read_linear_serial = numba.njit(cache=True, nogil=True)(_read_linear_body)


#: Below this many rows :func:`linear_rows` runs here, serially, rather than in
#: torch: a flush's few hundred changed rows are a ~1M-multiply GEMM, and a thread
#: pool's fork and join (torch's OpenMP team after numba's, on a 2-core machine that
#: others share) costs milliseconds where the work costs ~0.1 ms.
SMALL_ROWS = 2048


@numba.njit(cache=True, nogil=True)
def matmul_rows(
    x: np.ndarray, w_t: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``out = x @ w_t`` row by row (float64; the inner loop vectorises over out)."""
    k, d_in = x.shape
    d_out = w_t.shape[1]
    for i in range(k):
        for j in range(d_out):
            out[i, j] = 0.0
        for c in range(d_in):
            a = x[i, c]
            for j in range(d_out):
                out[i, j] += a * w_t[c, j]
