"""Softmax of edge scores over each destination's in-edges (attention weights).

``edge_softmax(graph, scores)[e] = exp(s_e) / sum_{e' -> dst(e)} exp(s_e')``,
computed stably (the row maximum is subtracted first). The backward pass uses the
saved probabilities: ``grad_s = p * (g - sum_row(p * g))``. On CPU both passes are
one row-parallel numba sweep over the CSR; elsewhere they are torch scatter ops.

Shapes:
    scores: ``[E]`` or ``[E, H]`` in in-adjacency (CSC) edge order.
    returns: the same shape; each destination's weights sum to 1 per head.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 0]), np.array([2, 2, 1]))
    >>> edge_softmax(g, torch.tensor([3.0, 1.0, 1.0])).tolist()  # 0->1, 0->2, 1->2
    [1.0, 0.5, 0.5]
"""

from __future__ import annotations

from typing import Any

import torch

from strata.operators.errors import OperatorError
from strata.operators.kernels import _cpu
from strata.operators.kernels.backend import Backend, resolve, work_dtype
from strata.operators.kernels.device_graph import (
    DeviceGraph,
    GraphLike,
    as_device_graph,
)


def _row_sum(dg: DeviceGraph, values: torch.Tensor) -> torch.Tensor:
    out = values.new_zeros((dg.num_dst, values.shape[1]))
    return out.index_add_(0, dg.dst_index(), values)


class _EdgeSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, dg: DeviceGraph, scores: torch.Tensor) -> torch.Tensor:
        dtype = scores.dtype
        scores = scores.detach().contiguous()
        if resolve(scores, scores.numel()) is Backend.NUMBA:
            scores = scores.to(work_dtype(dtype))
            probs = torch.empty_like(scores)
            _cpu.edge_softmax_forward(dg.indptr.numpy(), scores.numpy(), probs.numpy())
            probs = probs.to(dtype)
        else:
            dst = dg.dst_index()
            top = scores.new_full((dg.num_dst, scores.shape[1]), float("-inf"))
            index = dst.view(-1, 1).expand_as(scores)
            top.scatter_reduce_(0, index, scores, "amax")
            probs = (scores - top[dst]).exp()
            probs = probs / _row_sum(dg, probs)[dst]
        ctx.dg = dg
        ctx.save_for_backward(probs)
        return probs

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        (probs,) = ctx.saved_tensors
        grad = grad.contiguous()
        if resolve(probs, probs.numel()) is Backend.NUMBA:
            work = work_dtype(probs.dtype)
            out = torch.empty(probs.shape, dtype=work)
            _cpu.edge_softmax_backward(
                ctx.dg.indptr.numpy(),
                probs.to(work).numpy(),
                grad.to(work).numpy(),
                out.numpy(),
            )
            return None, out.to(grad.dtype)
        weighted = probs * grad
        return None, weighted - probs * _row_sum(ctx.dg, weighted)[ctx.dg.dst_index()]


def edge_softmax(graph: GraphLike | DeviceGraph, scores: torch.Tensor) -> torch.Tensor:
    """Normalise edge scores into attention weights per destination node.

    Args:
        graph: a full graph, a block, or a :class:`DeviceGraph`.
        scores: ``[E]`` or ``[E, H]`` edge scores in in-adjacency order.

    Returns:
        Softmax-normalised weights of the same shape, differentiable in ``scores``.

    Raises:
        OperatorError: if ``scores`` does not have one row per edge.
    """
    dg = as_device_graph(graph, scores.device)
    if scores.shape[0] != dg.num_edges or scores.dim() > 2:
        raise OperatorError.build(
            "scores",
            "edge_softmax",
            f"shape ({dg.num_edges},) or ({dg.num_edges}, heads)",
            f"shape {tuple(scores.shape)}",
        )
    flat = scores.dim() == 1
    result: torch.Tensor = _EdgeSoftmax.apply(
        dg, scores.view(-1, 1) if flat else scores
    )
    return result.view(-1) if flat else result
