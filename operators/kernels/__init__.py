"""Message-passing kernels on torch tensors (CPU and CUDA), with gradients.

* :class:`DeviceGraph` / :func:`as_device_graph`: a graph's in-adjacency on a
  device, with its transpose, degrees and self-loop variant cached.
* :func:`spmm` (weighted neighbour sum), :func:`aggregate` (sum, mean, max),
  :func:`edge_softmax`, :func:`sddmm_add`, :func:`sddmm_dot`.
* :func:`gat_attention`: GAT's scores, softmax and weighted sum, fused.
* :data:`AGGREGATORS` / :func:`get_aggregator`: the named reducers layers use.
* :class:`Backend` / :func:`use_backend`: the formulation per device
  (numba CSR kernels on CPU, torch sparse CSR elsewhere).
"""

from strata.operators.kernels.aggregate import aggregate
from strata.operators.kernels.aggregators import (
    AGGREGATORS,
    Aggregation,
    get_aggregator,
)
from strata.operators.kernels.attention import gat_attention
from strata.operators.kernels.backend import Backend, use_backend
from strata.operators.kernels.device_graph import DeviceGraph, as_device_graph
from strata.operators.kernels.edge_softmax import edge_softmax
from strata.operators.kernels.order import aggregate_first
from strata.operators.kernels.sddmm import sddmm_add, sddmm_dot
from strata.operators.kernels.spmm import spmm

__all__ = [
    "AGGREGATORS",
    "Aggregation",
    "Backend",
    "DeviceGraph",
    "aggregate",
    "aggregate_first",
    "as_device_graph",
    "edge_softmax",
    "gat_attention",
    "get_aggregator",
    "sddmm_add",
    "sddmm_dot",
    "spmm",
    "use_backend",
]
