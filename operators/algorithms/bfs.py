"""Breadth-first search: hop distances from one source.

Distances are int64; vertices the source cannot reach get ``-1`` (scipy's
``shortest_path(unweighted=True)`` reports ``inf`` there). Edges are followed in
their direction; repeated edges and self-loops change nothing.

The single-process kernel is a serial queue BFS (``nogil``) over a one-byte
``seen`` array; it beats scipy's ``breadth_first_order`` on the benchmark graphs
(``benchmarks/results/algorithms.json``). Parallel and direction-optimising BFS
were not tried (the spec leaves direction switching out of v1, tdorch.md §5).

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 3]), np.array([1, 2, 0]), 4)
    >>> r = bfs(g, 0)
    >>> r.values.tolist(), r.iterations
    ([0, 1, 2, -1], 3)
"""

from __future__ import annotations

import time

from strata.operators.algorithms._graph import check_source, unsigned
from strata.operators.algorithms.kernels import bfs_run
from strata.operators.algorithms.result import AlgorithmResult
from strata.storage import CSRGraph

#: The distance of a vertex the source cannot reach.
UNREACHED = -1


def bfs(graph: CSRGraph, source: int) -> AlgorithmResult:
    """Hop distances from ``source`` (``-1``: unreachable).

    Args:
        graph: a directed graph (symmetrise it for undirected distances).
        source: an internal vertex id in ``[0, n)``.

    Returns:
        Int64 distances; ``iterations`` is the number of BFS levels.

    Raises:
        AlgorithmError: when ``source`` is not a vertex (also on an empty graph).
    """
    source = check_source(graph, source, "bfs")
    start = time.perf_counter()
    dist, levels = bfs_run(unsigned(graph.indptr), unsigned(graph.indices), source)
    seconds = time.perf_counter() - start
    return AlgorithmResult("bfs", dist, levels, seconds, {"source": source})
