"""Converters between :class:`GraphDataset` and DGL graphs.

DGL is never a dependency of Strata (see PEERS.md §3): it lives in the pinned peer
environment of ``benchmarks/peers/dgl/requirements.txt``, and these functions import
it only when called.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from strata.storage.csr import CSRGraph, as_tensor
from strata.storage.dataset.model import NAME_PATTERN, GraphDataset
from strata.storage.interop._guard import require

_HINT = (
    "DGL 2.1 from the pinned peer environment (benchmarks/peers/dgl/requirements.txt)"
)


def to_dgl(dataset: GraphDataset | CSRGraph) -> Any:
    """Convert to a ``dgl.DGLGraph``; node/edge arrays become ``ndata``/``edata``.

    Args:
        dataset: a dataset, or a bare graph.

    Returns:
        The DGL graph (edges in CSR order).
    """
    dgl = require("dgl", "to_dgl", _HINT)
    if isinstance(dataset, CSRGraph):
        dataset = GraphDataset(dataset)
    graph = dataset.graph
    src, dst = graph.to_coo()
    out = dgl.graph(
        (torch.from_numpy(src), as_tensor(dst).to(torch.int64)),
        num_nodes=graph.num_nodes,
    )
    if graph.edge_weight is not None:
        out.edata["weight"] = as_tensor(graph.edge_weight).clone()
    for name, array in dataset.node_data.items():
        if array.dtype.kind in "biuf":
            out.ndata[name] = as_tensor(array).clone()
    for name, array in dataset.edge_data.items():
        if array.dtype.kind in "biuf":
            out.edata[name] = as_tensor(array).clone()
    return out


def from_dgl(graph: Any, *, name: str = "dgl") -> GraphDataset:
    """Convert a homogeneous ``dgl.DGLGraph`` to a dataset.

    Args:
        graph: the DGL graph; ``edata['weight']`` (1-D) becomes the edge weights.
        name: the dataset name.

    Returns:
        The dataset, edge arrays in CSR order.
    """
    require("dgl", "from_dgl", _HINT)
    src, dst = (t.cpu().numpy() for t in graph.edges())
    edata = {k: v.detach().cpu().numpy() for k, v in graph.edata.items()}
    weight = edata.pop("weight", None)
    if weight is not None and weight.ndim != 1:
        edata["weight"], weight = weight, None
    csr = CSRGraph.from_edges(
        src, dst, graph.num_nodes(), edge_weight=weight, keep_edge_ids=True
    )
    assert csr.edge_ids is not None
    order = csr.edge_ids
    node_data = {
        k: v.detach().cpu().numpy()
        for k, v in graph.ndata.items()
        if NAME_PATTERN.fullmatch(k)
    }
    edge_data = {k: v[order] for k, v in edata.items() if NAME_PATTERN.fullmatch(k)}
    plain = CSRGraph(csr.indptr, csr.indices, csr.num_nodes, csr.edge_weight)
    return GraphDataset(
        plain, node_data, {k: np.asarray(v) for k, v in edge_data.items()}, name=name
    )
