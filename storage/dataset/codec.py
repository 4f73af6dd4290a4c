"""One numpy array <-> one Arrow IPC file, memory-mapped on read.

Every stored array is a single-column Arrow IPC *file* (the random-access format),
uncompressed so it can be memory-mapped and viewed as numpy without a copy:

* 1-D numeric arrays are a primitive column;
* ``(N, D...)`` arrays are a ``fixed_size_list<D * ...>`` column (row-major), so rows
  stay contiguous and one row is one list entry;
* ``bool`` is stored as ``uint8`` 0/1, because Arrow packs booleans into bits and bits
  cannot be viewed as a numpy bool array;
* strings (numpy ``U``) are a ``large_string`` column, read back into memory (only
  small id maps use them).

The manifest records the numpy dtype and full shape, so the reader can restore them
and check the file against them.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from strata.storage.errors import DatasetError

SUPPORTED_KINDS = "biuf"  # bool, signed, unsigned, float; plus "U" strings
_COLUMN = "values"
_CHUNK = 1 << 22  # bytes hashed per read


def dtype_name(array: np.ndarray) -> str:
    """The manifest's name for ``array``'s dtype (``float32``, ``bool``, ``str``)."""
    if array.dtype.kind == "U":
        return "str"
    if array.dtype.kind not in SUPPORTED_KINDS or array.dtype.byteorder == ">":
        raise DatasetError.build(
            "dtype",
            "dataset writer",
            "a native-endian bool, integer, float or str array",
            str(array.dtype),
        )
    return array.dtype.name


def _to_arrow(array: np.ndarray) -> pa.Array:
    if array.dtype.kind == "U":
        return pa.array(array.reshape(-1).tolist(), type=pa.large_string())
    flat = np.ascontiguousarray(array).reshape(-1)
    if flat.dtype == np.bool_:
        flat = flat.view(np.uint8)
    width = int(np.prod(array.shape[1:], dtype=np.int64))
    values = pa.array(flat)
    if array.ndim == 1 or width == 0:
        # Zero-width rows cannot be a fixed_size_list; the manifest keeps the shape.
        return values
    return pa.FixedSizeListArray.from_arrays(values, width)


def fsync_path(path: Path) -> None:
    """Flush a file or a directory (its entries) to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_array(path: Path, array: np.ndarray) -> tuple[int, str]:
    """Write ``array`` to a new Arrow IPC file at ``path`` and fsync it.

    Args:
        path: destination; must not exist (writers use fresh, unique names).
        array: the array, 1-D or more, of a supported dtype.

    Returns:
        ``(file size in bytes, sha256 hex digest)``.
    """
    dtype_name(array)
    column = _to_arrow(array)
    batch = pa.record_batch([column], names=[_COLUMN])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as w:
        w.write_batch(batch)
    fsync_path(path)
    return path.stat().st_size, file_sha256(path)


@dataclass(frozen=True, slots=True)
class MappedArray:
    """A memory-mapped stored array and where its bytes sit in the file.

    Attributes:
        array: the read-only numpy view (in memory for ``str`` arrays).
        offset: byte offset of element 0 in the file (``None`` for ``str``), which
            lets readers ``pread`` rows instead of faulting in mapped pages.
    """

    array: np.ndarray
    offset: int | None


def read_array(
    path: Path, dtype: str, shape: tuple[int, ...], expected_bytes: int
) -> np.ndarray:
    """Memory-map one stored array and view it as numpy (read-only, no copy).

    See :func:`map_array`, which this wraps.
    """
    return map_array(path, dtype, shape, expected_bytes).array


def map_array(
    path: Path, dtype: str, shape: tuple[int, ...], expected_bytes: int
) -> MappedArray:
    """Memory-map one stored array, checking it against its manifest entry.

    Args:
        path: the Arrow IPC file.
        dtype: the manifest dtype name.
        shape: the manifest shape.
        expected_bytes: the manifest's file size; a different size means the file
            was truncated or replaced.

    Returns:
        The read-only array of ``dtype`` and ``shape`` and its offset in the file.

    Raises:
        DatasetError: naming the file if it is missing, truncated, unreadable, or
            does not hold an array of that dtype and shape.
    """
    where = "open_dataset"
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise DatasetError.build(
            str(path),
            where,
            "the file named in manifest.json",
            "no such file",
            "the dataset directory lost a file; restore it or save again",
        ) from None
    if size != expected_bytes:
        raise DatasetError.build(
            str(path),
            where,
            f"{expected_bytes} bytes (manifest.json)",
            f"{size} bytes",
            "the file was truncated or replaced",
        )
    try:
        with open(path, "rb") as f:
            mapping = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        buffer = pa.py_buffer(mapping)
        column = pa.ipc.open_file(buffer).get_batch(0).column(0)
    except (pa.ArrowException, OSError, ValueError, IndexError) as err:
        raise DatasetError.build(
            str(path),
            where,
            "a readable Arrow IPC file",
            f"{type(err).__name__}: {err}",
        ) from err
    rows = shape[0]
    if dtype == "str":
        out = np.array(column.to_pylist(), dtype=str).reshape(shape)
        out.flags.writeable = False
        return MappedArray(out, None)
    np_dtype = np.dtype(dtype)
    stored = np.dtype(np.uint8) if np_dtype == np.bool_ else np_dtype
    if isinstance(column, pa.FixedSizeListArray):
        values = column.flatten() if len(column) == rows else None
    else:
        values = column
    count = int(np.prod(shape, dtype=np.int64))
    if values is None or len(values) != count or values.null_count:
        raise DatasetError.build(
            str(path),
            where,
            f"an array of shape {shape}",
            f"{len(column)} rows of {column.type}",
        )
    try:
        flat = values.to_numpy(zero_copy_only=True)
    except pa.ArrowException as err:
        raise DatasetError.build(
            str(path), where, f"a {dtype} column", str(column.type)
        ) from err
    if flat.dtype != stored:
        raise DatasetError.build(str(path), where, f"a {dtype} column", str(flat.dtype))
    mapped: np.ndarray = np.asarray(flat).view(np_dtype).reshape(shape)
    mapped.flags.writeable = False
    offset = flat.ctypes.data - buffer.address if count else 0
    return MappedArray(mapped, offset)
