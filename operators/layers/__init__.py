"""GNN layers with an explicit ``forward(graph, x)`` and the models built on them.

Layers (PyG's outline and defaults; outputs and gradients match PyG's to 1e-5):
:class:`GCNConv`, :class:`SAGEConv`, :class:`GATConv`, :class:`GINConv`; typed graphs:
:class:`HeteroConv` (one layer per relation, on bipartite ``(x_src, x_dst)`` pairs) and
:class:`HeteroSAGE`. Each takes a
full :class:`strata.storage.CSRGraph`, a sampled
:class:`strata.operators.samplers.Block`, or a
:class:`strata.operators.kernels.DeviceGraph`. Models: :class:`GCN`, :class:`GraphSAGE`,
:class:`GAT`, :class:`GIN` (registry :data:`MODELS`).
"""

from strata.operators.layers.basic_gnn import (
    GAT,
    GCN,
    GIN,
    MODELS,
    BasicGNN,
    GraphSAGE,
    LayerStack,
)
from strata.operators.layers.gat_conv import GATConv
from strata.operators.layers.gcn_conv import GCNConv, gcn_coefficients
from strata.operators.layers.gin_conv import GINConv
from strata.operators.layers.hetero import HeteroConv, HeteroSAGE
from strata.operators.layers.message_passing import MessagePassing
from strata.operators.layers.sage_conv import SAGEConv

__all__ = [
    "GAT",
    "GCN",
    "GIN",
    "MODELS",
    "BasicGNN",
    "GATConv",
    "GCNConv",
    "GINConv",
    "GraphSAGE",
    "HeteroConv",
    "HeteroSAGE",
    "LayerStack",
    "MessagePassing",
    "SAGEConv",
    "gcn_coefficients",
]
