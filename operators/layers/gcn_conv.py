"""Graph convolution (GCN) of Kipf & Welling, with PyG's ``GCNConv`` defaults.

``out = D^-1/2 (A + I) D^-1/2 X W + b``: each node averages its in-neighbours and
itself, weighted by ``1 / sqrt(deg(src) deg(dst))``. Declared once as a
:class:`~strata.operators.layers.message_passing.MessagePassing` layer: the
:class:`~strata.operators.layers.message_passing.SymNorm` aggregation of the raw
features, then ``transform() = (W, b)``; the self-loop graph and the coefficients
are computed once per graph and cached on its :class:`DeviceGraph`, and the layer
picks aggregate-first ``(A X) W`` or transform-first ``A (X W)`` by cost
(:func:`strata.operators.kernels.aggregate_first`), which gives the same result.

On a full graph this is PyG's ``GCNConv`` exactly: self-loops replace existing
ones (``add_remaining_self_loops``), degrees are weighted in-degrees, used for both
endpoints. On a sampled :class:`~strata.operators.samplers.Block`, where PyG has no
bipartite GCN, it follows DGL's ``GraphConv(norm="both")``: destinations use their
in-degree in the block, sources their out-degree in the block (self-loops
included in both).

References:
    Thomas N. Kipf, Max Welling. *Semi-Supervised Classification with Graph
    Convolutional Networks*. ICLR 2017, arXiv:1609.02907.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> conv = GCNConv(4, 2)
    >>> conv
    GCNConv(4, 2)
    >>> conv(g, torch.randn(3, 4)).shape
    torch.Size([3, 2])
"""

from __future__ import annotations

import torch
from torch import nn

from strata.operators.errors import OperatorError
from strata.operators.kernels.device_graph import DeviceGraph
from strata.operators.layers._common import glorot_
from strata.operators.layers.message_passing import (
    MessagePassing,
    SymNorm,
    WeightedSum,
)


def gcn_coefficients(
    dg: DeviceGraph, *, improved: bool, add_self_loops: bool, normalize: bool
) -> tuple[DeviceGraph, torch.Tensor | None]:
    """The propagation graph and its edge coefficients for GCN (cached on ``dg``).

    Args:
        dg: the input graph.
        improved: self-loops weigh 2 (``A + 2I``) instead of 1.
        add_self_loops: replace self-loops by one loop per node.
        normalize: apply the symmetric normalisation.

    Returns:
        ``(graph, values)``: the graph to aggregate over and its per-edge
        coefficients (``None`` for an unweighted sum).
    """
    prop = _aggregation(improved, add_self_loops, normalize).propagate(dg)
    return prop.graph, prop.values


def _aggregation(
    improved: bool, add_self_loops: bool, normalize: bool
) -> SymNorm | WeightedSum:
    if not normalize:
        return WeightedSum()
    return SymNorm(2.0 if improved else 1.0, add_self_loops)


class GCNConv(MessagePassing):
    """Graph convolution layer (symmetric normalisation, self-loops).

    Args:
        in_channels: input feature width.
        out_channels: output feature width.
        improved: use ``A + 2I`` (self-loops of weight 2). Note: PyG's
            ``edge_index`` path ignores this on unweighted graphs (its loops keep
            weight 1); here, as in PyG's sparse-tensor path and the paper's
            definition, the loops weigh 2.
        add_self_loops: add self-loops (default: same as ``normalize``).
        normalize: apply ``D^-1/2 . D^-1/2``; without it the layer sums
            (weighted) in-neighbours.
        bias: learn an additive bias.

    Shapes:
        x: ``[num_src, in_channels]``; returns ``[num_dst, out_channels]``.
    """

    work_units = ((0, 1), (2, 4))

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        *,
        improved: bool = False,
        add_self_loops: bool | None = None,
        normalize: bool = True,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise OperatorError.build(
                "add_self_loops",
                "GCNConv",
                "add_self_loops=False when normalize=False",
                "add_self_loops=True",
                "self-loops are only added as part of the normalisation, as in PyG",
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.improved = improved
        self.add_self_loops = add_self_loops
        self.normalize = normalize
        self.aggregation = _aggregation(improved, add_self_loops, normalize)
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weights and zero bias, as PyG."""
        glorot_(self.lin.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def transform(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(W, b)``: the bias joins after the aggregation, as PyG's."""
        return self.lin.weight, self.bias

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"
