"""The in-memory shape of a dataset: a graph plus named node and edge arrays.

A :class:`GraphDataset` is what loaders, generators and graph specs return and what
:func:`strata.storage.dataset.save_dataset` writes. Node arrays have one row per node
and edge arrays one row per edge *in CSR order* (aligned with ``graph.indices``). The
conventional node array names are ``x`` (features), ``y`` (labels) and ``train_mask`` /
``val_mask`` / ``test_mask``; any other name matching ``[A-Za-z0-9_.-]+`` is allowed.

``node_ids`` (:data:`ID_COLUMN`) holds the *original* id of every node when a loader
mapped a file's ids (1-based, sparse, 64-bit, strings) to ``0..n-1``;
:attr:`GraphDataset.original_ids` reads it, or ``0..n-1`` for datasets without one
(every dataset saved before the column existed opens unchanged).

Examples:
    >>> import numpy as np
    >>> from strata.storage.csr import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2]))
    >>> ds = GraphDataset(g, node_data={"y": np.array([0, 1, 1])}, name="path")
    >>> ds.num_classes, ds.x is None, ds.original_ids.tolist()
    (2, True, [0, 1, 2])
    >>> GraphDataset(g, node_data={"y": np.array([0, 1])})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    strata.storage.errors.DatasetError: node_data['y'] in GraphDataset: expected ...
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from strata.storage.csr import CSRGraph
from strata.storage.errors import DatasetError

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.\-]+")
#: The node column holding each node's original id (see the module doc).
ID_COLUMN = "node_ids"
JSONValue = Any  # JSON-serialisable metadata (str, numbers, bools, lists, dicts)


def check_name(kind: str, name: str, where: str) -> None:
    """Raise :class:`DatasetError` unless ``name`` is a safe array/table name."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise DatasetError.build(
            kind,
            where,
            "a name matching [A-Za-z0-9_.-]+",
            repr(name),
            "names become file names, so no slashes or spaces",
        )


def _check_table(
    kind: str, arrays: Mapping[str, np.ndarray], rows: int, what: str
) -> None:
    for name, array in arrays.items():
        check_name(f"{kind} name", name, "GraphDataset")
        if not isinstance(array, np.ndarray) or array.ndim == 0:
            got = type(array).__name__ if not isinstance(array, np.ndarray) else "0-D"
            raise DatasetError.build(
                f"{kind}[{name!r}]", "GraphDataset", "a numpy array, 1-D or more", got
            )
        if array.shape[0] != rows:
            raise DatasetError.build(
                f"{kind}[{name!r}]",
                "GraphDataset",
                f"{rows} rows (one per {what})",
                f"shape {array.shape}",
            )


@dataclass(frozen=True, slots=True)
class GraphDataset:
    """A graph with node arrays, edge arrays (CSR order) and JSON metadata.

    Attributes:
        graph: the graph.
        node_data: arrays with ``graph.num_nodes`` rows, by name.
        edge_data: arrays with ``graph.num_edges`` rows in CSR edge order, by name.
        name: a short name (``cora``, ``rmat-s16``), recorded in the manifest.
        meta: JSON-serialisable metadata (source spec, ``num_classes``, ...).
    """

    graph: CSRGraph
    node_data: Mapping[str, np.ndarray] = field(default_factory=dict)
    edge_data: Mapping[str, np.ndarray] = field(default_factory=dict)
    name: str = "graph"
    meta: Mapping[str, JSONValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name("name", self.name, "GraphDataset")
        _check_table("node_data", self.node_data, self.graph.num_nodes, "node")
        _check_table("edge_data", self.edge_data, self.graph.num_edges, "edge")

    @property
    def x(self) -> np.ndarray | None:
        """Node features (``node_data['x']``), if any."""
        return self.node_data.get("x")

    @property
    def y(self) -> np.ndarray | None:
        """Node labels (``node_data['y']``), if any."""
        return self.node_data.get("y")

    @property
    def train_mask(self) -> np.ndarray | None:
        """Boolean training mask, if any."""
        return self.node_data.get("train_mask")

    @property
    def val_mask(self) -> np.ndarray | None:
        """Boolean validation mask, if any."""
        return self.node_data.get("val_mask")

    @property
    def test_mask(self) -> np.ndarray | None:
        """Boolean test mask, if any."""
        return self.node_data.get("test_mask")

    @property
    def original_ids(self) -> np.ndarray:
        """Each node's id in the source file (``node_ids``), else ``0..n-1``."""
        ids = self.node_data.get(ID_COLUMN)
        if ids is None:
            return np.arange(self.graph.num_nodes, dtype=np.int64)
        return ids

    @property
    def num_classes(self) -> int | None:
        """``meta['num_classes']`` when recorded, else ``max(y) + 1``, else None."""
        if "num_classes" in self.meta:
            return int(self.meta["num_classes"])
        y = self.y
        if y is None or y.size == 0:
            return None
        return int(y.max()) + 1

    def __repr__(self) -> str:
        def names(arrays: Mapping[str, np.ndarray]) -> str:
            return ", ".join(f"{k}{list(v.shape)}" for k, v in arrays.items())

        return (
            f"GraphDataset(name={self.name!r}, num_nodes={self.graph.num_nodes}, "
            f"num_edges={self.graph.num_edges}, node_data=[{names(self.node_data)}], "
            f"edge_data=[{names(self.edge_data)}])"
        )
