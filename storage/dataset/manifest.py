"""``manifest.json``: the one file that says what a dataset directory holds.

A dataset directory is valid exactly when its manifest parses and every file it names
exists with the recorded size (and, on request, SHA-256). The manifest is replaced
atomically by the writer, so it always describes one complete version.

Layout (format version 1)::

    {
      "format": "strata-dataset", "format_version": 1,
      "name": "cora", "version": 3,          # version counts saves
      "num_nodes": 2708, "num_edges": 10556,
      "meta": {...},                         # free JSON (num_classes, source spec)
      "graph": {"indptr": ENTRY, "indices": ENTRY, ["edge_weight", "edge_ids"]},
      "tables": {"node": {"x": ENTRY, "y": ENTRY, ...}, "edge": {...}},
      "groups": {"partition/metis-k4": {"meta": {...}, "arrays": {"owner": ENTRY}}}
    }
    ENTRY = {"file": "node.x.v3-1a2b3c4d.arrow", "dtype": "float32",
             "shape": [2708, 1433], "bytes": 15533290, "sha256": "..."}

``tables`` is the schema of every table: each column's dtype and shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strata.storage.errors import DatasetError

FORMAT = "strata-dataset"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
GRAPH_ARRAYS = ("indptr", "indices", "edge_weight", "edge_ids")
TABLES = ("node", "edge")
GROUP_PATTERN = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*")


@dataclass(frozen=True, slots=True)
class ArrayEntry:
    """One stored array: its file, numpy dtype name, shape, size and checksum."""

    file: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON object."""
        return {
            "file": self.file,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "bytes": self.nbytes,
            "sha256": self.sha256,
        }

    @classmethod
    def from_json(cls, raw: Any, where: str) -> ArrayEntry:
        """Parse and check one entry; ``where`` names it in errors."""
        try:
            entry = cls(
                file=str(raw["file"]),
                dtype=str(raw["dtype"]),
                shape=tuple(int(v) for v in raw["shape"]),
                nbytes=int(raw["bytes"]),
                sha256=str(raw["sha256"]),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise DatasetError.build(
                where, MANIFEST, "file, dtype, shape, bytes, sha256", repr(err)
            ) from err
        if "/" in entry.file or entry.file.startswith(".") or not entry.shape:
            raise DatasetError.build(
                where, MANIFEST, "a plain file name and a shape", repr(raw)
            )
        return entry


@dataclass(frozen=True, slots=True)
class GroupEntry:
    """An auxiliary group of named arrays (e.g. a partition book) with JSON meta."""

    arrays: Mapping[str, ArrayEntry]
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Manifest:
    """The parsed ``manifest.json`` of a dataset directory.

    Attributes:
        name: dataset name.
        version: save counter (1 for the first save).
        num_nodes: node count, ``None`` when no graph is stored.
        num_edges: edge count, ``None`` when no graph is stored.
        graph: CSR arrays by name (``indptr``, ``indices``, optional extras).
        tables: ``node`` and ``edge`` columns by name.
        groups: auxiliary array groups by group name.
        meta: free JSON metadata.
    """

    name: str
    version: int
    num_nodes: int | None
    num_edges: int | None
    graph: Mapping[str, ArrayEntry]
    tables: Mapping[str, Mapping[str, ArrayEntry]]
    groups: Mapping[str, GroupEntry]
    meta: Mapping[str, Any]

    def entries(self) -> dict[str, ArrayEntry]:
        """Every stored array, keyed ``graph/indptr``, ``node/x``, ``group:g/name``."""
        out = {f"graph/{k}": v for k, v in self.graph.items()}
        for table, columns in self.tables.items():
            out.update({f"{table}/{k}": v for k, v in columns.items()})
        for group, entry in self.groups.items():
            out.update({f"group:{group}/{k}": v for k, v in entry.arrays.items()})
        return out

    def files(self) -> set[str]:
        """Names of all data files the manifest references."""
        return {e.file for e in self.entries().values()}

    def to_json(self) -> dict[str, Any]:
        """The manifest as a JSON object."""

        def table(entries: Mapping[str, ArrayEntry]) -> dict[str, Any]:
            return {k: v.to_json() for k, v in sorted(entries.items())}

        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "version": self.version,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "meta": dict(self.meta),
            "graph": table(self.graph),
            "tables": {t: table(c) for t, c in sorted(self.tables.items())},
            "groups": {
                g: {"meta": dict(e.meta), "arrays": table(e.arrays)}
                for g, e in sorted(self.groups.items())
            },
        }

    @classmethod
    def from_json(cls, raw: Any) -> Manifest:
        """Parse a manifest object, raising :class:`DatasetError` on any mismatch."""
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise DatasetError.build(
                MANIFEST, "open_dataset", f'"format": "{FORMAT}"', "another file"
            )
        if raw.get("format_version") != FORMAT_VERSION:
            raise DatasetError.build(
                MANIFEST,
                "open_dataset",
                f"format_version {FORMAT_VERSION}",
                repr(raw.get("format_version")),
                "the dataset was written by another Strata version",
            )

        def entries(obj: Any, where: str) -> dict[str, ArrayEntry]:
            if not isinstance(obj, dict):
                raise DatasetError.build(where, MANIFEST, "an object", repr(obj))
            return {k: ArrayEntry.from_json(v, f"{where}/{k}") for k, v in obj.items()}

        try:
            groups = {
                g: GroupEntry(entries(e["arrays"], f"groups/{g}"), dict(e["meta"]))
                for g, e in raw["groups"].items()
            }
            return cls(
                name=str(raw["name"]),
                version=int(raw["version"]),
                num_nodes=None if raw["num_nodes"] is None else int(raw["num_nodes"]),
                num_edges=None if raw["num_edges"] is None else int(raw["num_edges"]),
                graph=entries(raw["graph"], "graph"),
                tables={t: entries(c, t) for t, c in raw["tables"].items()},
                groups=groups,
                meta=dict(raw["meta"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise DatasetError.build(
                MANIFEST, "open_dataset", "a complete manifest", repr(err)
            ) from err


def empty_manifest(name: str) -> Manifest:
    """A manifest with nothing stored yet (version 0)."""
    return Manifest(name, 0, None, None, {}, {t: {} for t in TABLES}, {}, {})


def read_manifest(directory: str | Path) -> Manifest:
    """Read and parse ``<directory>/manifest.json``.

    Args:
        directory: a dataset directory.

    Returns:
        The parsed manifest.

    Raises:
        DatasetError: if the directory or manifest is missing or malformed.

    Examples:
        >>> import tempfile
        >>> read_manifest(tempfile.mkdtemp())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        strata.storage.errors.DatasetError: .../manifest.json in open_dataset: ...
    """
    path = Path(directory) / MANIFEST
    if Path(directory).exists() and not Path(directory).is_dir():
        raise DatasetError.build(
            str(directory),
            "open_dataset",
            "a dataset directory with manifest.json",
            "a file",
            "give the directory `strata dataset import` or save_dataset wrote.",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise DatasetError.build(
            str(path),
            "open_dataset",
            "a dataset directory with manifest.json",
            "no such file",
            "create one with save_dataset or `strata dataset import`",
        ) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise DatasetError.build(
            str(path), "open_dataset", "valid JSON", str(err)
        ) from err
    return Manifest.from_json(raw)


def check_group(group: str, where: str) -> None:
    """Raise unless ``group`` is ``segment(/segment)*`` of ``[A-Za-z0-9_.-]``."""
    if (
        not isinstance(group, str)
        or not GROUP_PATTERN.fullmatch(group)
        or any(part in (".", "..") for part in group.split("/"))
    ):
        raise DatasetError.build(
            "group",
            where,
            "names like 'partition/metis-k4' ([A-Za-z0-9_.-] segments joined by /)",
            repr(group),
        )
