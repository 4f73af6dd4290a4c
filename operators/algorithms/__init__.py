"""Graph algorithms (TDO-GP): PageRank, BFS, SSSP and connected components.

Single-process versions run numba kernels on a :class:`~strata.storage.CSRGraph`
(:mod:`strata.operators.algorithms.kernels` also holds the per-superstep pieces the
distributed runner shares); :mod:`strata.operators.algorithms.steps` wraps them as
pipeline steps, and ``strata algo`` as a command.

* :func:`pagerank`: float64 ranks (networkx ``DiGraph`` semantics and tolerance).
* :func:`bfs`: int64 hop distances, ``-1`` unreachable.
* :func:`sssp`: float64 Dijkstra distances, ``inf`` unreachable, weights ``>= 0``.
* :func:`connected_components`: weak components, labelled by their smallest id.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 0]), 3)
    >>> bfs(g, 0).values.tolist(), connected_components(g).values.tolist()
    ([0, 1, -1], [0, 0, 2])
"""

from strata.operators.algorithms.bfs import UNREACHED, bfs
from strata.operators.algorithms.components import connected_components
from strata.operators.algorithms.errors import AlgorithmError
from strata.operators.algorithms.pagerank import pagerank
from strata.operators.algorithms.result import AlgorithmResult
from strata.operators.algorithms.sssp import sssp

#: The algorithms by the names ``strata algo`` and the steps use.
ALGORITHMS = ("pagerank", "bfs", "sssp", "cc")

__all__ = [
    "ALGORITHMS",
    "UNREACHED",
    "AlgorithmError",
    "AlgorithmResult",
    "bfs",
    "connected_components",
    "pagerank",
    "sssp",
]
