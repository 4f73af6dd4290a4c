"""Sampled dense-dense products: one value per edge from its two endpoints.

* :func:`sddmm_add` (DGL's ``u_add_v``): ``out[e] = a_src[src(e)] + a_dst[dst(e)]``,
  GAT's attention logits from per-node scores.
* :func:`sddmm_dot` (``u_dot_v``): ``out[e] = <x_src[src(e)], y_dst[dst(e)]>``,
  dot-product attention; its backward is :func:`strata.operators.kernels.spmm` over the
  graph and its transpose, so no per-edge feature tensor is stored.

Edges are in the graph's in-adjacency (CSC) order, like every edge tensor here.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([2, 2]))
    >>> a = torch.tensor([[1.0], [2.0], [10.0]])
    >>> sddmm_add(g, a, a).flatten().tolist()  # edges 0->2 and 1->2
    [11.0, 12.0]
    >>> sddmm_dot(g, a, a).tolist()
    [10.0, 20.0]
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


def _check_dst(
    dg: DeviceGraph, x_src: torch.Tensor, y_dst: torch.Tensor, where: str
) -> None:
    check_node_features(dg, x_src, where)
    if y_dst.shape[0] != dg.num_dst or y_dst.shape[1:] != x_src.shape[1:]:
        raise OperatorError.build(
            "y_dst",
            where,
            f"shape ({dg.num_dst}, {', '.join(map(str, x_src.shape[1:]))}) "
            "(num_dst rows, trailing shape of x_src)",
            f"shape {tuple(y_dst.shape)}",
        )


def sddmm_add(
    graph: GraphLike | DeviceGraph, a_src: torch.Tensor, a_dst: torch.Tensor
) -> torch.Tensor:
    """Per-edge sums of a source and a destination score.

    Args:
        graph: a full graph, a block, or a :class:`DeviceGraph`.
        a_src: ``[num_src, ...]`` source scores.
        a_dst: ``[num_dst, ...]`` destination scores, same trailing shape.

    Returns:
        ``[E, ...]`` in in-adjacency edge order; gradients flow to both inputs.
    """
    dg = as_device_graph(graph, a_src.device)
    _check_dst(dg, a_src, a_dst, "sddmm_add")
    return a_src.index_select(0, dg.src_index()) + a_dst.index_select(0, dg.dst_index())


class _SDDMMDot(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, dg: DeviceGraph, x_src: torch.Tensor, y_dst: torch.Tensor
    ) -> torch.Tensor:
        ctx.dg = dg
        ctx.save_for_backward(x_src, y_dst)
        return sddmm_raw(dg, x_src, y_dst)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        x_src, y_dst = ctx.saved_tensors
        grad_x = grad_y = None
        if ctx.needs_input_grad[1]:
            grad_x = spmm_raw(ctx.dg, y_dst, grad.contiguous(), transpose=True)
        if ctx.needs_input_grad[2]:
            grad_y = spmm_raw(ctx.dg, x_src, grad.contiguous())
        return None, grad_x, grad_y


def sddmm_dot(
    graph: GraphLike | DeviceGraph, x_src: torch.Tensor, y_dst: torch.Tensor
) -> torch.Tensor:
    """Per-edge dot products of source and destination features.

    Args:
        graph: a full graph, a block, or a :class:`DeviceGraph`.
        x_src: ``[num_src, F]`` or ``[num_src, H, C]``.
        y_dst: ``[num_dst, ...]`` with the same trailing shape.

    Returns:
        ``[E]`` (or ``[E, H]`` per head), differentiable in both inputs.
    """
    dg = as_device_graph(graph, x_src.device)
    _check_dst(dg, x_src, y_dst, "sddmm_dot")
    result: torch.Tensor = _SDDMMDot.apply(dg, x_src, y_dst)
    return result
