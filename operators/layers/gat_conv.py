"""Graph attention (GAT) with multiple heads, PyG's ``GATConv`` defaults.

For every head ``h``: ``e_ij = LeakyReLU(a_src . W x_j + a_dst . W x_i)`` (negative
slope 0.2), ``alpha_ij = softmax_j(e_ij)`` over ``i``'s in-edges (self-loop
included), dropout on ``alpha`` in training, ``out_i = sum_j alpha_ij W x_j``.
Heads are concatenated (``concat=True``) or averaged, then the bias is added.

Without attention dropout (evaluation, or ``dropout=0``) the logits, softmax and
weighted sum are one fused kernel (:func:`~strata.operators.kernels.gat_attention`)
that keeps only the ``[E, H]`` weights. With attention dropout in training they are
an SDDMM (:func:`~strata.operators.kernels.sddmm_add`), an
:func:`~strata.operators.kernels.edge_softmax`, dropout and a per-head
:func:`~strata.operators.kernels.spmm`. Neither materialises a ``[E, H, C]``
message tensor.

Self-loops follow PyG: existing loops are removed and one added per node (per
destination on a :class:`~strata.operators.samplers.Block`). Graph edge weights are
ignored (PyG's GAT has none); edge features (``edge_dim``) are not supported.

References:
    Petar Velickovic, Guillem Cucurull, Arantxa Casanova, Adriana Romero, Pietro
    Lio, Yoshua Bengio. *Graph Attention Networks*. ICLR 2018, arXiv:1710.10903.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> conv = GATConv(4, 3, heads=2)
    >>> conv
    GATConv(4, 3, heads=2)
    >>> conv(g, torch.randn(3, 4)).shape
    torch.Size([3, 6])
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from strata.operators.errors import OperatorError
from strata.operators.kernels.attention import gat_attention
from strata.operators.kernels.edge_softmax import edge_softmax
from strata.operators.kernels.sddmm import sddmm_add
from strata.operators.kernels.spmm import spmm
from strata.operators.layers._common import Graph, glorot_, resolve_graph
from strata.operators.layers.message_passing import (
    Attention,
    MessagePassing,
    destination_rows,
)


class GATConv(MessagePassing):
    """Multi-head graph attention layer.

    Args:
        in_channels: input feature width.
        out_channels: width per head.
        heads: number of attention heads.
        concat: concatenate heads (output ``heads * out_channels``) or average
            them (output ``out_channels``).
        negative_slope: LeakyReLU slope of the attention logits.
        dropout: dropout probability on the attention weights (training only).
        add_self_loops: attend to self through a loop.
        bias: learn an additive bias.
        residual: add a linear projection of the root features.

    Shapes:
        x: ``[num_src, in_channels]``; returns ``[num_dst, heads * out_channels]``
        (concat) or ``[num_dst, out_channels]``.
    """

    aggregation = Attention()
    update_is_sum = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        heads: int = 1,
        *,
        concat: bool = True,
        negative_slope: float = 0.2,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        bias: bool = True,
        residual: bool = False,
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.heads = heads
        self.concat = concat
        self.negative_slope = negative_slope
        self.dropout = dropout
        self.add_self_loops = add_self_loops
        total = heads * out_channels if concat else out_channels
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        self.res = nn.Linear(in_channels, total, bias=False) if residual else None
        self.bias = nn.Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weights and attention vectors, zero bias, as PyG."""
        glorot_(self.lin.weight)
        if self.res is not None:
            glorot_(self.res.weight)
        glorot_(self.att_src)
        glorot_(self.att_dst)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def message(self, x: torch.Tensor) -> torch.Tensor:
        """``W x_j``, one row of ``heads x out_channels`` per source."""
        return self.lin(x).view(-1, self.heads, self.out_channels)

    def root(self, x: torch.Tensor) -> torch.Tensor | None:
        """The residual projection of the destination (None without one)."""
        return self.res(x) if self.res is not None else None

    def update(self, h: torch.Tensor, root: torch.Tensor | None) -> torch.Tensor:
        """Heads concatenated or averaged, plus the residual and the bias."""
        out = h.reshape(h.shape[0], -1) if self.concat else h.mean(dim=1)
        if root is not None:
            out = out + root
        if self.bias is not None:
            out = out + self.bias
        return out

    def forward(
        self, graph: Graph, x: torch.Tensor | tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        """Attend over in-neighbours of every destination node.

        The attention-weighted sum replaces the reduction of
        :class:`~strata.operators.layers.message_passing.MessagePassing`; the
        message, root and update are the layer's declared ones.

        Raises:
            OperatorError: if ``x`` does not have one row per source node, or is
                an ``(x_src, x_dst)`` pair (not supported by this layer yet).
        """
        if isinstance(x, tuple):
            raise OperatorError.build(
                "x",
                "GATConv.forward",
                "one feature tensor",
                "an (x_src, x_dst) pair",
                "bipartite (typed-relation) attention is not implemented; use a "
                "reduction layer such as SAGEConv per relation",
            )
        dg = resolve_graph(graph, x, "GATConv.forward")
        prop = dg.with_self_loops() if self.add_self_loops else dg
        h = self.message(x)
        alpha_src = (h * self.att_src).sum(dim=-1)
        alpha_dst = (destination_rows(h, dg.num_dst) * self.att_dst).sum(dim=-1)
        if not (self.training and self.dropout > 0):
            # Scores, softmax and weighted sum in one fused kernel.
            z = gat_attention(prop, h, alpha_src, alpha_dst, self.negative_slope)
            return self.update(z, self.root(destination_rows(x, dg.num_dst)))
        logits = F.leaky_relu(
            sddmm_add(prop, alpha_src, alpha_dst), self.negative_slope
        )
        alpha = edge_softmax(prop, logits)
        alpha = F.dropout(alpha, p=self.dropout, training=self.training)
        return self.update(spmm(prop, h, alpha), self.root(x[: dg.num_dst]))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
            f"heads={self.heads})"
        )
