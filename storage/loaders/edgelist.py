r"""Edge lists from CSV, TSV, SNAP text and Parquet, with optional id remapping.

Formats (inferred from the suffix, ``.gz``/``.bz2`` allowed for text):

* ``csv`` (``.csv``) and ``tsv`` (``.tsv``): one edge per line, with or without a
  header; ``#`` comment lines and blank lines are skipped anywhere.
* ``snap`` (``.txt``, ``.snap``, ``.edges``, ``.el``, ``.edgelist``): SNAP's text
  format, fields separated by runs of spaces or tabs, ``#`` comments.
* ``parquet`` (``.parquet``, ``.pq``): two columns by name.

Columns are chosen by name (``src_col="from"``) or by position (``src_col=0``). By
default the columns named ``src``/``dst`` are used when present, else the first two.
A third numeric column becomes edge weights only when ``weight_col`` names it.

Node ids: with ``remap=None`` (default) ids are kept when they are exactly
``0..n-1``; otherwise (gaps, negative ids, string ids) they are remapped to
``0..n-1`` in sorted order and :attr:`EdgeList.node_ids` holds the original id of
every new id. ``remap=True`` always remaps; ``remap=False`` never does (then ids
must be non-negative integers and ``num_nodes`` is ``max id + 1``).

Text is parsed by pyarrow's multithreaded CSV reader; when that fails, the file is
re-scanned line by line, so a malformed line is reported as ``file:line``.

Examples:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "g.txt"
    >>> _ = path.write_text("# a SNAP file\n10\t20\n20 30\n")
    >>> edges = read_edges(path)
    >>> edges.src.tolist(), edges.dst.tolist(), edges.node_ids.tolist()
    ([0, 1], [1, 2], [10, 20, 30])
    >>> _ = path.write_text("0 1\n1 2 3\n")
    >>> read_edges(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    strata.storage.errors.FormatError: .../g.txt:2 in read_edges: expected 2 fields, ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.csv as pv
import pyarrow.parquet as pq

from strata.storage._types import Int64Array
from strata.storage.csr import CSRGraph, DuplicatePolicy, SelfLoopPolicy
from strata.storage.dataset.model import GraphDataset
from strata.storage.errors import FormatError
from strata.storage.loaders._text import detect_layout, find_bad_line, normalise

EdgeFormat = Literal["csv", "tsv", "snap", "parquet"]
FORMATS: tuple[str, ...] = ("csv", "tsv", "snap", "parquet")
_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".txt": "snap",
    ".snap": "snap",
    ".edges": "snap",
    ".el": "snap",
    ".edgelist": "snap",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_WHERE = "read_edges"
Column = str | int | None


@dataclass(frozen=True, slots=True)
class EdgeList:
    """Parsed edges with contiguous node ids.

    Attributes:
        src: int64 source ids in ``[0, num_nodes)``, file order.
        dst: int64 destination ids.
        num_nodes: node count.
        node_ids: original id of each node when ids were remapped (int64 or str
            array), else ``None``.
        weight: float64 edge weights when a weight column was read.
    """

    src: Int64Array
    dst: Int64Array
    num_nodes: int
    node_ids: np.ndarray | None = None
    weight: np.ndarray | None = None


def infer_format(path: Path) -> str:
    """The edge-list format implied by ``path``'s suffix (``.gz``/``.bz2`` skipped)."""
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and suffixes[-1] in (".gz", ".bz2"):
        suffixes.pop()
    fmt = _SUFFIXES.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise FormatError.build(
            "format",
            f"{_WHERE}({path.name})",
            f"a suffix among {sorted(_SUFFIXES)}",
            repr("".join(path.suffixes) or "no suffix"),
            "pass format= (or --format) explicitly",
        )
    return fmt


def _resolve(
    col: Column, default: str, fallback: int, names: tuple[str, ...], path: Path
) -> int:
    if col is None:
        return names.index(default) if default in names else fallback
    if isinstance(col, int):
        if not 0 <= col < len(names):
            raise FormatError.build(
                f"column {col}",
                f"{_WHERE}({path})",
                f"a position < {len(names)}",
                f"a file with {len(names)} columns",
            )
        return col
    if col not in names:
        raise FormatError.build(
            f"column {col!r}",
            f"{_WHERE}({path})",
            f"one of the columns {list(names)}",
            "no such column",
            "pass --src-col/--dst-col (names need a header)",
        )
    return names.index(col)


def _read_text(
    path: Path,
    fmt: str,
    cols: tuple[Column, Column, Column],
    header: bool | None,
    id_type: str,
) -> tuple[pa.Array, pa.Array, pa.Array | None]:
    layout = detect_layout(path, fmt, header, numeric_ids=id_type == "int")
    src_i = _resolve(cols[0], "src", 0, layout.names, path)
    dst_i = _resolve(cols[1], "dst", 1, layout.names, path)
    w_i = None if cols[2] is None else _resolve(cols[2], "", 2, layout.names, path)
    if src_i == dst_i:
        raise FormatError.build(
            "columns",
            f"{_WHERE}({path})",
            "different src and dst columns",
            f"column {src_i} twice",
        )
    id_arrow = pa.int64() if id_type == "int" else pa.string()
    wanted = {src_i: id_arrow, dst_i: id_arrow}
    if w_i is not None:
        wanted[w_i] = pa.float64()
    names = [f"c{i}" for i in range(len(layout.names))]

    def parse(source: object, skip: int, delimiter: str) -> pa.Table:
        return pv.read_csv(
            source,
            read_options=pv.ReadOptions(
                skip_rows=skip + int(layout.header), column_names=names
            ),
            parse_options=pv.ParseOptions(delimiter=delimiter),
            convert_options=pv.ConvertOptions(
                include_columns=[names[i] for i in wanted],
                column_types={names[i]: t for i, t in wanted.items()},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )

    try:
        if layout.whitespace and layout.delimiter == " ":
            raise pa.ArrowInvalid("runs of spaces need normalising")
        table = parse(str(path), layout.leading_comments, layout.delimiter)
    except pa.ArrowInvalid as first_error:
        bad = find_bad_line(
            path,
            layout,
            (src_i, dst_i) if id_type == "int" else (),
            () if w_i is None else (w_i,),
        )
        if bad is not None:
            number, expected, text = bad
            raise FormatError.build(
                f"{path}:{number}", _WHERE, expected, repr(text[:120])
            ) from None
        try:
            # normalise() turns SNAP whitespace runs into single spaces.
            delimiter = " " if layout.whitespace else layout.delimiter
            data = pa.BufferReader(normalise(path, layout))
            table = parse(data, layout.leading_comments, delimiter)
        except pa.ArrowInvalid as err:
            raise FormatError.build(
                str(path), _WHERE, "a parsable edge list", str(err)
            ) from first_error
    src, dst = table.column(names[src_i]), table.column(names[dst_i])
    weight = None if w_i is None else table.column(names[w_i])
    return src, dst, weight


def _read_parquet(
    path: Path, cols: tuple[Column, Column, Column]
) -> tuple[pa.Array, pa.Array, pa.Array | None]:
    try:
        names = tuple(pq.read_schema(str(path)).names)
    except (pa.ArrowException, OSError) as err:
        raise FormatError.build(str(path), _WHERE, "a Parquet file", str(err)) from err
    picked = [
        _resolve(cols[0], "src", 0, names, path),
        _resolve(cols[1], "dst", 1, names, path),
    ]
    if cols[2] is not None:
        picked.append(_resolve(cols[2], "", 2, names, path))
    table = pq.read_table(str(path), columns=[names[i] for i in picked])
    for i, column in zip(picked, table.columns, strict=True):
        if column.null_count:
            row = int(np.argmax(column.is_null().to_numpy(zero_copy_only=False)))
            raise FormatError.build(
                f"column {names[i]!r}",
                f"{_WHERE}({path})",
                "no missing values",
                f"a null at row {row}",
            )
    weight = table.column(2) if len(picked) == 3 else None
    return table.column(0), table.column(1), weight


def _ids_to_numpy(
    column: pa.ChunkedArray | pa.Array, path: Path, name: str
) -> np.ndarray:
    kind = column.type
    if pa.types.is_integer(kind):
        return np.asarray(column.to_numpy(), dtype=np.int64)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=str)
    raise FormatError.build(
        f"{name} column",
        f"{_WHERE}({path})",
        "integer or string ids",
        str(kind),
        "float ids are not node ids; convert them first",
    )


def _present_ids(ids: np.ndarray) -> np.ndarray | None:
    """Which ids in ``[min, max]`` occur, when that range is small enough to table."""
    if ids.size == 0:
        return None
    low, high = int(ids.min()), int(ids.max())
    if high - low > 2 * ids.size + (1 << 20):
        return None
    present = np.zeros(high - low + 1, dtype=bool)
    present[ids - low] = True
    return present


def _remap(
    src: np.ndarray,
    dst: np.ndarray,
    remap: bool | None,
    num_nodes: int | None,
    path: Path,
) -> EdgeList:
    numeric = src.dtype.kind in "iu" and dst.dtype.kind in "iu"
    both = np.concatenate([src, dst])
    present = _present_ids(both) if numeric else None
    if remap is None:
        remap = not numeric
        if present is not None:
            remap = int(both.min()) < 0 or not present.all()
        elif numeric and both.size:
            remap = True  # ids too sparse for a table: certainly not 0..n-1
    if remap:
        m = src.shape[0]
        if present is not None:
            # Dense id range: a lookup table is O(m), sorting is O(m log m).
            low = int(both.min())
            node_ids = np.flatnonzero(present).astype(np.int64) + low
            lookup = np.cumsum(present, dtype=np.int64) - 1
            inverse = lookup[both - low]
        else:
            node_ids, inverse = np.unique(both, return_inverse=True)
        return EdgeList(
            inverse[:m].astype(np.int64),
            inverse[m:].astype(np.int64),
            int(node_ids.shape[0]),
            node_ids,
        )
    if not numeric:
        raise FormatError.build(
            "node ids",
            f"{_WHERE}({path})",
            "integer ids without remapping",
            "string ids",
            "use remap=True (the default remaps string ids)",
        )
    if both.size and both.min() < 0:
        raise FormatError.build(
            "node ids",
            f"{_WHERE}({path})",
            "ids >= 0 without remapping",
            str(both.min()),
            "use remap=True",
        )
    n = int(both.max()) + 1 if both.size else 0
    if num_nodes is not None:
        if num_nodes < n:
            raise FormatError.build(
                "num_nodes",
                f"{_WHERE}({path})",
                f"num_nodes > max id ({n - 1})",
                str(num_nodes),
            )
        n = num_nodes
    return EdgeList(src.astype(np.int64), dst.astype(np.int64), n)


def read_edges(
    path: str | Path,
    *,
    format: EdgeFormat | None = None,
    src_col: Column = None,
    dst_col: Column = None,
    weight_col: Column = None,
    header: bool | None = None,
    remap: bool | None = None,
    id_type: Literal["int", "str"] = "int",
    num_nodes: int | None = None,
) -> EdgeList:
    """Read an edge list file.

    Args:
        path: the file.
        format: ``csv``, ``tsv``, ``snap`` or ``parquet``; inferred from the suffix
            when omitted.
        src_col: source column, by name or position (default ``src``, else 0).
        dst_col: destination column (default ``dst``, else 1).
        weight_col: optional weight column.
        header: whether text files have a header line; ``None`` detects one (a first
            line whose id fields are not integers).
        remap: remap ids to ``0..n-1`` (see the module doc); ``None`` remaps only
            when ids are not already ``0..n-1``.
        id_type: ``"int"`` (text ids must be integers) or ``"str"`` (any token is an
            id; implies remapping).
        num_nodes: node count when not remapping (isolated trailing nodes).

    Returns:
        The edges.

    Raises:
        FormatError: naming the file and line of a malformed line, a missing column
            (with the columns present), null or non-integer ids.
    """
    path = Path(path)
    if not path.is_file():
        raise FormatError.build(str(path), _WHERE, "an edge list file", "no such file")
    fmt = format or infer_format(path)
    if fmt not in FORMATS:
        raise FormatError.build("format", _WHERE, f"one of {FORMATS}", repr(fmt))
    cols = (src_col, dst_col, weight_col)
    if fmt == "parquet":
        src_a, dst_a, weight_a = _read_parquet(path, cols)
    else:
        src_a, dst_a, weight_a = _read_text(path, fmt, cols, header, id_type)
    src = _ids_to_numpy(src_a, path, "src")
    dst = _ids_to_numpy(dst_a, path, "dst")
    edges = _remap(src, dst, remap, num_nodes, path)
    if weight_a is None:
        return edges
    weight = np.asarray(weight_a.to_numpy(), dtype=np.float64)
    return EdgeList(edges.src, edges.dst, edges.num_nodes, edges.node_ids, weight)


def load_edge_list(
    path: str | Path,
    *,
    name: str | None = None,
    self_loops: SelfLoopPolicy = SelfLoopPolicy.KEEP,
    duplicates: DuplicatePolicy = DuplicatePolicy.KEEP,
    symmetrize: bool = False,
    **read_options: Any,
) -> GraphDataset:
    """Read an edge list into a :class:`GraphDataset`.

    Args:
        path: the file.
        name: dataset name (default: the file name without suffixes).
        self_loops: CSR policy for ``v -> v`` edges (default keep).
        duplicates: CSR policy for repeated edges (default keep).
        symmetrize: add the reverse of every edge.
        **read_options: passed to :func:`read_edges` (``format``, ``src_col``, ...).

    Returns:
        The dataset; ``node_data['node_ids']`` holds the original ids when the
        file's ids were remapped, and weights become ``graph.edge_weight``.
    """
    path = Path(path)
    edges = read_edges(path, **read_options)
    graph = CSRGraph.from_edges(
        edges.src,
        edges.dst,
        edges.num_nodes,
        edge_weight=edges.weight,
        self_loops=self_loops,
        duplicates=duplicates,
        symmetrize=symmetrize,
    )
    node_data = {} if edges.node_ids is None else {"node_ids": edges.node_ids}
    stem = name or path.name.split(".")[0]
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", stem):
        stem = "edges"
    return GraphDataset(
        graph, node_data=node_data, name=stem, meta={"source": str(path)}
    )
