"""Counter-based dropout: the mask of a row is a function of its global id.

Every full-graph trainer draws its dropout masks here, on one device or on a gang.
Partition-parallel and chunked training compute a layer's input rows in many
places (on the worker that owns a row, on every worker whose halo holds it, once
more when backward recomputes it). ``torch.nn.functional.dropout`` draws from a
stateful generator, so each of those places would draw a different mask and the
result would depend on the worker count. Here the keep/drop bit of element
``(v, j)`` of layer ``l``'s input in epoch ``e`` is a hash of
``(seed, epoch, layer, v, j)``: every worker, every chunk and every recompute
draws the same mask, and so does
:class:`~strata.operators.trainers.FullGraphTrainer` on one device, so the same
seed trains the same model whatever the worker count. On CPU the fused kernel is
also faster than torch's generator: one epoch of ``strata run jobs/cora_gcn.py``
(training step and evaluation) takes about 10 ms with it, 50 ms with ``F.dropout``.

The hash is a 32-bit integer finaliser (two multiply-xorshift rounds, constants
below 2^31 so int64 products never overflow) applied to a row key and a column
key; the low 24 bits decide. Kept elements are scaled by ``1 / (1 - p)`` as in
``F.dropout``.

Examples:
    >>> import torch
    >>> x = torch.ones(4, 6)
    >>> ids = torch.tensor([10, 11, 12, 13])
    >>> a = counter_dropout(x, ids, p=0.5, seed=0, epoch=3, layer=0)
    >>> b = counter_dropout(x[2:], ids[2:], p=0.5, seed=0, epoch=3, layer=0)
    >>> bool(torch.equal(a[2:], b))            # a row's mask depends on its id only
    True
    >>> sorted(set(a.flatten().tolist()))      # dropped, or scaled by 1 / (1 - p)
    [0.0, 2.0]
    >>> c = counter_dropout(x, ids, p=0.5, seed=0, epoch=4, layer=0)
    >>> bool(torch.equal(a, c))                # a new epoch draws a new mask
    False
"""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np
import torch

_M32 = 0xFFFFFFFF
_MUL = 0x045D9F3B  # < 2^27: h * _MUL stays below 2^59 for 32-bit h
_COL = 0x09E3779B  # spreads column indices before mixing
_BITS = 24  # resolution of the keep probability
_BLOCK = 1 << 18  # elements hashed at once (torch path)
_LOW = (1 << _BITS) - 1


def _mix(h: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer finaliser on int64 tensors holding values in [0, 2^32)."""
    h = ((h >> 16) ^ h) * _MUL & _M32
    h = ((h >> 16) ^ h) * _MUL & _M32
    return (h >> 16) ^ h


def _mix_int(h: int) -> int:
    h = (((h >> 16) ^ h) * _MUL) & _M32
    h = (((h >> 16) ^ h) * _MUL) & _M32
    return (h >> 16) ^ h


def stream_key(seed: int, epoch: int, layer: int) -> int:
    """The 32-bit key of one (seed, epoch, layer) mask stream."""
    key = _mix_int(seed & _M32)
    for word in (seed >> 32, epoch, layer):
        key = _mix_int(key ^ (word & _M32))
    return key


@numba.njit(cache=True, inline="always")
def _mix_nb(h: int) -> int:  # pragma: no cover - numba
    h = (((h >> 16) ^ h) * _MUL) & _M32
    h = (((h >> 16) ^ h) * _MUL) & _M32
    return (h >> 16) ^ h


@numba.njit(cache=True, inline="always")
def _row_key(key: int, v: int) -> int:  # pragma: no cover - numba
    row = _mix_nb(key ^ (v & _M32))
    if v > _M32:
        row = _mix_nb(row ^ (v >> 32))
    return row


# The kernels run on the calling thread (nogil, so other threads run meanwhile).
# A prange version over rows (parallel=True) gave the same bits but, beside
# torch's own OpenMP threads on a busy 2-core machine, made the Cora epoch
# 219 ms instead of 13 ms (numba's spinning workers starve torch's).


@numba.njit(cache=True, nogil=True)
def _mask_cpu(
    ids: np.ndarray, cols: np.ndarray, key: int, threshold: int, out: np.ndarray
) -> None:  # pragma: no cover - numba
    for i in range(ids.shape[0]):
        row = _row_key(key, ids[i])
        for j in range(cols.shape[0]):
            out[i, j] = (_mix_nb(row ^ cols[j]) & _LOW) >= threshold


@numba.njit(cache=True, nogil=True)
def _dropout_cpu(
    x: np.ndarray,
    ids: np.ndarray,
    cols: np.ndarray,
    key: int,
    threshold: int,
    scale: np.float32,
    out: np.ndarray,
) -> None:  # pragma: no cover - numba
    """``out = x * mask / (1 - p)`` in one pass (``out`` must not overlap ``x``).

    Forward applies it to the features and backward to their gradient (the
    factor is its own derivative), so no mask is ever stored.
    """
    for i in range(ids.shape[0]):
        row = _row_key(key, ids[i])
        for j in range(cols.shape[0]):
            keep = (_mix_nb(row ^ cols[j]) & _LOW) >= threshold
            out[i, j] = x[i, j] * scale if keep else x[i, j] * np.float32(0.0)


@numba.njit(cache=True, nogil=True)
def _scale_cpu(
    x: np.ndarray,
    ids: np.ndarray,
    cols: np.ndarray,
    key: int,
    threshold: int,
    scale: np.float32,
) -> None:  # pragma: no cover - numba
    """``_dropout_cpu`` in place (``out`` is ``x``).

    A kernel of its own: with two arguments that alias, LLVM's runtime overlap
    check fails and the loop runs unvectorised (measured 7x slower).
    """
    for i in range(ids.shape[0]):
        row = _row_key(key, ids[i])
        for j in range(cols.shape[0]):
            keep = (_mix_nb(row ^ cols[j]) & _LOW) >= threshold
            x[i, j] = x[i, j] * scale if keep else x[i, j] * np.float32(0.0)


def _column_keys(width: int, device: torch.device) -> torch.Tensor:
    return _mix(torch.arange(width, dtype=torch.int64, device=device) * _COL & _M32)


@functools.lru_cache(maxsize=16)
def _column_keys_np(width: int) -> np.ndarray:
    """``_column_keys`` on CPU as a read-only array, computed once per width."""
    cols = _column_keys(width, torch.device("cpu")).numpy()
    cols.setflags(write=False)
    return cols


def _ids_np(ids: torch.Tensor) -> np.ndarray:
    return ids.to(torch.int64).contiguous().numpy()


def keep_mask(
    ids: torch.Tensor, width: int, p: float, *, seed: int, epoch: int, layer: int
) -> torch.Tensor:
    """Bool ``[len(ids), width]``: which elements of these rows dropout keeps.

    Args:
        ids: int64 global ids of the rows.
        width: features per row.
        p: drop probability, ``0 <= p < 1``.
        seed: the run's seed.
        epoch: the epoch (a fresh mask every epoch).
        layer: the layer whose input is masked (a fresh mask per layer).

    Returns:
        The keep mask, on ``ids``' device.
    """
    key = stream_key(seed, epoch, layer)
    ids = ids.to(torch.int64)
    threshold = round(p * (1 << _BITS))
    out = torch.empty((ids.shape[0], width), dtype=torch.bool, device=ids.device)
    if ids.device.type == "cpu":  # a numba kernel: no int64 temporaries at all
        _mask_cpu(_ids_np(ids), _column_keys_np(width), key, threshold, out.numpy())
        return out
    cols = _column_keys(width, ids.device)
    return _keep_mask_torch(ids, cols, key, threshold, out)


def _keep_mask_torch(
    ids: torch.Tensor,
    cols: torch.Tensor,
    key: int,
    threshold: int,
    out: torch.Tensor,
) -> torch.Tensor:
    """The same bits as ``_mask_cpu``, with torch ops (CUDA; tests on CPU)."""
    # Rows in blocks: the int64 hash temporaries stay a few MiB whatever the size.
    step = max(1, _BLOCK // max(cols.shape[0], 1))
    for lo in range(0, ids.shape[0], step):
        block = ids[lo : lo + step]
        rows = _mix(key ^ (block & _M32))
        if block.numel() and int(block.max()) > _M32:  # ids past 2^32: per row
            rows = torch.where(block > _M32, _mix(rows ^ (block >> 32)), rows)
        bits = _mix(rows.unsqueeze(1) ^ cols.unsqueeze(0)) & _LOW
        torch.ge(bits, threshold, out=out[lo : lo + step])
    return out


def scale_rows_(
    x: torch.Tensor, ids: torch.Tensor, *, p: float, seed: int, epoch: int, layer: int
) -> torch.Tensor:
    """Multiply ``x`` in place by the dropout factor ``mask / (1 - p)``; return it.

    Forward applies it to loaded rows and backward to their gradients (the
    factor is its own derivative), without a mask-sized temporary on CPU.
    """
    if p == 0.0 or x.shape[0] == 0:
        return x
    scale = 1.0 / (1.0 - p)
    if x.device.type == "cpu" and x.dtype == torch.float32 and x.is_contiguous():
        key = stream_key(seed, epoch, layer)
        threshold = round(p * (1 << _BITS))
        cols = _column_keys_np(x.shape[1])
        xs = x.numpy()
        _scale_cpu(xs, _ids_np(ids), cols, key, threshold, np.float32(scale))
        return x
    step = max(1, _BLOCK // max(x.shape[1], 1))
    for lo in range(0, x.shape[0], step):
        mask = keep_mask(
            ids[lo : lo + step], x.shape[1], p, seed=seed, epoch=epoch, layer=layer
        )
        block = x[lo : lo + step]
        block.mul_(mask.to(x.dtype)).mul_(scale)
    return x


def _apply_cpu(x: torch.Tensor, ids: np.ndarray, p: float, key: int) -> torch.Tensor:
    """A new tensor ``x * mask / (1 - p)`` (CPU, float32, contiguous ``x``)."""
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    threshold = round(p * (1 << _BITS))
    scale = np.float32(1.0 / (1.0 - p))
    cols = _column_keys_np(x.shape[1])
    _dropout_cpu(x.numpy(), ids, cols, key, threshold, scale, out.numpy())
    return out


class _CounterDropout(torch.autograd.Function):
    """Fused mask-and-scale on CPU; backward rehashes instead of saving a mask.

    Hashing costs about as much as reading a saved bool mask would, and saving
    none keeps a mask-sized tensor (1 byte per element) out of autograd's
    saved set.
    """

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, ids: torch.Tensor, p: float, key: int
    ) -> torch.Tensor:
        ids64 = ids.to(torch.int64).contiguous()
        ctx.save_for_backward(ids64)
        ctx.p, ctx.key = p, key
        return _apply_cpu(x, ids64.numpy(), p, key)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        (ids64,) = ctx.saved_tensors
        if grad.dtype != torch.float32 or not grad.is_contiguous():
            grad = grad.to(torch.float32).contiguous()
        # The factor mask / (1 - p) is its own derivative: the same kernel.
        return _apply_cpu(grad, ids64.numpy(), ctx.p, ctx.key), None, None, None


def counter_dropout(
    x: torch.Tensor,
    ids: torch.Tensor,
    *,
    p: float,
    seed: int,
    epoch: int,
    layer: int,
) -> torch.Tensor:
    """Dropout of ``x`` (rows ``ids``) with the counter-based mask; differentiable.

    Args:
        x: ``[rows, width]`` features.
        ids: int64 ``[rows]`` global ids of ``x``'s rows.
        p: drop probability (0 returns ``x`` itself).
        seed: the run's seed.
        epoch: the epoch.
        layer: the layer whose input ``x`` is.

    Returns:
        ``x * mask / (1 - p)`` (the same values on every device).
    """
    if p == 0.0:
        return x
    fused = x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() == 2
    if fused and x.is_contiguous():
        key = stream_key(seed, epoch, layer)
        result: torch.Tensor = _CounterDropout.apply(x, ids, p, key)
        return result
    mask = keep_mask(ids, x.shape[1], p, seed=seed, epoch=epoch, layer=layer)
    return x * mask.to(x.dtype) * (1.0 / (1.0 - p))
