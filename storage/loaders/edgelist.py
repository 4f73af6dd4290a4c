r"""Edge lists from CSV, TSV, SNAP text, Parquet, METIS and MatrixMarket, ids mapped.

Formats (inferred from the suffix, ``.gz``/``.bz2`` allowed for text):

* ``csv`` (``.csv``) and ``tsv`` (``.tsv``): one edge per line, with or without a
  header; ``#`` comment lines and blank lines are skipped anywhere.
* ``snap`` (``.txt``, ``.snap``, ``.edges``, ``.el``, ``.edgelist``): SNAP's text
  format, fields separated by runs of spaces or tabs, ``#`` comments.
* ``parquet`` (``.parquet``, ``.pq``): columns by name.
* ``metis`` (``.graph``, ``.metis``) and ``mtx`` (``.mtx``): adjacency formats,
  read by :mod:`strata.storage.loaders.matrix`.

Columns are chosen by name (``src_col="from"``) or by position (``src_col=0``). By
default the first column named like a source (``src``, ``source``, ``from``, ``u``,
...) and like a destination (``dst``, ``target``, ``to``, ``v``, ...) are used, else
the first two; a column named ``weight`` (``weights``, ``w``, ``value``) becomes edge
weights, as does any column ``weight_col`` names.

Headers are detected: a first line is a header when its ids are not integers and
the next line's are, or when its fields are known column names (see
:func:`strata.storage.loaders._text.detect_layout`). With ``id_type="auto"`` ids
are integers when the first edge's are (a later non-integer id is then an error
naming its line), else strings; Parquet id columns keep their type.

Node ids: with ``remap=None`` (default) ids are kept only when they are exactly
``0..n-1``; otherwise (1-based, gaps, negative, 64-bit or string ids) they are
remapped to ``0..n-1`` in sorted order and :attr:`EdgeList.node_ids` holds the
original id of every new id, so a 1-based file has exactly its own nodes.
``remap=True`` always remaps; ``remap=False`` never does (then ids must be
non-negative integers and ``num_nodes`` is ``max id + 1``).

Text is parsed by pyarrow's multithreaded CSV reader; when that fails, the file is
re-scanned line by line, so a malformed line is reported as ``file:line``.

Examples:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "g.txt"
    >>> _ = path.write_text("# a SNAP file\n10\t20\n20 30\n")
    >>> edges = read_edges(path)
    >>> edges.src.tolist(), edges.dst.tolist(), edges.node_ids.tolist()
    ([0, 1], [1, 2], [10, 20, 30])
    >>> _ = path.write_text("1 2\n2 3\n")
    >>> read_edges(path).num_nodes  # 1-based ids: no phantom node 0
    3
    >>> _ = path.write_text("0 1\n1 2 3\n")
    >>> read_edges(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    strata.storage.errors.FormatError: .../g.txt:2 in read_edges: expected 2 fields, ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv
import pyarrow.parquet as pq

from strata.storage._types import Int64Array
from strata.storage.csr import CSRGraph, DuplicatePolicy, SelfLoopPolicy
from strata.storage.dataset.model import GraphDataset
from strata.storage.errors import FormatError
from strata.storage.loaders._text import (
    DST_NAMES,
    SRC_NAMES,
    WEIGHT_NAMES,
    detect_layout,
    find_bad_line,
    normalise,
)
from strata.storage.loaders.nodes import read_node_table
from strata.storage.loaders.structural import structural_features

EdgeFormat = Literal["csv", "tsv", "snap", "parquet", "metis", "mtx"]
FORMATS: tuple[str, ...] = ("csv", "tsv", "snap", "parquet", "metis", "mtx")
IdType = Literal["auto", "int", "str"]
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
    ".graph": "metis",
    ".metis": "metis",
    ".mtx": "mtx",
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
        directed: ``False`` when the format itself is undirected (METIS, a
            symmetric MatrixMarket matrix): then both directions are listed.
        node_data: per-node arrays the format carries (METIS vertex weights).
    """

    src: Int64Array
    dst: Int64Array
    num_nodes: int
    node_ids: np.ndarray | None = None
    weight: np.ndarray | None = None
    directed: bool = True
    node_data: dict[str, np.ndarray] = field(default_factory=dict)


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


def _by_alias(names: tuple[str, ...], aliases: tuple[str, ...]) -> int | None:
    lowered = [n.lower() for n in names]
    for alias in aliases:
        if alias in lowered:
            return lowered.index(alias)
    return None


def _resolve(
    col: Column,
    aliases: tuple[str, ...],
    fallback: int | None,
    names: tuple[str, ...],
    path: Path,
    flag: str,
) -> int | None:
    """The position of a column given by name, position, or (``None``) detected."""
    if col is None:
        found = _by_alias(names, aliases)
        return fallback if found is None else found
    if isinstance(col, int):
        if not 0 <= col < len(names):
            raise FormatError.build(
                f"{flag} column {col}",
                f"{_WHERE}({path})",
                f"a position < {len(names)}",
                f"a file with {len(names)} columns",
            )
        return col
    if col not in names:
        raise FormatError.build(
            f"{flag} column {col!r}",
            f"{_WHERE}({path})",
            f"one of the columns {list(names)}",
            "no such column",
            f"pass {flag} with one of those names (names need a header line)",
        )
    return names.index(col)


def _pick(
    cols: tuple[Column, Column, Column], names: tuple[str, ...], path: Path
) -> tuple[int, int, int | None]:
    src_i = _resolve(cols[0], SRC_NAMES, 0, names, path, "--src")
    dst_i = _resolve(cols[1], DST_NAMES, 1, names, path, "--dst")
    w_i = _resolve(cols[2], WEIGHT_NAMES, None, names, path, "--weight")
    assert src_i is not None
    assert dst_i is not None
    if src_i == dst_i or len(names) < 2:
        raise FormatError.build(
            "columns",
            f"{_WHERE}({path})",
            "different src and dst columns",
            f"column {src_i} twice (columns {list(names)})",
        )
    if w_i in (src_i, dst_i):
        w_i = None if cols[2] is None else w_i
    return src_i, dst_i, w_i


def _read_text(
    path: Path,
    fmt: str,
    cols: tuple[Column, Column, Column],
    header: bool | None,
    id_type: str,
) -> tuple[pa.Array, pa.Array, pa.Array | None]:
    named = any(isinstance(c, str) for c in cols)
    layout = detect_layout(path, fmt, header, id_type, named)
    src_i, dst_i, w_i = _pick(cols, layout.names, path)
    if id_type == "auto":
        # The first row decides: a later non-integer id is then a typo to report.
        id_type = "int" if layout.int_ids else "str"
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
        src_i, dst_i, w_i = _pick(cols, names, path)
        picked = [src_i, dst_i] + ([] if w_i is None else [w_i])
        table = pq.read_table(str(path), columns=[names[i] for i in picked])
    except (pa.ArrowException, OSError) as err:
        raise FormatError.build(
            str(path),
            _WHERE,
            "a complete Parquet file",
            f"{type(err).__name__}: {err}",
            "the file may be truncated; write it again",
        ) from err
    for i, column in zip(picked, table.columns, strict=True):
        if column.null_count:
            row = int(np.argmax(column.is_null().to_numpy(zero_copy_only=False)))
            raise FormatError.build(
                f"column {names[i]!r}",
                f"{_WHERE}({path})",
                "no missing values",
                f"a null at row {row}",
            )
    weight = table.column(2) if w_i is not None else None
    if weight is not None and not (
        pa.types.is_integer(weight.type) or pa.types.is_floating(weight.type)
    ):
        raise FormatError.build(
            f"weight column {names[w_i or 0]!r}",
            f"{_WHERE}({path})",
            "numbers",
            f"Arrow type {weight.type}",
            "choose another column with --weight, or cast it to float",
        )
    return table.column(0), table.column(1), weight


def _ids_to_numpy(
    column: pa.ChunkedArray | pa.Array, path: Path, name: str
) -> np.ndarray:
    kind = column.type
    if pa.types.is_integer(kind):
        if pa.types.is_uint64(kind) and len(column) and pc.max(column).as_py() >= 2**63:
            # 64-bit hashes above int64: keep them exact as strings.
            return np.asarray(column.cast(pa.string()).to_numpy(False), dtype=str)
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
            remap = int(both.min()) != 0 or not present.all()
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


def map_id_column(
    column: pa.ChunkedArray | pa.Array, path: str | Path, name: str
) -> tuple[Int64Array, np.ndarray]:
    """Dense ids ``0..n-1`` for one id column, as :func:`read_edges` remaps ids.

    For tables whose id columns are separate id spaces (users and items of an
    interaction table), each column is mapped on its own.

    Args:
        column: integer or string ids (uint64 ids above int64 stay exact, as text).
        path: the file, for error messages.
        name: the column's name, for error messages.

    Returns:
        ``(dense, node_ids)``: the dense id of every row, and the original id of
        every dense id, in sorted order.

    Raises:
        FormatError: for ids that are neither integers nor strings.

    Examples:
        >>> dense, ids = map_id_column(pa.array(["b", "a", "b"]), "t.csv", "user")
        >>> dense.tolist(), ids.tolist()
        ([1, 0, 1], ['a', 'b'])
    """
    ids = _ids_to_numpy(column, Path(path), name)
    edges = _remap(ids, ids[:0], True, None, Path(path))
    assert edges.node_ids is not None
    return edges.src, edges.node_ids


def _auto_ids(
    src: pa.ChunkedArray | pa.Array, dst: pa.ChunkedArray | pa.Array
) -> tuple[pa.ChunkedArray | pa.Array, pa.ChunkedArray | pa.Array]:
    """Integer ids when every id of both columns parses as one, else strings."""
    if not (pa.types.is_string(src.type) or pa.types.is_string(dst.type)):
        return src, dst
    try:
        return pc.cast(src, pa.int64()), pc.cast(dst, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return src.cast(pa.string()), dst.cast(pa.string())


def read_edges(
    path: str | Path,
    *,
    format: EdgeFormat | None = None,
    src_col: Column = None,
    dst_col: Column = None,
    weight_col: Column = None,
    header: bool | None = None,
    remap: bool | None = None,
    id_type: IdType = "auto",
    num_nodes: int | None = None,
) -> EdgeList:
    """Read an edge list file.

    Args:
        path: the file.
        format: one of :data:`FORMATS`; inferred from the suffix when omitted.
        src_col: source column, by name or position (default: detected, else 0).
        dst_col: destination column (default: detected, else 1).
        weight_col: weight column (default: a column named ``weight``, if any).
        header: whether text files have a header line; ``None`` detects one.
        remap: remap ids to ``0..n-1`` (see the module doc); ``None`` remaps
            unless ids are already exactly ``0..n-1``.
        id_type: ``"auto"`` (integers when every id is one, else strings),
            ``"int"`` (a non-integer id is an error naming its line) or ``"str"``.
        num_nodes: node count when not remapping (isolated trailing nodes).

    Returns:
        The edges.

    Raises:
        FormatError: naming the file and line of a malformed line, a missing column
            (with the columns present), null or float ids, non-numeric weights, a
            truncated Parquet file.
    """
    path = Path(path)
    if not path.is_file():
        raise FormatError.build(str(path), _WHERE, "an edge list file", "no such file")
    fmt = format or infer_format(path)
    if fmt not in FORMATS:
        raise FormatError.build("format", _WHERE, f"one of {FORMATS}", repr(fmt))
    if fmt in ("metis", "mtx"):
        from strata.storage.loaders.matrix import read_matrix

        return read_matrix(path, fmt)
    cols = (src_col, dst_col, weight_col)
    if fmt == "parquet":
        src_a, dst_a, weight_a = _read_parquet(path, cols)
    else:
        src_a, dst_a, weight_a = _read_text(path, fmt, cols, header, id_type)
    if id_type == "auto":
        src_a, dst_a = _auto_ids(src_a, dst_a)
    elif id_type == "str":
        src_a, dst_a = src_a.cast(pa.string()), dst_a.cast(pa.string())
    src = _ids_to_numpy(src_a, path, "src")
    dst = _ids_to_numpy(dst_a, path, "dst")
    if src.dtype.kind != dst.dtype.kind:
        src, dst = src.astype(str), dst.astype(str)
    edges = _remap(src, dst, remap, num_nodes, path)
    if weight_a is None:
        return edges
    weight = np.asarray(weight_a.to_numpy(), dtype=np.float64)
    return replace(edges, weight=weight)


def load_edge_list(
    path: str | Path,
    *,
    name: str | None = None,
    self_loops: SelfLoopPolicy = SelfLoopPolicy.KEEP,
    duplicates: DuplicatePolicy = DuplicatePolicy.KEEP,
    undirected: bool = False,
    symmetrize: bool = False,
    nodes: str | Path | None = None,
    node_id_col: str | None = None,
    label_col: str | None = None,
    structural: str | None = None,
    **read_options: Any,
) -> GraphDataset:
    """Read an edge list (any of :data:`FORMATS`) into a :class:`GraphDataset`.

    Direction is explicit: edges are read as directed unless ``undirected`` (then
    the reverse of every edge is added) or the format is undirected (METIS, a
    symmetric ``.mtx``, which list both directions already). ``meta['directed']``
    records which.

    Args:
        path: the file.
        name: dataset name (default: the file name without suffixes).
        self_loops: CSR policy for ``v -> v`` edges (default keep).
        duplicates: CSR policy for repeated edges (default keep).
        undirected: the edges are undirected: add the reverse of every edge.
        symmetrize: the former name of ``undirected``.
        nodes: a node table (Parquet or CSV) joined by id: features, labels, masks
            (see :func:`strata.storage.loaders.nodes.read_node_table`).
        node_id_col: the node table's id column (default: detected).
        label_col: the node table's label column (default: ``label``/``y``).
        structural: when there are no features ``x``, derive them (see
            :data:`strata.storage.loaders.structural.STRUCTURAL_KINDS`).
        **read_options: passed to :func:`read_edges` (``format``, ``src_col``, ...).

    Returns:
        The dataset; ``node_data['node_ids']`` holds the original id of every node
        when the file's ids were remapped (``meta['id_column']`` names it), and
        weights become ``graph.edge_weight``.
    """
    path = Path(path)
    edges = read_edges(path, **read_options)
    undirected = undirected or symmetrize
    graph = CSRGraph.from_edges(
        edges.src,
        edges.dst,
        edges.num_nodes,
        edge_weight=edges.weight,
        self_loops=self_loops,
        duplicates=duplicates,
        symmetrize=undirected and edges.directed,
    )
    node_data: dict[str, np.ndarray] = dict(edges.node_data)
    meta: dict[str, Any] = {
        "source": str(path),
        "directed": edges.directed and not undirected,
    }
    if edges.node_ids is not None:
        node_data["node_ids"] = edges.node_ids
        meta["id_column"] = "node_ids"
    if nodes is not None:
        table = read_node_table(
            nodes,
            edges.node_ids,
            graph.num_nodes,
            id_col=node_id_col,
            label_col=label_col,
        )
        node_data.update(table.columns)
        meta.update(table.meta)
    if structural is not None and "x" not in node_data:
        node_data["x"] = structural_features(graph, structural)
        meta["x"] = f"structural:{structural}"
    stem = name or path.name.split(".")[0]
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", stem):
        stem = "edges"
    return GraphDataset(graph, node_data=node_data, name=stem, meta=meta)
