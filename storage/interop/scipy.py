"""Converters between :class:`CSRGraph` and ``scipy.sparse`` matrices.

The adjacency matrix has ``A[u, v]`` = weight of edge ``u -> v`` (1 when the graph is
unweighted); parallel edges stay separate entries (scipy sums them on conversion).

Examples:
    >>> import numpy as np
    >>> from strata.storage.csr import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2]))
    >>> to_scipy(g).toarray().tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    >>> from_scipy(to_scipy(g)).indices.tolist()
    [1, 2]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from strata.storage.csr import CSRGraph, DuplicatePolicy, SelfLoopPolicy
from strata.storage.errors import GraphError
from strata.storage.interop._guard import require

_HINT = "pip install scipy"


def to_scipy(graph: CSRGraph) -> Any:
    """The ``num_nodes x num_nodes`` ``scipy.sparse.csr_matrix`` of ``graph``.

    Args:
        graph: the graph.

    Returns:
        A float32 CSR matrix sharing no memory with ``graph``.
    """
    sparse = require("scipy.sparse", "to_scipy", _HINT)
    data = (
        np.ones(graph.num_edges, dtype=np.float32)
        if graph.edge_weight is None
        else graph.edge_weight.copy()
    )
    n = graph.num_nodes
    return sparse.csr_matrix(
        (data, graph.indices.copy(), graph.indptr.copy()), shape=(n, n)
    )


def from_scipy(
    matrix: Any,
    *,
    weighted: bool | None = None,
    self_loops: SelfLoopPolicy = SelfLoopPolicy.KEEP,
    duplicates: DuplicatePolicy = DuplicatePolicy.KEEP,
) -> CSRGraph:
    """Build a graph from a square scipy sparse matrix (any format).

    Args:
        matrix: the adjacency matrix; stored entries are edges (explicit zeros too).
        weighted: keep entry values as ``edge_weight``; ``None`` keeps them unless
            every value is 1.
        self_loops: CSR policy for diagonal entries.
        duplicates: CSR policy for repeated entries (COO input may repeat).

    Returns:
        The graph.

    Raises:
        GraphError: if the matrix is not square.
    """
    require("scipy.sparse", "from_scipy", _HINT)
    rows, cols = matrix.shape
    if rows != cols:
        raise GraphError.build(
            "matrix", "from_scipy", "a square adjacency matrix", f"shape {matrix.shape}"
        )
    coo = matrix.tocoo()
    values = np.asarray(coo.data)
    keep = weighted if weighted is not None else not np.all(values == 1)
    return CSRGraph.from_edges(
        np.asarray(coo.row, dtype=np.int64),
        np.asarray(coo.col, dtype=np.int64),
        rows,
        edge_weight=values if keep else None,
        self_loops=self_loops,
        duplicates=duplicates,
    )
