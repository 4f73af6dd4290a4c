"""GAT's attention aggregation as one fused kernel: scores, softmax, weighted sum.

``gat_attention(graph, h, el, er, negative_slope)`` computes, per destination
``i`` and head ``k``::

    alpha_ik[e] = softmax_{e -> i}( leaky_relu(el[src(e), k] + er[i, k]) )
    out[i, k]   = sum_{e -> i} alpha_ik[e] * h[src(e), k]

On CPU (numba) the forward is one sweep per destination row that keeps only the
``[E, H]`` weights for backward; the backward is two sweeps: one over destination
rows (the softmax and LeakyReLU gradients, and ``er``'s), one over the cached
transpose (``h``'s and ``el``'s gradients, without atomics). DGL's ``GATConv``
and the unfused formulation materialise several ``[E, H]`` tensors per pass
(logits, activation, exp, weights, their gradients) and gather-scatter each.
Elsewhere the same function is the composition of :func:`sddmm_add`, LeakyReLU,
:func:`edge_softmax` and :func:`spmm`, which gives the same result.

Shapes:
    h: ``[num_src, H, C]``; el: ``[num_src, H]``; er: ``[num_dst, H]``.
    returns: ``[num_dst, H, C]``.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([2, 2]))
    >>> h = torch.tensor([[[1.0]], [[3.0]], [[0.0]]])
    >>> zero = torch.zeros(3, 1)
    >>> gat_attention(g, h, zero, zero, 0.2)[2].flatten().tolist()  # equal weights
    [2.0]
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from strata.operators.errors import OperatorError
from strata.operators.kernels import _cpu
from strata.operators.kernels.backend import Backend, resolve, work_dtype
from strata.operators.kernels.device_graph import (
    DeviceGraph,
    GraphLike,
    as_device_graph,
    check_node_features,
)
from strata.operators.kernels.edge_softmax import edge_softmax
from strata.operators.kernels.sddmm import sddmm_add
from strata.operators.kernels.spmm import spmm


class _GATAttention(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        dg: DeviceGraph,
        slope: float,
        h: torch.Tensor,
        el: torch.Tensor,
        er: torch.Tensor,
    ) -> torch.Tensor:
        dtype = h.dtype
        work = work_dtype(dtype)
        h = h.detach().to(work).contiguous()
        el = el.detach().to(work).contiguous()
        er = er.detach().to(work).contiguous()
        out = torch.empty((dg.num_dst, *h.shape[1:]), dtype=work)
        alpha = torch.empty((dg.num_edges, h.shape[1]), dtype=work)
        _cpu.gat_forward(
            dg.indptr.numpy(),
            dg.indices.numpy(),
            el.numpy(),
            er.numpy(),
            h.numpy(),
            float(slope),
            out.numpy(),
            alpha.numpy(),
        )
        ctx.dg = dg
        ctx.slope = float(slope)
        ctx.dtype = dtype
        ctx.save_for_backward(h, el, er, alpha)
        return out.to(dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        h, el, er, alpha = ctx.saved_tensors
        dg: DeviceGraph = ctx.dg
        grad = grad.to(h.dtype).contiguous()
        d_score = torch.empty_like(alpha)
        d_er = torch.empty_like(er)
        _cpu.gat_backward_rows(
            dg.indptr.numpy(),
            dg.indices.numpy(),
            el.numpy(),
            er.numpy(),
            h.numpy(),
            alpha.numpy(),
            grad.numpy(),
            ctx.slope,
            d_score.numpy(),
            d_er.numpy(),
        )
        t = dg.transpose()
        d_h = torch.empty_like(h)
        d_el = torch.empty_like(el)
        _cpu.gat_backward_cols(
            t.indptr.numpy(),
            t.indices.numpy(),
            t.perm.numpy(),
            alpha.numpy(),
            d_score.numpy(),
            grad.numpy(),
            d_h.numpy(),
            d_el.numpy(),
        )
        need = ctx.needs_input_grad
        return (
            None,
            None,
            d_h.to(ctx.dtype) if need[2] else None,
            d_el.to(ctx.dtype) if need[3] else None,
            d_er.to(ctx.dtype) if need[4] else None,
        )


def gat_attention(
    graph: GraphLike | DeviceGraph,
    h: torch.Tensor,
    el: torch.Tensor,
    er: torch.Tensor,
    negative_slope: float = 0.2,
) -> torch.Tensor:
    """Attention-weighted sum of in-neighbour features, per head (module docs).

    Args:
        graph: a full graph, a block, or a :class:`DeviceGraph` (self-loops, if
            wanted, already added).
        h: ``[num_src, H, C]`` source features.
        el: ``[num_src, H]`` source halves of the scores.
        er: ``[num_dst, H]`` destination halves of the scores.
        negative_slope: the LeakyReLU slope of the scores.

    Returns:
        ``[num_dst, H, C]``, differentiable in ``h``, ``el`` and ``er``.

    Raises:
        OperatorError: on a shape mismatch between the inputs and the graph.
    """
    dg = as_device_graph(graph, h.device)
    check_node_features(dg, h, "gat_attention")
    heads = h.shape[1] if h.dim() == 3 else -1
    if (
        h.dim() != 3
        or tuple(el.shape) != (dg.num_src, heads)
        or tuple(er.shape) != (dg.num_dst, heads)
    ):
        raise OperatorError.build(
            "h, el, er",
            "gat_attention",
            f"h [{dg.num_src}, H, C], el [{dg.num_src}, H], er [{dg.num_dst}, H]",
            f"h {tuple(h.shape)}, el {tuple(el.shape)}, er {tuple(er.shape)}",
        )
    work = dg.num_edges * h.shape[1] * h.shape[2]
    if resolve(h, work) is Backend.NUMBA:
        result: torch.Tensor = _GATAttention.apply(dg, negative_slope, h, el, er)
        return result
    logits = F.leaky_relu(sddmm_add(dg, el, er), negative_slope)
    return spmm(dg, h, edge_softmax(dg, logits))
