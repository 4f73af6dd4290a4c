"""Train a PyG model: ``forward(x, edge_index)`` as Strata's ``forward(graph, x)``.

:class:`PyGAdapter` wraps any module whose ``forward`` takes node features and a
PyG ``edge_index`` (``[2, num_edges]``, row 0 the sources, row 1 the targets:
PyG's default ``source_to_target`` flow), so Strata's trainers can call it with a
graph. The ``edge_index`` of a graph is built once per graph and device and
cached on the graph's :class:`~strata.operators.kernels.DeviceGraph`.

Give the trainers a factory through ``ModelConfig(module=...)``;
:func:`pyg_module` makes one from the PyG model's constructor. Full-graph and
sampled training both work: a sampled trainer hands a model that is not a Strata
layer stack the union of each batch's sampled blocks as one subgraph, as PyG's
``NeighborLoader`` does. ``torch_geometric`` is needed only by the model itself;
this module does not import it.

Examples:
    >>> import numpy as np, torch
    >>> from torch_geometric.nn import GCNConv
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> model = PyGAdapter(GCNConv(4, 2))
    >>> model(g, torch.randn(3, 4)).shape
    torch.Size([3, 2])
    >>> edge_index(g).tolist()  # sources, then targets
    [[2, 0, 1], [0, 1, 2]]
    >>> make = pyg_module(lambda i, o: GCNConv(i, o))
    >>> make(4, 2)
    PyGAdapter(GCNConv(4, 2))
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from strata.operators.errors import OperatorError
from strata.operators.kernels.device_graph import as_device_graph
from strata.operators.layers._common import Graph

__all__ = ["PyGAdapter", "edge_index", "pyg_module"]


def edge_index(graph: Graph, device: torch.device | None = None) -> torch.Tensor:
    """PyG's ``edge_index`` of ``graph``: int64 ``[2, num_edges]``, sources first.

    Raises:
        OperatorError: for a sampled (bipartite) block, which has no PyG
            ``edge_index`` over one node set.
    """
    dg = as_device_graph(graph, device or torch.device("cpu"))
    if dg.bipartite:
        raise OperatorError.build(
            "graph",
            "PyGAdapter",
            "a full graph or subgraph",
            "a sampled block",
            "a sampled trainer passes a subgraph to modules that are not layer stacks",
        )
    return dg.cached(
        "pyg_edge_index",
        lambda: torch.stack([dg.src_index(cache=False), dg.dst_index(cache=False)]),
    )


class PyGAdapter(nn.Module):
    """A module with ``forward(x, edge_index)`` as one with ``forward(graph, x)``.

    Args:
        module: the PyG model (or layer); its parameters are the adapter's.
    """

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def reset_parameters(self) -> None:
        """Reset the wrapped module, if it can."""
        reset = getattr(self.module, "reset_parameters", None)
        if callable(reset):
            reset()

    def forward(self, graph: Graph, x: torch.Tensor) -> torch.Tensor:
        """Run the wrapped module on ``x`` and ``graph``'s ``edge_index``.

        Shapes:
            x: ``[num_nodes, in_channels]``; returns the module's output.
        """
        return self.module(x, edge_index(graph, x.device))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.module!r})"


def pyg_module(
    make: Callable[[int, int], nn.Module],
) -> Callable[[int, int], nn.Module]:
    """A ``ModelConfig(module=...)`` factory wrapping ``make(in, out)``'s model."""

    def build(in_channels: int, out_channels: int) -> nn.Module:
        return PyGAdapter(make(in_channels, out_channels))

    build.__qualname__ = f"pyg_module({getattr(make, '__qualname__', 'make')})"
    build.__module__ = getattr(make, "__module__", __name__)
    return build
