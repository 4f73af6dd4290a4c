"""Stacks of message-passing layers: GCN, GraphSAGE, GAT and GIN models.

Each model is ``num_layers`` convolutions with ``dropout -> conv -> activation``
per layer and no activation after the last (dropout before every layer, the input
included, as in Kipf & Welling's GCN and Velickovic et al.'s GAT).

``forward(graph, x)`` takes either one graph (a full graph, used by every layer)
or a list of sampled :class:`~strata.operators.samplers.Block`, one per layer, as
:meth:`strata.operators.samplers.NeighborSampler.sample` returns them; ``x`` then holds
the rows of ``blocks[0].src_global_ids`` and the output the rows of
``blocks[-1].dst_global_ids`` (the seeds).

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> from strata.operators.samplers import NeighborSampler, SamplerConfig
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]))
    >>> model = GraphSAGE(8, 16, 3, num_layers=2)
    >>> model(g, torch.randn(4, 8)).shape  # full graph
    torch.Size([4, 3])
    >>> sampler = NeighborSampler(g, SamplerConfig(fanouts=(5, 5)), seed=0)
    >>> blocks = sampler.sample(np.array([0, 2]), epoch=0, batch_index=0)
    >>> x = torch.randn(4, 8)[torch.from_numpy(blocks[0].src_global_ids)]
    >>> model(blocks, x).shape  # one row per seed
    torch.Size([2, 3])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from strata.operators.errors import OperatorError
from strata.operators.layers._common import Graph
from strata.operators.layers.gat_conv import GATConv
from strata.operators.layers.gcn_conv import GCNConv
from strata.operators.layers.gin_conv import GINConv
from strata.operators.layers.sage_conv import SAGEConv
from strata.operators.samplers.block import Block

#: ``dropout(x, layer)``: a dropout applied to layer ``layer``'s input rows.
LayerDropout = Callable[[torch.Tensor, int], torch.Tensor]


class BasicGNN(nn.Module):
    """A stack of convolutions; subclasses say how to build one layer.

    Args:
        in_channels: input feature width.
        hidden_channels: width of every hidden layer.
        out_channels: output width (e.g. the number of classes).
        num_layers: number of convolutions (``>= 1``).
        dropout: dropout probability before every layer.
        act: activation between layers.
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 2,
        *,
        dropout: float = 0.0,
        act: Callable[[torch.Tensor], torch.Tensor] = F.relu,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if num_layers < 1:
            raise OperatorError.build(
                "num_layers", name, "num_layers >= 1", str(num_layers)
            )
        self.in_channels = in_channels
        self.hidden_channels = hidden_channels
        self.out_channels = out_channels
        self.num_layers = num_layers
        self.dropout = dropout
        self.act = act
        self.convs = nn.ModuleList()
        width = in_channels
        for i in range(num_layers):
            last = i == num_layers - 1
            conv, width = self.make_conv(
                width, out_channels if last else hidden_channels, last=last
            )
            self.convs.append(conv)

    def make_conv(
        self, in_channels: int, out_channels: int, *, last: bool
    ) -> tuple[nn.Module, int]:
        """Build one layer; return it and its output width."""
        raise NotImplementedError

    def reset_parameters(self) -> None:
        """Reset every layer."""
        for conv in self.convs:
            conv.reset_parameters()  # type: ignore[operator]

    def forward(
        self,
        graph: Graph | Sequence[Block],
        x: torch.Tensor,
        *,
        dropout: LayerDropout | None = None,
    ) -> torch.Tensor:
        """Run the stack over one graph or over one block per layer.

        Args:
            graph: one graph for every layer, or one block per layer.
            x: the input rows.
            dropout: ``dropout(x, layer)`` in place of ``F.dropout`` before every
                layer (a trainer's counter-based masks, which make a row's mask a
                function of its global id, so every worker count draws the same);
                ``None`` uses ``F.dropout`` with ``self.dropout``.

        Raises:
            OperatorError: if a list of blocks does not have one block per layer,
                or a graph and ``x`` disagree in size.
        """
        graphs = self._per_layer(graph)
        for i, (conv, g) in enumerate(zip(self.convs, graphs, strict=True)):
            if dropout is None:
                x = F.dropout(x, p=self.dropout, training=self.training)
            else:
                x = dropout(x, i)
            x = conv(g, x)
            if i < self.num_layers - 1:
                # A layer's output is a fresh tensor no backward pass reads, so
                # ReLU may overwrite it: one activation-sized buffer less per
                # layer (134 MB per layer on the RMAT-18 benchmark).
                x = F.relu(x, inplace=True) if self.act is F.relu else self.act(x)
        return x

    def _per_layer(self, graph: Graph | Sequence[Block]) -> Sequence[Graph]:
        if not isinstance(graph, Sequence):
            return [graph] * self.num_layers
        if len(graph) != self.num_layers:
            raise OperatorError.build(
                "blocks",
                f"{type(self).__name__}.forward",
                f"{self.num_layers} blocks (one per layer)",
                f"{len(graph)} blocks",
                "SamplerConfig.fanouts needs one fan-out per model layer",
            )
        return graph

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
            f"num_layers={self.num_layers})"
        )


class LayerStack(BasicGNN):
    """Stacked layers of a user's own class (any ``layer(in, out)`` callable).

    Args:
        in_channels: input feature width.
        hidden_channels: width of every hidden layer.
        out_channels: output width.
        num_layers: number of layers.
        layer: builds one layer from its input and output widths, e.g. a
            :class:`~strata.operators.layers.message_passing.MessagePassing`
            subclass: every execution (full-graph, partition-parallel, streaming)
            derives from its definition.
        dropout: dropout probability before every layer.
        act: activation between layers.
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 2,
        *,
        layer: Callable[[int, int], nn.Module],
        dropout: float = 0.0,
        act: Callable[[torch.Tensor], torch.Tensor] = F.relu,
    ) -> None:
        self.layer = layer
        super().__init__(
            in_channels,
            hidden_channels,
            out_channels,
            num_layers,
            dropout=dropout,
            act=act,
        )

    def make_conv(
        self, in_channels: int, out_channels: int, *, last: bool
    ) -> tuple[nn.Module, int]:
        """``layer(in_channels, out_channels)``."""
        return self.layer(in_channels, out_channels), out_channels


class GCN(BasicGNN):
    """Stacked :class:`~strata.operators.layers.GCNConv` (Kipf & Welling)."""

    def make_conv(
        self, in_channels: int, out_channels: int, *, last: bool
    ) -> tuple[nn.Module, int]:
        """A ``GCNConv(in_channels, out_channels)``."""
        return GCNConv(in_channels, out_channels), out_channels


class GraphSAGE(BasicGNN):
    """Stacked :class:`~strata.operators.layers.SAGEConv`.

    Args:
        in_channels: input feature width.
        hidden_channels: width of every hidden layer.
        out_channels: output width.
        num_layers: number of convolutions.
        aggr: the SAGE aggregator (``"mean"``, ``"sum"``, ``"max"``).
        project: with ``aggr="max"``, the max-pool aggregator.
        dropout: dropout probability before every layer.
        act: activation between layers.
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 2,
        *,
        aggr: str = "mean",
        project: bool = False,
        dropout: float = 0.0,
        act: Callable[[torch.Tensor], torch.Tensor] = F.relu,
    ) -> None:
        self.aggr = aggr
        self.project = project
        super().__init__(
            in_channels,
            hidden_channels,
            out_channels,
            num_layers,
            dropout=dropout,
            act=act,
        )

    def make_conv(
        self, in_channels: int, out_channels: int, *, last: bool
    ) -> tuple[nn.Module, int]:
        """A ``SAGEConv`` with the model's aggregator."""
        conv = SAGEConv(in_channels, out_channels, aggr=self.aggr, project=self.project)
        return conv, out_channels


class GAT(BasicGNN):
    """Stacked :class:`~strata.operators.layers.GATConv`.

    Hidden layers concatenate ``heads`` heads of ``hidden_channels`` each; the last
    layer averages ``output_heads`` heads.

    Args:
        in_channels: input feature width.
        hidden_channels: width of each head in the hidden layers.
        out_channels: output width.
        num_layers: number of convolutions.
        heads: heads of every hidden layer.
        output_heads: heads of the last layer.
        attention_dropout: dropout on attention weights.
        dropout: dropout probability before every layer.
        act: activation between layers (ELU in the GAT paper).
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 2,
        *,
        heads: int = 8,
        output_heads: int = 1,
        attention_dropout: float = 0.0,
        dropout: float = 0.0,
        act: Callable[[torch.Tensor], torch.Tensor] = F.elu,
    ) -> None:
        self.heads = heads
        self.output_heads = output_heads
        self.attention_dropout = attention_dropout
        super().__init__(
            in_channels,
            hidden_channels,
            out_channels,
            num_layers,
            dropout=dropout,
            act=act,
        )

    def make_conv(
        self, in_channels: int, out_channels: int, *, last: bool
    ) -> tuple[nn.Module, int]:
        """A ``GATConv``: concatenated heads inside, averaged heads last."""
        heads = self.output_heads if last else self.heads
        conv = GATConv(
            in_channels,
            out_channels,
            heads,
            concat=not last,
            dropout=self.attention_dropout,
        )
        return conv, out_channels if last else heads * out_channels


class GIN(BasicGNN):
    """Stacked :class:`~strata.operators.layers.GINConv`, each with a 2-layer MLP."""

    def make_conv(
        self, in_channels: int, out_channels: int, *, last: bool
    ) -> tuple[nn.Module, int]:
        """A ``GINConv`` over ``Linear -> ReLU -> Linear``."""
        mlp = nn.Sequential(
            nn.Linear(in_channels, out_channels),
            nn.ReLU(),
            nn.Linear(out_channels, out_channels),
        )
        return GINConv(mlp, train_eps=True), out_channels


MODELS: dict[str, type[BasicGNN]] = {
    "gcn": GCN,
    "sage": GraphSAGE,
    "gat": GAT,
    "gin": GIN,
}
