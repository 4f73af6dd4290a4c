"""GraphSAGE convolution with mean, sum, max or max-pool aggregation.

``out = W_l . aggr_{j -> i}(x_j) + W_r . x_i`` (then optionally L2-normalised),
PyG's ``SAGEConv`` with the same parameters and defaults.

Aggregators: ``aggr="mean"`` (the paper's mean aggregator, default), ``"sum"``,
``"max"``. **Max-pool** is ``aggr="max", project=True``: sources first pass
through ``relu(W_pool x + b)``, then the feature-wise max is taken — the
paper's pooling aggregator, DGL's ``aggregator_type="pool"``, and PyG's
``SAGEConv(aggr="max", project=True)``. (Only the aggregated sources are
projected; the root term uses the raw ``x_i``, as in PyG and DGL.)

For linear aggregators the layer transforms before aggregating when that is
cheaper (:func:`strata.operators.kernels.aggregate_first`); the bias is added after the
aggregation, so nodes without in-neighbours still get ``W_l . 0 + b`` as in PyG.

On a :class:`~strata.operators.samplers.Block` the root features are the destination
rows ``x[:num_dst]`` (destinations come first among sources).

References:
    William L. Hamilton, Rex Ying, Jure Leskovec. *Inductive Representation
    Learning on Large Graphs*. NeurIPS 2017, arXiv:1706.02216.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> SAGEConv(4, 2, aggr="max", project=True)
    SAGEConv(4, 2, aggr=max)
    >>> SAGEConv(4, 2)(g, torch.randn(3, 4)).shape
    torch.Size([3, 2])
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from strata.operators.kernels.aggregators import get_aggregator
from strata.operators.kernels.order import aggregate_first
from strata.operators.layers._common import Graph, needs_backward, resolve_graph


class SAGEConv(nn.Module):
    """GraphSAGE layer.

    Args:
        in_channels: input feature width.
        out_channels: output feature width.
        aggr: ``"mean"``, ``"sum"`` or ``"max"`` (see the module docs).
        normalize: L2-normalise each output row.
        root_weight: add the transformed root features ``W_r . x_i``.
        project: pass sources through ``relu(Linear(x))`` before aggregating
            (with ``aggr="max"``: the max-pool aggregator).
        bias: learn a bias in ``W_l``.

    Shapes:
        x: ``[num_src, in_channels]``; returns ``[num_dst, out_channels]``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        *,
        aggr: str = "mean",
        normalize: bool = False,
        root_weight: bool = True,
        project: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.aggr = aggr
        self.aggregation = get_aggregator(aggr, "SAGEConv")
        self.normalize = normalize
        self.root_weight = root_weight
        self.project = project
        self.lin = nn.Linear(in_channels, in_channels, bias=True) if project else None
        self.lin_l = nn.Linear(in_channels, out_channels, bias=bias)
        self.lin_r = (
            nn.Linear(in_channels, out_channels, bias=False) if root_weight else None
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Default ``nn.Linear`` initialisation, as PyG."""
        for lin in (self.lin, self.lin_l, self.lin_r):
            if lin is not None:
                lin.reset_parameters()

    def forward(self, graph: Graph, x: torch.Tensor) -> torch.Tensor:
        """Aggregate in-neighbours of every destination and combine with its root.

        Raises:
            OperatorError: if ``x`` does not have one row per source node.
        """
        dg = resolve_graph(graph, x, "SAGEConv.forward")
        x_root = x[: dg.num_dst]
        x_src = F.relu(self.lin(x)) if self.lin is not None else x
        first = not self.aggregation.linear or aggregate_first(
            num_src=dg.num_src,
            num_dst=dg.num_dst,
            num_edges=dg.num_edges,
            in_width=self.in_channels,
            out_width=self.out_channels,
            x_requires_grad=x_src.requires_grad,
            training=needs_backward(self),
        )
        if first:
            out = self.lin_l(self.aggregation(dg, x_src))
        else:
            out = self.aggregation(dg, F.linear(x_src, self.lin_l.weight))
            if self.lin_l.bias is not None:
                out = out + self.lin_l.bias
        if self.lin_r is not None:
            out = out + self.lin_r(x_root)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
            f"aggr={self.aggr})"
        )
