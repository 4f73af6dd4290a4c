"""The Arrow-backed :class:`FeatureStore` over a dataset directory.

Keys are ``Key("node", attr)`` and ``Key("edge", attr)``: the columns of the dataset's
``node`` and ``edge`` tables. Files are memory-mapped when first used; ``put`` writes a
new column file and swaps the manifest atomically
(:func:`strata.storage.dataset.save_columns`), so a failed ``put`` leaves the stored
data as it was.

Gathers read rows in one of two ways (``access``):

* ``"pread"`` (default): a parallel numba kernel ``pread``s each row from the file
  into the output tensor. Memory use is the output only, however large the table.
* ``"mmap"``: the same kernel as the in-memory store, reading the mapped pages.
  Faster once the pages are mapped, but touched pages count toward the process's
  resident set (on kernels with large page-cache folios, up to 2 MB per row read).

Examples:
    >>> import tempfile, numpy as np
    >>> from strata.storage.csr import CSRGraph
    >>> from strata.storage.dataset import GraphDataset, save_dataset
    >>> d = tempfile.mkdtemp()
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2]))
    >>> x = np.arange(6, dtype=np.float32).reshape(3, 2)
    >>> _ = save_dataset(GraphDataset(g, {"x": x}), d)
    >>> store = ArrowFeatureStore(d)
    >>> store.get(("node", "x"), [2, 0]).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    >>> store.put(("node", "y"), np.array([1, 0, 1]))
    >>> ArrowFeatureStore(d).get(("node", "y")).tolist()
    [1, 0, 1]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from strata.storage.csr import as_tensor
from strata.storage.dataset.codec import MappedArray, file_sha256, map_array
from strata.storage.dataset.manifest import TABLES, ArrayEntry, Manifest, read_manifest
from strata.storage.dataset.writer import save_columns
from strata.storage.errors import DatasetError, FeatureError
from strata.storage.features.gather import (
    gather_rows,
    pread_available,
    pread_rows,
    torch_dtype_of,
)
from strata.storage.features.store import FeatureSchema, FeatureStore, Key

Access = Literal["pread", "mmap"]


class ArrowFeatureStore(FeatureStore):
    """Feature columns of a dataset directory, memory-mapped, gathered by row id."""

    def __init__(
        self, directory: str | Path, *, access: Access = "pread", verify: bool = False
    ) -> None:
        """Open the store (reads the manifest; files are mapped on first use).

        Args:
            directory: a dataset directory with a graph.
            access: ``"pread"`` (bounded memory) or ``"mmap"`` (see module doc).
            verify: check each file's SHA-256 when it is first mapped.

        Raises:
            DatasetError: if the directory is not a dataset with a graph.
        """
        if access not in ("pread", "mmap"):
            raise FeatureError.build(
                "access", "ArrowFeatureStore", "'pread' or 'mmap'", repr(access)
            )
        self.directory = Path(directory)
        self.access: Access = access if pread_available() else "mmap"
        self.verify = verify
        self._manifest = read_manifest(self.directory)
        if self._manifest.num_nodes is None:
            raise DatasetError.build(
                str(self.directory),
                "ArrowFeatureStore",
                "a dataset with a graph",
                "only array groups",
            )
        self._mapped: dict[Key, tuple[ArrayEntry, MappedArray, int | None]] = {}

    @property
    def manifest(self) -> Manifest:
        """The manifest this store currently reads."""
        return self._manifest

    def _entries(self) -> dict[Key, ArrayEntry]:
        return {
            Key(table, name): entry
            for table in TABLES
            for name, entry in self._manifest.tables.get(table, {}).items()
        }

    def _schema(self) -> dict[Key, FeatureSchema]:
        return {
            key: FeatureSchema(torch_dtype_of(np.dtype(e.dtype)), e.shape)
            for key, e in self._entries().items()
            if e.dtype != "str"
        }

    def _open(self, key: Key) -> tuple[MappedArray, int | None]:
        entry = self._entries()[key]
        cached = self._mapped.get(key)
        if cached is not None and cached[0] == entry:
            return cached[1], cached[2]
        if cached is not None:
            self._close_one(key)
        path = self.directory / entry.file
        mapped = map_array(path, entry.dtype, entry.shape, entry.nbytes)
        if self.verify and file_sha256(path) != entry.sha256:
            raise DatasetError.build(
                str(path),
                "ArrowFeatureStore",
                "the sha256 in manifest.json",
                "another checksum",
                "the file was modified after it was saved",
            )
        fd = os.open(path, os.O_RDONLY) if self.access == "pread" else None
        self._mapped[key] = (entry, mapped, fd)
        return mapped, fd

    def _get_all(self, key: Key) -> torch.Tensor:
        return as_tensor(self._open(key)[0].array)

    def _gather(self, key: Key, ids: np.ndarray, out: torch.Tensor) -> torch.Tensor:
        mapped, fd = self._open(key)
        if fd is None or mapped.offset is None:
            return gather_rows(mapped.array, ids, out)
        array = mapped.array
        row_bytes = array.itemsize * int(np.prod(array.shape[1:], dtype=np.int64))
        return pread_rows(fd, mapped.offset, row_bytes, ids, out, f"get({key})")

    def _put(self, key: Key, array: np.ndarray) -> None:
        if key.group not in TABLES:
            raise FeatureError.build(
                "key.group", "ArrowFeatureStore.put", f"one of {TABLES}", key.group
            )
        # save_columns checks row counts and writes crash-safely; NaN/inf were
        # already checked by FeatureStore.put, so do not scan twice.
        self._manifest = save_columns(
            self.directory, key.group, {key.attr: array}, allow_nonfinite=True
        )

    def refresh(self) -> None:
        """Re-read the manifest (to see columns another process added)."""
        self._manifest = read_manifest(self.directory)

    def _close_one(self, key: Key) -> None:
        _, _, fd = self._mapped.pop(key)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        """Close file descriptors (mapped arrays handed out stay valid)."""
        for key in list(self._mapped):
            self._close_one(key)

    def __del__(self) -> None:
        if hasattr(self, "_mapped"):
            self.close()

    def __repr__(self) -> str:
        keys = ", ".join(str(k) for k in self.keys())
        return f"ArrowFeatureStore({str(self.directory)!r}, {keys})"
