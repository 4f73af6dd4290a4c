"""Supervise one gang: start its workers, watch them, stop them.

:class:`GangSupervisor` owns one attempt at running a gang: the rendezvous
``TCPStore`` (the parent hosts it, bound before any worker starts, so a free port
is never raced for), the worker processes and their message pipes. It watches
every worker in one loop over its pipe and its process sentinel, with no helper
threads:

* a worker that raises reports its traceback; one that dies without reporting
  (segfault, SIGKILL, the OOM killer) is seen through its sentinel at once;
* after the first failure it waits a short grace period (0.5 s) to learn what
  else failed, because a rank's death makes its peers' collectives fail too; the
  rank that died, or else the first to raise, leads the error;
* start-up (``startup_timeout_s``), the whole gang (``timeout_s``) and silent
  ranks (``heartbeat_timeout_s``) have deadlines; the error names the ranks still
  running and where each last said it was;
* :meth:`GangSupervisor.stop` terminates what is left (SIGTERM, SIGKILL after
  1 s) and joins it. Gangs still running at interpreter exit are killed.

A failure while joining the process group, before any rank ran the function,
raises :class:`JoinFailed` so that the launcher may start the gang again.

A gang across nodes (:mod:`strata.engine.gang.cluster`) starts only this node's
share of the ranks and keeps a :class:`~strata.engine.gang.nodes.NodeLink` to
the other nodes: each tick it beats, looks for failures the other nodes
published and, once its own ranks are done, publishes their results and waits
for everyone else's. Every node retries it when the first failure anywhere was
a rank failing to join (:mod:`strata.engine.gang.nodes`).
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import pickle
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from strata.engine.errors import RemoteError
from strata.engine.gang import start
from strata.engine.gang.cluster import current
from strata.engine.gang.errors import FailureKind, GangError, WorkerFailure
from strata.engine.gang.messages import Beat, Done, Failed, Ready, WorkerMessage
from strata.engine.gang.metrics import WorkerMetrics
from strata.engine.gang.nodes import (
    SILENT_AFTER_FAILURE_S,
    SILENT_S,
    NodeLink,
    NodeLost,
    Published,
    RankRecord,
)
from strata.engine.gang.report import GangReport, WorkerReport
from strata.engine.gang.spec import GangPlacement, GangSpec
from strata.engine.gang.worker import WorkerSetup, main, open_store

log = logging.getLogger("strata.gang")

_TICK_S = 0.25  # longest wait between checks of deadlines and heartbeats
_GRACE_S = 0.5  # after a failure: how long to listen for its consequences
_TERM_S = 1.0  # SIGTERM to SIGKILL
_GATHER_S = 0.01  # across nodes: between looks for the other nodes' results
_ORDER = {FailureKind.DIED: 0, FailureKind.RAISED: 1}
#: What gloo raises in a rank whose peer went away: a consequence, never a cause.
_PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")


class JoinFailed(Exception):
    """No rank got through joining the process group: the gang may be retried."""

    def __init__(self, error: GangError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(slots=True)
class _Rank:
    """The parent's view of one worker."""

    rank: int
    process: Any
    reader: Connection
    pid: int
    started: float
    ready_at: float | None = None
    last_beat: float = 0.0
    progress: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    payload: bytes = b""  # the pickled result, kept for other nodes
    stats: dict[str, Any] | None = None
    failed: bool = False
    exited: bool = False

    @property
    def done(self) -> bool:
        return self.stats is not None


class GangSupervisor:
    """One gang's processes, store and bookkeeping."""

    def __init__(
        self,
        name: str,
        spec: GangSpec,
        placement: GangPlacement,
        origin: float,
        attempt: int,
    ) -> None:
        self.name = name
        self.spec = spec
        self.placement = placement
        self.origin = origin  # the first attempt's launch: timeout_s counts from it
        self.attempt = attempt
        self.ranks: list[_Rank] = []
        self.failures: list[WorkerFailure] = []
        self.order: list[int] = []  # each failure's number: the first seen, lowest
        self.remote: dict[int, RemoteError] = {}
        self.joining: set[int] = set()  # ranks whose error came before "ready"
        self.launched = time.monotonic()
        group = current() if spec.resolved_launcher() == "local" else None
        self.link = (
            None
            if group is None
            else NodeLink(group, name, spec.workers, spec.startup_timeout_s, attempt)
        )
        self.local = range(spec.workers) if self.link is None else self.link.ranks
        self.records: list[RankRecord] | None = None  # every node's ranks, when done
        self.published = False  # this node's results are in the store
        self.heard_remote = False  # another node told what failed, or went silent
        self.lost = False  # node 0's store is gone: stop asking it
        self.host = spec.host
        try:
            if self.link is not None:
                self.store, self.host, self.port = self.link.open(spec.host)
            else:
                self.store = open_store(
                    spec.host, spec.port, spec.startup_timeout_s, master=True
                )
                self.port = self.store.port
        except (GangError, ValueError):
            raise
        except Exception as exc:
            raise GangError.of_gang(
                name,
                f"a rendezvous store listening on {spec.host}:{spec.port}",
                f"{type(exc).__name__}: {exc}",
                "use port=0 for a free port, or another host address.",
            ) from exc

    def launch(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """Start every worker; they rendezvous through the store on their own."""
        spec, placement = self.spec, self.placement
        context = start.worker_context(fn, spec.start_method)
        _LIVE.add(self)
        self.launched = time.monotonic()
        with start.starting():
            for rank in self.local:
                setup = WorkerSetup.of_rank(
                    self.name,
                    spec,
                    placement,
                    rank,
                    device=placement.devices[rank - self.local.start],
                    address=(self.host, self.port),
                )
                reader, writer = context.Pipe(duplex=False)
                process = context.Process(  # type: ignore[attr-defined]
                    target=main,
                    args=(setup, fn, args, kwargs, writer),
                    name=f"strata-gang:{self.name}[{rank}]",
                )
                try:
                    process.start()
                except _WORKER_GONE as exc:
                    # The child (or the fork server) went away while its arguments
                    # were being sent: a death to report, not the user's arguments.
                    reader.close()
                    raise GangError.build(
                        self.name, [_died_starting(rank, process, exc)]
                    ) from exc
                except Exception as exc:
                    reader.close()
                    raise GangError.of_gang(
                        self.name,
                        f"arguments that can be sent to rank {rank}",
                        f"{type(exc).__name__}: {exc}",
                        "arguments are pickled (CPU tensors are shared instead, one "
                        "file descriptor each, at most ~250 per worker): pass "
                        "picklable values, and many arrays as one SharedTensors.",
                    ) from exc
                finally:
                    writer.close()
                now = time.monotonic()
                self.ranks.append(
                    _Rank(rank, process, reader, process.pid, now, last_beat=now)
                )
        log.info("gang %r: started ranks %s", self.name, _span(self.local))

    def watch(self) -> GangReport:
        """Wait for every result, or fail with the ranks to blame."""
        grace_until: float | None = None
        while not self._complete():
            if grace_until is not None and time.monotonic() >= grace_until:
                break
            timeout = _TICK_S
            if grace_until is not None:
                timeout = max(0.0, min(timeout, grace_until - time.monotonic()))
            self._poll(timeout)
            if self.link is not None:
                self._hear_nodes(self.link)
            if self.failures:
                grace_until = grace_until or time.monotonic() + self._grace()
                if self.heard_remote:  # the cause is known: a short grace
                    grace_until = min(grace_until, time.monotonic() + _GRACE_S)
            elif self._check_deadlines():
                break
        if self.failures:
            self._raise()
        if self.link is not None:
            self.link.wait_for_readers()
        return self._report()

    def stop(self, patience: float) -> None:
        """Stop every worker (waiting ``patience`` s for those still leaving)."""
        _LIVE.discard(self)
        processes = [r.process for r in self.ranks]
        deadline = time.monotonic() + patience
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
        _terminate(processes)
        for r in self.ranks:
            r.reader.close()
            r.process.close()
        self.ranks = []
        if self.link is not None:
            self.link.close()
        self.store = None  # closes the rendezvous server

    # -- watching -------------------------------------------------------------

    def _complete(self) -> bool:
        local = all(r.done for r in self.ranks)
        return local and (self.link is None or self.records is not None)

    def _grace(self) -> float:
        # Across nodes, wait long enough to tell a killed node from a live one.
        return _GRACE_S + (0.0 if self.link is None else SILENT_AFTER_FAILURE_S)

    def _poll(self, timeout: float) -> None:
        if self.link is not None and all(r.done for r in self.ranks):
            # Only other nodes' results to wait for: ask the store often.
            time.sleep(min(timeout, _GATHER_S))
            return
        readers = {r.reader: r for r in self.ranks if not r.reader.closed}
        sentinels = {r.process.sentinel: r for r in self.ranks if not r.exited}
        for ready in wait([*readers, *sentinels], timeout):
            if ready in readers:
                self._receive(readers[ready])
            else:
                self._exited(sentinels[ready])

    def _receive(self, r: _Rank) -> None:
        try:
            message = pickle.loads(r.reader.recv_bytes())
        except (EOFError, OSError):
            r.reader.close()
            return
        now = time.monotonic()
        r.last_beat = now
        self._handle(r, message, now)

    def _handle(self, r: _Rank, message: WorkerMessage, now: float) -> None:
        """Apply one message from rank ``r`` (see :mod:`.messages`)."""
        match message:
            case Ready():
                r.ready_at = now
            case Beat(progress=progress, metrics=metrics):
                r.progress, r.metrics = progress, metrics
                log.debug("gang %r: rank %d: %s", self.name, r.rank, r.progress)
            case Done(payload=payload, metrics=metrics, stats=stats):
                r.metrics = metrics
                if self.link is not None:
                    r.payload = payload
                try:
                    r.result = pickle.loads(payload)
                except Exception as exc:
                    detail = f"a result the parent cannot unpickle: {exc!r}"
                    self._fail(r, FailureKind.RAISED, detail)
                    return
                r.stats = stats
            case Failed():
                if message.phase == "join":
                    self.joining.add(r.rank)
                r.metrics = message.metrics or r.metrics
                r.progress = message.progress or r.progress
                r.failed = True
                error = RemoteError(message.type_name, message.text, message.trace)
                self.remote[r.rank] = error
                summary = f"{message.type_name}: {message.text}"
                self._fail(r, FailureKind.RAISED, summary, message.trace)

    def _exited(self, r: _Rank) -> None:
        r.exited = True
        while not r.reader.closed and r.reader.poll(0):  # what it sent before dying
            self._receive(r)
        if r.done or r.failed:
            return
        how = _exit_text(r.process.exitcode) + " before returning"
        self._fail(r, FailureKind.DIED, how)

    # -- other nodes ------------------------------------------------------------

    def _hear_nodes(self, link: NodeLink) -> None:
        """One tick of the link: beat, learn remote failures, trade results."""
        if self.lost:
            return
        try:
            link.beat()
            for item in link.remote_failures():
                self._add_remote(item)
            self._check_silence(link)
            if self.failures or not all(r.done for r in self.ranks):
                return
            if not self.published:
                link.put_results(self._local_records())
                self.published = True
            if link.results_ready():
                self.records = link.take_results()
        except NodeLost as lost:
            self.lost = True
            if not self.heard_remote:
                self.heard_remote = True
                self._record(lost.failure, 1 << 30)

    def _check_silence(self, link: NodeLink) -> None:
        if self.failures:
            limit = SILENT_AFTER_FAILURE_S
        elif self.ranks and all(r.ready_at is not None for r in self.ranks):
            limit = SILENT_S  # every node joined: each one beats now
        else:
            limit = float("inf")
        for node in link.silent_nodes(limit):
            if not self.heard_remote:
                self.heard_remote = True
                self._record(link.dead_node(node, limit), link.number())

    def _add_remote(self, item: Published) -> None:
        failure = dataclasses.replace(
            item.failure, detail=f"{item.failure.detail} (on node {item.node})"
        )
        cause = item.error()
        if cause is not None:
            self.remote[failure.rank] = cause
        if item.joining:
            self.joining.add(failure.rank)
        self.heard_remote = True
        self._record(failure, item.seq)

    def _local_records(self) -> list[RankRecord]:
        records = []
        for r in self.ranks:
            assert r.stats is not None
            assert r.ready_at is not None
            report = WorkerReport(
                rank=r.rank,
                pid=r.pid,
                device=self.placement.devices[r.rank - self.local.start],
                startup_s=r.ready_at - self.origin,
                wall_s=r.stats["wall_s"],
                peak_rss_bytes=r.stats["peak_rss_bytes"],
                peak_device_bytes=r.stats["peak_device_bytes"],
                metrics=WorkerMetrics.from_dict(r.metrics),
            )
            records.append(RankRecord(report, r.payload))
        return records

    # -- deadlines and failures ---------------------------------------------------

    def _check_deadlines(self) -> bool:
        """Record deadline failures; return whether any deadline passed."""
        spec, now = self.spec, time.monotonic()
        running = [r for r in self.ranks if not r.done]
        if now - self.launched > spec.startup_timeout_s:
            late = [r for r in running if r.ready_at is None]
            for r in late:
                waited = f"not in the process group after {now - r.started:.1f} s"
                self._fail(r, FailureKind.NOT_STARTED, waited)
            if late:
                return True
        if spec.timeout_s is not None and now - self.origin > spec.timeout_s:
            detail = f"still running after timeout_s={spec.timeout_s:g}"
            for r in running:
                self._fail(r, FailureKind.TIMED_OUT, detail)
            if not running:  # this node's ranks are done; other nodes' are not
                mine = _span(self.local)
                where = f"{detail} (another node's; this node's ranks {mine} done)"
                failure = WorkerFailure(0, None, FailureKind.TIMED_OUT, where)
                self._record(failure, self._number())
            return True
        if spec.heartbeat_timeout_s is not None:
            silent = [
                r
                for r in running
                if r.ready_at is not None
                and now - r.last_beat > spec.heartbeat_timeout_s
            ]
            for r in silent:
                detail = f"no heartbeat for {now - r.last_beat:.1f} s"
                self._fail(r, FailureKind.STALLED, detail)
            return bool(silent)
        return False

    def _fail(
        self, r: _Rank, kind: FailureKind, detail: str, trace: str | None = None
    ) -> None:
        r.failed = True
        since = None if kind is FailureKind.RAISED else time.monotonic() - r.last_beat
        failure = WorkerFailure(r.rank, r.pid, kind, detail, trace, r.progress, since)
        self._record(failure, self._number())
        log.info("gang %r: rank %d %s: %s", self.name, r.rank, kind.value, detail)
        if self.link is not None and not self.lost:
            mine = [
                Published.of(
                    seq,
                    self.link.group.node_rank,
                    f,
                    self.remote.get(f.rank),
                    joining=f.rank in self.joining,
                )
                for f, seq in zip(self.failures, self.order, strict=True)
                if f.rank in self.local and f.pid is not None
            ]
            try:
                self.link.publish(mine)
            except NodeLost:
                self.lost = True

    def _record(self, failure: WorkerFailure, seq: int) -> None:
        self.failures.append(failure)
        self.order.append(seq)

    def _number(self) -> int:
        """The next failure's number: arrival here, or the store's across nodes."""
        if self.link is None or self.lost:
            return len(self.failures) + (1 << 30 if self.lost else 0)
        try:
            return self.link.number()
        except NodeLost:
            self.lost = True
            return len(self.failures) + (1 << 30)

    def _raise(self) -> None:
        # Deaths first (their peers' errors follow from them), then errors that
        # are not a peer gone away, then by number: the order in which they were
        # seen (across nodes: by the store's counter, which a rank's own report
        # and its peer's lost connection may reach in either order).
        numbered = sorted(
            zip(self.failures, self.order, strict=True),
            key=lambda item: (
                _ORDER.get(item[0].kind, 2),
                any(text in item[0].detail for text in _PEER_GONE),
                item[1],
            ),
        )
        failures = [failure for failure, _ in numbered]
        if self.attempt > 1:
            first = failures[0]
            detail = f"{first.detail} (start-up attempt {self.attempt})"
            failures[0] = dataclasses.replace(first, detail=detail)
        error = GangError.build(self.name, failures)
        error.__cause__ = self.remote.get(failures[0].rank)
        # A rendezvous that failed before any rank ran user code is safe to redo:
        # gloo's full-mesh connect can fail spuriously on an overloaded machine.
        # Across nodes, every node sees the same first failure (the store numbers
        # them), so all of them retry, or none.
        if failures[0].rank in self.joining and all(
            r.ready_at is None for r in self.ranks
        ):
            raise JoinFailed(error)
        raise error

    def _report(self) -> GangReport:
        records = self.records if self.records is not None else self._local_records()
        workers = [record.report for record in records]
        mine = {r.rank: r.result for r in self.ranks}
        results = [
            mine[w.rank] if w.rank in mine else pickle.loads(record.payload)
            for w, record in zip(workers, records, strict=True)
        ]
        ready = max(w.startup_s for w in workers)
        return GangReport(
            name=self.name,
            results=results,
            workers=tuple(workers),
            device=self.placement.device,
            backend=self.placement.backend,
            startup_s=ready,
            wall_s=time.monotonic() - self.origin,
            startup_attempts=self.attempt,
        )


def _span(ranks: range) -> str:
    """``0..3`` (or ``2`` for one rank)."""
    return f"{ranks.start}..{ranks.stop - 1}" if len(ranks) > 1 else str(ranks.start)


def _terminate(processes: list[Any]) -> None:
    live = [p for p in processes if p.exitcode is None]
    for process in live:
        process.terminate()
    deadline = time.monotonic() + _TERM_S
    for process in live:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in live:
        if process.exitcode is None:
            process.kill()
            process.join()


class _LiveGangs:
    """Gangs with running workers, killed at interpreter exit."""

    def __init__(self) -> None:
        self._gangs: set[GangSupervisor] = set()
        self._lock = threading.Lock()

    def add(self, gang: GangSupervisor) -> None:
        with self._lock:
            self._gangs.add(gang)

    def discard(self, gang: GangSupervisor) -> None:
        with self._lock:
            self._gangs.discard(gang)

    def kill_all(self) -> None:
        with self._lock:
            gangs = list(self._gangs)
        for gang in gangs:
            for r in gang.ranks:
                if r.process.exitcode is None:
                    r.process.kill()


_LIVE = _LiveGangs()
# Registered after multiprocessing's own exit hook, so it runs first (LIFO): that
# hook joins non-daemon children, which would wait for a gang forever.
atexit.register(_LIVE.kill_all)


#: What ``Process.start()`` raises when the new worker (or the fork server that
#: forks it) dies while its arguments are sent: the pipe to it broke or closed.
_WORKER_GONE = (EOFError, BrokenPipeError, ConnectionError)


def _exit_text(code: int | None) -> str:
    """``killed by SIGKILL``, ``exit code 3``, or ``no exit status yet``."""
    if code is None:
        return "no exit status yet"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _died_starting(rank: int, process: Any, exc: BaseException) -> WorkerFailure:
    """The failure of a rank whose process died while it was being started."""
    pid: int | None = getattr(process, "pid", None)
    code: int | None = None
    if pid is not None:
        try:
            process.join(1.0)
            code = process.exitcode
        except (AssertionError, ValueError, OSError):  # never started
            code = None
    status = _exit_text(code) if pid is not None else "no pid yet"
    detail = f"died while starting ({status}; {type(exc).__name__}: {exc})"
    return WorkerFailure(rank, pid, FailureKind.DIED, detail)
