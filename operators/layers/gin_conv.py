"""Graph isomorphism network (GIN) convolution, PyG's ``GINConv``.

``out_i = nn((1 + eps) x_i + sum_{j -> i} x_j)`` with a user-supplied MLP ``nn``;
``eps`` is a constant, or learned with ``train_eps=True``. The sum is taken before
the MLP (it is not linear), with :func:`~strata.operators.kernels.aggregate`.

References:
    Keyulu Xu, Weihua Hu, Jure Leskovec, Stefanie Jegelka. *How Powerful are Graph
    Neural Networks?* ICLR 2019, arXiv:1810.00826.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> conv = GINConv(torch.nn.Linear(4, 2), train_eps=True)
    >>> conv(g, torch.randn(3, 4)).shape
    torch.Size([3, 2])
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from strata.operators.kernels.aggregate import aggregate
from strata.operators.layers._common import Graph, resolve_graph


class GINConv(nn.Module):
    """GIN layer.

    Args:
        nn: the MLP applied after aggregation (any module or callable).
        eps: initial ``eps``.
        train_eps: learn ``eps``.

    Shapes:
        x: ``[num_src, F]``; returns ``nn``'s output for ``[num_dst, F]``.
    """

    def __init__(
        self,
        nn: Callable[[torch.Tensor], torch.Tensor],
        eps: float = 0.0,
        *,
        train_eps: bool = False,
    ) -> None:
        super().__init__()
        self.nn = nn
        self.initial_eps = eps
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Reset every sub-module of ``nn`` that can be, and ``eps``."""
        if isinstance(self.nn, torch.nn.Module):
            for module in self.nn.modules():
                reset = getattr(module, "reset_parameters", None)
                if callable(reset):
                    reset()
        self.eps.data.fill_(self.initial_eps)

    def forward(self, graph: Graph, x: torch.Tensor) -> torch.Tensor:
        """Sum in-neighbours, add the scaled root, apply the MLP.

        Raises:
            OperatorError: if ``x`` does not have one row per source node.
        """
        dg = resolve_graph(graph, x, "GINConv.forward")
        out = aggregate(dg, x, "sum") + (1 + self.eps) * x[: dg.num_dst]
        return self.nn(out)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(nn={self.nn})"
