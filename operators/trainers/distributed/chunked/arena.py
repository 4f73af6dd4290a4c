"""Device-memory accounting for chunked training: :class:`DeviceArena`.

HongTu's promise is a per-worker device-memory budget. On a GPU the allocator
could report usage; on CPU, where processes stand in for GPUs, "device memory" is
what this arena accounts: every tensor the chunked trainer brings to the device
(loaded rows, exchange buffers, aggregates, outputs, gradients, chunk topology,
the model and optimiser state) is registered under a name while it lives, and
the arena tracks the live bytes and their high-water mark. What torch keeps
inside a small dense computation (the vertex-local layer and its backward) is
registered as a *modelled* bound (:meth:`DeviceArena.reserve`), since the
trainer never sees those tensors.

With a budget, exceeding it raises :class:`ArenaError` at once, naming the
largest live allocations: a wrong memory model fails loudly instead of
silently overrunning the device.

Examples:
    >>> import torch
    >>> arena = DeviceArena(budget=1 << 20)
    >>> rows = arena.alloc("rows", (100, 64))          # 25600 bytes
    >>> _ = arena.adopt("z", torch.zeros(10, 64))      # 2560 bytes
    >>> arena.free("z")
    >>> arena.live_bytes, arena.peak_bytes
    (25600, 28160)
    >>> arena.alloc("big", (1 << 20,))                 # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    strata.operators.trainers.distributed.chunked.arena.ArenaError: device memory in ...
"""

from __future__ import annotations

import torch

from strata.operators.errors import OperatorError


class ArenaError(OperatorError):
    """An allocation would exceed the device budget."""


class DeviceArena:
    """Live device bytes by name, with a high-water mark and an optional budget.

    Args:
        budget: bytes the worker may hold at once (None: no limit).
        device: where :meth:`alloc` places tensors.
        where: names the worker in errors.
    """

    def __init__(
        self,
        budget: int | None = None,
        device: torch.device | None = None,
        where: str = "DeviceArena",
    ) -> None:
        self.budget = budget
        self.device = device or torch.device("cpu")
        self.where = where
        self.live: dict[str, int] = {}
        self.live_bytes = 0
        self.peak_bytes = 0

    def alloc(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype: torch.dtype = torch.float32,
        *,
        zero: bool = False,
    ) -> torch.Tensor:
        """A new tensor on the device, accounted under ``name``."""
        make = torch.zeros if zero else torch.empty
        tensor = make(shape, dtype=dtype, device=self.device)
        self._hold(name, tensor.numel() * tensor.element_size())
        return tensor

    def adopt(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        """Account an existing tensor (e.g. a kernel's output) under ``name``."""
        self._hold(name, tensor.numel() * tensor.element_size())
        return tensor

    def reserve(self, name: str, nbytes: int) -> None:
        """Account ``nbytes`` that torch holds out of sight (a modelled bound)."""
        self._hold(name, int(nbytes))

    def free(self, *names: str) -> None:
        """Stop accounting ``names`` (absent names are ignored)."""
        for name in names:
            self.live_bytes -= self.live.pop(name, 0)

    def rename(self, old: str, new: str) -> None:
        """Move an allocation to another name (a buffer changing role)."""
        if old in self.live:
            self.free(new)
            self.live[new] = self.live.pop(old)

    def _hold(self, name: str, nbytes: int) -> None:
        self.free(name)
        self.live[name] = nbytes
        self.live_bytes += nbytes
        if self.budget is not None and self.live_bytes > self.budget:
            largest = sorted(self.live.items(), key=lambda kv: -kv[1])[:4]
            held = ", ".join(f"{n}={b}" for n, b in largest)
            raise ArenaError.build(
                "device memory",
                self.where,
                f"at most device_budget={self.budget} bytes live",
                f"{self.live_bytes} bytes after allocating {name!r} ({held})",
                "the memory model underestimated this step; raise device_budget "
                "or set more chunks",
            )
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
