"""Crash-safe writes to a dataset directory.

Every change (a whole dataset, one feature column, one array group) is one
transaction, and a transaction never touches a file the current manifest references:

1. take an exclusive ``flock`` on ``<dir>/.lock`` (one writer at a time);
2. write each new array to a *fresh* file named ``<stem>.v<version>-<random>.arrow``
   and fsync it;
3. write the new manifest to ``manifest.json.tmp-<random>``, fsync it, rename it over
   ``manifest.json`` (atomic on POSIX) and fsync the directory;
4. delete the files no longer referenced (old versions, leftovers of killed writers).

A crash before step 3 leaves the previous manifest and all its files untouched (the
orphans are removed by the next successful write); a crash after it leaves the new
version complete. Readers that mapped old files keep their mappings (unlinking a
mapped file is safe on POSIX).

Examples:
    >>> import tempfile, numpy as np
    >>> from strata.storage.csr import CSRGraph
    >>> from strata.storage.dataset.model import GraphDataset
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2]))
    >>> d = tempfile.mkdtemp()
    >>> save_dataset(GraphDataset(g, {"x": np.ones((3, 2), np.float32)}), d).version
    1
    >>> save_arrays(d, "partition/k2", {"owner": np.array([0, 0, 1])},
    ...             meta={"k": 2}).version
    2
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from strata.storage._checks import describe_nonfinite, first_nonfinite
from strata.storage.dataset.codec import dtype_name, fsync_path, write_array
from strata.storage.dataset.manifest import (
    MANIFEST,
    TABLES,
    ArrayEntry,
    GroupEntry,
    Manifest,
    check_group,
    empty_manifest,
    read_manifest,
)
from strata.storage.dataset.model import GraphDataset, check_name
from strata.storage.errors import DatasetError, FeatureError

LOCK = ".lock"
_DATA_FILE = re.compile(r".+\.v\d+-[0-9a-f]{8}\.arrow")
_TMP_MANIFEST = re.compile(re.escape(MANIFEST) + r"\.tmp-[0-9a-f]{8}")


def _ours(name: str) -> bool:
    return name == LOCK or bool(
        _DATA_FILE.fullmatch(name) or _TMP_MANIFEST.fullmatch(name)
    )


class _Transaction:
    """Writes fresh files for one new manifest version; see the module docstring."""

    def __init__(self, directory: Path, where: str) -> None:
        self.directory = directory
        self.where = where
        self.written: list[Path] = []
        self.base = empty_manifest(_default_name(directory))
        self.version = 1

    def open(self) -> None:
        if (self.directory / MANIFEST).exists():
            self.base = read_manifest(self.directory)
        else:
            strangers = [p.name for p in self.directory.iterdir() if not _ours(p.name)]
            if strangers:
                raise DatasetError.build(
                    str(self.directory),
                    self.where,
                    "an empty directory or a dataset directory",
                    f"a directory holding {sorted(strangers)[:3]}",
                    "choose a new --out directory; Strata will not write among "
                    "other files",
                )
        self.version = self.base.version + 1

    def write(self, stem: str, array: np.ndarray) -> ArrayEntry:
        """Write one array under a fresh, version-unique name."""
        name = f"{stem}.v{self.version}-{secrets.token_hex(4)}.arrow"
        path = self.directory / name
        self.written.append(path)
        nbytes, digest = write_array(path, array)
        return ArrayEntry(name, dtype_name(array), tuple(array.shape), nbytes, digest)

    def commit(self, manifest: Manifest) -> Manifest:
        """Atomically make ``manifest`` current, then collect unreferenced files."""
        manifest = replace(manifest, version=self.version)
        try:
            text = json.dumps(manifest.to_json(), indent=1, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise DatasetError.build(
                "meta", self.where, "JSON-serialisable metadata", str(err)
            ) from err
        tmp = self.directory / f"{MANIFEST}.tmp-{secrets.token_hex(4)}"
        self.written.append(tmp)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.directory / MANIFEST)
        fsync_path(self.directory)
        self.written.clear()  # committed: nothing to roll back
        keep = manifest.files()
        for path in self.directory.iterdir():
            if path.name != LOCK and _ours(path.name) and path.name not in keep:
                path.unlink(missing_ok=True)
        return manifest

    def rollback(self) -> None:
        for path in self.written:
            path.unlink(missing_ok=True)


def _default_name(directory: Path) -> str:
    name = directory.resolve().name
    return name if re.fullmatch(r"[A-Za-z0-9_.\-]+", name) else "dataset"


@contextlib.contextmanager
def _transaction(directory: str | Path, where: str) -> Iterator[_Transaction]:
    path = Path(directory)
    created = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as err:
        raise DatasetError.build(
            str(path), where, "a directory", "a file", "choose another --out"
        ) from err
    except OSError as err:  # no such parent (under /proc), read-only, no access
        raise DatasetError.build(
            str(path),
            where,
            "a directory that can be created",
            f"{type(err).__name__}: {err.strerror or err}",
            "choose a directory you can write to.",
        ) from err
    if created:  # make the new directory's own entry durable too
        fsync_path(path.resolve().parent)
    with open(path / LOCK, "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        tx = _Transaction(path, where)
        try:
            tx.open()
            yield tx
        except BaseException:
            tx.rollback()
            raise
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def check_finite(
    array: np.ndarray, subject: str, where: str, allow_nonfinite: bool
) -> None:
    """Apply the non-finite policy (``strata.storage._checks``) to one array."""
    if allow_nonfinite:
        return
    index = first_nonfinite(array)
    if index is not None:
        raise FeatureError.build(
            subject,
            where,
            "finite values",
            describe_nonfinite(array, index),
            "pass allow_nonfinite=True to store NaN/inf on purpose",
        )


def save_dataset(
    dataset: GraphDataset, directory: str | Path, *, allow_nonfinite: bool = False
) -> Manifest:
    """Save a dataset as a new version of ``directory`` (created if missing).

    The graph, node and edge tables, name and meta are replaced; auxiliary array
    groups already stored (e.g. partition books) are kept.

    Args:
        dataset: what to save.
        directory: the dataset directory.
        allow_nonfinite: store NaN/inf in float arrays instead of rejecting them.

    Returns:
        The new manifest.

    Raises:
        FeatureError: on NaN/inf features (by default), naming row and column.
        DatasetError: if ``directory`` holds other files or a damaged manifest.
    """
    where = "save_dataset"
    tables = {"node": dataset.node_data, "edge": dataset.edge_data}
    for table, columns in tables.items():
        for col, array in columns.items():
            dtype_name(array)
            check_finite(array, f"{table}_data[{col!r}]", where, allow_nonfinite)
    g = dataset.graph
    with _transaction(directory, where) as tx:
        graph = {
            name: tx.write(f"graph.{name}", array)
            for name, array in (
                ("indptr", g.indptr),
                ("indices", g.indices),
                ("edge_weight", g.edge_weight),
                ("edge_ids", g.edge_ids),
            )
            if array is not None
        }
        written = {
            table: {c: tx.write(f"{table}.{c}", a) for c, a in cols.items()}
            for table, cols in tables.items()
        }
        manifest = Manifest(
            name=dataset.name,
            version=tx.version,
            num_nodes=g.num_nodes,
            num_edges=g.num_edges,
            graph=graph,
            tables=written,
            groups=tx.base.groups,
            meta=dict(dataset.meta),
        )
        return tx.commit(manifest)


def save_columns(
    directory: str | Path,
    table: str,
    columns: Mapping[str, np.ndarray],
    *,
    allow_nonfinite: bool = False,
) -> Manifest:
    """Add or replace columns of the ``node`` or ``edge`` table of a saved dataset.

    Args:
        directory: an existing dataset directory (with a graph).
        table: ``"node"`` or ``"edge"``.
        columns: arrays by name, one row per node (edge).
        allow_nonfinite: store NaN/inf instead of rejecting them.

    Returns:
        The new manifest.

    Raises:
        FeatureError: on a row-count mismatch or NaN/inf values.
        DatasetError: if the directory holds no graph.
    """
    where = "save_columns"
    if table not in TABLES:
        raise DatasetError.build("table", where, f"one of {TABLES}", repr(table))
    with _transaction(directory, where) as tx:
        base = tx.base
        rows = base.num_nodes if table == "node" else base.num_edges
        if rows is None:
            raise DatasetError.build(
                str(directory), where, "a dataset with a graph", "no graph saved yet"
            )
        for name, array in columns.items():
            check_name("column", name, where)
            if array.ndim == 0 or array.shape[0] != rows:
                raise FeatureError.build(
                    f"{table}/{name}", where, f"{rows} rows", f"shape {array.shape}"
                )
            dtype_name(array)
            check_finite(array, f"{table}/{name}", where, allow_nonfinite)
        new = {name: tx.write(f"{table}.{name}", a) for name, a in columns.items()}
        tables = {t: dict(c) for t, c in base.tables.items()}
        tables.setdefault(table, {}).update(new)
        return tx.commit(replace(base, tables=tables))


def save_arrays(
    directory: str | Path,
    group: str,
    arrays: Mapping[str, np.ndarray],
    *,
    meta: Mapping[str, Any] | None = None,
) -> Manifest:
    """Store a named group of arrays (replacing a group of that name) atomically.

    Groups hold derived data next to a dataset, such as a partition book under
    ``"partition/metis-k4"``; arrays in a group may have different lengths. The
    directory need not hold a graph.

    Args:
        directory: the dataset directory (created if missing).
        group: ``segment(/segment)*`` of ``[A-Za-z0-9_.-]``.
        arrays: numpy arrays by name (any supported dtype, 1-D or more).
        meta: JSON-serialisable metadata stored with the group.

    Returns:
        The new manifest.
    """
    where = "save_arrays"
    check_group(group, where)
    for name, array in arrays.items():
        check_name("array name", name, where)
        if not isinstance(array, np.ndarray) or array.ndim == 0:
            raise DatasetError.build(
                f"{group}/{name}", where, "a numpy array, 1-D or more", repr(array)
            )
        dtype_name(array)
    with _transaction(directory, where) as tx:
        stem = "group~" + group.replace("/", "~")
        entries = {name: tx.write(f"{stem}.{name}", a) for name, a in arrays.items()}
        groups = dict(tx.base.groups)
        groups[group] = GroupEntry(entries, dict(meta or {}))
        return tx.commit(replace(tx.base, groups=groups))


def delete_arrays(directory: str | Path, group: str) -> Manifest:
    """Remove an array group; raises :class:`DatasetError` if it does not exist."""
    where = "delete_arrays"
    check_group(group, where)
    with _transaction(directory, where) as tx:
        if group not in tx.base.groups:
            raise DatasetError.build(
                "group", where, f"one of {sorted(tx.base.groups)}", repr(group)
            )
        groups = {g: e for g, e in tx.base.groups.items() if g != group}
        return tx.commit(replace(tx.base, groups=groups))
