"""Converters between :class:`CSRGraph` and networkx graphs.

Examples:
    >>> import numpy as np
    >>> from strata.storage.csr import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2]), num_nodes=4)
    >>> G = to_networkx(g)
    >>> sorted(G.edges()), G.number_of_nodes()
    ([(0, 1), (1, 2)], 4)
    >>> back, nodes = from_networkx(G)
    >>> back.indices.tolist(), nodes
    ([1, 2], [0, 1, 2, 3])
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from strata.storage.csr import CSRGraph
from strata.storage.interop._guard import require

_HINT = "pip install networkx"


def to_networkx(graph: CSRGraph, *, multigraph: bool = False) -> Any:
    """A ``networkx.DiGraph`` (or ``MultiDiGraph``) with nodes ``0..n-1``.

    Args:
        graph: the graph.
        multigraph: keep parallel edges (``MultiDiGraph``); a ``DiGraph`` keeps one.

    Returns:
        The networkx graph; edge weights, when present, are the ``weight`` attribute.
    """
    nx = require("networkx", "to_networkx", _HINT)
    out = nx.MultiDiGraph() if multigraph else nx.DiGraph()
    out.add_nodes_from(range(graph.num_nodes))
    src, dst = graph.to_coo()
    if graph.edge_weight is None:
        out.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
    else:
        out.add_weighted_edges_from(
            zip(src.tolist(), dst.tolist(), graph.edge_weight.tolist(), strict=True)
        )
    return out


def from_networkx(
    graph: Any, *, weight: str | None = "weight"
) -> tuple[CSRGraph, list[Hashable]]:
    """Build a graph from any networkx graph.

    Undirected graphs become both directions of every edge. Nodes are numbered in
    ``graph.nodes`` order.

    Args:
        graph: a networkx graph (directed or not, multi or not).
        weight: edge attribute to keep as ``edge_weight`` (when every edge has it);
            ``None`` ignores weights.

    Returns:
        ``(csr_graph, nodes)``, where ``nodes[i]`` is the networkx node of id ``i``.
    """
    require("networkx", "from_networkx", _HINT)
    nodes = list(graph.nodes)
    index = {node: i for i, node in enumerate(nodes)}
    edges = list(graph.edges(data=True))
    src = np.array([index[u] for u, _, _ in edges], dtype=np.int64)
    dst = np.array([index[v] for _, v, _ in edges], dtype=np.int64)
    weights = None
    if weight is not None and edges and all(weight in d for _, _, d in edges):
        weights = np.array([d[weight] for _, _, d in edges], dtype=np.float32)
    csr = CSRGraph.from_edges(
        src,
        dst,
        len(nodes),
        edge_weight=weights,
        symmetrize=not graph.is_directed(),
    )
    return csr, nodes
