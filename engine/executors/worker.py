"""The worker side of the process executor: one task in one process.

A worker connects a DEALER socket to the coordinator (control), binds a ROUTER on
loopback for its inputs (when it has any), says hello with that endpoint, waits for
the coordinator's ``start`` with its outlets' endpoints and credits, runs the task
with :func:`strata.engine.runtime.run_task`, and reports ``done`` (with its metrics) or
``error``.

Flow control is credit-based: an outlet may have at most its share of the consumer's
:class:`~strata.engine.config.ChannelBounds` in flight (sent but not yet taken by the
consumer); the consumer acknowledges the messages its task takes, returning the
credit. Acknowledgements are batched (one tiny binary frame for several messages):
a link's are sent once its task took half the link's credit, before the task waits
for anything (input or credit), and at once for end-of-stream and barrier messages,
which are acknowledged too, so a worker exits only after its consumers took
everything it sent, and no message is lost to socket shutdown. While a task aligns a
checkpoint barrier it does not take from the links that delivered it, so their
producers run out of credit and wait: memory stays bounded and the other links keep
flowing.

Checkpoint traffic rides the control socket: a source asks for a checkpoint
(``ckpt_request``), the coordinator answers with ``trigger``; every task reports its
stored part (``ckpt``), and listeners receive ``complete``.

The data path is one thread: a single :class:`_Pump` polls every socket whenever the
task waits, for input or for credit, so acknowledgements, inputs and ``cancel``
are handled in every wait and the task cannot deadlock on its own sockets.
"""

from __future__ import annotations

import multiprocessing
import pickle
import signal
import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import zmq

from strata.engine.channels import (
    Barrier,
    Cancelled,
    CheckpointComplete,
    Delivery,
    EndOfStream,
    LinkMessage,
    Message,
)
from strata.engine.checkpoint.store import TaskEntry
from strata.engine.checkpoint.task import TaskCheckpoints, TaskCheckpointSpec
from strata.engine.errors import StepError, error_fields
from strata.engine.metrics import StepMetrics
from strata.engine.progress import configure_worker_logging
from strata.engine.runtime import Inbox, Outlet, run_task
from strata.engine.tasks import Task
from strata.engine.wire import pack, unpack

_POLL_MS = 100
_HEARTBEAT_S = 0.5
_LINGER_MS = 2000
#: An acknowledgement frame: how many messages of the link were taken, their bytes.
_ACK = struct.Struct("<qq")
_EVENTS, _POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)  # plain ints: no enum arithmetic


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What a worker process is started with (the only pickled object)."""

    task: Task
    host: str
    heartbeat: bool
    checkpoint: TaskCheckpointSpec | None = None
    #: Bind the inputs here (``ipc://...``) instead of a TCP port on ``host``.
    inbound: str | None = None


def main(coordinator: str, identity: bytes, step_id: str, blob: bytes) -> None:
    """Entry point of a worker process (``multiprocessing`` target)."""
    # Ctrl-C reaches the whole process group; the coordinator decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure_worker_logging()
    context = zmq.Context()
    control = context.socket(zmq.DEALER)
    control.setsockopt(zmq.IDENTITY, identity)
    control.setsockopt(zmq.LINGER, _LINGER_MS)
    control.connect(coordinator)
    linger = _LINGER_MS
    try:
        spec: WorkerSpec = pickle.loads(blob)
        _Worker(spec, context, control).run()
    except Cancelled:
        linger = 0
    except StepError as error:
        _send_error(control, error)
    except BaseException as exc:  # a worker must always report before it exits
        wrapped = StepError.wrap(exc, step=step_id, location="engine")
        wrapped.__cause__ = exc
        _send_error(control, wrapped)
    finally:
        context.destroy(linger=linger)


def _send_error(control: zmq.Socket[Any], error: StepError) -> None:
    control.send_multipart(pack({"k": "error", **error_fields(error)}))


def _check_coordinator() -> None:
    """Stop when the coordinator is gone (killed, say): no cancel will ever come."""
    parent = multiprocessing.parent_process()
    if parent is not None and not parent.is_alive():
        raise Cancelled


class _Worker:
    def __init__(
        self, spec: WorkerSpec, context: zmq.Context[Any], control: zmq.Socket[Any]
    ) -> None:
        self.spec = spec
        self.task = spec.task
        self.context = context
        self.control = control
        self.metrics = StepMetrics()
        self.inbound: zmq.Socket[Any] | None = None

    def run(self) -> None:
        endpoint = None
        if self.task.inputs:
            self.inbound = self.context.socket(zmq.ROUTER)
            self.inbound.setsockopt(zmq.LINGER, _LINGER_MS)
            if self.spec.inbound is not None:
                endpoint = self.spec.inbound
                self.inbound.bind(endpoint)
            else:
                port = self.inbound.bind_to_random_port(f"tcp://{self.spec.host}")
                endpoint = f"tcp://{self.spec.host}:{port}"
        self.control.send_multipart(pack({"k": "hello", "endpoint": endpoint}))
        while not self.control.poll(_POLL_MS):
            _check_coordinator()
        header, _ = unpack(self.control.recv_multipart(copy=False))
        if header["k"] != "start":
            raise Cancelled
        outlets = {
            (link["port"], link["route"], link["shard"]): self._outlet(link)
            for link in header["links"]
        }
        pump = _Pump(self, list(outlets.values()), header["credit"])
        for outlet in outlets.values():
            outlet.pump = pump
        inbox = Inbox(pump.receive, self.task.inbound_links, take=pump.take)
        collector = self._gather if self.task.collect else None
        checkpoints = None
        if self.spec.checkpoint is not None:
            task = self.task
            checkpoints = TaskCheckpoints.from_spec(
                self.spec.checkpoint, task.step.id, task.shard, task.shards, pump.link
            )
        run_task(self.task, inbox, outlets, self.metrics, collector, checkpoints)
        pump.flush()
        consumers: dict[str, list[int]] = {}
        for outlet in outlets.values():
            peaks = consumers.setdefault(outlet.consumer, [0, 0])
            peaks[0] += outlet.peak_items
            peaks[1] += outlet.peak_bytes
        self.control.send_multipart(
            pack({"k": "done", "metrics": self.metrics.to_dict(), "peaks": consumers})
        )

    def _outlet(self, link: dict[str, Any]) -> _ZmqOutlet:
        socket = self.context.socket(zmq.DEALER)
        identity = f"{self.task.name}>{link['input']}".encode()
        socket.setsockopt(zmq.IDENTITY, identity)
        socket.setsockopt(zmq.LINGER, 0)  # close() waits for every acknowledgement
        socket.connect(link["endpoint"])
        return _ZmqOutlet(socket, link, self.task.shard)

    def _gather(self, port: str, item: Any) -> None:
        self.control.send_multipart(
            pack({"k": "gather", "port": port}, item), copy=False
        )


class _ZmqOutlet(Outlet):
    """A DEALER socket to one consumer task, with credit-based flow control."""

    def __init__(
        self, socket: zmq.Socket[Any], link: dict[str, Any], shard: int
    ) -> None:
        self.socket = socket
        self.consumer: str = link["consumer"]
        self.input: int = link["input"]
        self.shard = shard
        self.max_items: int = link["items"]
        self.max_bytes: int = link["bytes"]
        self.items = 0  # in flight: sent, not yet acknowledged
        self.bytes = 0
        self.peak_items = 0
        self.peak_bytes = 0
        self.pump: _Pump | None = None

    def put(self, item: Any, size: int) -> float:
        frames = pack({"k": "d", "in": self.input, "sh": self.shard, "n": size}, item)
        waited = self._wait(lambda: self._full(size))
        self.socket.send_multipart(frames, copy=False)
        self.items += 1
        self.bytes += size
        self.peak_items = max(self.peak_items, self.items)
        self.peak_bytes = max(self.peak_bytes, self.bytes)
        return waited

    def barrier(self, checkpoint: int) -> None:
        # Control messages need no credit; the acknowledgement balances the count.
        self.socket.send_multipart(
            pack({"k": "b", "in": self.input, "sh": self.shard, "c": checkpoint})
        )
        self.items += 1

    def close(self) -> None:
        self.socket.send_multipart(
            pack({"k": "eos", "in": self.input, "sh": self.shard})
        )
        self.items += 1
        self._wait(lambda: self.items > 0)

    def acknowledge(self, count: int, size: int) -> None:
        self.items -= count
        self.bytes -= size

    def _full(self, size: int) -> bool:
        if self.items == 0:  # an idle link admits even an oversized item
            return False
        return self.items >= self.max_items or self.bytes + size > self.max_bytes

    def _wait(self, blocked: Any) -> float:
        assert self.pump is not None
        waited = 0.0
        while blocked():
            start = time.perf_counter()
            self.pump.poll()
            waited += time.perf_counter() - start
        return waited


class _ControlLink:
    """A task's line to the checkpoint coordinator over the control socket."""

    def __init__(self, pump: _Pump) -> None:
        self.pump = pump
        self.triggers: deque[int] = deque()
        self.notices: deque[int] = deque()

    def request(self) -> None:
        self.pump.worker.control.send_multipart(pack({"k": "ckpt_request"}))

    def poll(self) -> None:
        self.pump.poll(0)

    def report(self, checkpoint: int, entry: TaskEntry) -> None:
        self.pump.worker.control.send_multipart(
            pack({"k": "ckpt", "n": checkpoint, "entry": entry.to_dict()})
        )


class _Pump:
    """Polls every socket of a worker and dispatches what arrives."""

    def __init__(
        self, worker: _Worker, outlets: list[_ZmqOutlet], credit: dict[str, int]
    ) -> None:
        self.worker = worker
        # Taken but not yet acknowledged, by link: [messages, bytes]; a link's are
        # sent once they reach half its credit (see the module docstring).
        self.unacked: dict[tuple[int, int], list[int]] = {}
        self.ack_items = max(1, credit["items"] // 2)
        self.ack_bytes = max(1, credit["bytes"] // 2)
        self.link = _ControlLink(self)
        self.producers: dict[tuple[int, int], bytes] = {}  # link -> its identity
        self.queue: deque[Message] = deque()
        self.by_socket = {outlet.socket: outlet for outlet in outlets}
        self.poller = zmq.Poller()
        self.poller.register(worker.control, zmq.POLLIN)
        if worker.inbound is not None:
            self.poller.register(worker.inbound, zmq.POLLIN)
        for socket in self.by_socket:
            self.poller.register(socket, zmq.POLLIN)
        self.last_beat = time.monotonic()

    def receive(self) -> Message:
        """Return the next inbound message (:meth:`take` acknowledges it)."""
        while not self.queue:
            self.poll()
        return self.queue.popleft()

    def take(self, message: LinkMessage, held: bool) -> None:
        """The task took ``message``: return its credit to the producer (batched)."""
        link = (message.input, message.shard)
        unacked = self.unacked.get(link)
        if unacked is None:
            unacked = self.unacked[link] = [0, 0]
        unacked[0] += 1
        if type(message) is Delivery:
            unacked[1] += message.nbytes
            if unacked[0] < self.ack_items and unacked[1] < self.ack_bytes:
                return
        self._acknowledge(link, unacked)

    def flush(self) -> None:
        """Acknowledge everything taken so far."""
        for link, unacked in self.unacked.items():
            if unacked[0]:
                self._acknowledge(link, unacked)

    def _acknowledge(self, link: tuple[int, int], unacked: list[int]) -> None:
        assert self.worker.inbound is not None
        frame = _ACK.pack(unacked[0], unacked[1])
        self.worker.inbound.send_multipart([self.producers[link], frame])
        unacked[0] = unacked[1] = 0

    def poll(self, timeout_ms: int = _POLL_MS) -> None:
        """Wait up to ``timeout_ms``, then handle everything readable.

        Before a wait, every taken message is acknowledged: a producer may be
        waiting for that credit.
        """
        if timeout_ms:
            self.flush()
        for socket, _ in self.poller.poll(timeout_ms):
            # ZMQ_EVENTS, not socket.poll(0): that builds a Poller per call.
            while socket.getsockopt(_EVENTS) & _POLLIN:
                frames = socket.recv_multipart(copy=False)
                self._dispatch(socket, frames)
        if time.monotonic() - self.last_beat > _HEARTBEAT_S:
            self.last_beat = time.monotonic()
            _check_coordinator()
            if self.worker.spec.heartbeat:
                metrics = self.worker.metrics.to_dict()
                self.worker.control.send_multipart(
                    pack({"k": "progress", "metrics": metrics})
                )

    def _dispatch(self, socket: zmq.Socket[Any], frames: list[Any]) -> None:
        if socket is self.worker.control:
            header, _ = unpack(frames)
            kind = header["k"]
            if kind == "trigger":
                self.link.triggers.append(header["n"])
            elif kind == "complete" and self.worker.task.inputs:
                self.queue.append(CheckpointComplete(header["n"]))
            elif kind == "complete":
                self.link.notices.append(header["n"])
            else:
                raise Cancelled
            return
        if socket is self.worker.inbound:
            header, value = unpack(frames[1:])
            link = (header["in"], header["sh"])
            self.producers.setdefault(link, frames[0].bytes)
            kind = header["k"]
            message: Message
            if kind == "eos":
                message = EndOfStream(*link)
            elif kind == "b":
                message = Barrier(*link, header["c"])
            else:
                message = Delivery(*link, value, header["n"])
            self.queue.append(message)
            return
        count, size = _ACK.unpack(frames[0].bytes)
        self.by_socket[socket].acknowledge(count, size)
