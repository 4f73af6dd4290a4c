"""The graph algorithms as batch pipeline steps: a graph payload in, a table out.

A graph crosses the process and Ray executors as a payload
(:mod:`strata.operators.io.datasets`); :func:`load_weighted_graph` makes one with
the edge weights (``edge_weight``, CSR order) that SSSP needs. Each algorithm step
returns an Arrow table ``node_id, value`` with the graph's *original* ids (the
payload's ``node_ids`` column when the loader mapped ids, else ``0..n-1``), the
same rows ``strata algo`` writes; BFS and SSSP take ``source`` as an original id.

In a job: ``p.step("graph", load_weighted_graph, spec=...)`` then
``p.step("ranks", pagerank_step, "graph", iterations=20)``.

Examples:
    >>> graph = load_weighted_graph("rmat:scale=6,edge_factor=4")
    >>> table = bfs_step(graph, source=0)
    >>> table.column_names, table.num_rows
    (['node_id', 'value'], 64)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from strata.operators.algorithms.bfs import bfs
from strata.operators.algorithms.components import connected_components
from strata.operators.algorithms.errors import AlgorithmError
from strata.operators.algorithms.pagerank import pagerank
from strata.operators.algorithms.sssp import sssp
from strata.operators.io.datasets import Payload, dataset_from_payload, dataset_payload
from strata.storage import CSRGraph, GraphDataset
from strata.storage.spec import load_graph


def load_weighted_graph(spec: str, data_dir: str | None = None) -> Payload:
    """Batch step: the graph a spec names, as a payload with ``edge_weight``.

    Args:
        spec: a graph spec (dataset directory, edge list, generator).
        data_dir: where Planetoid files other than the shipped Cora live.

    Returns:
        :func:`~strata.operators.io.datasets.dataset_payload` plus
        ``edge_weight`` (float32, CSR order) when the graph has weights.
    """
    dataset = load_graph(spec, data_dir=data_dir)
    payload = dataset_payload(dataset)
    if dataset.graph.edge_weight is not None:
        payload["edge_weight"] = dataset.graph.edge_weight
    return payload


def _dataset(graph: Mapping[str, Any]) -> GraphDataset:
    dataset = dataset_from_payload(graph)
    weight = graph.get("edge_weight")
    if weight is None:
        return dataset
    g = dataset.graph
    weighted = CSRGraph(g.indptr, g.indices, g.num_nodes, edge_weight=weight)
    return GraphDataset(weighted, dataset.node_data, name=dataset.name)


def _source(dataset: GraphDataset, source: Any, where: str) -> int:
    ids = dataset.original_ids
    hits = np.flatnonzero(ids == source)
    if hits.size == 0:
        raise AlgorithmError.build(
            "source", where, "an original id of the graph", repr(source)
        )
    return int(hits[0])


def _table(dataset: GraphDataset, values: np.ndarray) -> pa.Table:
    return pa.table(
        {"node_id": pa.array(dataset.original_ids), "value": pa.array(values)}
    )


def pagerank_step(
    graph: Payload,
    *,
    damping: float = 0.85,
    iterations: int | None = None,
    tol: float | None = None,
) -> pa.Table:
    """Batch step: PageRank (see :func:`~strata.operators.algorithms.pagerank`)."""
    dataset = _dataset(graph)
    result = pagerank(dataset.graph, damping=damping, iterations=iterations, tol=tol)
    return _table(dataset, result.values)


def bfs_step(graph: Payload, *, source: Any) -> pa.Table:
    """Batch step: BFS hop counts from the original id ``source`` (``-1``: none)."""
    dataset = _dataset(graph)
    result = bfs(dataset.graph, _source(dataset, source, "bfs_step"))
    return _table(dataset, result.values)


def sssp_step(graph: Payload, *, source: Any) -> pa.Table:
    """Batch step: Dijkstra distances from the original id ``source`` (``inf``)."""
    dataset = _dataset(graph)
    start = _source(dataset, source, "sssp_step")
    result = sssp(dataset.graph, start, node_ids=dataset.original_ids)
    return _table(dataset, result.values)


def cc_step(graph: Payload) -> pa.Table:
    """Batch step: weak components, labelled by their smallest original id."""
    dataset = _dataset(graph)
    labels = connected_components(dataset.graph).values
    return _table(dataset, dataset.original_ids[labels])
