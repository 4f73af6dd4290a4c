"""GNN layers with an explicit ``forward(graph, x)`` and the models built on them.

Layers (PyG's outline and defaults; outputs and gradients match PyG's to 1e-5):
:class:`GCNConv`, :class:`SAGEConv`, :class:`GATConv`, :class:`GINConv`. Each takes
a full :class:`storage.CSRGraph`, a sampled :class:`operators.samplers.Block`, or a
:class:`operators.kernels.DeviceGraph`. Models: :class:`GCN`, :class:`GraphSAGE`,
:class:`GAT`, :class:`GIN` (registry :data:`MODELS`).
"""

from operators.layers.basic_gnn import GAT, GCN, GIN, MODELS, BasicGNN, GraphSAGE
from operators.layers.gat_conv import GATConv
from operators.layers.gcn_conv import GCNConv, gcn_coefficients
from operators.layers.gin_conv import GINConv
from operators.layers.sage_conv import SAGEConv

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
    "SAGEConv",
    "gcn_coefficients",
]
