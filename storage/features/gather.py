"""Row gathers by id: validated ids, preallocated output, parallel numba kernels.

Two kernels fill a preallocated (optionally pinned) output tensor in parallel:

* :func:`gather_rows` copies rows of an in-memory (or memory-mapped) array;
* :func:`pread_rows` reads each row from a file with ``pread(2)`` at its offset.

Rows are copied as opaque bytes (LLVM vectorises the copy loop), so one compiled
kernel serves every dtype, float16 and bool included, and int32 ids are widened to
int64: few specialisations keep cold-start compilation short.

Why ``pread`` for stores on disk: reading rows through a memory map maps whole
page-cache folios into the process (up to 2 MB per touched row on kernels with large
folios), so 100k random rows of a 1 GB table map all of it into the resident set.
``pread`` copies just the rows, which bounds memory by the output.

Examples:
    >>> import numpy as np
    >>> src = np.arange(12, dtype=np.float32).reshape(4, 3)
    >>> ids = validate_ids([3, 0], num_rows=4, where="example")
    >>> out = alloc_rows(2, (3,), src.dtype)
    >>> gather_rows(src, ids, out).tolist()
    [[9.0, 10.0, 11.0], [0.0, 1.0, 2.0]]
    >>> validate_ids([4], num_rows=4, where="example")
    Traceback (most recent call last):
    ...
    strata.storage.errors.FeatureError: ids in example: expected ids < 4 (the number of rows), got 4 at position 0. Hint: ids index rows of the table
"""  # noqa: E501

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
import torch

from strata.storage.csr import as_tensor
from strata.storage.errors import FeatureError

IdsLike = torch.Tensor | np.ndarray | Sequence[int]
# Below this many bytes, starting threads costs more than the copy.
_SERIAL_BELOW = 1 << 16


@numba.njit(parallel=True, nogil=True, cache=True)
def _gather_parallel(
    src: np.ndarray, ids: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover
    for i in numba.prange(ids.shape[0]):
        out[i, :] = src[ids[i], :]


@numba.njit(nogil=True, cache=True)
def _gather_serial(
    src: np.ndarray, ids: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover
    for i in range(ids.shape[0]):
        out[i, :] = src[ids[i], :]


def validate_ids(ids: IdsLike, num_rows: int, where: str) -> np.ndarray:
    """Check that ``ids`` is a 1-D integer id array in ``[0, num_rows)``.

    Args:
        ids: a tensor (moved to CPU), numpy array or sequence of ints.
        num_rows: the table's row count.
        where: names the caller in errors.

    Returns:
        The ids as a numpy int32 or int64 array (no copy when already one).

    Raises:
        FeatureError: on a non-integer dtype (bool included), not 1-D, or an id out
            of range (the first offending position is named).
    """
    if isinstance(ids, torch.Tensor):
        if (
            ids.dtype.is_floating_point
            or ids.dtype.is_complex
            or ids.dtype == torch.bool
        ):
            raise FeatureError.build(
                "ids", where, "an integer tensor", f"dtype {ids.dtype}"
            )
        array = ids.detach().cpu().numpy()
    else:
        array = np.asarray(ids)
        if array.size == 0 and array.dtype == np.float64:  # [] parses as float64
            array = array.astype(np.int64)
    if array.dtype.kind not in "iu":
        raise FeatureError.build(
            "ids",
            where,
            "an integer array",
            f"dtype {array.dtype}",
            "ids must be int32/int64 row numbers",
        )
    if array.ndim != 1:
        raise FeatureError.build("ids", where, "a 1-D array", f"shape {array.shape}")
    if array.dtype not in (np.int32, np.int64):
        if (
            array.dtype == np.uint64
            and array.size
            and array.max() > np.iinfo(np.int64).max
        ):
            raise FeatureError.build(
                "ids", where, f"ids < {num_rows}", str(array.max())
            )
        array = array.astype(np.int64)
    if array.size:
        low, high = int(array.min()), int(array.max())
        if low < 0:
            pos = int(np.argmax(array < 0))
            raise FeatureError.build(
                "ids",
                where,
                "ids >= 0",
                f"{low} at position {pos}",
                "negative ids do not count from the end here",
            )
        if high >= num_rows:
            pos = int(np.argmax(array >= num_rows))
            raise FeatureError.build(
                "ids",
                where,
                f"ids < {num_rows} (the number of rows)",
                f"{int(array[pos])} at position {pos}",
                "ids index rows of the table",
            )
    return np.ascontiguousarray(array)


def alloc_rows(
    n: int, row_shape: tuple[int, ...], dtype: Any, *, pin_memory: bool = False
) -> torch.Tensor:
    """Allocate an uninitialised ``(n, *row_shape)`` CPU tensor.

    ``dtype`` is a numpy or torch dtype. The tensor is pinned (page-locked, for fast
    host-to-device copies) only when ``pin_memory`` is set and CUDA is available.
    """
    torch_dtype = dtype if isinstance(dtype, torch.dtype) else torch_dtype_of(dtype)
    pin = pin_memory and torch.cuda.is_available()
    return torch.empty((n, *row_shape), dtype=torch_dtype, pin_memory=pin)


def torch_dtype_of(dtype: Any) -> torch.dtype:
    """The torch dtype of a numpy dtype (via a zero-size array)."""
    return as_tensor(np.empty(0, dtype=dtype)).dtype


def _byte_rows(array: np.ndarray) -> np.ndarray:
    """View a C-contiguous array as ``(rows, row_bytes)`` uint8."""
    return array.reshape(array.shape[0], -1).view(np.uint8)


def gather_rows(src: np.ndarray, ids: np.ndarray, out: torch.Tensor) -> torch.Tensor:
    """Copy ``src[ids]`` into ``out`` with a parallel numba kernel.

    Args:
        src: a C-contiguous array of shape ``(num_rows, *row_shape)``.
        ids: validated ids (see :func:`validate_ids`).
        out: a contiguous CPU tensor of shape ``(len(ids), *row_shape)`` and the
            same item size as ``src``.

    Returns:
        ``out``.
    """
    n = ids.shape[0]
    if n == 0 or out.numel() == 0:
        return out
    source = _byte_rows(np.ascontiguousarray(src))
    target = out.view(torch.uint8).numpy().reshape(n, -1)
    kernel = _gather_serial if target.size < _SERIAL_BELOW else _gather_parallel
    kernel(source, ids.astype(np.int64, copy=False), target)
    return out


# ---------------------------------------------------------------- pread
# libc's pread, called from nopython code by symbol name (so the kernel caches).
# Addresses travel as int64: pointers and 64-bit integers share registers in the
# x86-64 and AArch64 calling conventions.
_pread = numba.types.ExternalFunction(
    "pread",
    numba.types.int64(
        numba.types.int32, numba.types.int64, numba.types.uint64, numba.types.int64
    ),
)


@numba.njit(parallel=True, nogil=True, cache=True)
def _pread_kernel(
    fd: np.int32,
    offset: np.int64,
    row_bytes: np.int64,
    ids: np.ndarray,
    out_addr: np.int64,
    failed: np.ndarray,
) -> None:  # pragma: no cover - numba
    for i in numba.prange(ids.shape[0]):
        done = 0
        while done < row_bytes:
            got = _pread(  # type: ignore[call-overload]
                fd,
                out_addr + i * row_bytes + done,
                row_bytes - done,
                offset + ids[i] * row_bytes + done,
            )
            if got <= 0:
                failed[i] = 1
                break
            done += got


def pread_available() -> bool:
    """Whether :func:`pread_rows` can run here (a POSIX libc with ``pread``)."""
    return os.name == "posix" and sys.maxsize > 2**32


def pread_rows(
    fd: int, offset: int, row_bytes: int, ids: np.ndarray, out: torch.Tensor, where: str
) -> torch.Tensor:
    """Read rows ``ids`` of a table stored at byte ``offset`` of file ``fd``.

    Args:
        fd: an open file descriptor.
        offset: byte offset of row 0 in the file.
        row_bytes: bytes per row.
        ids: validated ids.
        out: a contiguous CPU tensor with ``row_bytes`` bytes per row.
        where: names the caller in errors.

    Returns:
        ``out``.

    Raises:
        FeatureError: if a read came back short (the file shrank underneath).
    """
    n = ids.shape[0]
    if n == 0 or row_bytes == 0:
        return out
    failed = np.zeros(n, dtype=np.uint8)
    _pread_kernel(
        np.int32(fd),
        np.int64(offset),
        np.int64(row_bytes),
        ids.astype(np.int64, copy=False),
        np.int64(out.data_ptr()),
        failed,
    )
    if failed.any():
        pos = int(np.argmax(failed))
        raise FeatureError.build(
            "file",
            where,
            f"{row_bytes} readable bytes for row {int(ids[pos])}",
            "a short read",
            "the file changed underneath the store; reopen it",
        )
    return out
