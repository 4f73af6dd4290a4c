"""Pipeline steps where graphs meet the engine: GNN kernels, layers, samplers, ...

The GNN names below are exported lazily (PEP 562), so ``import operators`` (e.g.
by the ``strata`` CLI) does not load torch and numba until one is used:

* layers and models: :class:`GCNConv`, :class:`SAGEConv`, :class:`GATConv`,
  :class:`GINConv`, :class:`GCN`, :class:`GraphSAGE`, :class:`GAT`, :class:`GIN`;
* sampling: :class:`NeighborSampler`, :class:`SamplerConfig`, :class:`Block`;
* kernels: :class:`DeviceGraph`, :func:`spmm`, :func:`aggregate`,
  :func:`edge_softmax`, :func:`sddmm_add`, :func:`sddmm_dot`;
* :class:`OperatorError`.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "OperatorError": "strata.operators.errors",
    "DeviceGraph": "strata.operators.kernels",
    "aggregate": "strata.operators.kernels",
    "edge_softmax": "strata.operators.kernels",
    "sddmm_add": "strata.operators.kernels",
    "sddmm_dot": "strata.operators.kernels",
    "spmm": "strata.operators.kernels",
    "GAT": "strata.operators.layers",
    "GATConv": "strata.operators.layers",
    "GCN": "strata.operators.layers",
    "GCNConv": "strata.operators.layers",
    "GIN": "strata.operators.layers",
    "GINConv": "strata.operators.layers",
    "GraphSAGE": "strata.operators.layers",
    "SAGEConv": "strata.operators.layers",
    "Block": "strata.operators.samplers",
    "NeighborSampler": "strata.operators.samplers",
    "SamplerConfig": "strata.operators.samplers",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'operators' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
