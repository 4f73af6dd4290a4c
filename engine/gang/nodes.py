"""One gang's link to the other nodes: its rendezvous, results and failures.

When a gang spans nodes (:mod:`strata.engine.gang.cluster`), each node's
:class:`~strata.engine.gang.supervisor.GangSupervisor` starts its share of the
ranks and keeps a :class:`NodeLink`:

* **rendezvous**: node 0 hosts the gang's own ``TCPStore`` on a free port (as a
  one-node gang does) and publishes the port in the job store under the gang's
  key (name, the n-th gang of that name in this process, the start-up attempt),
  which is the same on every node; the other nodes read it and point their
  workers at ``master_addr``. A gang's keys never meet another gang's.
* **results**: each supervisor puts its ranks' pickled results, metrics and
  stats in the gang's store and reads every other rank's, so every node gets the
  full list in rank order and the steps downstream agree on every node. Node 0
  keeps the store open until every node has read (bounded wait).
* **failures**: a supervisor that sees a failure publishes it at once (rank,
  node, what happened, the traceback), numbered by one counter in the store so
  that the first failure anywhere leads the error on every node; the others
  check for it every tick, without blocking. Each supervisor also ticks a beat
  counter: a node that stopped beating (its launch was killed) is named as
  dead, and a store that cannot be reached means node 0 is gone. Every wait has
  a deadline; nothing hangs.

Start-up retries (``startup_retries``) stay in step: a failure is published
with whether the rank was still joining, and every node orders the failures by
the same numbers, so every node sees the same first failure and retries when
it was a rank failing to join (no rank anywhere can have run the function then:
a rank starts it only after a barrier of all). The retry's keys carry the
attempt; the gang's count stays.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field
from typing import Any

from strata.engine.errors import RemoteError
from strata.engine.gang.cluster import NodeGroup, job_store, next_launch
from strata.engine.gang.errors import FailureKind, GangError, WorkerFailure
from strata.engine.gang.report import WorkerReport
from strata.engine.gang.worker import open_store

_POLL_S = 0.01  # between checks while waiting for a key
#: After a local failure: how long a remote node may be silent before it counts as
#: dead (its launch was killed), so the error names its ranks.
SILENT_AFTER_FAILURE_S = 2.0
#: While running: a remote node silent this long has died or lost the network.
SILENT_S = 30.0
_READ_WAIT_S = 30.0  # node 0 waits this long for every node to read the results


@dataclass(frozen=True, slots=True)
class RankRecord:
    """What one rank reported, as a node's supervisor publishes it.

    Attributes:
        report: Its times, peaks and metrics.
        payload: Its result, pickled (as the worker sent it).
    """

    report: WorkerReport
    payload: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class Published:
    """A failure seen on some node, in the order the store numbered it.

    ``cause`` is the rank's exception as text (type name, message, traceback):
    a :class:`RemoteError` does not survive pickling.
    """

    seq: int
    node: int
    failure: WorkerFailure
    cause: tuple[str, str, str] | None
    joining: bool = False  # the rank failed before it joined the group

    @classmethod
    def of(
        cls,
        seq: int,
        node: int,
        failure: WorkerFailure,
        cause: RemoteError | None,
        joining: bool,
    ) -> Published:
        """Number ``failure`` with its cause (if it raised)."""
        text = None
        if cause is not None:
            text = (cause.type_name, cause.message, cause.traceback)
        return cls(seq, node, failure, text, joining)

    def error(self) -> RemoteError | None:
        """The rank's exception, as the other nodes chain it."""
        return None if self.cause is None else RemoteError(*self.cause)


class NodeLink:
    """A gang's view of the other nodes (see the module docstring).

    Args:
        group: The nodes.
        name: The gang's name (identical on every node).
        workers: The global world size.
        timeout_s: How long to wait for the job store and node 0's gang store.
        attempt: The start-up attempt (a retry keeps the gang's count).
    """

    def __init__(
        self,
        group: NodeGroup,
        name: str,
        workers: int,
        timeout_s: float,
        attempt: int = 1,
    ) -> None:
        self.group = group
        self.name = name
        self.workers = workers
        self.timeout_s = timeout_s
        self.ranks = group.share(workers, name)
        count = next_launch(name, again=attempt > 1)
        self.key = f"gang/{name}/{count}/{attempt}"
        self.store: Any = None  # the gang's store (node 0 hosts it)
        self.host = group.master_addr
        self.port = 0
        self._beats: dict[int, tuple[int, float]] = {}
        self._seen: set[tuple[int, int]] = set()

    # -- rendezvous -----------------------------------------------------------
    def open(self, host: str) -> tuple[Any, str, int]:
        """Host (node 0) or find the gang's store; return it, its host and port.

        Node 0's own workers reach it at ``host``; the others at ``master_addr``.
        """
        import torch.distributed as dist

        job = job_store(self.group, self.timeout_s)
        if self.group.node_rank == 0:
            raw = open_store(host, 0, self.timeout_s, master=True)
            job.set(f"{self.key}/port", str(raw.port))
            self.host, self.port = host, raw.port
        else:
            port = self._wait(job, f"{self.key}/port", "node 0 to start the gang")
            self.host, self.port = self.group.master_addr, int(port)
            raw = open_store(self.host, self.port, self.timeout_s, master=False)
        self.store = dist.PrefixStore("strata/", raw)  # type: ignore[attr-defined]
        return raw, self.host, self.port

    def close(self) -> None:
        """Drop the gang's store (node 0: stops listening)."""
        self.store = None

    # -- liveness and failures --------------------------------------------------
    def beat(self) -> None:
        """Tell the other nodes this supervisor is alive (once per tick)."""
        self._call(self.store.add, f"beat/{self.group.node_rank}", 1)

    def silent_nodes(self, longer_than: float) -> list[int]:
        """Other nodes whose beat has not moved for ``longer_than`` seconds.

        A node that never beat is still starting its ranks, not silent.
        """
        now = time.monotonic()
        silent = []
        for node in range(self.group.nnodes):
            if node == self.group.node_rank:
                continue
            count = int(self._call(self.store.add, f"beat/{node}", 0))
            last = self._beats.get(node)
            if last is None or last[0] != count:
                self._beats[node] = (count, now)
            elif count and now - last[1] > longer_than:
                silent.append(node)
        return silent

    def number(self) -> int:
        """A global sequence number for a failure seen now (first seen, lowest)."""
        return int(self._call(self.store.add, "failure_seq", 1))

    def publish(self, failures: list[Published]) -> None:
        """Tell the other nodes what failed here."""
        data = pickle.dumps(failures, protocol=pickle.HIGHEST_PROTOCOL)
        self._call(self.store.set, f"failures/{self.group.node_rank}", data)

    def remote_failures(self) -> list[Published]:
        """Failures other nodes published that this node has not seen yet."""
        found = []
        for node in range(self.group.nnodes):
            key = f"failures/{node}"
            if node == self.group.node_rank or not self._call(self.store.check, [key]):
                continue
            for item in pickle.loads(self._call(self.store.get, key)):
                if (item.node, item.seq) not in self._seen:
                    self._seen.add((item.node, item.seq))
                    found.append(item)
        return found

    def dead_node(self, node: int, silent_s: float) -> WorkerFailure:
        """The failure that names a silent node's first rank."""
        k = len(self.ranks)
        first = node * k
        detail = (
            f"node {node} (ranks {first}..{first + k - 1}) stopped: its launch has "
            f"not answered for {silent_s:.1f} s (killed, or cut off)"
        )
        return WorkerFailure(first, None, FailureKind.DIED, detail)

    # -- results ----------------------------------------------------------------
    def put_results(self, records: list[RankRecord]) -> None:
        """Publish this node's ranks' records."""
        for record in records:
            data = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
            self._call(self.store.set, f"done/{record.report.rank}", data)

    def results_ready(self) -> bool:
        """Whether every rank's record is in the store (non-blocking)."""
        keys = [f"done/{rank}" for rank in range(self.workers)]
        return bool(self._call(self.store.check, keys))

    def take_results(self) -> list[RankRecord]:
        """Every rank's record, in rank order (after :meth:`results_ready`)."""
        records = [
            pickle.loads(self._call(self.store.get, f"done/{rank}"))
            for rank in range(self.workers)
        ]
        self._call(self.store.add, "read", 1)
        return records

    def wait_for_readers(self) -> None:
        """Node 0: keep the store until every node read the results (bounded)."""
        if self.group.node_rank != 0:
            return
        deadline = time.monotonic() + _READ_WAIT_S
        while time.monotonic() < deadline:
            if int(self._call(self.store.add, "read", 0)) >= self.group.nnodes:
                return
            self.beat()
            time.sleep(_POLL_S)

    # -- plumbing -----------------------------------------------------------------
    def _wait(self, store: Any, key: str, what: str) -> str:
        deadline = time.monotonic() + self.timeout_s
        while not store.check([key]):
            if time.monotonic() > deadline:
                raise GangError.of_gang(
                    self.name,
                    f"{what} within {self.timeout_s:g} s",
                    f"no {key!r} in the job store at "
                    f"{self.group.master_addr}:{self.group.master_port}",
                    "start every node with the same job and parameters; raise "
                    "startup_timeout_s when the nodes start far apart.",
                )
            time.sleep(_POLL_S)
        return bytes(store.get(key)).decode()

    def _call(self, method: Any, *args: Any) -> Any:
        try:
            return method(*args)
        except (RuntimeError, OSError) as exc:  # DistStoreError is a RuntimeError
            raise NodeLost(self._lost(exc)) from exc

    def _lost(self, exc: BaseException) -> WorkerFailure:
        k = len(self.ranks)
        detail = (
            f"node 0 (ranks 0..{k - 1}) unreachable: the gang's store at "
            f"{self.host}:{self.port} failed ({type(exc).__name__}: {exc}); "
            "node 0 stopped or the network failed"
        )
        return WorkerFailure(0, None, FailureKind.DIED, detail)


class NodeLost(Exception):
    """The gang's store cannot be reached: node 0 (its host) is gone."""

    def __init__(self, failure: WorkerFailure) -> None:
        super().__init__(failure.detail)
        self.failure = failure
