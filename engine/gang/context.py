"""What a worker function receives: :class:`GangContext`, and per-rank seeds.

``run_gang`` calls ``fn(ctx, *args, **kwargs)`` in every worker after
``torch.distributed`` is initialised, so besides the helpers here any
``torch.distributed`` call (``all_to_all_single`` for a halo exchange, a new
subgroup) works on the default group as usual.

The helpers take the same code path on gloo and NCCL: ``mean`` is a sum divided by
the world size (gloo has no average), and NCCL barriers name the rank's device.

Examples:
    >>> rank_seed(0, 0) != rank_seed(0, 1)
    True
    >>> rank_seed(7, 1) == rank_seed(7, 1)
    True
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from strata.engine.gang.metrics import WorkerMetrics

if TYPE_CHECKING:
    import torch

#: Reductions of :meth:`GangContext.all_reduce`.
ReduceOp = Literal["sum", "mean", "max", "min", "product"]
#: Sends a heartbeat to the parent: (progress text, metrics snapshot).
BeatSender = Callable[[str | None, WorkerMetrics], None]
# Heartbeats are throttled to one per interval; the parent checks less often.
_BEAT_INTERVAL_S = 0.2


def rank_seed(base: int, rank: int) -> int:
    """Return a 63-bit seed for ``rank``, stable across runs, machines and Pythons."""
    digest = hashlib.blake2b(f"gang/{base}/{rank}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, numpy's global generator and torch (CPU and CUDA)."""
    import numpy as np
    import torch

    random.seed(seed)
    # User code may draw from numpy's legacy global generator: seed it too.
    np.random.seed(seed % (1 << 32))  # noqa: NPY002
    torch.manual_seed(seed)


class GangContext:
    """One rank's view of its gang (see the module docstring).

    Attributes:
        rank: This worker's rank, ``0 <= rank < world_size``.
        world_size: How many workers the gang has.
        device: This rank's torch device (``cpu``, or ``cuda:i`` with
            ``i = rank % device_count``).
        backend: The ``torch.distributed`` backend (``gloo`` or ``nccl``).
        seed: This rank's seed, ``rank_seed(base_seed, rank)``; the worker was
            seeded with it before the function ran.
        base_seed: The gang's base seed (``GangSpec.seed``), the same on every
            rank: seed with it to build identical models everywhere, or build on
            rank 0 and ``broadcast_module``.
        name: The gang's name.
        metrics: This worker's counters, peaks and series, returned to the parent.
    """

    def __init__(
        self,
        *,
        rank: int,
        world_size: int,
        device: torch.device,
        backend: str,
        base_seed: int,
        name: str,
        send_beat: BeatSender | None = None,
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.backend = backend
        self.base_seed = base_seed
        self.seed = rank_seed(base_seed, rank)
        self.name = name
        self.metrics = WorkerMetrics()
        self._send_beat = send_beat
        self._progress: str | None = None
        self._last_beat = 0.0
        self._lock = threading.Lock()

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0 (the rank that logs, saves and evaluates)."""
        return self.rank == 0

    def heartbeat(self, progress: str | None = None) -> None:
        """Tell the parent this rank is alive and, optionally, where it is.

        Cheap enough to call every step: beats are throttled to one per 0.2 s.
        The last progress text appears in errors naming a stuck or dead rank, and
        ``GangSpec.heartbeat_timeout_s`` fails a rank that stops beating.

        Args:
            progress: A short text such as ``"epoch 3/20"``.
        """
        with self._lock:
            if progress is not None:
                self._progress = progress
            now = time.monotonic()
            if self._send_beat is None or now - self._last_beat < _BEAT_INTERVAL_S:
                return
            self._last_beat = now
            self._send_beat(self._progress, self.metrics)

    @property
    def progress(self) -> str | None:
        """The last progress text given to :meth:`heartbeat`."""
        return self._progress

    def barrier(self) -> None:
        """Wait until every rank reaches this call."""
        import torch.distributed as dist

        if self.device.type == "cuda" and self.backend == "nccl":
            dist.barrier(device_ids=[self.device.index or 0])
        else:
            dist.barrier()

    def all_reduce(self, tensor: torch.Tensor, op: ReduceOp = "sum") -> torch.Tensor:
        """Reduce ``tensor`` over every rank, in place; return it.

        Args:
            tensor: The same shape and dtype on every rank, on ``ctx.device``.
            op: ``sum``, ``mean`` (sum divided by the world size), ``max``,
                ``min`` or ``product``.
        """
        import torch.distributed as dist

        ops = {
            "sum": dist.ReduceOp.SUM,
            "mean": dist.ReduceOp.SUM,
            "max": dist.ReduceOp.MAX,
            "min": dist.ReduceOp.MIN,
            "product": dist.ReduceOp.PRODUCT,
        }
        dist.all_reduce(tensor, op=ops[op])
        if op == "mean":
            tensor.div_(self.world_size)
        return tensor

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        """Overwrite ``tensor`` on every rank with rank ``src``'s; return it."""
        import torch.distributed as dist

        dist.broadcast(tensor, src=src)
        return tensor

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Return every rank's ``tensor`` (same shape everywhere), in rank order."""
        import torch
        import torch.distributed as dist

        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(parts, tensor)
        return parts

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Return every rank's picklable ``obj``, in rank order (small data only)."""
        import torch.distributed as dist

        objects: list[Any] = [None] * self.world_size
        dist.all_gather_object(objects, obj)
        return objects

    def __repr__(self) -> str:
        return (
            f"GangContext(name={self.name!r}, rank={self.rank}, "
            f"world_size={self.world_size}, device={str(self.device)!r}, "
            f"backend={self.backend!r})"
        )
