"""Open dataset directories: memory-mapped arrays, verified against the manifest.

Opening checks that every file named by the manifest exists with the recorded size
and holds an array of the recorded dtype and shape; ``verify=True`` also compares
SHA-256 checksums (reads every byte, so it is opt-in). Every failure is a
:class:`DatasetError` naming the file.

Examples:
    >>> import tempfile, numpy as np
    >>> from strata.storage.csr import CSRGraph
    >>> from strata.storage.dataset.model import GraphDataset
    >>> from strata.storage.dataset.writer import save_arrays, save_dataset
    >>> d = tempfile.mkdtemp()
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2]))
    >>> _ = save_dataset(GraphDataset(g, {"y": np.array([0, 1, 0])}, name="p"), d)
    >>> ds = open_dataset(d, verify=True)
    >>> ds.name, ds.graph.num_edges, ds.y.tolist()
    ('p', 2, [0, 1, 0])
    >>> _ = save_arrays(d, "partition/k2", {"owner": np.array([0, 1, 1])})
    >>> load_arrays(d, "partition/k2")["owner"].tolist()
    [0, 1, 1]
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from strata.storage.csr import CSRGraph
from strata.storage.dataset.codec import file_sha256, read_array
from strata.storage.dataset.manifest import ArrayEntry, Manifest, read_manifest
from strata.storage.dataset.model import GraphDataset
from strata.storage.errors import DatasetError, GraphError

T = TypeVar("T")
_RETRIES = 3  # a concurrent writer may replace the manifest while we open files


def read_entry(
    directory: Path, entry: ArrayEntry, *, verify: bool = False
) -> np.ndarray:
    """Map one manifest entry (checking its checksum when ``verify``)."""
    path = directory / entry.file
    array = read_array(path, entry.dtype, entry.shape, entry.nbytes)
    if verify:
        digest = file_sha256(path)
        if digest != entry.sha256:
            raise DatasetError.build(
                str(path),
                "open_dataset",
                f"sha256 {entry.sha256[:16]}... (manifest.json)",
                f"{digest[:16]}...",
                "the file was modified after it was saved",
            )
    return array


def _with_retry(directory: Path, load: Callable[[Manifest], T]) -> T:
    """Run ``load(manifest)``; if a writer replaced the manifest meanwhile, retry."""
    manifest = read_manifest(directory)
    for attempt in range(_RETRIES):
        try:
            return load(manifest)
        except DatasetError:
            latest = read_manifest(directory)
            if latest.version == manifest.version or attempt == _RETRIES - 1:
                raise
            manifest = latest
    raise AssertionError("unreachable")  # pragma: no cover


def _open(directory: Path, manifest: Manifest, verify: bool) -> GraphDataset:
    if "indptr" not in manifest.graph or manifest.num_nodes is None:
        raise DatasetError.build(
            str(directory),
            "open_dataset",
            "a dataset with a graph",
            "only array groups",
            "load its groups with load_arrays",
        )
    graph_arrays = {
        k: read_entry(directory, e, verify=verify) for k, e in manifest.graph.items()
    }
    try:
        graph = CSRGraph(num_nodes=manifest.num_nodes, **graph_arrays)
    except (GraphError, TypeError) as err:
        raise DatasetError.build(
            str(directory), "open_dataset", "valid CSR arrays", str(err)
        ) from err
    tables = {
        table: {
            name: read_entry(directory, entry, verify=verify)
            for name, entry in manifest.tables.get(table, {}).items()
        }
        for table in ("node", "edge")
    }
    try:
        return GraphDataset(
            graph,
            node_data=tables["node"],
            edge_data=tables["edge"],
            name=manifest.name,
            meta=manifest.meta,
        )
    except DatasetError as err:
        raise DatasetError.build(
            str(directory), "open_dataset", "consistent tables", str(err)
        ) from err


def open_dataset(directory: str | Path, *, verify: bool = False) -> GraphDataset:
    """Open a dataset directory with every array memory-mapped (read-only).

    Args:
        directory: a directory written by :func:`save_dataset`.
        verify: also check every file's SHA-256 against the manifest.

    Returns:
        The dataset; its arrays are read-only views of the mapped files.

    Raises:
        DatasetError: naming the file that is missing, truncated, tampered with or
            inconsistent with the manifest.
    """
    path = Path(directory)

    def load(manifest: Manifest) -> GraphDataset:
        return _open(path, manifest, verify)

    return _with_retry(path, load)


def load_arrays(
    directory: str | Path, group: str, *, verify: bool = False
) -> dict[str, np.ndarray]:
    """Load one auxiliary array group (memory-mapped, read-only).

    Args:
        directory: the dataset directory.
        group: the group name given to :func:`save_arrays`.
        verify: also check SHA-256 checksums.

    Returns:
        The arrays by name; the group's JSON meta is
        ``read_manifest(directory).groups[group].meta``.

    Raises:
        DatasetError: if the group does not exist or a file is damaged.
    """
    path = Path(directory)

    def load(manifest: Manifest) -> dict[str, np.ndarray]:
        if group not in manifest.groups:
            raise DatasetError.build(
                "group",
                "load_arrays",
                f"one of {sorted(manifest.groups)}",
                repr(group),
            )
        entries = manifest.groups[group].arrays
        return {k: read_entry(path, e, verify=verify) for k, e in entries.items()}

    return _with_retry(path, load)


def verify_dataset(directory: str | Path) -> Manifest:
    """Check every file of a dataset directory (size, schema, SHA-256).

    Args:
        directory: the dataset directory.

    Returns:
        The manifest, when every file checks out.

    Raises:
        DatasetError: listing every damaged file at once.
    """
    path = Path(directory)
    manifest = read_manifest(path)
    problems = []
    for entry in manifest.entries().values():
        try:
            read_entry(path, entry, verify=True)
        except DatasetError as err:
            problems.append(str(err))
    if problems:
        raise DatasetError("; ".join(problems))
    return manifest
