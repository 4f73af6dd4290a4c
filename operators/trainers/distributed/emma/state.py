"""The moving aggregates of one worker: :class:`MovingState`.

Per layer ``l`` a buffer ``h_l`` of ``[owned rows, d_{l-1}]`` holds the running
estimate of every owned destination's full neighbour sum (the layer's input width:
the programs aggregate before the dense transform). Buffers start at zero. The
trainer owns the state explicitly (``emma.md`` §3.4): it is not a module buffer,
so it is never saved with the model by accident, and :meth:`MovingState.snapshot`
/ :meth:`MovingState.restore` let a checkpoint carry it, so a resumed run
continues the same trajectory. Its size, :attr:`MovingState.buffer_bytes`, is
exactly ``sum_l |V_local| * d_{l-1} * itemsize`` (``emma.md`` M4).

Examples:
    >>> import torch
    >>> state = MovingState.zeros(num_dst=3, widths=[4, 2])
    >>> state.buffer_bytes              # (3 * 4 + 3 * 2) * 4 bytes
    72
    >>> saved = state.snapshot()
    >>> state.store(1, torch.ones(3, 2))
    >>> state.restore(saved)
    >>> float(state[1].sum())
    0.0
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from strata.operators.errors import OperatorError


class MovingState:
    """Per-layer moving-aggregate buffers over a worker's owned destinations.

    Args:
        buffers: one ``[num_dst, width]`` tensor per layer.
    """

    def __init__(self, buffers: Sequence[torch.Tensor]) -> None:
        self._buffers = list(buffers)

    @classmethod
    def zeros(
        cls,
        num_dst: int,
        widths: Sequence[int],
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | None = None,
    ) -> MovingState:
        """Zero buffers of ``num_dst`` rows, one per layer input width."""
        return cls(
            [torch.zeros(num_dst, w, dtype=dtype, device=device) for w in widths]
        )

    def __len__(self) -> int:
        return len(self._buffers)

    def __getitem__(self, layer: int) -> torch.Tensor:
        """The buffer of ``layer`` (0-based)."""
        return self._buffers[layer]

    def store(self, layer: int, value: torch.Tensor) -> None:
        """Overwrite ``layer``'s buffer with ``value`` (detached, copied in place)."""
        buffer = self._buffers[layer]
        if value.shape != buffer.shape:
            raise OperatorError.build(
                "value",
                "MovingState.store",
                f"shape {tuple(buffer.shape)} for layer {layer}",
                f"shape {tuple(value.shape)}",
            )
        with torch.no_grad():
            buffer.copy_(value)

    @property
    def buffer_bytes(self) -> int:
        """Bytes of every buffer."""
        return sum(b.numel() * b.element_size() for b in self._buffers)

    def snapshot(self) -> list[torch.Tensor]:
        """Copies of the buffers (on the CPU), for a checkpoint."""
        return [b.detach().cpu().clone() for b in self._buffers]

    def restore(self, snapshot: Sequence[torch.Tensor]) -> None:
        """Load buffers saved by :meth:`snapshot`.

        Raises:
            OperatorError: if the layers or shapes differ.
        """
        shapes = [tuple(b.shape) for b in self._buffers]
        got = [tuple(s.shape) for s in snapshot]
        if shapes != got:
            raise OperatorError.build(
                "snapshot", "MovingState.restore", f"buffers {shapes}", f"{got}"
            )
        for layer, saved in enumerate(snapshot):
            self.store(layer, saved.to(self._buffers[layer].device))

    def __repr__(self) -> str:
        shapes = [tuple(b.shape) for b in self._buffers]
        return f"MovingState({shapes}, buffer_bytes={self.buffer_bytes})"
