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
    >>> import networkx as nx
    >>> H = nx.Graph([("a", "b", {"weight": 2.0})])
    >>> H.nodes["a"]["age"] = 3; H.nodes["b"]["age"] = 5
    >>> ds = dataset_from_networkx(H)
    >>> ds.graph.num_edges, ds.meta["directed"], ds.node_data["age"].tolist()
    (2, False, [3.0, 5.0])
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from strata.storage.csr import CSRGraph
from strata.storage.dataset.model import NAME_PATTERN, GraphDataset
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

    Undirected graphs become both directions of every edge (use
    :func:`dataset_from_networkx` to keep attributes and record the direction).
    Nodes are numbered in ``graph.nodes`` order.

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


def _numeric_column(values: list[Any]) -> np.ndarray | None:
    """A float32 column when every value is a number (bools excluded), else None."""
    if not values or not all(
        isinstance(v, int | float | np.number) and not isinstance(v, bool)
        for v in values
    ):
        return None
    return np.asarray(values, dtype=np.float32)


def dataset_from_networkx(graph: Any, *, name: str = "networkx") -> GraphDataset:
    """A :class:`GraphDataset` from a networkx graph, attributes included.

    Direction is recorded, not hidden: an undirected graph stores both directions of
    each edge and ``meta['directed']`` is ``False``. Every node attribute that all
    nodes carry as a number becomes a float32 node column of that name (``x`` when
    named so); edge attributes likewise become edge columns in CSR order, and
    ``weight`` becomes ``graph.edge_weight``. The original nodes are kept in
    ``node_ids`` (as strings unless they are all integers).

    Args:
        graph: a networkx graph (directed or not).
        name: the dataset name.

    Returns:
        The dataset.
    """
    require("networkx", "dataset_from_networkx", _HINT)
    nodes = list(graph.nodes)
    index = {node: i for i, node in enumerate(nodes)}
    edges = list(graph.edges(data=True))
    src = np.array([index[u] for u, _, _ in edges], dtype=np.int64)
    dst = np.array([index[v] for _, v, _ in edges], dtype=np.int64)
    directed = bool(graph.is_directed())
    if not directed:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    order_graph = CSRGraph.from_edges(
        src, dst, len(nodes), keep_edge_ids=True
    )  # edge_ids: each CSR edge's input position, to order edge columns
    assert order_graph.edge_ids is not None
    position = order_graph.edge_ids
    edge_data: dict[str, np.ndarray] = {}
    keys = set().union(*(d.keys() for _, _, d in edges)) if edges else set()
    for key in sorted(k for k in keys if isinstance(k, str)):
        column = _numeric_column([d.get(key) for _, _, d in edges])
        if column is not None and NAME_PATTERN.fullmatch(key):
            both = column if directed else np.concatenate([column, column])
            edge_data[key] = both[position]
    weight = edge_data.pop("weight", None)
    csr = CSRGraph(
        order_graph.indptr, order_graph.indices, len(nodes), edge_weight=weight
    )
    node_data: dict[str, np.ndarray] = {}
    attrs = [graph.nodes[n] for n in nodes]
    keys = set().union(*(a.keys() for a in attrs)) if attrs else set()
    for key in sorted(k for k in keys if isinstance(k, str)):
        column = _numeric_column([a.get(key) for a in attrs])
        if column is not None and NAME_PATTERN.fullmatch(key):
            node_data[key] = column
    if all(isinstance(n, int) and not isinstance(n, bool) for n in nodes):
        ids = np.asarray(nodes, dtype=np.int64)
        if not np.array_equal(ids, np.arange(len(nodes))):
            node_data["node_ids"] = ids
    else:
        node_data["node_ids"] = np.asarray([str(n) for n in nodes], dtype=str)
    meta = {"directed": directed, "source": "networkx"}
    return GraphDataset(csr, node_data, edge_data, name=name, meta=meta)
