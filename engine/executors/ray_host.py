"""The Ray side of the ray executor: a task hosted in a Ray actor or a Ray task.

:mod:`strata.engine.executors.ray_driver` decides where each task runs and wires
the links; this module runs one task there with
:func:`strata.engine.runtime.run_task`, the loop every executor shares.

Two hosts:

* :class:`TaskHost`, made a Ray actor: streaming tasks, and every task downstream
  of one (a batch step gathering a stream takes part in checkpoints while the
  stream flows). Its inputs arrive through :meth:`TaskHost.deliver` into a
  :class:`~strata.engine.channels.Channel`, the same bounded channel as the local
  executor's.
* :func:`run_batch_task`, made a Ray task: a batch step with no streaming step
  upstream. It runs once its producers finished; their outputs arrive as
  object-store references, resolved without a copy where Ray can (numpy arrays,
  Arrow buffers), and its own outputs for such consumers go back the same way.

Links into an actor are :class:`PushOutlet`: items are buffered and sent in
batches (one actor call carries many items), each batch at most half the link's
credit, so at most the link's share of the channel's bounds is in flight. A
producer with no credit left waits for its oldest call to be accepted: the
consumer's ``deliver`` returns only once its channel took every item, so a slow
consumer blocks its producers (backpressure) and memory stays bounded, as on the
local executor. Calls of one link may run concurrently on the actor's threads;
each carries a sequence number and the actor takes them in order. Control
messages (barriers, end-of-stream) are sent at once, flushing what is buffered
before them, and never wait for credit. A partial batch goes out when the task
waits for input, or after ``flush_s`` (a background flusher), so a slow source
still streams.

Items collected for the driver, checkpoint requests and reports and progress
travel in an *outbox* the driver drains (:meth:`TaskHost.control`), in order, so a
checkpoint's collected prefix is exact, as on the other executors.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from strata.engine.channels import (
    Barrier,
    Cancelled,
    Channel,
    CheckpointComplete,
    Delivery,
    EndOfStream,
    LinkMessage,
    Message,
)
from strata.engine.checkpoint.store import TaskEntry
from strata.engine.checkpoint.task import TaskCheckpoints, TaskCheckpointSpec
from strata.engine.config import ChannelBounds
from strata.engine.errors import StepError, error_fields, format_error
from strata.engine.gang.spec import LAUNCHER_ENV
from strata.engine.inbox import Inbox
from strata.engine.metrics import StepMetrics
from strata.engine.runtime import Outlet, engine_failure, run_task
from strata.engine.tasks import Task

_FLUSH_S = 0.005
_NO_BARRIER = "a batch task with no streaming step upstream saw a barrier"
#: A data message on the wire between hosts: ("d", item, nbytes), ("b", n), ("e",).
Wired = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class HostSpec:
    """What a host is started with: its task and the run's settings."""

    task: Task
    index: int
    bounds: ChannelBounds
    checkpoint: TaskCheckpointSpec | None = None
    flush_s: float = _FLUSH_S


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """One outlet of a task: where items of (port, route, shard) go.

    ``actor`` is the consumer's actor handle (a push link) or ``None``: the items
    return to the driver in the task's payload for consumer task ``consumer``.
    """

    port: int
    route: int
    shard: int
    input: int
    consumer: int
    consumer_name: str
    actor: Any
    items: int
    bytes: int
    token: str = ""


@dataclass(slots=True)
class HostResult:
    """What a host returns when its task ends (small: never the data)."""

    metrics: dict[str, Any]
    outbox: list[tuple[Any, ...]]
    error: dict[str, Any] | None = None
    cancelled: bool = False
    peak_items: int = 0
    peak_bytes: int = 0
    peaks: dict[str, list[int]] = field(default_factory=dict)


def compact(messages: list[Wired]) -> list[Wired]:
    """Pack runs of Arrow record batches with one schema into one IPC stream.

    Ray pickles a record batch column by column, about 40 us each way for a
    64-row batch; one Arrow IPC stream for the whole run costs about 3.5 us per
    batch, and its buffer travels without a copy. Everything else is left to
    Ray's serializer (numpy arrays are zero-copy there already).

    Examples:
        >>> import pyarrow as pa
        >>> b = pa.record_batch({"x": [1, 2]})
        >>> packed = compact([("d", b, 16), ("d", b, 16), ("e",)])
        >>> [m[0] for m in packed], [m[0] for m in expand(packed)]
        (['a', 'e'], ['d', 'd', 'e'])
        >>> [m[1].equals(b) for m in expand(packed) if m[0] == "d"]
        [True, True]
    """
    out: list[Wired] = []
    run: list[Wired] = []
    for message in messages:
        item = message[1] if message[0] == "d" else None
        if isinstance(item, pa.RecordBatch) and (
            not run or item.schema.equals(run[0][1].schema)
        ):
            run.append(message)
            continue
        _flush_run(run, out)
        run = []
        if isinstance(item, pa.RecordBatch):
            run.append(message)
        else:
            out.append(message)
    _flush_run(run, out)
    return out


def _flush_run(run: list[Wired], out: list[Wired]) -> None:
    if len(run) < 2:
        out.extend(run)
        return
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, run[0][1].schema) as writer:
        for message in run:
            writer.write_batch(message[1])
    out.append(("a", sink.getvalue(), [message[2] for message in run]))


def expand(messages: list[Wired]) -> Iterator[Wired]:
    """Undo :func:`compact`: every data message again, in order."""
    for message in messages:
        if message[0] != "a":
            yield message
            continue
        reader = pa.ipc.open_stream(message[1])
        for batch, size in zip(reader, message[2], strict=True):
            yield ("d", batch, size)


class _Outbox:
    """What the driver drains: gathered items, checkpoint requests and reports."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.entries: list[tuple[Any, ...]] = []
        self.closed = False

    def add(self, *entry: Any) -> None:
        with self.changed:
            self.entries.append(entry)
            self.changed.notify_all()

    def drain(self, wait_s: float = 0.0) -> list[tuple[Any, ...]]:
        """Take every entry, waiting up to ``wait_s`` for one (a long poll)."""
        with self.changed:
            if wait_s > 0 and not self.entries and not self.closed:
                self.changed.wait(wait_s)
            entries, self.entries = self.entries, []
        return entries

    def close(self) -> None:
        """The task ended: release the driver's long poll at once."""
        with self.changed:
            self.closed = True
            self.changed.notify_all()


class _Link:
    """A hosted task's line to the driver's checkpoint coordinator.

    A source that asks for a checkpoint waits for the answer (a trigger, or word
    that one is already in flight), at most ``answer_s``: the driver's long poll
    hears the request within a millisecond or two, so the barrier goes in right
    after the item that made it due, as on the other executors, instead of after
    everything the source emitted meanwhile.
    """

    def __init__(self, outbox: _Outbox, answer_s: float = 1.0) -> None:
        self.outbox = outbox
        self.answer_s = answer_s
        self.answered = threading.Event()
        self.triggers: deque[int] = deque()
        self.notices: deque[int] = deque()

    def request(self) -> None:
        self.answered.clear()
        self.outbox.add("request")
        self.answered.wait(self.answer_s)

    def answer(self, checkpoint: int | None) -> None:
        if checkpoint is not None:
            self.triggers.append(checkpoint)
        self.answered.set()

    def poll(self) -> None:
        pass  # the driver's calls append to the deques directly

    def report(self, checkpoint: int, entry: TaskEntry) -> None:
        self.outbox.add("report", checkpoint, entry.to_dict())


class PushOutlet(Outlet):
    """A link into a consumer actor; see the module docstring."""

    def __init__(self, link: LinkSpec, shard: int, stop: threading.Event) -> None:
        self.link = link
        self.actor = link.actor
        self.key = (link.input, shard)
        self.max_items = link.items
        self.max_bytes = link.bytes
        self.batch_items = max(1, link.items // 2)
        self.batch_bytes = max(1, link.bytes // 2)
        self.stop = stop
        self.lock = threading.Lock()
        self.buffer: list[Wired] = []
        self.buffered = [0, 0]  # items, bytes
        self.in_flight: deque[tuple[Any, int, int]] = deque()  # ref, items, bytes
        self.items = 0  # buffered or in flight, not yet accepted
        self.bytes = 0
        self.peak_items = 0
        self.peak_bytes = 0
        self.sequence = 0

    def put(self, item: Any, size: int) -> float:
        """Buffer one item (waiting for credit); send the buffer once it is a batch."""
        waited = 0.0
        if self.items and (
            self.items >= self.max_items or self.bytes + size > self.max_bytes
        ):
            waited = self._wait_for_credit(size)
        with self.lock:
            self.buffer.append(("d", item, size))
            self.buffered[0] += 1
            self.buffered[1] += size
            self.items += 1
            self.bytes += size
            self.peak_items = max(self.peak_items, self.items)
            self.peak_bytes = max(self.peak_bytes, self.bytes)
            if (
                self.buffered[0] >= self.batch_items
                or self.buffered[1] >= self.batch_bytes
            ):
                self._send()
        return waited

    def barrier(self, checkpoint: int) -> None:
        """Send what is buffered and the barrier, now."""
        with self.lock:
            self.buffer.append(("b", checkpoint))
            self._send()

    def close(self) -> None:
        """Send end-of-stream; return once the consumer took everything."""
        with self.lock:
            self.buffer.append(("e",))
            self._send()
        while self.in_flight:  # end-of-stream taken: nothing is lost to shutdown
            self._reap(wait=True)

    def flush(self) -> None:
        """Send what is buffered (the task waits, or the flusher's period passed)."""
        if self.buffer and self.lock.acquire(blocking=False):
            try:
                if self.buffer:
                    self._send()
            finally:
                self.lock.release()

    def _send(self) -> None:
        """Send the buffer as one call (the lock held)."""
        if self.stop.is_set():
            raise Cancelled
        ref = self.actor.deliver.remote(
            self.link.token, *self.key, self.sequence, compact(self.buffer)
        )
        self.in_flight.append((ref, *self.buffered))
        self.sequence += 1
        self.buffer = []
        self.buffered = [0, 0]

    def _wait_for_credit(self, size: int) -> float:
        start = time.perf_counter()
        self.flush()
        while self.items and (
            self.items >= self.max_items or self.bytes + size > self.max_bytes
        ):
            if not self.in_flight:
                self.flush()  # the flusher held the lock: try again
                if not self.in_flight:
                    break
            self._reap(wait=True)
        return time.perf_counter() - start

    def _reap(self, *, wait: bool) -> None:
        """Retire accepted calls (waiting for the oldest when ``wait``)."""
        import ray

        while self.in_flight:
            ref, items, size = self.in_flight[0]
            timeout = 0.1 if wait else 0.0
            done, _ = ray.wait([ref], timeout=timeout)
            if not done:
                if self.stop.is_set():
                    raise Cancelled
                if wait:
                    continue
                return
            try:
                ray.get(ref)
            except Exception as exc:
                raise _link_error(self.link, exc) from exc
            self.in_flight.popleft()
            with self.lock:
                self.items -= items
                self.bytes -= size
            wait = False


class ReturnOutlet(Outlet):
    """A link to a Ray-task consumer: items go back in the payload, by reference."""

    def __init__(self, messages: list[Wired]) -> None:
        self.messages = messages
        self.peak_items = 0
        self.peak_bytes = 0

    def put(self, item: Any, size: int) -> float:
        """Add one item to the payload."""
        self.messages.append(("d", item, size))
        return 0.0

    def barrier(self, checkpoint: int) -> None:
        """Never called: see :class:`_NoLink`."""
        raise AssertionError(_NO_BARRIER)

    def close(self) -> None:
        """End the link in the payload."""
        self.messages.append(("e",))


def _link_error(link: LinkSpec, exc: BaseException) -> StepError | Cancelled:
    """The error of a push that failed: the consumer died or was cancelled."""
    text = f"{type(exc).__name__}: {exc}"
    if "Cancelled" in text:
        return Cancelled()
    message = format_error(
        "ray actor",
        link.consumer_name.split("[")[0],
        "the consumer task to take its input",
        f"its actor failed ({text.splitlines()[0][:300]})",
        "the actor died: look for an out-of-memory kill or a crash in native code.",
    )
    return StepError(message, step=link.consumer_name, location="engine")


class _Flusher:
    """Sends partial batches that waited ``period`` (a slow source still streams)."""

    def __init__(self, outlets: list[PushOutlet], period: float) -> None:
        self.outlets = outlets
        self.period = period
        self.done = threading.Event()
        self.thread = threading.Thread(
            target=self._run, name="strata:ray-flusher", daemon=True
        )

    def __enter__(self) -> _Flusher:
        if self.outlets:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        if self.thread.is_alive():
            self.thread.join()

    def _run(self) -> None:
        while not self.done.wait(self.period):
            for outlet in self.outlets:
                try:
                    outlet.flush()
                except Cancelled:
                    return
                except Exception:  # the task thread meets the same error itself
                    pass


#: Items for Ray-task consumers, by (consumer task index, consumer input).
Produced = dict[tuple[int, int], list[Wired]]


def _build_outlets(
    task: Task, links: list[LinkSpec], payload: Produced, stop: threading.Event
) -> tuple[dict[tuple[int, int, int], Outlet], list[PushOutlet]]:
    outlets: dict[tuple[int, int, int], Outlet] = {}
    pushes: list[PushOutlet] = []
    for link in links:
        outlet: Outlet
        if link.actor is not None:
            push = PushOutlet(link, task.shard, stop)
            pushes.append(push)
            outlet = push
        else:
            outlet = ReturnOutlet(payload.setdefault((link.consumer, link.input), []))
        outlets[(link.port, link.route, link.shard)] = outlet
    return outlets, pushes


def _peaks(pushes: list[PushOutlet]) -> dict[str, list[int]]:
    peaks: dict[str, list[int]] = {}
    for push in pushes:
        peak = peaks.setdefault(push.link.consumer_name, [0, 0])
        peak[0] += push.peak_items
        peak[1] += push.peak_bytes
    return peaks


def _ray_workers_start_ray_gangs() -> None:
    import os

    # A gang step hosted here starts its ranks as Ray actors (GangSpec "auto").
    os.environ.setdefault(LAUNCHER_ENV, "ray")


def _run_hosted(
    spec: HostSpec,
    inbox: Inbox,
    links: list[LinkSpec],
    outbox: _Outbox,
    metrics: StepMetrics,
    stop: threading.Event,
    checkpoints: TaskCheckpoints | None,
    payload: Produced,
    on_outlets: Callable[[list[PushOutlet]], None] = lambda pushes: None,
) -> HostResult:
    """Run the task; turn every ending into a :class:`HostResult`."""
    _ray_workers_start_ray_gangs()
    task = spec.task
    outlets, pushes = _build_outlets(task, links, payload, stop)
    on_outlets(pushes)
    collector = None
    if task.collect:

        def collector(port: str, item: Any) -> None:
            outbox.add("gather", port, item)

    result = HostResult(metrics={}, outbox=[])
    try:
        with _Flusher(pushes, spec.flush_s):
            run_task(task, inbox, outlets, metrics, collector, checkpoints)
    except Cancelled:
        result.cancelled = True
    except StepError as error:
        result.error = error_fields(error)
    except BaseException as exc:  # an engine bug must still end the run clearly
        result.error = error_fields(engine_failure(task, exc))
    result.metrics = metrics.to_dict()
    result.outbox = outbox.drain()
    outbox.close()
    result.peaks = _peaks(pushes)
    return result


class TaskHost:
    """One run's task inside a :class:`HostProcess` actor.

    Methods other than :meth:`run` are short and run on the actor's other
    threads while ``run`` works.
    """

    def __init__(self, spec: HostSpec) -> None:
        self.spec = spec
        task = spec.task
        self.channel = Channel(spec.bounds, task.inbound_links) if task.inputs else None
        self.outbox = _Outbox()
        self.link = _Link(self.outbox)
        self.metrics = StepMetrics()
        self.stop = threading.Event()
        self.order = threading.Condition()
        self.expected: dict[tuple[int, int], int] = {}
        self.pushes: list[PushOutlet] = []

    def run(self, links: list[LinkSpec]) -> HostResult:
        """Run the task to its end; never raises for the task's failure."""
        spec, task = self.spec, self.spec.task
        checkpoints = None
        if spec.checkpoint is not None:
            checkpoints = TaskCheckpoints.from_spec(
                spec.checkpoint, task.step.id, task.shard, task.shards, self.link
            )
        if self.channel is None:
            inbox = Inbox(_nothing, task.inbound_links)
        else:
            channel = self.channel
            inbox = Inbox(
                self._receive,
                task.inbound_links,
                hold=channel.hold,
                take=lambda message, held: channel.release(message) if held else None,
            )
        result = _run_hosted(
            spec,
            inbox,
            links,
            self.outbox,
            self.metrics,
            self.stop,
            checkpoints,
            {},
            self._keep_outlets,
        )
        if self.channel is not None:
            result.peak_items = self.channel.peak_items
            result.peak_bytes = self.channel.peak_bytes
        return result

    def deliver(
        self, input: int, shard: int, sequence: int, messages: list[Wired]
    ) -> None:
        """Take one batch of a link into the channel, in the link's order."""
        assert self.channel is not None
        link = (input, shard)
        with self.order:
            while self.expected.get(link, 0) != sequence:
                if self.stop.is_set():
                    raise Cancelled
                self.order.wait(0.1)
        try:
            for message in expand(messages):
                kind = message[0]
                if kind == "d":
                    delivery = Delivery(input, shard, message[1], message[2])
                    self.channel.put(delivery, message[2])
                elif kind == "b":
                    self.channel.put_control(Barrier(input, shard, message[1]))
                else:
                    self.channel.put_control(EndOfStream(input, shard))
        finally:
            with self.order:
                self.expected[link] = sequence + 1
                self.order.notify_all()

    def control(self, wait_s: float) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
        """Drain the outbox, with a snapshot of the task's counters.

        It waits up to ``wait_s`` for an entry: the driver's long poll.
        """
        return self.outbox.drain(wait_s), self.metrics.to_dict()

    def trigger(self, checkpoint: int | None) -> None:
        """The coordinator's answer to this source's request.

        ``checkpoint``: the barrier to inject; ``None``: not now, one is in flight.
        """
        self.link.answer(checkpoint)

    def notice(self, checkpoint: int) -> None:
        """Checkpoint ``checkpoint`` is complete."""
        if self.channel is not None:
            with contextlib.suppress(Cancelled):  # the run is stopping
                self.channel.put_control(CheckpointComplete(checkpoint))
        else:
            self.link.notices.append(checkpoint)

    def cancel(self) -> None:
        """Stop: waiters raise ``Cancelled`` and the task unwinds."""
        self.stop.set()
        self.link.answer(None)
        self.outbox.close()
        if self.channel is not None:
            self.channel.cancel()
        with self.order:
            self.order.notify_all()

    def _keep_outlets(self, pushes: list[PushOutlet]) -> None:
        self.pushes = pushes

    def _receive(self) -> Message:
        assert self.channel is not None
        message = self.channel.try_get()
        if message is None:
            for push in self.pushes:  # about to wait: send the partial batches
                push.flush()
            message = self.channel.get()
        return message


class HostProcess:
    """A Ray actor hosting one task per run; pooled: a warm run starts at once.

    The driver makes it an actor with ``ray.remote``.

    Every call names the run (``token``): a call that arrives late, from a run
    that already ended (a completion notice, say), finds another token and is
    dropped instead of reaching the next run's task.
    """

    def __init__(self) -> None:
        self.token: str | None = None
        self.host: TaskHost | None = None

    def start(self, token: str, spec: HostSpec) -> bool:
        """Take on ``spec``'s task for run ``token``."""
        self.token, self.host = token, TaskHost(spec)
        return True

    def release(self, token: str) -> None:
        """Forget run ``token``'s task (the actor goes back to the pool)."""
        if token == self.token:
            self.token, self.host = None, None

    def run(self, token: str, links: list[LinkSpec]) -> HostResult:
        """See :meth:`TaskHost.run`."""
        return self._host(token).run(links)

    def deliver(
        self, token: str, input: int, shard: int, sequence: int, messages: list[Wired]
    ) -> None:
        """See :meth:`TaskHost.deliver`."""
        self._host(token).deliver(input, shard, sequence, messages)

    def control(
        self, token: str, wait_s: float
    ) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
        """See :meth:`TaskHost.control`."""
        return self._host(token).control(wait_s)

    def trigger(self, token: str, checkpoint: int | None) -> None:
        """See :meth:`TaskHost.trigger`."""
        if token == self.token and self.host is not None:
            self.host.trigger(checkpoint)

    def notice(self, token: str, checkpoint: int) -> None:
        """See :meth:`TaskHost.notice`."""
        if token == self.token and self.host is not None:
            self.host.notice(checkpoint)

    def cancel(self, token: str) -> None:
        """See :meth:`TaskHost.cancel`."""
        if token == self.token and self.host is not None:
            self.host.cancel()

    def _host(self, token: str) -> TaskHost:
        host = self.host
        if token != self.token or host is None:
            raise Cancelled  # a call of a run that is over
        return host


def run_batch_task(
    spec: HostSpec, links: list[LinkSpec], *payloads: dict[int, list[Wired]]
) -> tuple[HostResult, dict[int, list[Wired]]]:
    """A batch task as a Ray task: inputs from its producers' payloads.

    Returns:
        Its result, and its payload: the items for its Ray-task consumers.
    """
    task = spec.task
    messages: list[LinkMessage] = []
    for payload in payloads:
        for input_link, shard, wired in payload.get(spec.index, ()):
            for message in wired:
                if message[0] == "d":
                    messages.append(Delivery(input_link, shard, message[1], message[2]))
                else:
                    messages.append(EndOfStream(input_link, shard))
    queue = iter(messages)
    inbox = Inbox(lambda: next(queue), task.inbound_links)
    checkpoints = None
    if spec.checkpoint is not None:
        checkpoints = TaskCheckpoints.from_spec(
            spec.checkpoint, task.step.id, task.shard, task.shards, _NoLink()
        )
    outbox = _Outbox()
    produced: Produced = {}
    result = _run_hosted(
        spec,
        inbox,
        links,
        outbox,
        StepMetrics(),
        threading.Event(),
        checkpoints,
        produced,
    )
    # Keyed by consumer: (input, this task's shard, messages) per link.
    by_consumer: dict[int, list[Wired]] = {}
    for (consumer, input_link), wired in produced.items():
        by_consumer.setdefault(consumer, []).append((input_link, task.shard, wired))
    return result, by_consumer


class _NoLink:
    """A Ray task never meets a barrier: no checkpoint traffic."""

    def __init__(self) -> None:
        self.triggers: deque[int] = deque()
        self.notices: deque[int] = deque()

    def request(self) -> None:
        raise AssertionError("a batch task does not start checkpoints")

    def poll(self) -> None:
        pass

    def report(self, checkpoint: int, entry: TaskEntry) -> None:
        raise AssertionError(_NO_BARRIER)


def _nothing() -> Message:
    raise AssertionError("a task without inputs never receives")
