"""A one-rank gang in this process: :func:`local_gang`.

A worker function written for a gang (``fn(ctx, ...)``) runs unchanged with one
rank in the calling process, without starting a process: the "one worker" side of
worker-count invariance tests, and the cheap path when one rank is all a run needs.
Collectives work (a one-rank gloo group over an in-memory store) and do nothing.

Examples:
    >>> import torch
    >>> with local_gang(seed=0) as ctx:
    ...     ctx.rank, ctx.world_size, ctx.all_reduce(torch.ones(2)).tolist()
    (0, 1, [1.0, 1.0])
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from strata.engine.errors import format_error
from strata.engine.gang.context import GangContext

__all__ = ["local_gang"]


@contextlib.contextmanager
def local_gang(seed: int = 0, name: str = "local") -> Iterator[GangContext]:
    """A one-rank gloo group in this process, and its context.

    Raises:
        RuntimeError: a process group already exists in this process (inside a
            gang worker, run the function directly instead).
    """
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        raise RuntimeError(
            format_error(
                "torch.distributed",
                name,
                "no process group in this process",
                "one already initialised",
                "run the one-rank gang outside a gang worker",
            )
        )
    store = dist.HashStore()  # type: ignore[attr-defined]
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield GangContext(
            rank=0,
            world_size=1,
            device=torch.device("cpu"),
            backend="gloo",
            base_seed=seed,
            name=name,
        )
    finally:
        dist.destroy_process_group()
