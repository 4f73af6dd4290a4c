"""Source-skewed graphs (tdorch.md's G2): Zipf(alpha) sources, uniform destinations.

``num_edges`` edges are sampled independently: the source has rank ``k`` with
probability proportional to ``k**-alpha`` (``k = 1..num_nodes``; rank ``k`` is
vertex ``perm[k-1]`` for a seeded permutation, so hubs are not the low ids), the
destination is uniform. Repeated ``(src, dst)`` pairs are then dropped, so the graph
has slightly fewer edges than were sampled (self-loops stay). With
``num_nodes=2**20, num_edges=8_000_000, alpha=1.2`` the top source keeps about 11.6%
of the edges after deduplication; with ``alpha=1.5`` about 19%.

``weights=True`` adds integer weights 1..100 (float32, exact), uniform, for SSSP.

Examples:
    >>> g = zipf_source_graph(1000, 5000, alpha=1.2, seed=0)
    >>> g.num_nodes, g.num_edges <= 5000, int(g.out_degree().max()) > 500
    (1000, True, True)
    >>> w = zipf_source_graph(100, 300, weights=True).edge_weight
    >>> float(w.min()) >= 1, float(w.max()) <= 100
    (True, True)
"""

from __future__ import annotations

import numpy as np

from strata.storage.csr import CSRGraph, DuplicatePolicy
from strata.storage.errors import GraphError

_WHERE = "zipf_source_graph"


def zipf_source_graph(
    num_nodes: int = 1 << 20,
    num_edges: int = 8_000_000,
    *,
    alpha: float = 1.2,
    seed: int = 0,
    permute: bool = True,
    weights: bool = False,
) -> CSRGraph:
    """Sample a source-skewed directed graph (see the module doc).

    Args:
        num_nodes: vertices.
        num_edges: edges sampled before deduplication.
        alpha: the Zipf exponent of the sources (``0``: uniform).
        seed: random seed (numpy ``default_rng``).
        permute: map Zipf ranks to vertices by a seeded permutation.
        weights: add uniform integer weights 1..100 as ``edge_weight``.

    Returns:
        The deduplicated graph.

    Raises:
        GraphError: on ``num_nodes < 1``, ``num_edges < 0`` or ``alpha < 0``.
    """
    if num_nodes < 1:
        raise GraphError.build("num_nodes", _WHERE, ">= 1", str(num_nodes))
    if num_edges < 0:
        raise GraphError.build("num_edges", _WHERE, ">= 0", str(num_edges))
    if alpha < 0:
        raise GraphError.build("alpha", _WHERE, ">= 0", str(alpha))
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(np.arange(1, num_nodes + 1, dtype=np.float64) ** -alpha)
    cdf /= cdf[-1]
    rank = np.searchsorted(cdf, rng.random(num_edges), side="right")
    rank = np.minimum(rank, num_nodes - 1)  # guards the last bucket's rounding
    perm = rng.permutation(num_nodes) if permute else np.arange(num_nodes)
    src = perm[rank]
    dst = rng.integers(0, num_nodes, num_edges)
    weight = rng.integers(1, 101, num_edges).astype(np.float32) if weights else None
    return CSRGraph.from_edges(
        src,
        dst,
        num_nodes,
        edge_weight=weight,
        duplicates=DuplicatePolicy.REMOVE,
    )
