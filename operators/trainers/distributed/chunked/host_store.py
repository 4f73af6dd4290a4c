"""The host store of chunked training: vertex data in shared host memory.

HongTu keeps every layer's vertex data on the host (``hongtu.md`` §3.2): the
input features ``X``, each hidden layer's output ``H^l``, the gradient of every
layer's output ``dH^l`` and, for layers whose policy caches it, the aggregate
``Z^l``. The parent allocates them in the run's shared segment *before* the gang
starts (:func:`host_layout`); every worker maps the same memory
(:class:`HostStore`), reads any row and writes only rows it is the single writer
of in that step (its own destinations, or gradient rows it loaded).

=========  ====================  ==========================================
name       shape                 written by
=========  ====================  ==========================================
``x``      ``[n, d_0]``          the parent (input features)
``h<l>``   ``[n, d_l]``, l < L   layer l's forward, each chunk its ``D_c``
``g<l>``   ``[n, d_l]``, l <= L  layer L's loss (l = L); flushes of l + 1
``z<l>``   ``[n, d_{l-1}]``      layer l's forward when its policy caches
=========  ====================  ==========================================

Examples:
    >>> import torch
    >>> layout = host_layout(5, [(4, 8), (8, 3)], cached=[1])
    >>> {name: shape for name, (shape, _) in layout.items()}
    {'h1': (5, 8), 'g1': (5, 8), 'g2': (5, 3), 'z1': (5, 4)}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch


def host_layout(
    num_nodes: int, widths: Sequence[tuple[int, int]], cached: Sequence[int]
) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Shapes of the store's buffers (``x`` is added with the inputs).

    Args:
        num_nodes: vertices.
        widths: ``(d_in, d_out)`` per layer (1-based layer ``l`` is entry l-1).
        cached: layers (1-based) whose aggregate is cached.
    """
    layers = len(widths)
    layout: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
    for layer in range(1, layers):
        layout[f"h{layer}"] = ((num_nodes, widths[layer - 1][1]), torch.float32)
    for layer in range(1, layers + 1):
        layout[f"g{layer}"] = ((num_nodes, widths[layer - 1][1]), torch.float32)
    for layer in cached:
        layout[f"z{layer}"] = ((num_nodes, widths[layer - 1][0]), torch.float32)
    return layout


class HostStore:
    """A worker's view of the host store (see the module docstring).

    Args:
        shared: the run's shared tensors (``x``, ``h<l>``, ``g<l>``, ``z<l>``).
        num_layers: L.
    """

    def __init__(self, shared: Mapping[str, torch.Tensor], num_layers: int) -> None:
        self.shared = shared
        self.num_layers = num_layers

    def input(self, layer: int) -> torch.Tensor:
        """The rows layer ``layer`` (1-based) reads: ``X`` or ``H^{layer-1}``."""
        return self.shared["x"] if layer == 1 else self.shared[f"h{layer - 1}"]

    def output(self, layer: int) -> torch.Tensor:
        """``H^layer`` (layers below L)."""
        return self.shared[f"h{layer}"]

    def grad(self, layer: int) -> torch.Tensor:
        """``dH^layer``: the loss gradient of layer ``layer``'s output."""
        return self.shared[f"g{layer}"]

    def cache(self, layer: int) -> torch.Tensor:
        """``Z^layer``, the cached aggregate of layer ``layer``."""
        return self.shared[f"z{layer}"]

    @property
    def nbytes(self) -> int:
        """Bytes of the store's buffers (features included)."""
        return sum(t.numel() * t.element_size() for name, t in self._buffers())

    def _buffers(self) -> list[tuple[str, torch.Tensor]]:
        return [
            (name, t)
            for name, t in self.shared.items()
            if name == "x" or (name[:1] in "hgz" and name[1:].isdigit())
        ]
