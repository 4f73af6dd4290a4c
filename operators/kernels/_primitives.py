"""Sparse primitives without autograd, dispatched per backend (private).

``spmm_raw`` and ``sddmm_raw`` are duals: the backward of one is the other, which is how
:mod:`strata.operators.kernels.spmm` and :mod:`strata.operators.kernels.sddmm` build
their autograd Functions. Shapes: node tensors are ``[N, F]`` or ``[N, H, C]`` (heads);
edge values are ``[E]`` or ``[E, H]``.
"""

from __future__ import annotations

import warnings

import torch

from strata.operators.kernels import _cpu
from strata.operators.kernels.backend import Backend, resolve, work_dtype
from strata.operators.kernels.device_graph import DeviceGraph

# torch warns once per process that CSR tensors are "beta"; they are the
# documented sparse layout for SpMM and this module relies on them knowingly.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")

# Edges per chunk of the torch gather path: bounds the temporary [chunk, F] tensor.
_GATHER_ELEMENTS = 1 << 24


def _rows(dg: DeviceGraph, transpose: bool) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(indptr, int64 indices, num_cols) of the CSR to reduce over.

    Kernels always see int64 ids: one compiled variant per dtype instead of two,
    and torch's CSR matmul wants indices of indptr's dtype anyway.
    """
    if transpose:
        t = dg.transpose()
        return t.indptr, t.indices, dg.num_dst
    return dg.indptr, dg.src_index(), dg.num_src


def _edge_values(
    dg: DeviceGraph, values: torch.Tensor | None, transpose: bool, reuse: bool
) -> torch.Tensor | None:
    """Edge values in the order of the CSR being reduced over."""
    if values is None or not transpose:
        return values
    perm = dg.transpose().perm
    if not reuse:
        return values[perm]
    # Constant coefficients (GCN's) come back every backward pass: keep the last
    # permuted copy for as long as the same, unchanged tensor is passed.
    return dg.cached_for("transposed_values", values, lambda: values[perm])


def spmm_raw(
    dg: DeviceGraph,
    x: torch.Tensor,
    values: torch.Tensor | None = None,
    *,
    transpose: bool = False,
    reuse_values: bool = False,
) -> torch.Tensor:
    """Weighted neighbour sum: ``out[i] = sum_{e in row i} values[e] * x[src(e)]``.

    With ``transpose`` the roles swap: rows are sources, columns destinations, so
    this computes ``A^T @ x``, the backward of the forward product.
    ``reuse_values`` says ``values`` will be passed again unchanged (constant
    coefficients), so their transposed order is worth caching.
    """
    indptr, indices, num_cols = _rows(dg, transpose)
    num_rows = indptr.shape[0] - 1
    assert x.shape[0] == num_cols, (x.shape, num_cols)
    values = _edge_values(dg, values, transpose, reuse_values)
    per_head = values is not None and values.dim() == 2
    work = indices.shape[0] * (x[0].numel() if x.shape[0] else 0)
    if resolve(x, work) is Backend.NUMBA:
        return _spmm_numba(indptr, indices, num_rows, x, values, per_head)
    return _spmm_torch(dg, indptr, indices, num_rows, num_cols, x, values, transpose)


def _spmm_numba(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    num_rows: int,
    x: torch.Tensor,
    values: torch.Tensor | None,
    per_head: bool,
) -> torch.Tensor:
    dtype = x.dtype
    x = x.detach().to(work_dtype(dtype)).contiguous()
    out = torch.empty((num_rows, *x.shape[1:]), dtype=x.dtype)
    if per_head:
        assert values is not None
        heads = values.shape[1]
        x3 = x.view(x.shape[0], heads, -1)
        _cpu.spmm_heads(
            indptr.numpy(),
            indices.numpy(),
            values.detach().to(x.dtype).contiguous().numpy(),
            x3.numpy(),
            out.view(num_rows, heads, -1).numpy(),
        )
        return out.to(dtype)
    # flatten(1), not view(n, -1): a block may have no rows of a type
    x2 = x.flatten(1)
    out2 = out.flatten(1)
    if values is None:
        _cpu.spmm_sum(indptr.numpy(), indices.numpy(), x2.numpy(), out2.numpy())
    else:
        _cpu.spmm_weighted(
            indptr.numpy(),
            indices.numpy(),
            values.detach().to(x.dtype).contiguous().numpy(),
            x2.numpy(),
            out2.numpy(),
        )
    return out.to(dtype)


def _spmm_torch(
    dg: DeviceGraph,
    indptr: torch.Tensor,
    indices: torch.Tensor,
    num_rows: int,
    num_cols: int,
    x: torch.Tensor,
    values: torch.Tensor | None,
    transpose: bool,
) -> torch.Tensor:
    dtype = x.dtype
    if x.device.type == "cpu":  # no half-precision sparse matmul on CPU
        x = x.to(work_dtype(dtype))
    x = x.detach()
    if values is None:
        values = dg.cached(
            ("ones", x.dtype, transpose),
            lambda: torch.ones(indices.shape[0], dtype=x.dtype, device=x.device),
        )
    values = values.detach().to(x.dtype)
    size = (num_rows, num_cols)
    if values.dim() == 1:
        adj = torch.sparse_csr_tensor(
            indptr, indices, values, size, check_invariants=False
        )
        flat = x.flatten(1)  # also for 0 rows, where reshape(0, -1) fails
        return (adj @ flat).view(num_rows, *x.shape[1:]).to(dtype)
    heads = values.shape[1]
    x3 = x.reshape(num_cols, heads, -1)
    outs = []
    for h in range(heads):
        adj = torch.sparse_csr_tensor(
            indptr, indices, values[:, h].contiguous(), size, check_invariants=False
        )
        outs.append(adj @ x3[:, h].contiguous())
    return torch.stack(outs, dim=1).view(num_rows, *x.shape[1:]).to(dtype)


def sddmm_raw(
    dg: DeviceGraph, x_src: torch.Tensor, y_dst: torch.Tensor
) -> torch.Tensor:
    """Per-edge dot products ``out[e] = <x_src[src(e)], y_dst[dst(e)]>``.

    ``[N, F]`` inputs give ``[E]``; ``[N, H, C]`` inputs give ``[E, H]`` (per head).
    """
    heads = x_src.shape[1] if x_src.dim() == 3 else 0
    work = dg.num_edges * (x_src[0].numel() if x_src.shape[0] else 0)
    if resolve(x_src, work) is Backend.NUMBA:
        xs = x_src.detach().to(work_dtype(x_src.dtype)).contiguous()
        yd = y_dst.detach().to(xs.dtype).contiguous()
        h = max(heads, 1)
        out = torch.empty((dg.num_edges, h), dtype=xs.dtype)
        _cpu.sddmm_dot(
            dg.indptr.numpy(),
            dg.src_index().numpy(),
            xs.view(xs.shape[0], h, -1).numpy(),
            yd.view(yd.shape[0], h, -1).numpy(),
            out.numpy(),
        )
        out = out.to(x_src.dtype)
        return out if heads else out.view(-1)
    src, dst = dg.src_index(), dg.dst_index()
    xs, yd = x_src.detach(), y_dst.detach()
    width = max(1, xs[0].numel()) if xs.shape[0] else 1
    step = max(1, _GATHER_ELEMENTS // width)
    parts = [
        (xs[src[i : i + step]] * yd[dst[i : i + step]]).sum(-1)
        for i in range(0, dg.num_edges, step)
    ]
    if not parts:
        shape = (0, heads) if heads else (0,)
        return torch.zeros(shape, dtype=xs.dtype, device=xs.device)
    return torch.cat(parts)
