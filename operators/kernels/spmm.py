"""Sparse-dense matrix product over a graph (g-SpMM), with gradients.

``spmm(graph, x, values)`` computes ``out[i] = sum_{e: j -> i} values[e] * x[j]``:
the weighted sum of in-neighbour features that sum, mean and GCN aggregation reduce
to. The backward pass is the same product over the cached transpose (for ``x``)
and a per-edge dot product (for ``values``), so neither pass materialises one
message per edge.

Shapes:
    x: ``[num_src, F]``, or ``[num_src, H, C]`` for multi-head layers.
    values: ``None`` (all ones), ``[E]``, or ``[E, H]`` (one weight per head).
    returns: ``[num_dst, ...]`` matching ``x``'s trailing shape.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([2, 2]))
    >>> x = torch.tensor([[1.0], [2.0], [4.0]])
    >>> spmm(g, x).flatten().tolist()  # node 2 sums nodes 0 and 1
    [0.0, 0.0, 3.0]
"""

from __future__ import annotations

from typing import Any

import torch

from strata.operators.errors import OperatorError
from strata.operators.kernels._primitives import sddmm_raw, spmm_raw
from strata.operators.kernels.device_graph import (
    DeviceGraph,
    GraphLike,
    as_device_graph,
    check_node_features,
)


class _SpMM(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, dg: DeviceGraph, values: torch.Tensor | None, x: torch.Tensor
    ) -> torch.Tensor:
        ctx.dg = dg
        ctx.values_need_grad = values is not None and values.requires_grad
        # x is kept only when the values need a gradient (their dual is <g, x>).
        ctx.save_for_backward(values, x if ctx.values_need_grad else None)
        return spmm_raw(dg, x, values)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        values, x = ctx.saved_tensors
        grad_values = grad_x = None
        if ctx.needs_input_grad[2]:
            constant = values is not None and not ctx.values_need_grad
            grad_x = spmm_raw(
                ctx.dg, grad, values, transpose=True, reuse_values=constant
            )
        if ctx.needs_input_grad[1]:
            heads = values.shape[1] if values.dim() == 2 else 0
            if heads:
                grad_values = sddmm_raw(
                    ctx.dg,
                    x.reshape(x.shape[0], heads, -1),
                    grad.reshape(grad.shape[0], heads, -1),
                )
            else:
                grad_values = sddmm_raw(
                    ctx.dg, x.reshape(x.shape[0], -1), grad.reshape(grad.shape[0], -1)
                )
        return None, grad_values, grad_x


def spmm(
    graph: GraphLike | DeviceGraph,
    x: torch.Tensor,
    values: torch.Tensor | None = None,
) -> torch.Tensor:
    """Weighted sum of in-neighbour features, differentiable in ``x`` and ``values``.

    Args:
        graph: a full graph, a block, or a :class:`DeviceGraph`.
        x: source node features, ``[num_src, F]`` or ``[num_src, H, C]``.
        values: optional edge weights in the graph's in-adjacency (CSC) order,
            ``[E]`` or ``[E, H]`` for per-head weights.

    Returns:
        ``[num_dst, ...]`` aggregated features.

    Raises:
        OperatorError: on a feature row count or edge-value shape mismatch.
    """
    dg = as_device_graph(graph, x.device)
    check_node_features(dg, x, "spmm")
    if values is not None:
        heads = x.shape[1] if x.dim() == 3 else None
        expected = (dg.num_edges,) if values.dim() == 1 else (dg.num_edges, heads)
        if tuple(values.shape) != expected or values.dim() > 2:
            raise OperatorError.build(
                "values",
                "spmm",
                f"shape ({dg.num_edges},) or ({dg.num_edges}, heads) with x of shape "
                "[N, heads, C]",
                f"shape {tuple(values.shape)} with x of shape {tuple(x.shape)}",
            )
    result: torch.Tensor = _SpMM.apply(dg, values, x)
    return result
