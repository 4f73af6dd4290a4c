"""What a gang is asked to be: :class:`GangSpec`, and where its workers will run.

A spec is frozen data (building one starts nothing). :meth:`GangSpec.placement`
turns it into a :class:`GangPlacement` for this machine: the device kind, the
``torch.distributed`` backend, each rank's device and its CPU thread count.

* ``device="auto"`` picks CUDA when torch sees a GPU and CPU otherwise, so one job
  trains on a laptop (CPU processes standing in for GPUs) and on a GPU box.
* The backend follows the device (NCCL on CUDA, gloo on CPU) unless named.
* Rank ``r`` uses ``cuda:(r % device_count)``; on CPU every rank is ``cpu``.
* Each worker runs ``threads_per_worker`` torch threads, by default the cores this
  process may use divided by the workers (at least one), so a gang never
  oversubscribes the machine: two workers on two cores get one thread each.

Examples:
    >>> spec = GangSpec(workers=2, device="cpu", threads_per_worker=1)
    >>> placement = spec.placement()
    >>> placement.backend, placement.devices, placement.threads
    ('gloo', ('cpu', 'cpu'), 1)
    >>> GangSpec(workers=0)
    Traceback (most recent call last):
    ...
    ValueError: workers in step 'gang': expected workers >= 1, got 0. Hint: ...
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from strata.engine.errors import format_error

Device = Literal["cpu", "cuda", "auto"]
Launcher = Literal["auto", "local", "ray"]
#: Environment variable naming the launcher of ``launcher="auto"`` gangs.
LAUNCHER_ENV = "STRATA_GANG_LAUNCHER"
_LAUNCHERS = ("auto", "local", "ray")
_DEVICES = ("cpu", "cuda", "auto")
_BACKENDS = ("gloo", "nccl", "mpi", "ucc")
_TIMEOUTS = (
    "timeout_s",
    "collective_timeout_s",
    "startup_timeout_s",
    "heartbeat_timeout_s",
)


@dataclass(frozen=True, slots=True)
class GangSpec:
    """A request for ``workers`` processes on one device kind.

    Attributes:
        workers: World size: how many worker processes (ranks) to start.
        device: ``"cpu"``, ``"cuda"`` or ``"auto"`` (CUDA when available).
        backend: ``torch.distributed`` backend; ``None`` picks NCCL on CUDA and
            gloo on CPU.
        timeout_s: Wall-clock limit for the whole gang, start-up included; the
            ranks still running when it expires are named in the error. ``None``
            (the default) means no limit: training runs for as long as it needs,
            and a stuck rank is caught by its peers' ``collective_timeout_s`` or
            by ``heartbeat_timeout_s``.
        collective_timeout_s: Timeout of every ``torch.distributed`` operation
            (passed to ``init_process_group``); a rank waiting longer for a peer
            raises.
        startup_timeout_s: How long workers may take to start and join the
            process group (a cold fork server imports torch first: seconds).
        startup_retries: How many times to start the gang again when joining
            the process group fails before any rank ran ``fn`` (gloo's
            full-mesh connect fails now and then on an overloaded machine).
            A failure after any rank started ``fn`` is never retried.
        heartbeat_timeout_s: When set, a rank that has not called
            ``ctx.heartbeat()`` for this long is reported as stalled and the gang
            fails. Only set it when the worker function heartbeats (e.g. once per
            epoch or per chunk).
        threads_per_worker: torch intra-op threads per worker; ``None`` divides
            the usable cores evenly between the workers (at least one).
        seed: Base seed. Rank ``r`` is seeded with ``rank_seed(seed, r)`` before
            the worker function runs (``random``, numpy and torch).
        host: Address of the rendezvous store (a ``TCPStore`` run by the parent).
        port: Its port; 0 picks a free one (no race: the parent binds it).
        env: Extra environment variables set in each worker before
            ``torch.distributed`` starts (``NCCL_*``, ``GLOO_SOCKET_IFNAME``...).
            Variables read when torch is imported (``OMP_NUM_THREADS``) come too
            late: the fork server imported torch already.
        name: Names the gang in errors and logs; empty means the worker
            function's name.
        start_method: ``"forkserver"`` (the default where available) or
            ``"spawn"`` (imports torch in every worker: seconds each).
        launcher: Where the ranks run: ``"local"`` (processes of this machine, or
            this node's share of a multi-node gang), ``"ray"`` (one Ray actor per
            rank, anywhere in the cluster), or ``"auto"`` (the default:
            ``$STRATA_GANG_LAUNCHER`` when set, which the Ray executor sets in its
            workers, else ``"local"``).
    """

    workers: int
    device: Device = "auto"
    backend: str | None = None
    timeout_s: float | None = None
    collective_timeout_s: float = 600.0
    startup_timeout_s: float = 120.0
    startup_retries: int = 2
    heartbeat_timeout_s: float | None = None
    threads_per_worker: int | None = None
    seed: int = 0
    host: str = "127.0.0.1"
    port: int = 0
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    name: str = ""
    start_method: str | None = None
    launcher: Launcher = "auto"

    def __post_init__(self) -> None:
        problems = list(_problems(self))
        if problems:
            subject, expected, got, hint = problems[0]
            raise ValueError(
                format_error(subject, self.name or "gang", expected, got, hint)
            )

    def resolved_launcher(self) -> Literal["local", "ray"]:
        """``"local"`` or ``"ray"``: the launcher this gang starts with here.

        Raises:
            ValueError: ``$STRATA_GANG_LAUNCHER`` names no launcher.
        """
        if self.launcher != "auto":
            return self.launcher
        chosen = os.environ.get(LAUNCHER_ENV, "local") or "local"
        if chosen == "ray":
            return "ray"
        if chosen == "local":
            return "local"
        raise ValueError(
            format_error(
                LAUNCHER_ENV, self.name or "gang", "'local' or 'ray'", repr(chosen)
            )
        )

    def local_ranks(self) -> range:
        """The ranks this machine starts: all, or this node's share.

        A local gang across nodes (:mod:`strata.engine.gang.cluster`) starts
        ``workers / nnodes`` ranks on each node: node ``R`` the ranks
        ``[R*k, (R+1)*k)``.

        Raises:
            ValueError: ``workers`` is not a multiple of the node count.
        """
        from strata.engine.gang.cluster import current

        group = current() if self.resolved_launcher() == "local" else None
        if group is None:
            return range(self.workers)
        return group.share(self.workers, self.name or "gang")

    def local_workers(self) -> int:
        """How many ranks this machine starts (:meth:`local_ranks`)."""
        return len(self.local_ranks())

    def placement(self) -> GangPlacement:
        """Resolve the device kind, backend, per-rank devices and threads here.

        On a gang across nodes, for this node's ranks (:meth:`local_workers`).

        Raises:
            ValueError: ``device="cuda"`` on a machine where torch sees no GPU.
        """
        import torch

        workers = self.local_workers()

        kind = self.device
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if kind == "auto":
            kind = "cuda" if gpus else "cpu"
        if kind == "cuda" and not gpus:
            raise ValueError(
                format_error(
                    "device",
                    self.name or "gang",
                    "a CUDA device",
                    "none visible to torch",
                    "use device='auto' to fall back to CPU processes.",
                )
            )
        if kind == "cuda":
            devices = tuple(f"cuda:{rank % gpus}" for rank in range(workers))
        else:
            devices = ("cpu",) * workers
        backend = self.backend or ("nccl" if kind == "cuda" else "gloo")
        if backend == "nccl" and workers > gpus:
            raise ValueError(
                format_error(
                    "workers",
                    self.name or "gang",
                    f"at most one NCCL rank per GPU ({gpus} visible)",
                    str(workers),
                    "NCCL refuses two ranks on one device; use backend='gloo' to "
                    "share GPUs, or fewer workers.",
                )
            )
        threads = self.threads_per_worker or max(1, usable_cores() // workers)
        return GangPlacement(kind, backend, devices, threads)


@dataclass(frozen=True, slots=True)
class GangPlacement:
    """Where a gang's workers run on this machine (from :meth:`GangSpec.placement`).

    Attributes:
        device: ``"cpu"`` or ``"cuda"``.
        backend: The ``torch.distributed`` backend.
        devices: The torch device of each rank this machine starts, in rank
            order (a gang across nodes: this node's share).
        threads: torch intra-op threads per worker.
    """

    device: str
    backend: str
    devices: tuple[str, ...]
    threads: int


def usable_cores() -> int:
    """Return the CPU cores this process may run on (its affinity mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _problems(spec: GangSpec) -> list[tuple[str, str, str, str]]:
    found = []
    if not isinstance(spec.workers, int) or spec.workers < 1:
        found.append(
            (
                "workers",
                "workers >= 1",
                repr(spec.workers),
                "workers is the world size.",
            )
        )
    if spec.device not in _DEVICES:
        found.append(("device", f"one of {_DEVICES}", repr(spec.device), ""))
    if spec.backend is not None and spec.backend not in _BACKENDS:
        found.append(("backend", f"None or one of {_BACKENDS}", repr(spec.backend), ""))
    for name in _TIMEOUTS:
        value = getattr(spec, name)
        if value is not None and not (value > 0 and math.isfinite(value)):
            found.append((name, "a positive number of seconds", repr(value), ""))
    if not isinstance(spec.startup_retries, int) or spec.startup_retries < 0:
        found.append(("startup_retries", ">= 0", repr(spec.startup_retries), ""))
    threads = spec.threads_per_worker
    if threads is not None and threads < 1:
        found.append(("threads_per_worker", "None or >= 1", repr(threads), ""))
    if spec.start_method not in (None, "forkserver", "spawn"):
        expected = "None, 'forkserver' or 'spawn'"
        found.append(("start_method", expected, repr(spec.start_method), ""))
    if spec.launcher not in _LAUNCHERS:
        found.append(("launcher", f"one of {_LAUNCHERS}", repr(spec.launcher), ""))
    if not 0 <= spec.port <= 65535:
        found.append(("port", "0 (any free port) to 65535", repr(spec.port), ""))
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in spec.env.items()):
        found.append(("env", "str keys and values", repr(dict(spec.env)), ""))
    return found
