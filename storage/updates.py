"""Update batches: the Arrow schema of a batch of graph updates, its validator, helpers.

One row is one update. Which columns a row uses depends on its ``kind``; the columns it
does not use must be null, so a row means one thing only:

=============  ===========  ==============  =====================================
``kind``       name         non-null        meaning (see d3gnn.md §3.1)
=============  ===========  ==============  =====================================
0              add_edge     ``src, dst``    add one parallel copy of ``src -> dst``
1              remove_edge  ``src, dst``    remove one copy (absent: dropped, counted)
2              add_node     ``node``        make sure ``node`` exists
3              set_feature  ``node, feature``  create or replace ``x_node``
=============  ===========  ==============  =====================================

Columns (:func:`update_schema`): ``kind`` int8, ``src``/``dst``/``node`` int64 (dense
node ids), ``feature`` fixed-size list of ``feature_dim`` float32, ``event_time`` int64
(milliseconds since the epoch, assigned at ingestion; never null). Every batch of one
stream has the same ``feature_dim``; a topology-only stream (``feature_dim = 0``) has no
``feature`` column at all (Arrow handles zero-width fixed-size lists poorly).

:func:`validate_updates` checks a batch against :class:`UpdateLimits` (schema, kinds,
per-row consistency, id range, finite features, row and byte limits) and raises an
:class:`UpdateError` naming the first bad row. :func:`make_updates` builds a batch from
numpy arrays; :func:`decode_updates` turns one back into numpy arrays for vectorised
consumers such as ``DynamicGraph.apply``.

Examples:
    >>> import numpy as np
    >>> batch = make_updates(
    ...     np.array([UpdateKind.ADD_EDGE, UpdateKind.SET_FEATURE]),
    ...     src=np.array([0, 0]), dst=np.array([1, 0]), node=np.array([0, 2]),
    ...     feature=np.ones((2, 4), dtype=np.float32), event_time=np.array([5, 6]))
    >>> batch = validate_updates(batch, UpdateLimits(feature_dim=4, max_nodes=10))
    >>> batch.column("node").to_pylist(), batch.column("src").to_pylist()
    ([None, 2], [0, None])
    >>> decode_updates(batch).node.tolist()
    [-1, 2]
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from strata.storage._types import BoolArray, Int64Array
from strata.storage.errors import StorageError

# Node ids stay below 2**31 - 1 so every graph built from updates has int32 indices and
# a (src, dst) pair packs into one int64 key (DynamicGraph relies on both).
MAX_NODES = 2**31 - 1
_WHERE = "validate_updates"


class UpdateError(StorageError):
    """An update batch does not fit the update schema or the limits it is checked by."""


class UpdateKind(enum.IntEnum):
    """The operation of one update row (stored as int8 in the ``kind`` column)."""

    ADD_EDGE = 0
    REMOVE_EDGE = 1
    ADD_NODE = 2
    SET_FEATURE = 3

    @classmethod
    def parse(cls, name: str) -> UpdateKind:
        """Return the kind called ``name`` (``"add_edge"``, ...; case-insensitive)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            names = ", ".join(k.name.lower() for k in cls)
            raise UpdateError.build(
                "kind", "UpdateKind.parse", names, repr(name)
            ) from None


def update_schema(feature_dim: int) -> pa.Schema:
    """Return the Arrow schema of update batches whose features have ``feature_dim``.

    With ``feature_dim == 0`` the schema has no ``feature`` column.
    """
    if feature_dim < 0:
        raise UpdateError.build(
            "feature_dim", "update_schema", ">= 0", str(feature_dim)
        )
    fields = [
        pa.field("kind", pa.int8(), nullable=False),
        pa.field("src", pa.int64()),
        pa.field("dst", pa.int64()),
        pa.field("node", pa.int64()),
        pa.field("feature", pa.list_(pa.float32(), feature_dim)),
        pa.field("event_time", pa.int64(), nullable=False),
    ]
    return pa.schema([f for f in fields if f.name != "feature" or feature_dim])


@dataclass(frozen=True, slots=True)
class UpdateLimits:
    """What :func:`validate_updates` accepts.

    Attributes:
        feature_dim: required width of ``feature``; ``None`` accepts any width.
        max_nodes: node ids must be ``< max_nodes`` (at most :data:`MAX_NODES`).
        max_rows: most rows in one batch.
        max_bytes: most Arrow buffer bytes in one batch.
    """

    feature_dim: int | None = None
    max_nodes: int = MAX_NODES
    max_rows: int = 1 << 20
    max_bytes: int = 256 << 20

    def __post_init__(self) -> None:
        if not 0 < self.max_nodes <= MAX_NODES:
            raise UpdateError.build(
                "max_nodes",
                "UpdateLimits",
                f"0 < max_nodes <= {MAX_NODES}",
                str(self.max_nodes),
            )
        if self.max_rows < 1 or self.max_bytes < 1:
            raise UpdateError.build(
                "max_rows/max_bytes",
                "UpdateLimits",
                ">= 1",
                f"{self.max_rows}/{self.max_bytes}",
            )


@dataclass(frozen=True, slots=True)
class UpdateArrays:
    """A decoded update batch: one numpy array per column, nulls filled.

    Attributes:
        kind: int8 kinds (:class:`UpdateKind` values).
        src: int64 sources, ``-1`` where null.
        dst: int64 destinations, ``-1`` where null.
        node: int64 node ids, ``-1`` where null.
        feature: float32 of shape ``(rows, feature_dim)``; rows that are not
            ``set_feature`` hold unspecified values.
        event_time: int64 milliseconds.
    """

    kind: npt.NDArray[np.int8]
    src: Int64Array
    dst: Int64Array
    node: Int64Array
    feature: npt.NDArray[np.float32]
    event_time: Int64Array

    def __len__(self) -> int:
        return int(self.kind.shape[0])


# ---------------------------------------------------------------------------- building
def _id_column(values: npt.ArrayLike | None, used: BoolArray, name: str) -> pa.Array:
    n = used.shape[0]
    if values is None:
        if used.any():
            row = int(np.argmax(used))
            raise UpdateError.build(
                name, "make_updates", f"a {name} array", "None", f"row {row} needs it"
            )
        return pa.nulls(n, pa.int64())
    array = np.asarray(values)
    if array.shape != (n,):
        raise UpdateError.build(name, "make_updates", f"shape ({n},)", str(array.shape))
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise UpdateError.build(name, "make_updates", "integer ids", str(array.dtype))
    return pa.array(array.astype(np.int64, copy=False), mask=~used)


def make_updates(
    kind: npt.ArrayLike,
    *,
    src: npt.ArrayLike | None = None,
    dst: npt.ArrayLike | None = None,
    node: npt.ArrayLike | None = None,
    feature: npt.ArrayLike | None = None,
    event_time: npt.ArrayLike | int | None = None,
    feature_dim: int | None = None,
) -> pa.RecordBatch:
    """Build an update batch from numpy arrays, one entry per row.

    Values in rows whose kind does not use a column are ignored and stored as null,
    so callers can pass full-length arrays. The result is not validated against
    limits; pass it through :func:`validate_updates` where that matters.

    Args:
        kind: :class:`UpdateKind` values, one per row.
        src: sources (needed when any row is an edge update).
        dst: destinations (likewise).
        node: node ids (needed by ``add_node`` and ``set_feature`` rows).
        feature: ``(rows, feature_dim)`` floats (needed by ``set_feature`` rows).
        event_time: milliseconds, per row or one for all; default: now.
        feature_dim: width when ``feature`` is None (default 0).

    Returns:
        A record batch with :func:`update_schema`.

    Raises:
        UpdateError: when an array has the wrong shape or a needed one is missing.
    """
    kinds = np.asarray(kind).astype(np.int8)
    if kinds.ndim != 1:
        raise UpdateError.build("kind", "make_updates", "a 1-D array", str(kinds.shape))
    n = kinds.shape[0]
    is_edge = (kinds == UpdateKind.ADD_EDGE) | (kinds == UpdateKind.REMOVE_EDGE)
    is_set = kinds == UpdateKind.SET_FEATURE
    is_node = (kinds == UpdateKind.ADD_NODE) | is_set
    if feature is None:
        dim = feature_dim or 0
        flat = np.zeros(n * dim, dtype=np.float32)
        if is_set.any():
            raise UpdateError.build(
                "feature",
                "make_updates",
                "a feature array",
                "None",
                f"row {int(np.argmax(is_set))} is set_feature",
            )
    else:
        matrix = np.asarray(feature, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != n:
            raise UpdateError.build(
                "feature", "make_updates", f"shape ({n}, dim)", str(matrix.shape)
            )
        dim = matrix.shape[1]
        flat = np.ascontiguousarray(matrix).reshape(-1)
    if event_time is None:
        event_time = time.time_ns() // 1_000_000
    times = np.broadcast_to(np.asarray(event_time, dtype=np.int64), (n,))
    columns = [
        pa.array(kinds, type=pa.int8()),
        _id_column(src, is_edge, "src"),
        _id_column(dst, is_edge, "dst"),
        _id_column(node, is_node, "node"),
    ]
    if dim:
        values = pa.array(flat, type=pa.float32())
        mask = pa.array(~is_set)
        columns.append(pa.FixedSizeListArray.from_arrays(values, dim, mask=mask))
    columns.append(pa.array(times, type=pa.int64()))
    return pa.RecordBatch.from_arrays(columns, schema=update_schema(dim))


def edge_updates(
    src: npt.ArrayLike,
    dst: npt.ArrayLike,
    *,
    remove: bool = False,
    event_time: npt.ArrayLike | int | None = None,
    feature_dim: int = 0,
) -> pa.RecordBatch:
    """Build a batch adding (or, with ``remove``, removing) the edges ``src -> dst``."""
    n = np.asarray(src).shape[0]
    kind = UpdateKind.REMOVE_EDGE if remove else UpdateKind.ADD_EDGE
    return make_updates(
        np.full(n, kind, dtype=np.int8),
        src=src,
        dst=dst,
        event_time=event_time,
        feature_dim=feature_dim,
    )


def feature_updates(
    node: npt.ArrayLike,
    feature: npt.ArrayLike,
    *,
    event_time: npt.ArrayLike | int | None = None,
) -> pa.RecordBatch:
    """Build a batch setting ``x_node`` to the rows of ``feature``."""
    n = np.asarray(node).shape[0]
    return make_updates(
        np.full(n, UpdateKind.SET_FEATURE, dtype=np.int8),
        node=node,
        feature=feature,
        event_time=event_time,
    )


# ---------------------------------------------------------------------------- decoding
def _ids(column: pa.Array) -> Int64Array:
    if column.null_count:
        column = pc.fill_null(column, -1)
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)


def decode_updates(batch: pa.RecordBatch) -> UpdateArrays:
    """Return the columns of an (already validated) batch as numpy arrays."""
    n = batch.num_rows
    if "feature" in batch.schema.names:
        features = batch.column("feature")
        dim = features.type.list_size
        child = features.values.slice(features.offset * dim, n * dim)
        flat = child.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    else:
        dim, flat = 0, np.zeros(0, dtype=np.float32)
    return UpdateArrays(
        kind=batch.column("kind").to_numpy(zero_copy_only=False).astype(np.int8),
        src=_ids(batch.column("src")),
        dst=_ids(batch.column("dst")),
        node=_ids(batch.column("node")),
        feature=flat.reshape(n, dim),
        event_time=_ids(batch.column("event_time")),
    )


# ------------------------------------------------------------------------ validation
def _first_bad(bad: BoolArray, kinds: npt.NDArray[np.int8]) -> str:
    """Describe where ``bad`` rows are: the first row, its kind, how many in all."""
    row = int(np.argmax(bad))
    count = int(bad.sum())
    name = UpdateKind(int(kinds[row])).name.lower()
    more = f"; {count} bad rows in all" if count > 1 else ""
    return f"row {row} ({name}{more})"


def _check_schema(batch: pa.RecordBatch, limits: UpdateLimits) -> int:
    """Check column names and types; return the batch's feature width."""
    names = batch.schema.names
    feature_type = batch.schema.field("feature").type if "feature" in names else None
    dim = 0
    if feature_type is not None:
        if not pa.types.is_fixed_size_list(feature_type) or feature_type.list_size < 1:
            raise UpdateError.build(
                "feature",
                _WHERE,
                "type fixed_size_list<float>[feature_dim >= 1]",
                f"type {feature_type}",
                "leave the column out when there are no features",
            )
        dim = feature_type.list_size
    expected = update_schema(dim)
    if sorted(names) != sorted(expected.names) or len(names) != len(set(names)):
        raise UpdateError.build(
            "schema",
            _WHERE,
            f"columns {expected.names}",
            str(names),
            "build batches with strata.storage.updates.make_updates",
        )
    for field in expected:
        got = batch.schema.field(field.name).type
        if got != field.type:
            raise UpdateError.build(
                field.name, _WHERE, f"type {field.type}", f"type {got}"
            )
    if limits.feature_dim is not None and dim != limits.feature_dim:
        raise UpdateError.build(
            "feature",
            _WHERE,
            f"width {limits.feature_dim}",
            f"width {dim}",
            "every batch of one stream has the same feature width",
        )
    return dim


def validate_updates(
    batch: pa.RecordBatch | pa.Table, limits: UpdateLimits | None = None
) -> pa.RecordBatch:
    """Check an update batch and return it as one record batch in schema order.

    Checks, in order: row and byte limits, column names and types, the width of
    ``feature``, no null ``kind``/``event_time``, known kinds, the columns each kind
    needs present and the others null, ids in ``[0, max_nodes)``, finite features.

    Args:
        batch: the batch (a table is combined into one batch).
        limits: what to accept; default :class:`UpdateLimits()`.

    Returns:
        The batch, columns in :func:`update_schema` order.

    Raises:
        UpdateError: naming the column, the first bad row and its kind.
    """
    limits = limits or UpdateLimits()
    if isinstance(batch, pa.Table):
        batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else None
        if batch is None:
            raise UpdateError.build("batch", _WHERE, "at least one row", "0 rows")
    if not isinstance(batch, pa.RecordBatch):
        raise UpdateError.build(
            "batch", _WHERE, "a pyarrow RecordBatch", type(batch).__name__
        )
    if batch.num_rows > limits.max_rows:
        raise UpdateError.build(
            "batch",
            _WHERE,
            f"at most {limits.max_rows} rows",
            f"{batch.num_rows}",
            "split the batch",
        )
    size = batch.get_total_buffer_size()
    if size > limits.max_bytes:
        raise UpdateError.build(
            "batch",
            _WHERE,
            f"at most {limits.max_bytes} bytes",
            f"{size}",
            "split the batch",
        )
    dim = _check_schema(batch, limits)
    batch = batch.select(update_schema(dim).names)
    for name in ("kind", "event_time"):
        if batch.column(name).null_count:
            row = int(np.argmax(batch.column(name).is_null().to_numpy(False)))
            raise UpdateError.build(name, _WHERE, "no nulls", f"null at row {row}")
    kinds = batch.column("kind").to_numpy(zero_copy_only=False)
    unknown = (kinds < 0) | (kinds > max(UpdateKind))
    if unknown.any():
        row = int(np.argmax(unknown))
        raise UpdateError.build(
            "kind",
            _WHERE,
            f"a kind in 0..{max(UpdateKind)} (UpdateKind)",
            f"{int(kinds[row])} at row {row}",
        )
    is_edge = (kinds == UpdateKind.ADD_EDGE) | (kinds == UpdateKind.REMOVE_EDGE)
    is_set = kinds == UpdateKind.SET_FEATURE
    uses = {"src": is_edge, "dst": is_edge, "node": ~is_edge}
    if dim:
        uses["feature"] = is_set
    for name, used in uses.items():
        valid = batch.column(name).is_valid().to_numpy(zero_copy_only=False)
        if (used & ~valid).any():
            raise UpdateError.build(
                name,
                _WHERE,
                f"a {name} on every row of this kind",
                "null at " + _first_bad(used & ~valid, kinds),
            )
        if (valid & ~used).any():
            raise UpdateError.build(
                name,
                _WHERE,
                f"null {name} on rows of this kind",
                "a value at " + _first_bad(valid & ~used, kinds),
                "each row sets only the columns its kind uses",
            )
    arrays = decode_updates(batch)
    for name, ids, used in (
        ("src", arrays.src, is_edge),
        ("dst", arrays.dst, is_edge),
        ("node", arrays.node, ~is_edge),
    ):
        bad = used & ((ids < 0) | (ids >= limits.max_nodes))
        if bad.any():
            value = int(ids[int(np.argmax(bad))])
            raise UpdateError.build(
                name,
                _WHERE,
                f"ids in [0, {limits.max_nodes})",
                f"{value} at " + _first_bad(bad, kinds),
            )
    if dim and is_set.any():
        bad = is_set & ~np.isfinite(arrays.feature).all(axis=1)
        if bad.any():
            raise UpdateError.build(
                "feature",
                _WHERE,
                "finite values",
                "NaN or inf at " + _first_bad(bad, kinds),
            )
    elif is_set.any():
        raise UpdateError.build(
            "feature",
            _WHERE,
            "feature_dim >= 1 for set_feature rows",
            "width 0 at " + _first_bad(is_set, kinds),
        )
    return batch
