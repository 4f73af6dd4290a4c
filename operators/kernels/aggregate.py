"""Neighbourhood aggregation over a graph: sum, mean and max, with gradients.

``aggregate(graph, x, "sum" | "mean" | "max")`` reduces the features of every
destination's in-neighbours (parallel edges counted). Sum and mean are
:func:`strata.operators.kernels.spmm` products; max is a row-wise max that remembers the
winning source per feature, so its backward routes each gradient to that one
source (ties: the first edge wins on CPU; the torch path splits ties evenly like
PyG, which is the same total when the tied copies come from one node). A node with
no in-edges gets zeros, as in PyG.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([2, 2]))
    >>> x = torch.tensor([[1.0, 5.0], [3.0, -1.0], [0.0, 0.0]])
    >>> aggregate(g, x, "mean")[2].tolist(), aggregate(g, x, "max")[2].tolist()
    ([2.0, 2.0], [3.0, 5.0])
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from strata.operators.errors import OperatorError
from strata.operators.kernels import _cpu
from strata.operators.kernels.backend import Backend, resolve, work_dtype
from strata.operators.kernels.device_graph import (
    DeviceGraph,
    GraphLike,
    as_device_graph,
    check_node_features,
)
from strata.operators.kernels.spmm import spmm

Reduce = Literal["sum", "mean", "max"]
REDUCTIONS: tuple[str, ...] = ("sum", "mean", "max")


class _SegmentMax(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, dg: DeviceGraph, x: torch.Tensor) -> torch.Tensor:
        x2 = x.detach().to(work_dtype(x.dtype)).contiguous().flatten(1)
        out = torch.empty((dg.num_dst, x2.shape[1]), dtype=x2.dtype)
        arg = torch.empty((dg.num_dst, x2.shape[1]), dtype=torch.int64)
        _cpu.segment_max(
            dg.indptr.numpy(),
            dg.src_index().numpy(),
            x2.numpy(),
            out.numpy(),
            arg.numpy(),
        )
        ctx.save_for_backward(arg)
        ctx.x_shape = x.shape
        return out.to(x.dtype).view(dg.num_dst, *x.shape[1:])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        (arg,) = ctx.saved_tensors
        if ctx.x_shape[0] == 0:  # no sources (a typed block's empty type)
            return None, grad.new_zeros(ctx.x_shape)
        grad2 = grad.reshape(arg.shape)
        found = arg >= 0
        grad_x = grad2.new_zeros((ctx.x_shape[0], arg.shape[1]))
        grad_x.scatter_add_(0, arg.clamp(min=0), grad2 * found)
        return None, grad_x.view(ctx.x_shape)


def _max_torch(dg: DeviceGraph, x: torch.Tensor) -> torch.Tensor:
    # PyG's semantics exactly: scatter_reduce "amax" without the initial value.
    messages = x.index_select(0, dg.src_index())
    index = dg.dst_index().view(-1, *([1] * (x.dim() - 1))).expand_as(messages)
    out = x.new_zeros((dg.num_dst, *x.shape[1:]))
    return out.scatter_reduce(0, index, messages, "amax", include_self=False)


def aggregate(
    graph: GraphLike | DeviceGraph, x: torch.Tensor, reduce: Reduce = "sum"
) -> torch.Tensor:
    """Reduce in-neighbour features per destination node.

    Args:
        graph: a full graph, a block, or a :class:`DeviceGraph`.
        x: ``[num_src, ...]`` source features.
        reduce: ``"sum"``, ``"mean"`` or ``"max"``.

    Returns:
        ``[num_dst, ...]``; nodes without in-edges get zeros.

    Raises:
        OperatorError: on an unknown reduction or a feature row mismatch.
    """
    dg = as_device_graph(graph, x.device)
    check_node_features(dg, x, "aggregate")
    if reduce == "sum":
        return spmm(dg, x)
    if reduce == "mean":
        degree = dg.cached(
            ("inv_in_degree", x.dtype),
            lambda: 1.0 / dg.in_degree().clamp(min=1).to(x.dtype),
        )
        return spmm(dg, x) * degree.view(-1, *([1] * (x.dim() - 1)))
    if reduce == "max":
        work = dg.num_edges * (x[0].numel() if x.shape[0] else 0)
        if resolve(x, work) is Backend.NUMBA:
            result: torch.Tensor = _SegmentMax.apply(dg, x)
            return result
        return _max_torch(dg, x)
    raise OperatorError.build(
        "reduce", "aggregate", f"one of {list(REDUCTIONS)}", repr(reduce)
    )
