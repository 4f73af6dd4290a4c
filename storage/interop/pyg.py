"""Converters between :class:`GraphDataset` and PyG's ``Data``.

``edge_index`` is ``[src; dst]`` (messages flow from ``src`` to ``dst``, PyG's default),
in CSR order. Node arrays become ``Data`` attributes of the same name (``x``, ``y``,
``train_mask``, ...); edge arrays too, and ``graph.edge_weight`` becomes
``edge_weight``. :func:`from_pyg` does the reverse, reordering edge attributes into
CSR order.

Examples:
    >>> from strata.storage.loaders import load_planetoid
    >>> data = to_pyg(load_planetoid("cora"))
    >>> data.num_nodes, data.num_edges, data.x.shape[1]
    (2708, 10556, 1433)
    >>> from_pyg(data).graph.num_edges
    10556
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from strata.storage.csr import CSRGraph, as_tensor
from strata.storage.dataset.model import NAME_PATTERN, GraphDataset
from strata.storage.errors import GraphError
from strata.storage.interop._guard import require

_HINT = "pip install torch-geometric (or strata-gnn[pyg])"


def to_pyg(dataset: GraphDataset | CSRGraph) -> Any:
    """Convert to a ``torch_geometric.data.Data`` (tensors share memory).

    Args:
        dataset: a dataset, or a bare graph.

    Returns:
        The ``Data`` object.
    """
    geometric = require("torch_geometric.data", "to_pyg", _HINT)
    if isinstance(dataset, CSRGraph):
        dataset = GraphDataset(dataset)
    graph = dataset.graph
    src, dst = graph.to_coo()
    data = geometric.Data(
        edge_index=torch.stack([torch.from_numpy(src), as_tensor(dst).to(torch.int64)]),
        num_nodes=graph.num_nodes,
    )
    if graph.edge_weight is not None:
        data.edge_weight = as_tensor(graph.edge_weight)
    for table in (dataset.node_data, dataset.edge_data):
        for name, array in table.items():
            if array.dtype.kind in "biuf":
                data[name] = as_tensor(array)
    return data


def from_pyg(data: Any, *, name: str = "pyg") -> GraphDataset:
    """Convert a homogeneous ``torch_geometric.data.Data`` to a dataset.

    Tensor attributes with ``num_nodes`` rows become node arrays, those with
    ``num_edges`` rows (``edge_attr``, ...) edge arrays in CSR order, and
    ``edge_weight`` the graph's weights. When ``num_nodes == num_edges`` an attribute
    named ``edge_*`` is taken as an edge array.

    Args:
        data: the PyG data object.
        name: the dataset name.

    Returns:
        The dataset.

    Raises:
        GraphError: if ``data`` has no ``edge_index``.
    """
    require("torch_geometric", "from_pyg", _HINT)
    if getattr(data, "edge_index", None) is None:
        raise GraphError.build(
            "edge_index", "from_pyg", "a Data object with edge_index", repr(data)
        )
    edge_index = data.edge_index.detach().cpu().numpy()
    n, m = int(data.num_nodes), edge_index.shape[1]
    weight = getattr(data, "edge_weight", None)
    graph = CSRGraph.from_edges(
        edge_index[0],
        edge_index[1],
        n,
        edge_weight=None if weight is None else weight.detach().cpu().numpy(),
        keep_edge_ids=True,
    )
    assert graph.edge_ids is not None
    order = graph.edge_ids
    node_data: dict[str, np.ndarray] = {}
    edge_data: dict[str, np.ndarray] = {}
    for key, value in data.items():
        if key in ("edge_index", "edge_weight") or not isinstance(value, torch.Tensor):
            continue
        if value.dim() == 0 or not NAME_PATTERN.fullmatch(key):
            continue
        array = value.detach().cpu().numpy()
        is_edge = array.shape[0] == m and (
            array.shape[0] != n or key.startswith("edge")
        )
        if is_edge:
            edge_data[key] = array[order]
        elif array.shape[0] == n:
            node_data[key] = array
    graph = CSRGraph(graph.indptr, graph.indices, n, graph.edge_weight)
    return GraphDataset(graph, node_data, edge_data, name=name)
