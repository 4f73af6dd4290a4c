"""numba CPU kernels behind the message-passing primitives (private).

All kernels read a CSR over destination rows (``indptr``, ``indices`` = source ids)
and are parallel over row chunks. The sums use ``fastmath`` reassociation (so the
compiler vectorises the feature loop) but keep IEEE infinities and NaNs. These are
the CPU formulation chosen by ``benchmarks/kernels/test_spmm.py``; the torch
formulation in :mod:`strata.operators.kernels._primitives` serves every other device.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.generic]

# Reassociate and contract, but never assume away inf or NaN.
_FAST = {"reassoc", "contract", "nsz", "arcp"}
# Rows per parallel work item: small enough to balance skewed degrees over threads.
_CHUNK = 256


@numba.njit(parallel=True, fastmath=_FAST, cache=True, nogil=True)
def spmm_sum(
    indptr: Array, indices: Array, x: Array, out: Array
) -> None:  # pragma: no cover - numba
    """``out[i] = sum_{e in row i} x[indices[e]]`` for 2-D ``x``."""
    num_rows = indptr.shape[0] - 1
    width = x.shape[1]
    for chunk in numba.prange((num_rows + _CHUNK - 1) // _CHUNK):
        for i in range(chunk * _CHUNK, min(num_rows, (chunk + 1) * _CHUNK)):
            row = out[i]
            row[:] = 0
            for e in range(indptr[i], indptr[i + 1]):
                src = x[indices[e]]
                for k in range(width):
                    row[k] += src[k]


@numba.njit(parallel=True, fastmath=_FAST, cache=True, nogil=True)
def spmm_weighted(
    indptr: Array, indices: Array, values: Array, x: Array, out: Array
) -> None:  # pragma: no cover - numba
    """``out[i] = sum_{e in row i} values[e] * x[indices[e]]`` for 2-D ``x``."""
    num_rows = indptr.shape[0] - 1
    width = x.shape[1]
    for chunk in numba.prange((num_rows + _CHUNK - 1) // _CHUNK):
        for i in range(chunk * _CHUNK, min(num_rows, (chunk + 1) * _CHUNK)):
            row = out[i]
            row[:] = 0
            for e in range(indptr[i], indptr[i + 1]):
                src = x[indices[e]]
                w = values[e]
                for k in range(width):
                    row[k] += w * src[k]


@numba.njit(parallel=True, fastmath=_FAST, cache=True, nogil=True)
def spmm_heads(
    indptr: Array, indices: Array, values: Array, x: Array, out: Array
) -> None:  # pragma: no cover - numba
    """Per-head weights: ``out[i, h] = sum_e values[e, h] * x[indices[e], h]``."""
    num_rows = indptr.shape[0] - 1
    heads = x.shape[1]
    width = x.shape[2]
    for chunk in numba.prange((num_rows + _CHUNK - 1) // _CHUNK):
        for i in range(chunk * _CHUNK, min(num_rows, (chunk + 1) * _CHUNK)):
            row = out[i]
            row[:] = 0
            for e in range(indptr[i], indptr[i + 1]):
                src = x[indices[e]]
                for h in range(heads):
                    w = values[e, h]
                    for k in range(width):
                        row[h, k] += w * src[h, k]


@numba.njit(parallel=True, fastmath=_FAST, cache=True, nogil=True)
def sddmm_dot(
    indptr: Array, indices: Array, x_src: Array, y_dst: Array, out: Array
) -> None:  # pragma: no cover - numba
    """Per-edge, per-head dot products: ``out[e, h] = <x_src[src, h], y_dst[i, h]>``."""
    num_rows = indptr.shape[0] - 1
    heads = x_src.shape[1]
    width = x_src.shape[2]
    for chunk in numba.prange((num_rows + _CHUNK - 1) // _CHUNK):
        for i in range(chunk * _CHUNK, min(num_rows, (chunk + 1) * _CHUNK)):
            dst = y_dst[i]
            for e in range(indptr[i], indptr[i + 1]):
                src = x_src[indices[e]]
                for h in range(heads):
                    acc = 0.0
                    for k in range(width):
                        acc += src[h, k] * dst[h, k]
                    out[e, h] = acc


@numba.njit(parallel=True, cache=True, nogil=True)
def segment_max(
    indptr: Array, indices: Array, x: Array, out: Array, arg: Array
) -> None:  # pragma: no cover - numba
    """Row-wise max over in-neighbours; ``arg`` is the winning source (-1: no edge).

    Ties keep the first edge; an empty row gives 0, as PyG's max aggregation does.
    """
    num_rows = indptr.shape[0] - 1
    width = x.shape[1]
    for chunk in numba.prange((num_rows + _CHUNK - 1) // _CHUNK):
        for i in range(chunk * _CHUNK, min(num_rows, (chunk + 1) * _CHUNK)):
            start = indptr[i]
            end = indptr[i + 1]
            if start == end:
                out[i, :] = 0
                arg[i, :] = -1
                continue
            first = indices[start]
            out[i, :] = x[first]
            arg[i, :] = first
            for e in range(start + 1, end):
                j = indices[e]
                src = x[j]
                for k in range(width):
                    if src[k] > out[i, k]:
                        out[i, k] = src[k]
                        arg[i, k] = j


@numba.njit(parallel=True, cache=True, nogil=True)
def edge_softmax_forward(
    indptr: Array, scores: Array, out: Array
) -> None:  # pragma: no cover - numba
    """Softmax of ``scores[E, H]`` over each destination row's edges."""
    num_rows = indptr.shape[0] - 1
    heads = scores.shape[1]
    for chunk in numba.prange((num_rows + _CHUNK - 1) // _CHUNK):
        for i in range(chunk * _CHUNK, min(num_rows, (chunk + 1) * _CHUNK)):
            start = indptr[i]
            end = indptr[i + 1]
            for h in range(heads):
                top = -np.inf
                for e in range(start, end):
                    top = max(top, scores[e, h])
                total = 0.0
                for e in range(start, end):
                    value = np.exp(scores[e, h] - top)
                    out[e, h] = value
                    total += value
                for e in range(start, end):
                    out[e, h] /= total


@numba.njit(parallel=True, cache=True, nogil=True)
def edge_softmax_backward(
    indptr: Array, probs: Array, grad: Array, out: Array
) -> None:  # pragma: no cover - numba
    """``out = p * (g - sum_row(p * g))``, the softmax Jacobian-vector product."""
    num_rows = indptr.shape[0] - 1
    heads = probs.shape[1]
    for chunk in numba.prange((num_rows + _CHUNK - 1) // _CHUNK):
        for i in range(chunk * _CHUNK, min(num_rows, (chunk + 1) * _CHUNK)):
            start = indptr[i]
            end = indptr[i + 1]
            for h in range(heads):
                total = 0.0
                for e in range(start, end):
                    total += probs[e, h] * grad[e, h]
                for e in range(start, end):
                    out[e, h] = probs[e, h] * (grad[e, h] - total)


@numba.njit(cache=True, nogil=True)
def transpose_csr(
    indptr: Array, indices: Array, num_cols: int
) -> tuple[Array, Array, Array]:  # pragma: no cover - numba
    """Transpose a CSR by a stable counting sort on the column ids.

    Returns ``(t_indptr, t_indices, perm)``: row ``j`` of the transpose lists the
    rows that had an entry in column ``j``, and ``perm[t]`` is the position in the
    input of the transpose's entry ``t`` (so edge values move with ``v[perm]``).
    """
    num_rows = indptr.shape[0] - 1
    num_entries = indices.shape[0]
    t_indptr = np.zeros(num_cols + 1, dtype=np.int64)
    for e in range(num_entries):
        t_indptr[indices[e] + 1] += 1
    for j in range(num_cols):
        t_indptr[j + 1] += t_indptr[j]
    fill = t_indptr[:-1].copy()
    t_indices = np.empty(num_entries, dtype=np.int64)
    perm = np.empty(num_entries, dtype=np.int64)
    for i in range(num_rows):
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            t_indices[fill[j]] = i
            perm[fill[j]] = e
            fill[j] += 1
    return t_indptr, t_indices, perm


@numba.njit(parallel=True, fastmath=_FAST, cache=True, nogil=True)
def gat_forward(
    indptr: Array,
    indices: Array,
    el: Array,
    er: Array,
    h: Array,
    slope: float,
    out: Array,
    alpha: Array,
) -> None:  # pragma: no cover - numba
    """GAT attention in one sweep per destination row (softmax and weighted sum).

    ``alpha[e, k] = softmax_row(leaky_relu(el[src, k] + er[i, k]))`` and
    ``out[i, k] = sum_e alpha[e, k] * h[src, k]``; ``alpha`` is kept for the
    backward pass. No ``[E, H, C]`` message tensor exists at any point. The
    heads are the inner loop of the weighted sum, so each source row is read
    whole while it is in cache (a loop per head re-misses it: 2x slower).
    """
    num_rows = indptr.shape[0] - 1
    heads = h.shape[1]
    width = h.shape[2]
    # Accumulate in the arrays' dtype: a float64 literal would make every
    # float32 sum convert, and exp run in double (2x slower here).
    zero = h.dtype.type(0)
    for chunk in numba.prange((num_rows + _CHUNK - 1) // _CHUNK):
        for i in range(chunk * _CHUNK, min(num_rows, (chunk + 1) * _CHUNK)):
            start = indptr[i]
            end = indptr[i + 1]
            row = out[i]
            row[:] = 0
            for k in range(heads):
                top = h.dtype.type(-np.inf)
                er_k = er[i, k]
                for e in range(start, end):
                    s = el[indices[e], k] + er_k
                    if s <= 0:
                        s = s * slope
                    alpha[e, k] = s
                    top = max(top, s)
                total = zero
                for e in range(start, end):
                    value = np.exp(alpha[e, k] - top)
                    alpha[e, k] = value
                    total += value
                for e in range(start, end):
                    alpha[e, k] /= total
            for e in range(start, end):
                src = h[indices[e]]
                for k in range(heads):
                    w = alpha[e, k]
                    for c in range(width):
                        row[k, c] += w * src[k, c]


@numba.njit(parallel=True, fastmath=_FAST, cache=True, nogil=True)
def gat_backward_rows(
    indptr: Array,
    indices: Array,
    el: Array,
    er: Array,
    h: Array,
    alpha: Array,
    grad: Array,
    slope: float,
    d_score: Array,
    d_er: Array,
) -> None:  # pragma: no cover - numba
    """Per destination row: the score gradients and ``er``'s gradient.

    ``g_alpha[e] = <grad[i], h[src]>`` (per head), the softmax backward
    ``alpha * (g_alpha - sum_row(alpha * g_alpha))``, then the LeakyReLU's
    slope; ``d_er[i]`` is the row's sum of those (``er`` enters every edge of
    the row). ``d_score`` holds them per edge for :func:`gat_backward_cols`.
    """
    num_rows = indptr.shape[0] - 1
    heads = h.shape[1]
    width = h.shape[2]
    # Accumulate in the arrays' dtype: a float64 literal would make every
    # float32 sum convert, and exp run in double (2x slower here).
    zero = h.dtype.type(0)
    for chunk in numba.prange((num_rows + _CHUNK - 1) // _CHUNK):
        for i in range(chunk * _CHUNK, min(num_rows, (chunk + 1) * _CHUNK)):
            start = indptr[i]
            end = indptr[i + 1]
            g = grad[i]
            for e in range(start, end):
                src = h[indices[e]]
                for k in range(heads):
                    acc = zero
                    for c in range(width):
                        acc += g[k, c] * src[k, c]
                    d_score[e, k] = acc
            for k in range(heads):
                total = zero
                for e in range(start, end):
                    total += alpha[e, k] * d_score[e, k]
                row_sum = zero
                er_k = er[i, k]
                for e in range(start, end):
                    d = alpha[e, k] * (d_score[e, k] - total)
                    if el[indices[e], k] + er_k <= 0:
                        d = d * slope
                    d_score[e, k] = d
                    row_sum += d
                d_er[i, k] = row_sum


@numba.njit(parallel=True, fastmath=_FAST, cache=True, nogil=True)
def gat_backward_cols(
    t_indptr: Array,
    t_indices: Array,
    perm: Array,
    alpha: Array,
    d_score: Array,
    grad: Array,
    d_h: Array,
    d_el: Array,
) -> None:  # pragma: no cover - numba
    """Per source row (the transpose): ``h``'s and ``el``'s gradients.

    ``d_h[j] = sum_e alpha[e] * grad[dst(e)]`` and ``d_el[j] = sum_e d_score[e]``
    over ``j``'s out-edges, each row written by one thread (no atomics).
    """
    num_rows = t_indptr.shape[0] - 1
    heads = d_h.shape[1]
    width = d_h.shape[2]
    for chunk in numba.prange((num_rows + _CHUNK - 1) // _CHUNK):
        for j in range(chunk * _CHUNK, min(num_rows, (chunk + 1) * _CHUNK)):
            row = d_h[j]
            row[:] = 0
            d_el[j, :] = 0
            for t in range(t_indptr[j], t_indptr[j + 1]):
                e = perm[t]
                g = grad[t_indices[t]]
                for k in range(heads):
                    w = alpha[e, k]
                    d_el[j, k] += d_score[e, k]
                    for c in range(width):
                        row[k, c] += w * g[k, c]
