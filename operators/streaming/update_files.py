"""Update files: Parquet or CSV tables of graph updates, read into update batches.

What ``strata ingest ENDPOINT FILE`` sends and ``jobs/stream_ingest.py`` replays.
Columns (the ``strata.storage.updates`` schema, relaxed for hand-written files):

* ``kind``: ``add_edge``, ``remove_edge``, ``add_node``, ``set_feature`` (names,
  any case) or their codes 0-3;
* ``src``, ``dst``, ``node``: integer node ids, empty where the kind does not use
  them (missing columns are all empty);
* features: a ``feature`` list column (Parquet), or columns ``f0, f1, ...`` (CSV);
* ``event_time``: milliseconds; when absent, the time of reading.

Examples:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "updates.csv"
    >>> lines = ["kind,src,dst,node,f0,f1", "add_edge,0,1,,,",
    ...          "set_feature,,,2,0.5,1.5", "remove_edge,0,1,,,"]
    >>> _ = path.write_text(chr(10).join(lines))
    >>> table = read_update_file(path)
    >>> table.column("kind").to_pylist(), table.column("feature").type.list_size
    ([0, 3, 1], 2)
    >>> [b.num_rows for b in update_batches(table, 2)]
    [2, 1]
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from strata.operators.errors import OperatorError
from strata.storage import UpdateKind, update_schema

_WHERE = "read_update_file"
_F_COLUMN = re.compile(r"f(\d+)\Z")


def read_update_file(path: str | Path) -> pa.Table:
    """Read a Parquet (``.parquet``, ``.pq``) or CSV/TSV update file.

    Returns:
        A table in the update schema (not yet validated against limits).

    Raises:
        OperatorError: for an unknown extension, a missing ``kind`` column, or an
            unknown kind name.
    """
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv", ".tsv"):
        raise OperatorError.build(
            "path", _WHERE, ".parquet, .pq, .csv or .tsv", repr(file.name)
        )
    if not file.is_file():
        got = "a directory" if file.is_dir() else "no such file"
        raise OperatorError.build("path", _WHERE, f"a file at {file}", got)
    try:
        if suffix in (".parquet", ".pq"):
            raw = pq.read_table(file)
        else:
            delimiter = "\t" if suffix == ".tsv" else ","
            options = pacsv.ParseOptions(delimiter=delimiter)
            raw = pacsv.read_csv(file, parse_options=options)
    except (pa.ArrowException, OSError, ValueError) as exc:  # not that format
        kind = "Parquet" if suffix in (".parquet", ".pq") else "CSV/TSV"
        raise OperatorError.build(
            "file", f"{_WHERE}({file})", f"a {kind} update table", str(exc)[:200]
        ) from None
    return _normalise(raw)


def _kinds(column: pa.ChunkedArray) -> pa.Array:
    if pa.types.is_integer(column.type):
        return column.combine_chunks().cast(pa.int8())
    names = [k.name.lower() for k in UpdateKind]
    lowered = pc.utf8_lower(pc.utf8_trim_whitespace(column.cast(pa.string())))
    codes = pc.index_in(lowered, value_set=pa.array(names))
    if codes.null_count:
        bad = lowered.filter(pc.is_null(codes)).to_pylist()[0]
        raise OperatorError.build("kind", _WHERE, f"one of {names}", repr(bad))
    return codes.combine_chunks().cast(pa.int8())


def _features(raw: pa.Table, kinds: np.ndarray) -> pa.Array | None:
    is_set = kinds == UpdateKind.SET_FEATURE
    if "feature" in raw.column_names:
        column = raw.column("feature").combine_chunks()
        width = (
            column.type.list_size if pa.types.is_fixed_size_list(column.type) else None
        )
        if width is None:
            lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
            width = int(np.nanmax(np.where(is_set, lengths, 0), initial=0))
        values = np.zeros((len(raw), width), dtype=np.float32)
        rows = np.flatnonzero(is_set)
        if rows.size:
            values[rows] = np.asarray(
                column.take(pa.array(rows)).to_pylist(), np.float32
            )
    else:
        names = sorted(
            (int(m.group(1)), n) for n in raw.column_names if (m := _F_COLUMN.match(n))
        )
        if not names:
            return None
        values = np.stack(
            [
                raw.column(n).to_numpy(zero_copy_only=False).astype(np.float32)
                for _, n in names
            ],
            axis=1,
        )
    flat = pa.array(np.nan_to_num(values).reshape(-1), type=pa.float32())
    return pa.FixedSizeListArray.from_arrays(
        flat, values.shape[1], mask=pa.array(~is_set)
    )


def _normalise(raw: pa.Table) -> pa.Table:
    if "kind" not in raw.column_names:
        raise OperatorError.build(
            "columns", _WHERE, "a 'kind' column", str(raw.column_names)
        )
    kinds = _kinds(raw.column("kind"))
    n = len(raw)
    columns: dict[str, pa.Array] = {"kind": kinds}
    for name in ("src", "dst", "node"):
        if name in raw.column_names:
            columns[name] = raw.column(name).combine_chunks().cast(pa.int64())
        else:
            columns[name] = pa.nulls(n, pa.int64())
    feature = _features(raw, kinds.to_numpy(zero_copy_only=False))
    dim = 0 if feature is None else feature.type.list_size
    if feature is not None:
        columns["feature"] = feature
    if "event_time" in raw.column_names:
        columns["event_time"] = (
            raw.column("event_time").combine_chunks().cast(pa.int64())
        )
    else:
        now = time.time_ns() // 1_000_000
        columns["event_time"] = pa.array(np.full(n, now, dtype=np.int64))
    return pa.Table.from_pydict(columns, schema=update_schema(dim))


def update_batches(table: pa.Table, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Cut an update table into record batches of at most ``batch_rows`` rows."""
    yield from table.combine_chunks().to_batches(max_chunksize=batch_rows)


def write_update_file(batches: list[pa.RecordBatch], path: str | Path) -> Path:
    """Write update batches as Parquet (native schema) or CSV (kind names, ``f*``)."""
    file = Path(path)
    table = pa.Table.from_batches(batches)
    if file.suffix.lower() in (".parquet", ".pq"):
        pq.write_table(table, file)
        return file
    names = np.array([k.name.lower() for k in UpdateKind])
    columns = {
        "kind": pa.array(names[table.column("kind").to_numpy()]),
        "src": table.column("src"),
        "dst": table.column("dst"),
        "node": table.column("node"),
    }
    if "feature" in table.column_names:
        feature = table.column("feature").combine_chunks()
        width = feature.type.list_size
        child = feature.values.slice(feature.offset * width, len(feature) * width)
        values = child.to_numpy(zero_copy_only=False).reshape(-1, width)
        valid = feature.is_valid().to_numpy(zero_copy_only=False)
        for j in range(width):
            columns[f"f{j}"] = pa.array(values[:, j], mask=~valid)
    columns["event_time"] = table.column("event_time")
    pacsv.write_csv(pa.table(columns), file)
    return file
