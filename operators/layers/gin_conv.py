"""Graph isomorphism network (GIN) convolution, PyG's ``GINConv``.

``out_i = nn((1 + eps) x_i + sum_{j -> i} x_j)`` with a user-supplied MLP ``nn``;
``eps`` is a constant, or learned with ``train_eps=True``. Declared once as a
:class:`~strata.operators.layers.message_passing.MessagePassing` layer: the
:class:`~strata.operators.layers.message_passing.Sum` of the raw features, ``root =
(1 + eps) x_i`` and ``update = nn(h + root)`` (no ``transform``: the MLP is not
linear).

References:
    Keyulu Xu, Weihua Hu, Jure Leskovec, Stefanie Jegelka. *How Powerful are Graph
    Neural Networks?* ICLR 2019, arXiv:1810.00826.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> conv = GINConv(torch.nn.Linear(4, 2), train_eps=True)
    >>> conv(g, torch.randn(3, 4)).shape
    torch.Size([3, 2])
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from strata.operators.layers.message_passing import MessagePassing, Sum


class GINConv(MessagePassing):
    """GIN layer.

    Args:
        nn: the MLP applied after aggregation (any module or callable).
        eps: initial ``eps``.
        train_eps: learn ``eps``.

    Shapes:
        x: ``[num_src, F]``; returns ``nn``'s output for ``[num_dst, F]``.
    """

    aggregation = Sum()
    update_is_sum = False
    work_units = ((2, 3), (6, 9))

    def __init__(
        self,
        nn: Callable[[torch.Tensor], torch.Tensor],
        eps: float = 0.0,
        *,
        train_eps: bool = False,
    ) -> None:
        super().__init__()
        self.nn = nn
        self.initial_eps = eps
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Reset every sub-module of ``nn`` that can be, and ``eps``."""
        if isinstance(self.nn, torch.nn.Module):
            for module in self.nn.modules():
                reset = getattr(module, "reset_parameters", None)
                if callable(reset):
                    reset()
        self.eps.data.fill_(self.initial_eps)

    def root(self, x: torch.Tensor) -> torch.Tensor:
        """``(1 + eps) x_i``."""
        return (1 + self.eps) * x

    def update(self, h: torch.Tensor, root: torch.Tensor | None) -> torch.Tensor:
        """``nn(h + root)``."""
        return self.nn(h if root is None else h + root)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(nn={self.nn})"
