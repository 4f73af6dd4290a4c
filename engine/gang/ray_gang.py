"""A gang of Ray actors: one actor per rank, anywhere in a Ray cluster.

``GangSpec(launcher="ray")`` (or ``launcher="auto"`` with
``$STRATA_GANG_LAUNCHER=ray``, which the Ray executor sets in its workers) makes
:func:`~strata.engine.gang.run_gang` start the ranks as Ray actors instead of
local processes. Everything else is the local gang's: each actor runs
:func:`~strata.engine.gang.worker.run_rank` (join the group, seed, run
``fn(ctx, ...)``, build ``Done`` or ``Failed``), and the driver watches them with
:class:`~strata.engine.gang.supervisor.GangSupervisor`'s bookkeeping (deadlines,
heartbeats, the grace period, the ``GangError`` naming the rank, start-up
retries). Only the transport differs:

* **Placement.** A CUDA gang reserves one GPU per rank at once: a placement
  group of ``workers`` bundles of one GPU, strategy ``PACK`` (all ranks on one
  node when it has room: shared memory stays usable), created before any actor
  and removed after the gang; each actor sees its GPU as ``cuda:0`` (NCCL). A
  CPU gang's actors ask Ray for no CPU at all (``num_cpus=0``), so Ray places
  them at once, normally on the driver's node (its default policy prefers
  it; a rank placed elsewhere takes the network path below). Ray's CPU
  accounting would not pace a rank's threads anyway (``threads_per_worker``,
  or the driver's cores over the ranks, as a local gang does), and a gang
  started by a step must never wait for the CPUs that step's own task holds
  (a cluster with every CPU held still runs it, tested): any non-zero CPU
  request could deadlock there. The price: CPU ranks are not spread over
  nodes on purpose.
* **Rendezvous.** The driver hosts the ``TCPStore`` and gives the ranks this
  node's IP address (``ray.util.get_node_ip_address()``), which every node of
  the cluster can reach.
* **Messages.** An actor is threaded (two calls at once): ``run`` returns the
  outcome; ``poll`` long-polls ``Ready`` and heartbeats (the latest one only),
  which the driver requests again after each answer, waiting on everything with
  ``ray.wait``.
* **Failure.** An actor that dies (``os._exit``, SIGKILL, its node lost) fails
  its ``run`` call with ``RayActorError``: a ``GangError`` naming the rank, its
  pid and node follows within the grace period. Every actor is killed
  (``ray.kill``) when the gang ends, however it ends.
* **Shared memory.** A rank on the driver's node maps ``SharedTensors`` as a
  local worker does (zero copy, writable). A rank on another node, or every
  rank when ``$STRATA_GANG_NETWORK=1`` (tests), gets its arguments pickled
  inside :func:`~strata.engine.gang.shared.carried`: the segments travel by
  value, and what the rank wrote comes back with its result and is applied to
  the driver's segments (see :mod:`.shared`). The variable reaches the ranks too
  (in their environment), so other shared-memory users (feature-server
  partitions) take their network path as well.

Start-up (``benchmarks/engine/bench_ray_gang.py``): each actor is a fresh Ray
worker process that imports torch, so a 2-rank gang takes seconds where the
local fork server takes tens of milliseconds; see
``benchmarks/results/ray_gang.json``.

Example (needs Ray; starts actors, so not a doctest)::

    import torch
    from strata.engine.gang import GangContext, GangSpec, run_gang

    def total(ctx: GangContext, values: torch.Tensor) -> float:
        return ctx.all_reduce(values[ctx.rank :: ctx.world_size].sum()).item()

    run_gang(total, GangSpec(workers=2, launcher="ray"), torch.arange(10.0))
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from types import ModuleType
from typing import Any, cast

from strata.engine.errors import format_error
from strata.engine.gang.errors import FailureKind, GangError
from strata.engine.gang.launcher import run_attempts
from strata.engine.gang.messages import Beat, Done, Failed, WorkerMessage
from strata.engine.gang.report import GangReport
from strata.engine.gang.shared import apply_writes, carried, take_writes
from strata.engine.gang.spec import GangPlacement, GangSpec, usable_cores
from strata.engine.gang.supervisor import GangSupervisor, _Rank
from strata.engine.gang.worker import WorkerSetup, run_rank
from strata.engine.ray_cluster import connect

__all__ = ["NETWORK_ENV", "network_forced", "node_address", "run_ray_gang"]

#: ``"1"`` sends every rank down the network path, as if on another node.
NETWORK_ENV = "STRATA_GANG_NETWORK"
_POLL_S = 1.0  # how long an actor's poll waits for news
_KILL_WAIT_S = 2.0  # after ray.kill: how long to wait for the actors to be gone


def network_forced() -> bool:
    """Whether ``$STRATA_GANG_NETWORK`` asks for the network path everywhere."""
    return os.environ.get(NETWORK_ENV, "") == "1"


def node_address() -> str:
    """This node's IP address as Ray sees it (reachable from the cluster)."""
    return str(connect().util.get_node_ip_address())


def run_ray_gang(
    fn: Callable[..., Any],
    spec: GangSpec,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> GangReport:
    """Run ``fn`` on ``spec.workers`` Ray actors; see the module.

    Raises:
        GangError: A rank raised, died, timed out or stalled (names it), or the
            cluster could not place the gang within ``startup_timeout_s``.
        ImportError: Ray is not installed.
    """
    ray = connect()
    placement = _placement(spec, ray)
    origin = time.monotonic()
    group = _placement_group(ray, spec, name, placement)
    try:
        return run_attempts(
            lambda attempt: RayGangSupervisor(
                name, spec, placement, origin, attempt, ray, group
            ),
            spec,
            name,
            (fn, args, kwargs),
        )
    finally:
        if group is not None:
            ray.util.remove_placement_group(group)


class RankActor:
    """One rank (wrapped by ``ray.remote``; two calls at once: run and poll)."""

    def __init__(self) -> None:
        self._news: list[WorkerMessage] = []
        self._ended = False
        self._changed = threading.Condition()

    def where(self) -> tuple[str, str, int]:
        """``(node id, node IP, pid)`` of this actor."""
        from strata.engine.ray_cluster import require_ray

        ray = require_ray()  # a module: Ray's own functions are not typed
        node = ray.get_runtime_context().get_node_id()
        return str(node), str(ray.util.get_node_ip_address()), os.getpid()

    def run(self, setup: WorkerSetup, call: bytes) -> _Outcome:
        """Run the rank; return its last news, outcome and carried writes.

        The process group is not left: the driver kills the actor after the
        gang, and a group broken by a dead peer could hold the answer back.
        """
        outcome = run_rank(setup, _unpickled_call, (call,), {}, self._send)
        writes = take_writes() if isinstance(outcome, Done) else {}
        with self._changed:
            self._ended = True  # a waiting poll returns now
            news, self._news = self._news, []
            self._changed.notify_all()
        return news, outcome, writes

    def poll(self) -> list[WorkerMessage]:
        """``Ready`` and the latest heartbeat since the last poll (waits ~1 s)."""
        with self._changed:
            self._changed.wait_for(lambda: bool(self._news) or self._ended, _POLL_S)
            news, self._news = self._news, []
        return news

    def _send(self, message: WorkerMessage) -> None:
        with self._changed:
            if (
                isinstance(message, Beat)
                and self._news[-1:]
                and isinstance(self._news[-1], Beat)
            ):
                self._news.pop()  # only the latest beat matters
            self._news.append(message)
            self._changed.notify_all()


#: What an actor's ``run`` returns: news not yet polled, the outcome, and the
#: blocks of carried segments it wrote (by segment path).
_Outcome = tuple[list[WorkerMessage], Done | Failed, dict[str, list[tuple[int, bytes]]]]


def _unpickled_call(ctx: Any, call: bytes) -> Any:
    """Unpickle the function and its arguments in the rank, then run it.

    Unpickling here (not as a Ray argument) lets carried segments register as
    this rank's, and an argument that fails to load is the rank's error.
    """
    fn, args, kwargs = pickle.loads(call)
    return fn(ctx, *args, **kwargs)


@dataclass(slots=True)
class _ActorRank(_Rank):
    """A rank that is an actor: its node and its calls in flight."""

    node_id: str = ""
    address: str = ""
    run_ref: Any = None
    poll_ref: Any = None


class RayGangSupervisor(GangSupervisor):
    """One attempt at a Ray gang: actors instead of processes (see the module)."""

    def __init__(
        self,
        name: str,
        spec: GangSpec,
        placement: GangPlacement,
        origin: float,
        attempt: int,
        ray: ModuleType,
        group: Any,
    ) -> None:
        super().__init__(name, spec, placement, origin, attempt)
        self.ray = ray
        self.group = group
        self.host = _store_host(spec, ray)
        self.actors: list[_ActorRank] = []
        self.sent: dict[str, Any] = {}  # segments that travelled by value

    def launch(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """Start one actor per rank (a GPU's in the placement group), then run."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        ray, spec, placement = self.ray, self.spec, self.placement
        self.launched = now = time.monotonic()
        remote = ray.remote(RankActor)
        for rank in range(spec.workers):
            where: dict[str, Any] = {}
            if self.group is not None:
                where["num_gpus"] = 1
                where["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                    self.group, placement_group_bundle_index=rank
                )
            actor = remote.options(num_cpus=0, max_concurrency=2, **where).remote()
            # An actor has no pipe: the base class's reader is never used here.
            self.actors.append(
                _ActorRank(rank, actor, cast(Connection, None), 0, now, last_beat=now)
            )
        self.ranks = list(self.actors)
        self._locate()
        here = ray.get_runtime_context().get_node_id()
        env = dict(spec.env)
        if network_forced():
            env[NETWORK_ENV] = "1"
        calls: dict[bool, Any] = {}
        for r in self.actors:
            network = r.node_id != here or network_forced()
            if network not in calls:
                calls[network] = ray.put(self._pickle((fn, args, kwargs), network))
            setup = WorkerSetup.of_rank(
                self.name,
                spec,
                placement,
                r.rank,
                device=placement.devices[r.rank],
                address=(self.host, self.store.port),
                env=env,
            )
            r.run_ref = r.process.run.remote(setup, calls[network])

    def stop(self, patience: float) -> None:
        """Kill every actor and wait (briefly) until Ray reports them gone."""
        refs = [r.run_ref for r in self.actors if r.run_ref is not None]
        for r in self.actors:
            self.ray.kill(r.process, no_restart=True)
        if refs:
            self.ray.wait(refs, num_returns=len(refs), timeout=_KILL_WAIT_S)
        self.actors, self.ranks = [], []
        self.store = None

    # -- watching -------------------------------------------------------------

    def _poll(self, timeout: float) -> None:
        waiting: dict[Any, tuple[str, _ActorRank]] = {}
        for r in self.actors:
            if r.run_ref is None:
                continue
            if r.poll_ref is None:
                r.poll_ref = r.process.poll.remote()
            waiting[r.poll_ref] = ("poll", r)
            waiting[r.run_ref] = ("run", r)
        if not waiting:
            time.sleep(timeout)
            return
        refs = list(waiting)
        ready, rest = self.ray.wait(refs, num_returns=1, timeout=timeout)
        if ready and rest:
            ready += self.ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        # Polls first: a rank's Ready precedes its outcome.
        for ref in sorted(ready, key=lambda ref: waiting[ref][0] == "run"):
            what, r = waiting[ref]
            if what == "run":
                self._finished(r)
            elif r.poll_ref is ref:
                self._polled(r)

    def _polled(self, r: _ActorRank) -> None:
        ref, r.poll_ref = r.poll_ref, None
        try:
            news = self.ray.get(ref, timeout=_POLL_S + _KILL_WAIT_S)
        except self.ray.exceptions.RayError:
            return  # the run call reports what happened to the actor
        self._news(r, news)

    def _finished(self, r: _ActorRank) -> None:
        ref, r.run_ref = r.run_ref, None
        if r.poll_ref is not None:
            self._polled(r)  # answers at once: the run ended (or the actor died)
        try:
            news, outcome, writes = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as exc:
            detail = f"the actor on node {r.address} died before returning"
            self._fail(r, FailureKind.DIED, f"{detail} ({_first_line(exc)})")
            return
        except self.ray.exceptions.RayError as exc:
            self._fail(r, FailureKind.RAISED, f"Ray: {_first_line(exc)}")
            return
        self._news(r, [*news, outcome])
        if writes:
            apply_writes(self.sent, writes)

    def _news(self, r: _ActorRank, news: list[WorkerMessage]) -> None:
        now = time.monotonic()
        for message in news:
            r.last_beat = now
            self._handle(r, message, now)

    def _locate(self) -> None:
        """Learn every actor's node and pid once it is up (start-up deadline)."""
        refs = [r.process.where.remote() for r in self.actors]
        left = self.spec.startup_timeout_s - (time.monotonic() - self.launched)
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=max(left, 0.0))
        for r, ref in zip(self.actors, refs, strict=True):
            if ref not in ready:
                detail = f"no actor up after {time.monotonic() - self.launched:.1f} s"
                self._fail(r, FailureKind.NOT_STARTED, detail)
                continue
            try:
                r.node_id, r.address, r.pid = self.ray.get(ref)
            except self.ray.exceptions.RayError as exc:
                detail = f"the actor failed to start ({_first_line(exc)})"
                self._fail(r, FailureKind.DIED, detail)
        if self.failures:
            raise GangError.build(self.name, self.failures)

    def _pickle(self, call: tuple[Any, ...], network: bool) -> bytes:
        if not network:
            return pickle.dumps(call, protocol=pickle.HIGHEST_PROTOCOL)
        with carried() as sent:
            data = pickle.dumps(call, protocol=pickle.HIGHEST_PROTOCOL)
        self.sent.update(sent)
        return data


def _placement(spec: GangSpec, ray: ModuleType) -> GangPlacement:
    """Device kind, backend and threads for actors (GPUs as the cluster has them)."""
    gpus = int(ray.cluster_resources().get("GPU", 0))
    kind = spec.device
    if kind == "auto":
        kind = "cuda" if gpus else "cpu"
    if kind == "cuda" and not gpus:
        hint = "use device='auto' to fall back to CPU actors."
        where = spec.name or "gang"
        raise ValueError(format_error("device", where, "a Ray GPU", "none", hint))
    backend = spec.backend or ("nccl" if kind == "cuda" else "gloo")
    # Each GPU actor sees its one GPU (Ray sets CUDA_VISIBLE_DEVICES).
    device = "cuda:0" if kind == "cuda" else "cpu"
    threads = spec.threads_per_worker or max(1, usable_cores() // spec.workers)
    return GangPlacement(kind, backend, (device,) * spec.workers, threads)


def _placement_group(
    ray: ModuleType, spec: GangSpec, name: str, placement: GangPlacement
) -> Any:
    """Reserve a CUDA gang's GPUs at once (gang scheduling), or fail in time.

    Returns:
        The placement group, or ``None`` for a CPU gang (it reserves nothing).
    """
    if placement.device != "cuda":
        return None
    group = ray.util.placement_group([{"GPU": 1.0}] * spec.workers, strategy="PACK")
    ready, _ = ray.wait([group.ready()], timeout=spec.startup_timeout_s)
    if not ready:
        ray.util.remove_placement_group(group)
        raise GangError.of_gang(
            name,
            f"{spec.workers} free GPUs in the Ray cluster",
            f"not placed after startup_timeout_s={spec.startup_timeout_s:g} "
            f"(cluster: {ray.cluster_resources()})",
            "a CUDA gang needs one free GPU per rank; add nodes or use fewer workers.",
        )
    return group


def _store_host(spec: GangSpec, ray: ModuleType) -> str:
    """Where the ranks find the driver's store: this node's IP, unless set."""
    if spec.host not in ("127.0.0.1", "localhost"):
        return spec.host
    return str(ray.util.get_node_ip_address())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
