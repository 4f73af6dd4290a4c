"""Datasets: the in-memory :class:`GraphDataset` and the on-disk directory format.

A dataset directory holds ``manifest.json`` and one Arrow IPC file per array
(graph CSR arrays, ``node``/``edge`` feature columns, auxiliary array groups), all
memory-mapped on open. Writes are crash-safe transactions (see
:mod:`strata.storage.dataset.writer`); reads verify sizes and schema, and checksums on
request (see :mod:`strata.storage.dataset.reader`).
"""

from strata.storage.dataset.manifest import (
    ArrayEntry,
    GroupEntry,
    Manifest,
    read_manifest,
)
from strata.storage.dataset.model import GraphDataset
from strata.storage.dataset.reader import load_arrays, open_dataset, verify_dataset
from strata.storage.dataset.writer import (
    delete_arrays,
    save_arrays,
    save_columns,
    save_dataset,
)

__all__ = [
    "ArrayEntry",
    "GraphDataset",
    "GroupEntry",
    "Manifest",
    "delete_arrays",
    "load_arrays",
    "open_dataset",
    "read_manifest",
    "save_arrays",
    "save_columns",
    "save_dataset",
    "verify_dataset",
]
