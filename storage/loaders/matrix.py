r"""Adjacency formats: METIS ``.graph`` and MatrixMarket ``.mtx`` files.

* METIS (``.graph``, ``.metis``): a header ``n m [fmt [ncon]]`` then one line per
  vertex listing its neighbours (1-based), optionally led by a vertex size and
  ``ncon`` vertex weights and with a weight after each neighbour (``fmt`` digits
  ``abc``: sizes, vertex weights, edge weights). ``%`` lines are comments; a blank
  line is a vertex without neighbours. The graph is undirected: each edge is listed
  from both ends and ``m`` counts it once. Vertex weights become
  ``node_data['node_weight']`` (``n x ncon``), sizes ``node_data['node_size']``.
* MatrixMarket (``.mtx``): ``%%MatrixMarket matrix coordinate real|integer|pattern
  general|symmetric``, comments, a size line ``rows cols nnz`` (square), then ``nnz``
  lines ``i j [value]`` (1-based). Entry ``(i, j)`` is the edge ``i -> j``; a
  ``symmetric`` matrix also gets ``j -> i`` and reads as undirected. Values become
  edge weights.

Ids are the formats' own ``1..n``, so :attr:`EdgeList.node_ids` is ``1..n``: every
output names a node as the file does.

Examples:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tri.graph"
    >>> _ = path.write_text("% a triangle\n3 3\n2 3\n1 3\n1 2\n")
    >>> edges = read_matrix(path, "metis")
    >>> edges.num_nodes, edges.src.size, edges.directed, edges.node_ids.tolist()
    (3, 6, False, [1, 2, 3])
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from strata.storage.errors import FormatError
from strata.storage.loaders._text import open_text
from strata.storage.loaders.edgelist import EdgeList

_WHERE = "read_edges"


def _lines(path: Path) -> list[str]:
    with open_text(path) as f:
        data = f.read()
    if b"\0" in data[:4096]:
        raise FormatError.build(
            str(path), _WHERE, "a text file", "binary data (a NUL byte)"
        )
    return data.decode("utf-8", errors="replace").splitlines()


def _ints(path: Path, number: int, line: str, expected: str) -> list[int]:
    try:
        return [int(token) for token in line.split()]
    except ValueError:
        raise FormatError.build(
            f"{path}:{number}", _WHERE, expected, repr(line[:120])
        ) from None


def _read_metis(path: Path) -> EdgeList:
    lines = _lines(path)
    body = [(i, line) for i, line in enumerate(lines, 1) if not line.startswith("%")]
    if not body or not body[0][1].strip():
        raise FormatError.build(
            f"{path}:1", _WHERE, "a METIS header 'n m [fmt [ncon]]'", "no header"
        )
    number, header = body[0]
    head = _ints(path, number, header, "a METIS header 'n m [fmt [ncon]]'")
    if not 2 <= len(head) <= 4 or min(head) < 0:
        raise FormatError.build(
            f"{path}:{number}",
            _WHERE,
            "a METIS header 'n m [fmt [ncon]]' of non-negative integers",
            repr(header),
        )
    n, m = head[0], head[1]
    fmt = f"{head[2]:03d}" if len(head) > 2 else "000"
    has_size, has_vwgt, has_ewgt = (c == "1" for c in fmt[-3:])
    ncon = head[3] if len(head) > 3 else int(has_vwgt)
    vertex_lines = body[1:]
    while len(vertex_lines) > n and not vertex_lines[-1][1].strip():
        vertex_lines.pop()  # trailing blank lines
    if len(vertex_lines) != n:
        raise FormatError.build(
            str(path),
            _WHERE,
            f"{n} vertex lines (the header's n)",
            f"{len(vertex_lines)}",
            "the file may be truncated",
        )
    lead = int(has_size) + ncon
    step = 2 if has_ewgt else 1
    pairs = "(neighbour, weight) pairs" if has_ewgt else "neighbours"
    src: list[int] = []
    dst: list[int] = []
    weights: list[int] = []
    sizes = np.zeros(n, np.int64)
    vwgt = np.zeros((n, ncon), np.int64)
    for v, (number, line) in enumerate(vertex_lines):
        values = _ints(path, number, line, "integers (vertex ids and weights)")
        rest = values[lead:]
        if len(values) < lead or len(rest) % step:
            raise FormatError.build(
                f"{path}:{number}",
                _WHERE,
                f"{lead} leading value(s) then {pairs}",
                repr(line[:120]),
            )
        if has_size:
            sizes[v] = values[0]
        vwgt[v] = values[int(has_size) : lead]
        neighbours = rest[::step]
        bad = [u for u in neighbours if not 1 <= u <= n]
        if bad:
            raise FormatError.build(
                f"{path}:{number}",
                _WHERE,
                f"neighbour ids in 1..{n}",
                str(bad[0]),
            )
        src.extend([v] * len(neighbours))
        dst.extend(u - 1 for u in neighbours)
        if has_ewgt:
            weights.extend(rest[1::step])
    if len(src) != 2 * m:
        raise FormatError.build(
            f"{path}:{body[0][0]}",
            _WHERE,
            f"{2 * m} adjacency entries (each of the header's m={m} edges from both "
            "ends)",
            str(len(src)),
        )
    node_data: dict[str, np.ndarray] = {}
    if has_size:
        node_data["node_size"] = sizes
    if ncon:
        node_data["node_weight"] = vwgt
    return EdgeList(
        np.asarray(src, np.int64),
        np.asarray(dst, np.int64),
        n,
        np.arange(1, n + 1, dtype=np.int64),
        np.asarray(weights, np.float64) if has_ewgt else None,
        directed=False,
        node_data=node_data,
    )


def _mtx_header(path: Path, lines: list[str]) -> tuple[bool, bool]:
    """``(has values, symmetric)`` from the banner line."""
    banner = lines[0].lower().split() if lines else []
    expected = (
        "'%%MatrixMarket matrix coordinate real|integer|pattern general|symmetric'"
    )
    if (
        len(banner) != 5
        or banner[0] != "%%matrixmarket"
        or banner[1:3] != ["matrix", "coordinate"]
        or banner[3] not in ("real", "integer", "pattern")
        or banner[4] not in ("general", "symmetric")
    ):
        raise FormatError.build(
            f"{path}:1", _WHERE, expected, repr((lines or [""])[0][:120])
        )
    return banner[3] != "pattern", banner[4] == "symmetric"


def _read_mtx(path: Path) -> EdgeList:
    lines = _lines(path)
    has_values, symmetric = _mtx_header(path, lines)
    body = [
        (i, line)
        for i, line in enumerate(lines, 1)
        if line.strip() and not line.lstrip().startswith("%")
    ]
    if not body:
        raise FormatError.build(str(path), _WHERE, "a size line", "none")
    number, size_line = body[0]
    size = _ints(path, number, size_line, "a size line 'rows cols nnz'")
    if len(size) != 3 or size[0] != size[1] or min(size) < 0:
        raise FormatError.build(
            f"{path}:{number}",
            _WHERE,
            "'rows cols nnz' of a square matrix (an adjacency matrix)",
            repr(size_line),
        )
    n, nnz = size[0], size[2]
    entries = body[1:]
    if len(entries) != nnz:
        raise FormatError.build(
            str(path),
            _WHERE,
            f"{nnz} entries (the size line's nnz)",
            str(len(entries)),
            "the file may be truncated",
        )
    width = 3 if has_values else 2
    table = np.zeros((nnz, width), np.float64)
    for row, (number, line) in enumerate(entries):
        fields = line.split()
        try:
            if len(fields) != width:
                raise ValueError(line)
            i, j = int(fields[0]), int(fields[1])
            value = float(fields[2]) if has_values else 0.0
            if not (1 <= i <= n and 1 <= j <= n):
                raise ValueError(line)
        except ValueError:
            raise FormatError.build(
                f"{path}:{number}",
                _WHERE,
                f"'i j{' value' if has_values else ''}' with ids in 1..{n}",
                repr(line[:120]),
            ) from None
        table[row, 0], table[row, 1] = i - 1, j - 1
        if has_values:
            table[row, 2] = value
    src = table[:, 0].astype(np.int64)
    dst = table[:, 1].astype(np.int64)
    weight = table[:, 2] if has_values else None
    if symmetric:
        off = src != dst  # the diagonal is listed once and stays once
        src, dst = np.concatenate([src, dst[off]]), np.concatenate([dst, src[off]])
        if weight is not None:
            weight = np.concatenate([weight, weight[off]])
    return EdgeList(
        src,
        dst,
        n,
        np.arange(1, n + 1, dtype=np.int64),
        weight,
        directed=not symmetric,
    )


def read_matrix(path: str | Path, fmt: str) -> EdgeList:
    """Read a METIS (``fmt="metis"``) or MatrixMarket (``"mtx"``) file.

    Args:
        path: the file.
        fmt: ``metis`` or ``mtx``.

    Returns:
        The edges, ``directed=False`` for METIS and symmetric matrices.

    Raises:
        FormatError: naming the file and line of a malformed header or line, an id
            out of range, or a count that disagrees with the header.
    """
    path = Path(path)
    return _read_metis(path) if fmt == "metis" else _read_mtx(path)
