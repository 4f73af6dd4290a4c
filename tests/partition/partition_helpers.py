"""Helpers shared by the partition tests (importable: this folder is on sys.path)."""

from __future__ import annotations

import networkx as nx
import numpy as np

from strata.storage import CSRGraph, DuplicatePolicy, SelfLoopPolicy


def from_networkx(graph: nx.Graph) -> CSRGraph:
    """An undirected networkx graph as a simple symmetric CSRGraph."""
    graph = nx.convert_node_labels_to_integers(graph)
    edges = np.array(list(graph.edges()), dtype=np.int64).reshape(-1, 2)
    return CSRGraph.from_edges(
        edges[:, 0],
        edges[:, 1],
        graph.number_of_nodes(),
        symmetrize=True,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )


def simple(graph: CSRGraph) -> CSRGraph:
    src, dst = graph.to_coo()
    return CSRGraph.from_edges(
        src,
        dst,
        graph.num_nodes,
        symmetrize=True,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )
