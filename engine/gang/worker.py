"""The worker side of a gang: one rank in one process.

The launcher starts this module's :func:`main` in each worker process. It:

1. ignores Ctrl-C (the parent decides what stops) and starts a *lifeline*: a
   daemon thread that waits on multiprocessing's parent sentinel and ends the
   process the moment the parent dies, so a killed parent never leaves workers
   behind;
2. applies ``env`` and the torch thread count, selects its CUDA device, joins
   the process group through the parent's ``TCPStore`` and passes one barrier, so
   every link of the mesh has carried data before any rank runs user code;
3. says :class:`~.messages.Ready`, seeds itself with its rank seed, and runs
   ``fn(ctx, ...)``;
4. sends :class:`~.messages.Done` with the pickled result and its metrics, or
   :class:`~.messages.Failed` with the exception's type, message, formatted
   traceback and phase (``join`` before ``Ready``, ``run`` after: the parent
   retries a gang whose join failed).

Steps 2-4 are :func:`run_rank`, which a Ray actor rank runs too
(:mod:`.ray_gang`); only the delivery of the messages differs.

Messages to the parent are the typed dataclasses of :mod:`.messages`, pickled
over a one-way pipe (not the engine's wire: this stays inside one gang), written
only under a lock, so heartbeats from a helper thread cannot interleave with the
result.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import os
import pickle
import resource
import signal
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any, Literal

from strata.engine.gang.context import GangContext, seed_everything
from strata.engine.gang.messages import Beat, Done, Failed, Ready, WorkerMessage

if TYPE_CHECKING:
    from strata.engine.gang.spec import GangPlacement, GangSpec

#: Exit code of a worker whose parent died (the lifeline ended it).
ORPHANED = 75


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """Everything one rank needs besides the function and its arguments."""

    name: str
    rank: int
    world_size: int
    device: str
    backend: str
    threads: int
    host: str
    port: int
    base_seed: int
    env: Mapping[str, str]
    startup_timeout_s: float
    collective_timeout_s: float

    @classmethod
    def of_rank(
        cls,
        name: str,
        spec: GangSpec,
        placement: GangPlacement,
        rank: int,
        *,
        device: str,
        address: tuple[str, int],
        env: Mapping[str, str] | None = None,
    ) -> WorkerSetup:
        """Rank ``rank``'s setup in ``spec``'s gang; ``address`` is the store's."""
        host, port = address
        return cls(
            name=name,
            rank=rank,
            world_size=spec.workers,
            device=device,
            backend=placement.backend,
            threads=placement.threads,
            host=host,
            port=port,
            base_seed=spec.seed,
            env=dict(spec.env if env is None else env),
            startup_timeout_s=spec.startup_timeout_s,
            collective_timeout_s=spec.collective_timeout_s,
        )


def main(
    setup: WorkerSetup,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    channel: Connection,
) -> None:
    """Entry point of a worker process (``multiprocessing`` target)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _start_lifeline()
    sender = _Sender(channel)
    try:
        outcome = run_rank(setup, fn, args, kwargs, sender.send)
        sender.send(outcome)
    finally:
        leave()
        channel.close()
    if isinstance(outcome, Failed):
        raise SystemExit(1)


def run_rank(
    setup: WorkerSetup,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    send: Callable[[WorkerMessage], None],
) -> Done | Failed:
    """Join the group, say :class:`Ready`, run ``fn``; return the outcome.

    One rank's whole life but leaving the group, for every launcher: a worker
    process (:func:`main`) and a Ray actor (:mod:`.ray_gang`) differ only in how
    ``send`` delivers :class:`Ready` and heartbeats and where the outcome goes.
    Never raises: any exception becomes :class:`Failed` (phase ``join`` before
    ``Ready``, ``run`` after). The caller sends the outcome first and calls
    :func:`leave` after, so a group broken by a dead peer cannot hold it back.
    """
    ctx: GangContext | None = None
    phase: Literal["join", "run"] = "join"
    try:
        ctx = _join(setup, send)
        send(Ready(pid=os.getpid(), device=str(ctx.device)))
        phase = "run"
        seed_everything(ctx.seed)
        start = time.perf_counter()
        result = fn(ctx, *args, **kwargs)
        wall_s = time.perf_counter() - start
        if ctx.device.type == "cuda":
            result = _on_cpu(result)
        payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        return Done(payload, ctx.metrics.to_dict(), _stats(ctx, wall_s))
    except BaseException as exc:  # a worker must always report before it exits
        return Failed(
            type_name=type(exc).__qualname__,
            text=str(exc),
            trace="".join(traceback.format_exception(exc)),
            metrics=ctx.metrics.to_dict() if ctx is not None else {},
            progress=ctx.progress if ctx is not None else None,
            phase=phase,
        )


def _join(setup: WorkerSetup, send: Callable[[WorkerMessage], None]) -> GangContext:
    """Set threads, env and device; join the process group; build the context."""
    os.environ.update(setup.env)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(setup.threads)
    device = torch.device(setup.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    store = open_store(setup.host, setup.port, setup.startup_timeout_s, master=False)
    dist.init_process_group(
        setup.backend,
        store=store,
        rank=setup.rank,
        world_size=setup.world_size,
        timeout=timedelta(seconds=setup.collective_timeout_s),
        # Binding the device lets NCCL connect eagerly; a gloo gang on GPUs
        # stays unbound, or torch would split its NCCL subgroups from gloo.
        device_id=device if setup.backend == "nccl" else None,
    )
    context = GangContext(
        rank=setup.rank,
        world_size=setup.world_size,
        device=device,
        backend=setup.backend,
        base_seed=setup.base_seed,
        name=setup.name,
        send_beat=lambda progress, metrics: send(Beat(progress, metrics.to_dict())),
    )
    context.barrier()
    return context


def open_store(host: str, port: int, timeout_s: float, *, master: bool) -> Any:
    """Open the gang's rendezvous ``TCPStore`` (the parent is the master).

    Returns:
        A ``torch.distributed.TCPStore``; ``.port`` is the bound port.
    """
    import torch.distributed as dist

    # TCPStore is public in torch.distributed but not re-exported for type checkers.
    return dist.TCPStore(  # type: ignore[attr-defined]
        host,
        port,
        is_master=master,
        wait_for_workers=False,
        timeout=timedelta(seconds=timeout_s),
    )


def leave() -> None:
    """Leave the process group, if this process joined one (errors ignored)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        # A broken group (a peer died) cannot always be torn down cleanly.
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def _on_cpu(value: Any) -> Any:
    """Move CUDA tensors in a result to CPU: the parent must not touch the GPUs."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.cpu() if value.is_cuda else value
    if isinstance(value, dict):
        moved = copy.copy(value)  # keeps the type and attributes (a state dict's)
        for key, item in value.items():
            moved[key] = _on_cpu(item)
        return moved
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
        return type(value)(_on_cpu(v) for v in value)
    return value


def _stats(ctx: GangContext, wall_s: float) -> dict[str, Any]:
    import torch

    peak_device = None
    if ctx.device.type == "cuda":
        peak_device = int(torch.cuda.max_memory_allocated(ctx.device))
    # ru_maxrss is in KiB on Linux
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"wall_s": wall_s, "peak_rss_bytes": rss, "peak_device_bytes": peak_device}


def _start_lifeline() -> None:
    """End this process as soon as the parent dies (its sentinel becomes ready)."""
    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:
        return
    sentinel = parent.sentinel

    def watch() -> None:
        wait([sentinel])
        os._exit(ORPHANED)

    threading.Thread(target=watch, name="strata:gang-lifeline", daemon=True).start()


class _Sender:
    """Writes messages to the parent, one at a time."""

    def __init__(self, channel: Connection) -> None:
        self.channel = channel
        self.lock = threading.Lock()

    def send(self, message: WorkerMessage) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        # The parent may be gone or have stopped listening; the lifeline exits.
        with self.lock, contextlib.suppress(OSError):
            self.channel.send_bytes(data)
