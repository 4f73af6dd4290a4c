"""Moving (stale) aggregation over explicit state: Emma's ``moving_sum``.

Emma (``emma.md``) refreshes the messages of only about ``1/S`` of the sources per
iteration. Every destination ``v`` keeps a running estimate ``h[v]`` of its full
neighbour sum; with ``n_t[v]`` the (weighted) in-edges refreshed this iteration,
``deg[v]`` the full weighted in-degree and ``p_t[v]`` the partial sum over the
refreshed edges:

    h <- clamp(1 - n_t / deg, 0, 1) * h + p_t

If ``p_t`` carries ``n_t / deg`` of the true sum, the true sum is a fixed point.
The mean is ``h / deg`` (the caller scales). Backward passes the gradient straight
through to ``p_t``: only the refreshed edges get a gradient, and the carried part
is a constant (its inputs were computed with earlier weights and masks, and are
not kept).

The state is explicit: :func:`moving_sum` reads ``carried`` and returns the new
estimate; the caller stores it (``MovingState`` in the Emma trainer), so nothing
here hides state in a module buffer. :func:`decay_factor` is the per-destination
factor, with ``deg = 0`` giving 0 (such a destination has no in-edge, so its
estimate stays 0).

Examples:
    >>> import torch
    >>> true = torch.tensor([[4.0], [6.0]])
    >>> deg, n = torch.tensor([4.0, 3.0]), torch.tensor([1.0, 3.0])
    >>> h = torch.zeros(2, 1)
    >>> for _ in range(60):   # p_t = (n_t / deg) * true: the true sum is a fixed point
    ...     h = moving_sum((n / deg).unsqueeze(1) * true, h, n, deg)
    >>> torch.allclose(h, true)
    True
    >>> p = torch.ones(2, 1, requires_grad=True)
    >>> moving_sum(p, torch.full((2, 1), 5.0), n, deg).sum().backward()
    >>> p.grad.flatten().tolist()          # straight through to the partial sum
    [1.0, 1.0]
"""

from __future__ import annotations

from typing import Any

import torch

from strata.operators.errors import OperatorError

__all__ = ["decay_factor", "moving_sum"]


def decay_factor(refreshed: torch.Tensor, degree: torch.Tensor) -> torch.Tensor:
    """``clamp(1 - refreshed / degree, 0, 1)`` per destination; 0 where ``degree`` is 0.

    Args:
        refreshed: ``[num_dst]`` weighted in-edges refreshed this iteration (n_t).
        degree: ``[num_dst]`` full weighted in-degree (deg), the same weights.

    Returns:
        ``[num_dst]`` in ``degree``'s dtype.
    """
    safe = torch.where(degree > 0, degree, torch.ones_like(degree))
    decay = (1.0 - refreshed / safe).clamp(0.0, 1.0)
    return torch.where(degree > 0, decay, torch.zeros_like(decay))


class _MovingSum(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, partial: torch.Tensor, carried: torch.Tensor, decay: torch.Tensor
    ) -> torch.Tensor:
        shape = (decay.shape[0],) + (1,) * (partial.dim() - 1)
        return torch.addcmul(partial, decay.reshape(shape), carried)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        # Straight through to the partial sum; the carried part is a constant.
        return grad, None, None


def moving_sum(
    partial: torch.Tensor,
    carried: torch.Tensor,
    refreshed: torch.Tensor,
    degree: torch.Tensor,
) -> torch.Tensor:
    """The new moving estimate ``decay * carried + partial`` (see the module docstring).

    Args:
        partial: ``[num_dst, ...]`` sum over the refreshed edges (p_t); the only
            input that receives a gradient.
        carried: ``[num_dst, ...]`` the previous estimate (h); treated as a
            constant.
        refreshed: ``[num_dst]`` weighted in-edges refreshed (n_t).
        degree: ``[num_dst]`` full weighted in-degree (deg).

    Returns:
        ``[num_dst, ...]``: the new estimate, differentiable in ``partial``. The
        caller stores its detached value as the next ``carried``.

    Raises:
        OperatorError: on mismatched shapes.
    """
    if carried.shape != partial.shape or refreshed.shape != (partial.shape[0],):
        raise OperatorError.build(
            "carried",
            "moving_sum",
            f"carried of shape {tuple(partial.shape)} and refreshed of shape "
            f"({partial.shape[0]},), like partial",
            f"carried {tuple(carried.shape)}, refreshed {tuple(refreshed.shape)}",
        )
    if degree.shape != refreshed.shape:
        raise OperatorError.build(
            "degree",
            "moving_sum",
            f"shape {tuple(refreshed.shape)}",
            f"shape {tuple(degree.shape)}",
        )
    decay = decay_factor(refreshed.to(partial.dtype), degree.to(partial.dtype))
    out: torch.Tensor = _MovingSum.apply(partial, carried.detach(), decay)
    return out
