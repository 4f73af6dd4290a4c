"""Partition metrics on the undirected simple graph (``partitioners.md`` §4).

Partitioners and metrics read every graph as **undirected and simple**:
:func:`as_undirected_simple` symmetrises a directed graph (``u -> v`` becomes the edge
``{u, v}``), drops self-loops and merges duplicates. Edge weights of a symmetric input
are kept (parallel copies summed); a directed weighted input gets
``w({u, v}) = w(u -> v) + w(v -> u)``. A graph that is already simple and symmetric is
returned as is, after an O(m) check.

Definitions (n vertices, m undirected edges):

* **edge cut**: undirected edges ``{u, v}`` with ``a[u] != a[v]``, each counted once
  (weighted: their total weight); **edge-cut fraction** = cut / m (or / total weight).
* **vertex balance**: ``max_p w(P_p) / (W / k)``; the constraint every partitioner
  honours is ``w(P_p) <= cap = max(ceil(W / k), floor((1 + eps) * W / k))``.
* **edge balance**: edge-cut: ``max_p sum_{v in P_p} deg(v) / (2m / k)``; vertex-cut:
  ``max_p |E_p| / (m / k)``.
* **replication factor**: vertex-cut: ``sum_v |A(v)| / |V'|`` (``A(v)``: parts holding
  an edge of ``v``; ``V'``: vertices with an edge); edge-cut:
  ``1 + sum_p |H_p| / n`` with ``H_p`` the 1-hop halo of part ``p``.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]))
    >>> a = np.array([0, 0, 1, 1], dtype=np.int32)
    >>> edge_cut(g, a), balance(a, 2), halo_sizes(g, a, 2).tolist()
    (2.0, 1.0, [2, 2])
    >>> replication_factor(g, a, 2)
    2.0
"""

from __future__ import annotations

import math

import numpy as np

from strata.partition._jit import njit
from strata.partition._types import BoolArray, Float64Array, Int32Array, Int64Array
from strata.storage import CSRGraph, DuplicatePolicy, SelfLoopPolicy

NO_WEIGHTS = np.empty(0, dtype=np.float32)
NO_WEIGHTS.flags.writeable = False  # like CSRGraph's arrays: one numba signature

__all__ = [
    "as_undirected_simple",
    "balance",
    "balance_cap",
    "edge_balance",
    "edge_cut",
    "halo_sizes",
    "is_simple_symmetric",
    "replication_factor",
    "undirected_edges",
    "vertex_cut_replication",
]


@njit(cache=True)
def _simple_symmetric(indptr: np.ndarray, indices: np.ndarray) -> bool:
    """Rows strictly increasing (no duplicates), no loops, every edge reversed.

    Visiting rows in increasing order, the reverse entries of row ``v`` must appear
    in increasing order too, so one cursor per row checks the transpose in O(m).
    """
    n = indptr.shape[0] - 1
    cursor = indptr[:n].copy()
    for u in range(n):
        prev = -1
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if v <= prev or v == u:
                return False
            prev = v
            c = cursor[v]
            if c >= indptr[v + 1] or indices[c] != u:
                return False
            cursor[v] = c + 1
    for v in range(n):  # noqa: SIM110 - numba compiles loops, not all(genexpr)
        if cursor[v] != indptr[v + 1]:
            return False
    return True


@njit(cache=True)
def cut_stats(
    indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray, a: np.ndarray, k: int
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """One pass over a simple symmetric graph: ``(cut, total, halo, degree_sums)``.

    ``weights`` may be empty (unit weights). Cut and total count each undirected
    edge once; ``halo[p]`` counts vertices outside ``p`` adjacent to it;
    ``degree_sums[p]`` sums the degrees of ``p``'s vertices.
    """
    n = indptr.shape[0] - 1
    weighted = weights.shape[0] > 0
    cut = 0.0
    total = 0.0
    halo = np.zeros(k, dtype=np.int64)
    degree_sums = np.zeros(k, dtype=np.int64)
    seen = np.full(k, -1, dtype=np.int64)
    for v in range(n):
        own = a[v]
        degree_sums[own] += indptr[v + 1] - indptr[v]
        for e in range(indptr[v], indptr[v + 1]):
            w = weights[e] if weighted else 1.0
            total += w
            p = a[indices[e]]
            if p != own:
                cut += w
                if seen[p] != v:
                    seen[p] = v
                    halo[p] += 1
    return cut / 2, total / 2, halo, degree_sums


def is_simple_symmetric(graph: CSRGraph) -> bool:
    """Whether ``graph`` is already undirected and simple (O(m log d) check)."""
    return bool(_simple_symmetric(graph.indptr, graph.indices))


def as_undirected_simple(graph: CSRGraph) -> CSRGraph:
    """Return the undirected simple graph every partitioner and metric reads.

    Args:
        graph: any graph (directed, with loops or duplicates, weighted or not).

    Returns:
        ``graph`` itself when it is already simple and symmetric, else a symmetrised
        copy without loops or duplicates (weights summed over merged copies).
    """
    if graph.edge_weight is None and is_simple_symmetric(graph):
        return graph
    src, dst = graph.to_coo()
    if graph.edge_weight is None:
        return CSRGraph.from_edges(
            src,
            dst,
            graph.num_nodes,
            symmetrize=True,
            self_loops=SelfLoopPolicy.REMOVE,
            duplicates=DuplicatePolicy.REMOVE,
        )
    symmetric = graph.is_symmetric()
    return CSRGraph.from_edges(
        src,
        dst,
        graph.num_nodes,
        edge_weight=graph.edge_weight,
        symmetrize=not symmetric,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.SUM,
    )


def undirected_edges(graph: CSRGraph) -> tuple[Int64Array, Int64Array]:
    """Each undirected edge once as ``(u, v)`` with ``u < v``, in CSR order.

    This is the edge order of ``Partition.edge_assignment`` for vertex-cuts.
    """
    g = as_undirected_simple(graph)
    src, dst = g.to_coo()
    keep = src < dst
    return src[keep], dst[keep].astype(np.int64)


def balance_cap(total_weight: float, k: int, eps: float) -> float:
    """Largest allowed part weight: ``max(ceil(W / k), floor((1 + eps) * W / k))``."""
    return float(
        max(math.ceil(total_weight / k), math.floor((1 + eps) * total_weight / k))
    )


def edge_cut(graph: CSRGraph, assignment: np.ndarray) -> float:
    """Cut edges of the undirected simple graph (weighted: their total weight)."""
    g = as_undirected_simple(graph)
    src, dst = g.to_coo()
    a = np.asarray(assignment)
    crossing = a[src] != a[dst]
    if g.edge_weight is None:
        return float(np.count_nonzero(crossing) // 2)
    return float(g.edge_weight[crossing].sum(dtype=np.float64) / 2)


def balance(
    assignment: np.ndarray,
    k: int,
    node_weights: Float64Array | None = None,
    mask: BoolArray | None = None,
) -> float:
    """``max_p w(P_p) / (W / k)`` over the vertices in ``mask`` (all by default)."""
    a = np.asarray(assignment)
    w = None if node_weights is None else np.asarray(node_weights, dtype=np.float64)
    if mask is not None:
        a = a[mask]
        w = None if w is None else w[mask]
    sizes = np.bincount(a, weights=w, minlength=k).astype(np.float64)
    total = float(sizes.sum())
    return float(sizes.max() * k / total) if total > 0 else 1.0


def edge_balance(graph: CSRGraph, assignment: np.ndarray, k: int) -> float:
    """Edge-cut edge balance: ``max_p sum_{v in P_p} deg(v) / (2m / k)``."""
    g = as_undirected_simple(graph)
    deg = g.out_degree().astype(np.float64)
    return balance(assignment, k, deg) if deg.sum() > 0 else 1.0


def halo_sizes(graph: CSRGraph, assignment: np.ndarray, k: int) -> Int64Array:
    """Per part: vertices owned elsewhere with a neighbour in the part (1-hop halo)."""
    g = as_undirected_simple(graph)
    a = np.ascontiguousarray(assignment, dtype=np.int32)
    _, _, halo, _ = cut_stats(g.indptr, g.indices, NO_WEIGHTS, a, k)
    result: Int64Array = halo
    return result


def replication_factor(graph: CSRGraph, assignment: np.ndarray, k: int) -> float:
    """Edge-cut replication factor ``1 + sum_p |H_p| / n``."""
    n = graph.num_nodes
    return 1.0 + float(halo_sizes(graph, assignment, k).sum()) / n if n else 1.0


@njit(cache=True)
def _vertex_cut_rf(
    src: np.ndarray, dst: np.ndarray, parts: np.ndarray, n: int, k: int
) -> tuple[int, int]:
    words = (k + 63) // 64
    bits = np.zeros((n, words), dtype=np.uint64)
    total = 0
    for i in range(src.shape[0]):
        p = parts[i]
        w = p >> 6
        b = np.uint64(1) << np.uint64(p & 63)
        for x in (src[i], dst[i]):
            if bits[x, w] & b == 0:
                bits[x, w] |= b
                total += 1
    covered = 0
    for v in range(n):
        for w in range(words):
            if bits[v, w] != 0:
                covered += 1
                break
    return total, covered


def vertex_cut_replication(
    src: Int64Array, dst: Int64Array, edge_parts: Int32Array, num_nodes: int, k: int
) -> float:
    """Vertex-cut replication factor ``sum_v |A(v)| / |V'|`` of an edge placement."""
    total, covered = _vertex_cut_rf(src, dst, edge_parts, num_nodes, k)
    return float(total) / covered if covered else 1.0
