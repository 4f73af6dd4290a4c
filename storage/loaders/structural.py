r"""Structural node features, so a graph without features can still be trained on.

Every kind is deterministic (no random numbers) and computed from the graph alone:

* ``degree``: ``log1p`` of the in- and out-degree (2 columns);
* ``onehot-degree``: one-hot of the total degree, degrees ``>= max_degree`` sharing
  the last column (``max_degree + 1`` columns), as GIN uses on unlabelled graphs;
* ``random-walk``: random-walk landing probabilities ``(P^k)_{vv}`` for ``k = 1..steps``
  (RWSE) on the undirected graph (``steps`` columns), exact, by sparse powers; meant
  for graphs up to ~10^5 nodes.

The alternative, learnable node embeddings, belongs to a model (an embedding table
indexed by node id); it is not a stored feature.

References:
    Xu et al., "How Powerful are Graph Neural Networks?", ICLR 2019,
    arXiv:1810.00826 (one-hot degree inputs).
    Dwivedi et al., "Graph Neural Networks with Learnable Structural and Positional
    Representations", ICLR 2022, arXiv:2110.07875 (random-walk features).

Examples:
    >>> import numpy as np
    >>> from strata.storage.csr import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 0, 1]), np.array([1, 2, 2]))
    >>> structural_features(g, "onehot-degree", max_degree=2).tolist()
    [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    >>> structural_features(g, "degree").shape
    (3, 2)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from strata.storage._types import Float32Array
from strata.storage.csr import CSRGraph
from strata.storage.errors import FormatError

STRUCTURAL_KINDS = ("degree", "onehot-degree", "random-walk")


def _random_walk(graph: CSRGraph, steps: int) -> Float32Array:
    n = graph.num_nodes
    src, dst = graph.to_coo()
    adjacency = sp.coo_matrix((np.ones(src.size), (src, dst)), shape=(n, n)).tocsr()
    adjacency = ((adjacency + adjacency.T) > 0).astype(np.float64)
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    inverse = np.divide(1.0, degree, out=np.zeros(n), where=degree > 0)
    walk = sp.diags(inverse) @ adjacency
    out = np.zeros((n, steps), np.float32)
    power = walk
    for k in range(steps):
        out[:, k] = power.diagonal()
        power = power @ walk
    return out


def structural_features(
    graph: CSRGraph, kind: str, *, max_degree: int = 64, steps: int = 8
) -> Float32Array:
    """Node features derived from the graph's structure.

    Args:
        graph: the graph.
        kind: one of :data:`STRUCTURAL_KINDS`.
        max_degree: the last one-hot column (``onehot-degree``).
        steps: walk lengths (``random-walk``).

    Returns:
        float32 features, one row per node.

    Shapes:
        ``degree``: ``(n, 2)``; ``onehot-degree``: ``(n, max_degree + 1)``;
        ``random-walk``: ``(n, steps)``.

    Raises:
        FormatError: on an unknown kind.
    """
    if kind == "degree":
        columns = [graph.in_degree(), graph.out_degree()]
        return np.log1p(np.stack(columns, axis=1)).astype(np.float32)
    if kind == "onehot-degree":
        degree = np.minimum(graph.in_degree() + graph.out_degree(), max_degree)
        out = np.zeros((graph.num_nodes, max_degree + 1), np.float32)
        out[np.arange(graph.num_nodes), degree] = 1.0
        return out
    if kind == "random-walk":
        return _random_walk(graph, steps)
    raise FormatError.build(
        "structural features",
        "structural_features",
        f"one of {STRUCTURAL_KINDS}",
        repr(kind),
    )
