"""Dense layers on oneDNN's CPU matmul, with their gradients.

torch runs a float32 ``F.linear`` on CPU through MKL's ``sgemm``. On AMD CPUs MKL
takes its AVX2 code path; oneDNN (bundled with torch as ``torch.ops.mkldnn``)
dispatches on the instruction set and uses AVX-512. On this project's benchmark
machine (AMD EPYC, 1 thread) the layer shapes of a sampled GraphSAGE batch run at:

========================================  =========  ==========
product (3.9k rows, 128 wide)             MKL        oneDNN
========================================  =========  ==========
forward ``x W^T + b``                     97 GFLOP/s 216 GFLOP/s
weight gradient ``G^T x``                 94 GFLOP/s 153 GFLOP/s
input gradient ``G W``                    98 GFLOP/s 237 GFLOP/s
========================================  =========  ==========

In the sampled SAGE step this is 7.8 ms per batch against 10.3 ms on MKL (one
thread; ``benchmarks/operators/run_sage_sampled.py`` with ``--dense onednn`` or
``--dense torch``). On Intel CPUs both libraries use AVX-512 and the gain should be
small. Results differ from MKL's by float32 reassociation only, which Adam then
amplifies: one RMAT-18 epoch's per-batch losses move by up to 1.3e-5.

:func:`onednn_linear` is ``F.linear`` on oneDNN with an autograd backward on
oneDNN too, and :func:`onednn_addmm` is ``torch.addmm(c, a, b)`` with the add
fused into the product. :func:`dense_on_onednn` is a context in which every float32
CPU ``F.linear`` (a layer's own ``nn.Linear`` included) and plain ``torch.addmm``
runs there, so a layer written on them needs no change. Without the op (a torch
built without oneDNN), each falls back to torch's own.

Examples:
    >>> import torch
    >>> x, w, b = torch.randn(5, 4), torch.randn(3, 4), torch.randn(3)
    >>> torch.allclose(onednn_linear(x, w, b), torch.nn.functional.linear(x, w, b),
    ...                atol=1e-6)
    True
    >>> layer = torch.nn.Linear(4, 3)
    >>> with dense_on_onednn():
    ...     y = layer(x)
    >>> torch.allclose(y, torch.nn.functional.linear(x, layer.weight, layer.bias),
    ...                atol=1e-6)
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

__all__ = ["dense_on_onednn", "onednn_addmm", "onednn_available", "onednn_linear"]


def _pointwise(x: torch.Tensor, weight: torch.Tensor, bias: Any) -> torch.Tensor:
    """``x @ weight.T + bias`` by oneDNN (2-D ``x``; strided views are fine)."""
    out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(
        x, weight, bias, "none", [None], ""
    )
    return out


@functools.cache
def onednn_available() -> bool:
    """Whether torch has oneDNN's linear op here, and it agrees with ``F.linear``."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        x = torch.linspace(-1.0, 1.0, 12).view(3, 4)
        w = torch.linspace(0.5, -0.5, 8).view(2, 4)
        return bool(torch.allclose(_pointwise(x, w, None), F.linear(x, w), atol=1e-6))
    except (AttributeError, RuntimeError):
        return False


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _pointwise(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = _pointwise(grad, weight.t().contiguous(), None)
        if ctx.needs_input_grad[1]:
            grad_w = _pointwise(grad.t(), x.t(), None)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad.sum(0)
        return grad_x, grad_w, grad_b


class _AddMM(torch.autograd.Function):
    """``c + a @ b`` with the add fused into oneDNN's product (a binary post-op)."""

    @staticmethod
    def forward(
        ctx: Any, c: torch.Tensor, a: torch.Tensor, b: torch.Tensor
    ) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise.binary(
            a, c, b.t().contiguous(), None, "add"
        )
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        a, b = ctx.saved_tensors
        grad_c = grad if ctx.needs_input_grad[0] else None
        grad_a = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_a = _pointwise(grad, b.contiguous(), None)
        if ctx.needs_input_grad[2]:
            grad_b = _pointwise(a.t(), grad.t(), None)
        return grad_c, grad_a, grad_b


def onednn_addmm(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.addmm(c, a, b)`` (``c + a @ b``) on oneDNN, differentiable.

    Falls back to ``torch.addmm`` unless all three are 2-D float32 CPU tensors and
    ``c`` has the output's shape.
    """
    if not (
        a.dim() == 2
        and b.dim() == 2
        and c.shape == (a.shape[0], b.shape[1])
        and c.dtype == torch.float32
        and c.layout == torch.strided
        and _eligible(a, b)
    ):
        return torch.addmm(c, a, b)
    out: torch.Tensor = _AddMM.apply(c, a, b)
    return out


def _eligible(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return (
        x.device.type == "cpu"
        and x.dtype == torch.float32
        and weight.dtype == torch.float32
        and x.dim() >= 2
        and weight.dim() == 2
        and not x.is_sparse
        and x.layout == torch.strided
        and onednn_available()
    )


def onednn_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` on oneDNN, differentiable in all three.

    Falls back to ``F.linear`` off the CPU, for other dtypes, or without oneDNN.
    """
    if not _eligible(x, weight):
        return F.linear(x, weight, bias)
    if x.dim() == 2:
        out: torch.Tensor = _Linear.apply(x, weight, bias)
        return out
    flat = _Linear.apply(x.reshape(-1, x.shape[-1]), weight, bias)
    return flat.view(*x.shape[:-1], weight.shape[0])


class _DenseMode(TorchFunctionMode):
    """Routes ``F.linear`` and ``torch.addmm`` to oneDNN; the rest unchanged."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func is F.linear:
            return onednn_linear(*args, **kwargs)
        if func is torch.addmm and len(args) == 3 and not kwargs:
            return onednn_addmm(*args)  # beta = alpha = 1 only
        return func(*args, **kwargs)


def dense_on_onednn() -> TorchFunctionMode:
    """A context in which float32 CPU ``F.linear`` and ``torch.addmm`` run on oneDNN.

    Only the forward call needs to be inside: the backward of each product is
    oneDNN's too. Use it around a model's forward pass.
    """
    return _DenseMode()
