"""Device-memory accounting for chunked training: :class:`DeviceArena`.

HongTu's promise is a per-worker device-memory budget. On a GPU the allocator
could report usage; on CPU, where processes stand in for GPUs, "device memory" is
what this arena accounts: every tensor the chunked trainer brings to the device
(loaded rows, exchange buffers, aggregates, outputs, gradients, chunk topology,
the model and optimiser state) is registered under a :class:`Buffer` while it
lives, and
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
    >>> rows = arena.alloc(Buffer.ROWS, (100, 64))       # 25600 bytes
    >>> _ = arena.adopt(Buffer.Z, torch.zeros(10, 64))   # 2560 bytes
    >>> arena.free(Buffer.Z)
    >>> arena.live_bytes, arena.peak_bytes
    (25600, 28160)
    >>> arena.alloc(Buffer.SEND, (1 << 20,))             # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    strata.operators.trainers.distributed.chunked.arena.ArenaError: device memory in ...
"""

from __future__ import annotations

import enum

import torch

from strata.operators.errors import OperatorError


class ArenaError(OperatorError):
    """An allocation would exceed the device budget."""


class Buffer(enum.Enum):
    """The named device buffers of chunked training and where each one lives.

    Each member's comment says which code allocates it and where it is
    released; :mod:`~strata.operators.trainers.distributed.chunked.memory_model`
    replays the same events. "Step" is one chunk of one layer.
    """

    # For the whole run.
    MODEL = "model"  # modelled: weights, grads, Adam, all-reduce; setup() to the end
    # Forward and backward steps.
    ROWS = "rows"  # this step's source rows; Transfers.load .. end of step
    PREV = "prev"  # last step's ROWS, kept for reuse; end of step .. next load
    HOST_TMP = "host_tmp"  # rows gathered from the host; inside Transfers.load
    SEND = "send"  # rows for peers; inside Transfers.load
    RECV = "recv"  # rows from peers; inside Transfers.load
    TOPO = "topo"  # modelled: the chunk's graph (and transpose); per step
    WORK = "work"  # modelled: torch's temporaries of the dense layer; per step
    Z = "z"  # the aggregate (or the cached one, read back); per step
    ROOT = "root"  # the destinations' own rows (SAGE, GIN); per step
    Y = "y"  # the layer's output; forward step
    # Backward steps only.
    DY = "dy"  # output gradient read from the host; backward step
    RPREV = "rprev"  # last backward step's refetched ROWS; .. next refetch
    GRADS = "grads"  # modelled: gradients of Z and ROOT (cache policy); per step
    CONTRIB = "contrib"  # this step's gradient of its rows; .. becomes GRAD
    CARRY = "carry"  # gradient of the previous step's rows; allocated a step early
    GRAD = "grad"  # CONTRIB (+ CARRY) being flushed; .. end of Transfers.flush
    SENDBACK = "sendback"  # gradients for peers; inside Transfers.flush
    RETURNED = "returned"  # gradients from peers; inside Transfers.flush
    FLUSH = "flush"  # gradients added to the host table; inside Transfers.flush


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
        self.live: dict[Buffer, int] = {}
        self.live_bytes = 0
        self.peak_bytes = 0

    def alloc(
        self,
        name: Buffer,
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

    def adopt(self, name: Buffer, tensor: torch.Tensor) -> torch.Tensor:
        """Account an existing tensor (e.g. a kernel's output) under ``name``."""
        self._hold(name, tensor.numel() * tensor.element_size())
        return tensor

    def reserve(self, name: Buffer, nbytes: int) -> None:
        """Account ``nbytes`` that torch holds out of sight (a modelled bound)."""
        self._hold(name, int(nbytes))

    def free(self, *names: Buffer) -> None:
        """Stop accounting ``names`` (absent names are ignored)."""
        for name in names:
            self.live_bytes -= self.live.pop(name, 0)

    def rename(self, old: Buffer, new: Buffer) -> None:
        """Move an allocation to another name (a buffer changing role)."""
        if old in self.live:
            self.free(new)
            self.live[new] = self.live.pop(old)

    def _hold(self, name: Buffer, nbytes: int) -> None:
        self.free(name)
        self.live[name] = nbytes
        self.live_bytes += nbytes
        if self.budget is not None and self.live_bytes > self.budget:
            largest = sorted(self.live.items(), key=lambda kv: -kv[1])[:4]
            held = ", ".join(f"{n.value}={b}" for n, b in largest)
            raise ArenaError.build(
                "device memory",
                self.where,
                f"at most device_budget={self.budget} bytes live",
                f"{self.live_bytes} bytes after allocating {name.value!r} ({held})",
                "the memory model underestimated this step; raise device_budget "
                "or set more chunks",
            )
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
