r"""Node tables: features, labels and masks joined to a graph by original node id.

A node table is a Parquet or CSV file (with a header) holding one row per node:

* an id column (``id``, ``node_id``, ``node``, ``nid``; or ``id_col``), in the same
  ids as the edge list;
* a label column (``label``, ``y``, ``class``; or ``label_col``) -> ``y`` (int64;
  string labels become codes, their names in ``meta['label_names']``);
* ``train_mask`` / ``val_mask`` / ``test_mask`` (booleans), or a ``split`` column of
  ``train`` / ``val`` / ``test`` -> the three masks;
* a list column ``x`` / ``features`` / ``feat`` / ``embedding`` -> ``x``; otherwise
  every other numeric column, in file order, is one feature column of ``x``
  (float32), their names in ``meta['feature_names']``;
* any other column (text, booleans) is kept under its own name.

Every graph node needs exactly one row, and every row's id must be a graph node:
a row whose id the edge list never mentions is an error naming the file, the row
and the id, as is a graph node without a row.

Examples:
    >>> import tempfile, pathlib, numpy as np
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "nodes.csv"
    >>> _ = path.write_text("id,label,a,b\n30,1,0.5,1\n10,0,1.5,2\n20,1,2.5,3\n")
    >>> table = read_node_table(path, np.array([10, 20, 30]), 3)
    >>> table.columns["y"].tolist(), table.columns["x"][:, 0].tolist()
    ([0, 1, 1], [1.5, 2.5, 0.5])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.storage.dataset.model import NAME_PATTERN
from strata.storage.errors import FormatError
from strata.storage.loaders.tables import read_table_file

_WHERE = "read_node_table"
ID_NAMES = ("id", "node_id", "node", "nid")
LABEL_NAMES = ("label", "y", "class")
FEATURE_LIST_NAMES = ("x", "features", "feat", "embedding")
MASKS = ("train_mask", "val_mask", "test_mask")


@dataclass(frozen=True, slots=True)
class NodeTable:
    """Node arrays in graph id order, and the metadata that describes them."""

    columns: dict[str, np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)


def _find(names: list[str], given: str | None, aliases: tuple[str, ...]) -> str | None:
    if given is not None:
        return given if given in names else None
    lowered = {n.lower(): n for n in names}
    return next((lowered[a] for a in aliases if a in lowered), None)


def _fail(path: Path, subject: str, expected: str, got: str) -> FormatError:
    error = FormatError.build(subject, f"{_WHERE}({path})", expected, got)
    assert isinstance(error, FormatError)
    return error


def _rows_in_graph(
    path: Path, id_name: str, ids: pa.ChunkedArray, node_ids: np.ndarray | None, n: int
) -> np.ndarray:
    """The graph id of every row, checking that rows and graph nodes match 1:1."""
    if ids.null_count:
        row = int(np.argmax(ids.is_null().to_numpy(zero_copy_only=False)))
        raise _fail(
            path, f"column {id_name!r}", "an id in every row", f"a null at row {row}"
        )
    graph_ids = np.arange(n, dtype=np.int64) if node_ids is None else node_ids
    if graph_ids.dtype.kind == "U":
        values = np.asarray(ids.cast(pa.string()).to_numpy(zero_copy_only=False), str)
    else:
        try:
            values = np.asarray(pc.cast(ids, pa.int64()).to_numpy(), np.int64)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise _fail(
                path,
                f"column {id_name!r}",
                "integer node ids (as in the edge list)",
                f"Arrow type {ids.type}",
            ) from None
    order = np.argsort(graph_ids, kind="stable")
    sorted_ids = graph_ids[order]
    pos = np.searchsorted(sorted_ids, values)
    found = pos < n
    found[found] = sorted_ids[pos[found]] == values[found]
    if not found.all():
        row = int(np.argmin(found))
        raise _fail(
            path,
            f"row {row}, column {id_name!r}",
            "ids of nodes in the graph (the edge list's ids)",
            f"id {values[row].item()!r}, which no edge mentions",
        )
    where = order[pos]
    counts = np.bincount(where, minlength=n)
    if counts.max(initial=0) > 1:
        row = int(np.flatnonzero(counts[where] > 1)[1])
        raise _fail(
            path,
            f"row {row}, column {id_name!r}",
            "one row per node",
            f"id {values[row].item()!r} again",
        )
    if values.size != n:
        missing = graph_ids[int(np.argmin(counts))].item()
        raise _fail(
            path,
            f"column {id_name!r}",
            f"a row for each of the graph's {n} nodes",
            f"{values.size} rows; node {missing!r} has none",
        )
    return where


def _numeric(column: pa.ChunkedArray) -> bool:
    kind = column.type
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind))


def _column(path: Path, name: str, column: pa.ChunkedArray) -> np.ndarray:
    if column.null_count:
        row = int(np.argmax(column.is_null().to_numpy(zero_copy_only=False)))
        raise _fail(path, f"row {row}, column {name!r}", "a value", "null")
    kind = column.type
    if pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind):
        lengths = pc.list_value_length(column).to_numpy()
        if lengths.size and (lengths != lengths[0]).any():
            row = int(np.argmax(lengths != lengths[0]))
            raise _fail(
                path,
                f"row {row}, column {name!r}",
                f"{lengths[0]} values (as row 0)",
                f"{lengths[row]}",
            )
        flat = pc.list_flatten(column).to_numpy()
        return np.asarray(flat, np.float32).reshape(len(column), -1)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=str)
    return np.asarray(column.to_numpy(zero_copy_only=False))


def read_node_table(
    path: str | Path,
    node_ids: np.ndarray | None,
    num_nodes: int,
    *,
    id_col: str | None = None,
    label_col: str | None = None,
) -> NodeTable:
    """Read a node table and order its rows by graph id.

    Args:
        path: a ``.parquet`` or ``.csv`` file with a header.
        node_ids: the graph's original ids (``EdgeList.node_ids``); ``None`` when
            the ids are ``0..num_nodes-1``.
        num_nodes: the graph's node count.
        id_col: the id column (default: detected, see the module doc).
        label_col: the label column (default: detected).

    Returns:
        The arrays (``x``, ``y``, masks, other columns) in graph id order.

    Raises:
        FormatError: naming the file, the row and the column of a missing or
            duplicate id, an id the graph lacks, a null, or a missing column.
    """
    path = Path(path)
    if not path.is_file():
        raise FormatError.build(str(path), _WHERE, "a node table file", "no such file")
    table = read_table_file(path, _WHERE, "node table")
    names = list(table.column_names)
    id_name = _find(names, id_col, ID_NAMES)
    if id_name is None:
        raise _fail(
            path,
            f"id column {id_col or 'id'!r}",
            f"one of the columns {names}",
            "no such column",
        )
    rows = _rows_in_graph(path, id_name, table.column(id_name), node_ids, num_nodes)
    order = np.empty(num_nodes, np.int64)
    order[rows] = np.arange(num_nodes)
    columns: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {}
    label = _find(names, label_col, LABEL_NAMES)
    if label_col is not None and label is None:
        raise _fail(
            path, f"label column {label_col!r}", f"one of {names}", "no such column"
        )
    if label is not None:
        y = _column(path, label, table.column(label))[order]
        if y.dtype.kind == "U":
            label_names, y = np.unique(y, return_inverse=True)
            meta["label_names"] = label_names.tolist()
        elif y.dtype.kind == "f" and not np.array_equal(y, np.round(y)):
            raise _fail(path, f"column {label!r}", "integer class labels", "fractions")
        columns["y"] = y.astype(np.int64)
    split = _find(names, None, ("split",))
    if split is not None:
        values = _column(path, split, table.column(split))[order].astype(str)
        for mask, word in zip(MASKS, ("train", "val", "test"), strict=True):
            columns[mask] = values == word
    features: list[str] = []
    for name in names:
        if name in (id_name, label, split):
            continue
        if not NAME_PATTERN.fullmatch(name):
            raise _fail(
                path, f"column {name!r}", "a name matching [A-Za-z0-9_.-]+", repr(name)
            )
        array = _column(path, name, table.column(name))[order]
        if name.lower() in FEATURE_LIST_NAMES and array.ndim == 2:
            columns["x"] = array
        elif name in MASKS:
            columns[name] = array.astype(bool)
        elif _numeric(table.column(name)):
            features.append(name)
            columns[name] = array
        else:
            columns[name] = array
    if features and "x" not in columns:
        x = np.stack([columns.pop(f) for f in features], axis=1).astype(np.float32)
        columns["x"] = x
        meta["feature_names"] = features
    return NodeTable(columns, meta)
