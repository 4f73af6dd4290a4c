"""Run one task: the loop shared by every executor.

An executor gives a task an *inbox* (a function returning the next
:class:`~engine.channels.Message`) and *outlets* (one per consumer link); this module
does the rest the same way everywhere: calling the user's function or operator,
timing it, wrapping its exceptions in :class:`~engine.errors.StepError`, routing
outputs to ports and shards, counting items and bytes, and closing every outlet with
an end-of-stream.

A batch task reads all its inputs first: a streaming producer's items become a list
(grouped by producer shard, in shard order, so the list is the same on every
executor), a batch producer's single item becomes the argument itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from engine.channels import Barrier, Cancelled, Delivery, EndOfStream, Message
from engine.errors import StepError, WireError, format_error
from engine.metrics import StepMetrics
from engine.operator import Emit, Operator, StepContext, Tagged
from engine.pipeline import StepKind
from engine.sharding import ShardKeyError, split
from engine.sizing import nbytes
from engine.tasks import Task


class Outlet(Protocol):
    """One link from a task to one consumer task's input."""

    def put(self, item: Any, size: int) -> float:
        """Send one item of ``size`` bytes; return the seconds waited for room."""
        ...

    def close(self) -> None:
        """Send end-of-stream (and, on the process executor, wait for delivery)."""
        ...


#: Outlets of a task, by (port index, route index, consumer shard).
Outlets = Mapping[tuple[int, int, int], Outlet]
#: Receives the items of collected ports: (port name, item).
Collector = Callable[[str, Any], None]


@dataclass(slots=True)
class Inbox:
    """A task's inputs: yields deliveries until every inbound link has ended."""

    receive: Callable[[], Message]
    open_links: int

    def next(self) -> Delivery | None:
        """Return the next data item, or ``None`` once every link sent end-of-stream."""
        while self.open_links > 0:
            message = self.receive()
            if isinstance(message, EndOfStream):
                self.open_links -= 1
            elif isinstance(message, Barrier):
                continue  # checkpoints arrive with issue 7; see engine.channels
            else:
                return message
        return None


def run_task(
    task: Task,
    inbox: Inbox,
    outlets: Outlets,
    metrics: StepMetrics,
    collector: Collector | None = None,
) -> None:
    """Run ``task`` to completion, then close its outlets.

    Raises:
        StepError: The step's code (or the engine on its behalf) failed.
        Cancelled: The run is stopping; the caller unwinds quietly.
    """
    start = time.perf_counter()
    emitter = _Emitter(task, outlets, metrics, collector)
    try:
        if task.step.kind is StepKind.BATCH:
            _run_batch(task, inbox, emitter, metrics)
        else:
            _run_streaming(task, inbox, emitter, metrics)
        for outlet in outlets.values():
            outlet.close()
    finally:
        metrics.wall_s = time.perf_counter() - start


def _run_batch(
    task: Task, inbox: Inbox, emitter: _Emitter, metrics: StepMetrics
) -> None:
    step = task.step
    streams: list[list[list[Any]]] = [
        [[] for _ in range(link.shards)] for link in task.inputs
    ]
    while (delivery := inbox.next()) is not None:
        metrics.items_in += 1
        metrics.bytes_in += delivery.nbytes
        streams[delivery.input][delivery.shard].append(delivery.item)
    args = []
    for link, shards in zip(task.inputs, streams, strict=True):
        if link.streaming:
            args.append([item for shard in shards for item in shard])
        else:
            args.append(shards[0][0])
    start = time.perf_counter()
    try:
        result = step.fn(*args, **step.params)
    except Exception as exc:
        raise _wrap(task, exc, step.location) from exc
    finally:
        metrics.busy_s += time.perf_counter() - start
    if len(step.ports) == 1:
        emitter.emit_to(0, result)
        return
    if not isinstance(result, Mapping) or set(result) != set(step.ports):
        got = sorted(result) if isinstance(result, Mapping) else type(result).__name__
        raise _engine_error(
            task, "result", f"a mapping with keys {sorted(step.ports)}", str(got)
        )
    for index, port in enumerate(step.ports):
        emitter.emit_to(index, result[port])


def _run_streaming(
    task: Task, inbox: Inbox, emitter: _Emitter, metrics: StepMetrics
) -> None:
    step = task.step
    op: Operator[Any, Any] = step.fn
    ctx = StepContext(step.id, task.shard, task.shards, task.seed, step.inputs, metrics)
    _call(task, "open", lambda: op.open(ctx), metrics)
    tagged = len(task.inputs) > 1
    while (delivery := inbox.next()) is not None:
        metrics.items_in += 1
        metrics.bytes_in += delivery.nbytes
        item = Tagged(delivery.input, delivery.item) if tagged else delivery.item
        _drain(task, "process", partial(op.process, item), emitter, metrics)
    _drain(task, "finish", op.finish, emitter, metrics)


def _call(task: Task, method: str, fn: Callable[[], Any], metrics: StepMetrics) -> Any:
    start = time.perf_counter()
    try:
        return fn()
    except Exception as exc:
        raise _wrap(task, exc, f"{task.step.location}.{method}") from exc
    finally:
        metrics.busy_s += time.perf_counter() - start


def _drain(
    task: Task,
    method: str,
    produce: Callable[[], Iterable[Any] | None],
    emitter: _Emitter,
    metrics: StepMetrics,
) -> None:
    """Iterate an operator's outputs, timing only the operator's own code."""
    location = f"{task.step.location}.{method}"
    start = time.perf_counter()
    try:
        outputs = produce()
        iterator = iter(outputs if outputs is not None else ())
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                break
            metrics.busy_s += time.perf_counter() - start
            emitter.emit(item)  # raises StepError or Cancelled itself: not wrapped
            start = time.perf_counter()
    except (StepError, Cancelled):
        raise
    except Exception as exc:
        raise _wrap(task, exc, location) from exc
    metrics.busy_s += time.perf_counter() - start


class _Emitter:
    """Resolve an output's port, count it, split it by key and hand it to outlets."""

    def __init__(
        self,
        task: Task,
        outlets: Outlets,
        metrics: StepMetrics,
        collector: Collector | None,
    ) -> None:
        self._task = task
        self._outlets = outlets
        self._metrics = metrics
        self._collector = collector
        self._ports = {port: index for index, port in enumerate(task.step.ports)}

    def emit(self, output: Any) -> None:
        ports = self._task.step.ports
        if isinstance(output, Emit):
            index = self._ports.get(output.port)
            if index is None:
                raise _engine_error(
                    self._task, "port", f"one of {list(ports)}", repr(output.port)
                )
            self.emit_to(index, output.item)
        elif len(ports) == 1:
            self.emit_to(0, output)
        else:
            raise _engine_error(
                self._task,
                "output",
                f"Emit(port, item) with port in {list(ports)}",
                type(output).__qualname__,
                "a step with several ports must say where each item goes.",
            )

    def emit_to(self, port: int, item: Any) -> None:
        task = self._task
        size = nbytes(item)
        self._metrics.items_out += 1
        self._metrics.bytes_out += size
        try:
            for r, route in enumerate(task.routes[port]):
                if route.shards == 1 or route.key is None:
                    self._put((port, r, 0), item, size)
                    continue
                for shard, piece in split(item, route.key, route.shards):
                    self._put((port, r, shard), piece, nbytes(piece))
            if self._collector is not None and task.step.ports[port] in task.collect:
                self._collector(task.step.ports[port], item)
        except (ShardKeyError, WireError) as exc:
            raise _wrap(task, exc, "engine") from exc

    def _put(self, address: tuple[int, int, int], item: Any, size: int) -> None:
        self._metrics.blocked_s += self._outlets[address].put(item, size)


_WIRE_TYPES = (
    "an Arrow batch or table, numpy array, torch tensor, bytes, JSON scalar, "
    "or a dict, list or tuple of those"
)


def _wrap(task: Task, exc: Exception, location: str) -> StepError:
    if isinstance(exc, WireError):
        hint = "the process executor never pickles data; convert the item first."
        return _engine_error(task, "output", _WIRE_TYPES, str(exc), hint)
    if isinstance(exc, ShardKeyError):
        return _engine_error(task, exc.subject, exc.expected, exc.got)
    return StepError.wrap(
        exc, step=task.step.id, location=location, shard=task.shard, shards=task.shards
    )


def _engine_error(
    task: Task, subject: str, expected: str, got: str, hint: str | None = None
) -> StepError:
    message = format_error(subject, task.step.id, expected, got, hint)
    shard = task.shard if task.shards > 1 else None
    return StepError(message, step=task.step.id, location="engine", shard=shard)
