"""GraphSAGE convolution with mean, sum, max or max-pool aggregation.

``out = W_l . aggr_{j -> i}(x_j) + W_r . x_i`` (then optionally L2-normalised),
PyG's ``SAGEConv`` with the same parameters and defaults.

Aggregators: ``aggr="mean"`` (the paper's mean aggregator, default), ``"sum"``,
``"max"``. **Max-pool** is ``aggr="max", project=True``: sources first pass
through ``relu(W_pool x + b)``, then the feature-wise max is taken — the
paper's pooling aggregator, DGL's ``aggregator_type="pool"``, and PyG's
``SAGEConv(aggr="max", project=True)``. (Only the aggregated sources are
projected; the root term uses the raw ``x_i``, as in PyG and DGL.)

Declared once as a :class:`~strata.operators.layers.message_passing.MessagePassing`
layer: ``message`` (the max-pool projection, if any), the aggregation, ``transform()
= (W_l, b)``, ``root = W_r x_i`` and ``update`` (sum, then the optional L2
normalisation). For linear aggregators the layer transforms before aggregating when
that is cheaper (:func:`strata.operators.kernels.aggregate_first`); the bias is added
after the aggregation, so nodes without in-neighbours still get ``W_l . 0 + b`` as in
PyG.

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

from strata.operators.errors import OperatorError
from strata.operators.layers.message_passing import Max, Mean, MessagePassing, Sum

_AGGREGATIONS = {"mean": Mean(), "sum": Sum(), "max": Max()}


class SAGEConv(MessagePassing):
    """GraphSAGE layer.

    Args:
        in_channels: input feature width, or ``(source width, destination
            width)`` for a bipartite relation (sources and destinations of
            different node types, called with an ``(x_src, x_dst)`` pair), as
            PyG's ``SAGEConv((in_src, in_dst), out)``.
        out_channels: output feature width.
        aggr: ``"mean"``, ``"sum"`` or ``"max"`` (see the module docs).
        normalize: L2-normalise each output row.
        root_weight: add the transformed root features ``W_r . x_i``.
        project: pass sources through ``relu(Linear(x))`` before aggregating
            (with ``aggr="max"``: the max-pool aggregator).
        bias: learn a bias in ``W_l``.

    Shapes:
        x: ``[num_src, in_channels]``, or a pair ``([num_src, in_src],
        [num_dst, in_dst])``; returns ``[num_dst, out_channels]``.
    """

    work_units = ((0, 3), (4, 7))

    def __init__(
        self,
        in_channels: int | tuple[int, int],
        out_channels: int,
        *,
        aggr: str = "mean",
        normalize: bool = False,
        root_weight: bool = True,
        project: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if aggr not in _AGGREGATIONS:
            raise OperatorError.build(
                "aggr", "SAGEConv", f"one of {sorted(_AGGREGATIONS)}", repr(aggr)
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.aggr = aggr
        self.aggregation = _AGGREGATIONS[aggr]
        self.normalize = normalize
        self.root_weight = root_weight
        self.project = project
        in_src, in_dst = (
            in_channels if isinstance(in_channels, tuple) else (in_channels,) * 2
        )
        self.lin = nn.Linear(in_src, in_src, bias=True) if project else None
        self.lin_l = nn.Linear(in_src, out_channels, bias=bias)
        self.lin_r = (
            nn.Linear(in_dst, out_channels, bias=False) if root_weight else None
        )
        self.update_is_sum = not normalize
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Default ``nn.Linear`` initialisation, as PyG."""
        for lin in (self.lin, self.lin_l, self.lin_r):
            if lin is not None:
                lin.reset_parameters()

    @property
    def sends_features(self) -> bool:
        """Whether sources send their features unchanged (no max-pool)."""
        return self.lin is None

    def message(self, x: torch.Tensor) -> torch.Tensor:
        """The source's features, or ``relu(W_pool x + b)`` (max-pool)."""
        return F.relu(self.lin(x)) if self.lin is not None else x

    def transform(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(W_l, b)``."""
        return self.lin_l.weight, self.lin_l.bias

    def root(self, x: torch.Tensor) -> torch.Tensor | None:
        """``W_r x_i`` (None without ``root_weight``)."""
        return self.lin_r(x) if self.lin_r is not None else None

    def finish(self, z: torch.Tensor, x_root: torch.Tensor | None) -> torch.Tensor:
        """``update(W_l z + b, W_r x_root)``, the root term folded into the GEMM.

        Without ``normalize`` the sum is one ``addmm`` onto the root term
        (``W_r x + W_l z``, then ``+ b`` in place): one ``[N, out]`` temporary
        and one pass over it fewer than ``h + root``; the same value.
        """
        if self.normalize or self.lin_r is None or x_root is None:
            return super().finish(z, x_root)
        out = torch.addmm(self.lin_r(x_root), z, self.lin_l.weight.t())
        return out if self.lin_l.bias is None else out.add_(self.lin_l.bias)

    def update(self, h: torch.Tensor, root: torch.Tensor | None) -> torch.Tensor:
        """``h + root``, L2-normalised with ``normalize``."""
        out = h if root is None else h + root
        return F.normalize(out, p=2.0, dim=-1) if self.normalize else out

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
            f"aggr={self.aggr})"
        )
