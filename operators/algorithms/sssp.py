"""Single-source shortest paths for non-negative int or float weights (Dijkstra).

Dijkstra with a binary heap and lazy deletion, in numba, serial. Delta-stepping,
the parallel alternative, is not implemented or measured here (v1); the distributed
runner relaxes frontiers with :func:`strata.operators.algorithms.kernels.relax_min`,
a Bellman-Ford superstep, as tdorch.md §5's table says.

* Distances are float64; unreachable vertices get ``inf`` (as scipy's ``dijkstra``).
  Integer weights give exact integer distances (sums below 2**53 are exact).
* Repeated edges: the minimum weight per pair counts (Dijkstra relaxes every copy);
  self-loops change nothing.
* A negative or non-finite weight is refused, naming the first such edge.
* Without weights every edge weighs 1 (then :func:`bfs` is faster).

References:
    Dijkstra, "A note on two problems in connexion with graphs", Numerische
    Mathematik 1, 1959.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 0, 1]), np.array([1, 2, 2]), 4,
    ...                         edge_weight=np.array([1.0, 5.0, 2.0]))
    >>> sssp(g, 0).values.tolist()
    [0.0, 1.0, 3.0, inf]
"""

from __future__ import annotations

import time

import numpy as np

from strata.operators.algorithms._graph import check_source, edge_weights, unsigned
from strata.operators.algorithms.kernels import dijkstra_run
from strata.operators.algorithms.result import AlgorithmResult
from strata.storage import CSRGraph


def sssp(
    graph: CSRGraph,
    source: int,
    *,
    weights: np.ndarray | None = None,
    node_ids: np.ndarray | None = None,
) -> AlgorithmResult:
    """Shortest-path distances from ``source`` (``inf``: unreachable).

    Args:
        graph: a directed graph; its ``edge_weight`` are the weights unless
            ``weights`` is given.
        source: an internal vertex id in ``[0, n)``.
        weights: optional float or int weights in CSR edge order, all ``>= 0``.
        node_ids: original ids, so an error names the bad edge as the user knows it.

    Returns:
        Float64 distances; ``iterations`` counts the settled vertices.

    Raises:
        AlgorithmError: on a source outside the graph or a negative weight.
    """
    source = check_source(graph, source, "sssp")
    w = edge_weights(graph, weights, "sssp", node_ids)
    start = time.perf_counter()
    dist, settled = dijkstra_run(
        unsigned(graph.indptr), unsigned(graph.indices), w, source
    )
    seconds = time.perf_counter() - start
    return AlgorithmResult("sssp", dist, settled, seconds, {"source": source})
