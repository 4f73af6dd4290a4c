"""Run one task: the loop shared by every executor.

An executor gives a task an *inbox* (a function returning the next
:class:`~strata.engine.channels.Message`) and *outlets* (one per consumer link); this
module does the rest the same way everywhere: calling the user's function or operator,
timing it, wrapping its exceptions in :class:`~strata.engine.errors.StepError`, routing
outputs to ports and shards, counting items and bytes, and closing every outlet with an
end-of-stream.

A batch task reads all its inputs first: a streaming producer's items become a list
(grouped by producer shard, in shard order, so the list is the same on every
executor), a batch producer's single item becomes the argument itself.

Checkpoints (:mod:`strata.engine.checkpoint`) happen here too, the same way everywhere:
the :class:`~strata.engine.inbox.Inbox` aligns barriers across a task's inbound links;
at an aligned barrier the task snapshots (a :class:`~strata.engine.operator.Stateful`
operator, or a batch task's gathered input), forwards the barrier on every outlet, then
writes and reports its state. A source injects barriers between two items of its
``finish()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, Protocol

from strata.engine.channels import Barrier, Cancelled, Delivery
from strata.engine.checkpoint.task import StateEncodeError, TaskCheckpoints
from strata.engine.errors import StepError, WireError, format_error
from strata.engine.inbox import Inbox
from strata.engine.metrics import StepMetrics
from strata.engine.operator import IDLE, Emit, Operator, Stateful, StepContext, Tagged
from strata.engine.pipeline import StepKind
from strata.engine.sharding import ShardKeyError, split
from strata.engine.sizing import nbytes
from strata.engine.tasks import Task


class Outlet(Protocol):
    """One link from a task to one consumer task's input."""

    def put(self, item: Any, size: int) -> float:
        """Send one item of ``size`` bytes; return the seconds waited for room."""
        ...

    def barrier(self, checkpoint: int) -> None:
        """Send ``Barrier(checkpoint)`` (a control message: it never waits)."""
        ...

    def close(self) -> None:
        """Send end-of-stream (and, on the process executor, wait for delivery)."""
        ...


#: Outlets of a task, by (port index, route index, consumer shard).
Outlets = Mapping[tuple[int, int, int], Outlet]
#: Receives the items of collected ports: (port name, item).
Collector = Callable[[str, Any], None]

__all__ = ["Collector", "Inbox", "Outlet", "Outlets", "engine_failure", "run_task"]


def run_task(
    task: Task,
    inbox: Inbox,
    outlets: Outlets,
    metrics: StepMetrics,
    collector: Collector | None = None,
    checkpoints: TaskCheckpoints | None = None,
) -> None:
    """Run ``task`` to completion, then close its outlets.

    Args:
        task: The task.
        inbox: Its inputs.
        outlets: Its outputs.
        metrics: Its counters.
        collector: Receives the items of its collected ports.
        checkpoints: Its checkpoint duties when the run checkpoints.

    Raises:
        StepError: The step's code (or the engine on its behalf) failed.
        Cancelled: The run is stopping; the caller unwinds quietly.
    """
    start = time.perf_counter()
    emitter = _Emitter(task, outlets, metrics, collector)
    if checkpoints is not None:
        checkpoints.restore_totals(metrics)  # resumed: count the whole run
    try:
        if checkpoints is not None and checkpoints.finished_before:
            inbox.drain()  # it ended before the checkpoint: its output is downstream
        elif task.step.kind is StepKind.BATCH:
            _run_batch(task, inbox, emitter, metrics, checkpoints)
        else:
            _run_streaming(task, inbox, emitter, metrics, checkpoints)
        for outlet in outlets.values():
            outlet.close()
    finally:
        metrics.wall_s = time.perf_counter() - start


def _run_batch(
    task: Task,
    inbox: Inbox,
    emitter: _Emitter,
    metrics: StepMetrics,
    checkpoints: TaskCheckpoints | None,
) -> None:
    step = task.step
    streams: list[list[list[Any]]] = [
        [[] for _ in range(link.shards)] for link in task.inputs
    ]
    if checkpoints is not None and checkpoints.has_state:
        streams = _load(task, checkpoints)
    while (message := inbox.next()) is not None:
        if isinstance(message, Delivery):
            metrics.items_in += 1
            metrics.bytes_in += message.nbytes
            streams[message.input][message.shard].append(message.item)
        elif isinstance(message, Barrier):
            # The function runs once, at the end; what it has gathered is its state.
            started = time.perf_counter()
            _checkpoint(
                task,
                emitter,
                metrics,
                checkpoints,
                message.checkpoint,
                streams,
                started,
            )
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
    task: Task,
    inbox: Inbox,
    emitter: _Emitter,
    metrics: StepMetrics,
    checkpoints: TaskCheckpoints | None,
) -> None:
    step = task.step
    op: Operator[Any, Any] = step.fn
    ctx = StepContext(step.id, task.shard, task.shards, task.seed, step.inputs, metrics)
    _call(task, "open", lambda: op.open(ctx), metrics)
    stateful: Stateful[Any] | None = op if isinstance(op, Stateful) else None
    if checkpoints is not None and checkpoints.has_state and stateful is not None:
        state = _load(task, checkpoints)
        _call(task, "restore", partial(stateful.restore, state), metrics)

    def checkpoint(n: int) -> None:
        told = checkpoints.implied_notice(n) if checkpoints is not None else None
        if told is not None:
            notify(told)  # before the next snapshot, even if its notice is late
        started = time.perf_counter()
        if stateful is None:
            _checkpoint(
                task, emitter, metrics, checkpoints, n, None, started, stateful=False
            )
            return
        state = _call(task, "snapshot", stateful.snapshot, metrics)
        _checkpoint(task, emitter, metrics, checkpoints, n, state, started)

    def notify(n: int) -> None:
        listener = getattr(op, "on_checkpoint_complete", None)
        if listener is not None:
            _call(task, "on_checkpoint_complete", partial(listener, n), metrics)

    def notice(n: int) -> None:
        if checkpoints is not None and checkpoints.accept(n):
            notify(n)

    if not task.inputs:
        between = None
        if checkpoints is not None:
            gate = checkpoints

            def between(emitted: bool) -> None:
                for done in gate.notices():
                    notice(done)
                n = gate.due(emitted=emitted)
                if n is not None:
                    checkpoint(n)

        _drain(task, "finish", op.finish, emitter, metrics, between)
        return
    tagged = len(task.inputs) > 1
    # The per-item path: everything it calls is looked up once, here.
    receive, process = inbox.next, op.process
    while (message := receive()) is not None:
        if isinstance(message, Delivery):
            metrics.items_in += 1
            metrics.bytes_in += message.nbytes
            item = Tagged(message.input, message.item) if tagged else message.item
            _drain(task, "process", process, emitter, metrics, item=item)
        elif isinstance(message, Barrier):
            checkpoint(message.checkpoint)
        else:
            notice(message.checkpoint)
    _drain(task, "finish", op.finish, emitter, metrics)


def _checkpoint(
    task: Task,
    emitter: _Emitter,
    metrics: StepMetrics,
    checkpoints: TaskCheckpoints | None,
    n: int,
    state: Any,
    started: float,
    *,
    stateful: bool = True,
) -> None:
    """Store the task's part of checkpoint ``n``; forward its barrier."""
    if checkpoints is None:  # only checkpointed runs inject barriers
        emitter.barrier(n)
        return
    frames = None
    if stateful:
        try:
            frames = checkpoints.encode(state)
        except StateEncodeError as exc:
            batch = task.step.kind is StepKind.BATCH
            raise _engine_error(
                task,
                "gathered input" if batch else "snapshot",
                _WIRE_TYPES,
                str(exc),
                "a batch step stores the items it gathered in each checkpoint; "
                "send it wire-encodable items."
                if batch
                else "checkpoints never pickle: return numpy arrays, tensors, "
                "Arrow data or JSON values from snapshot() (dicts need string keys).",
            ) from exc
    totals = metrics.totals()  # the work before the barrier
    # Forward first: downstream tasks align while this one writes.
    emitter.barrier(n)
    try:
        checkpoints.persist(n, frames, started, totals)
    except OSError as exc:
        raise StepError.wrap(
            exc,
            step=task.step.id,
            location=f"engine (writing checkpoint {n})",
            shard=task.shard,
            shards=task.shards,
        ) from exc


def _load(task: Task, checkpoints: TaskCheckpoints) -> Any:
    try:
        return checkpoints.load()
    except Exception as exc:
        raise StepError.wrap(
            exc,
            step=task.step.id,
            location=f"engine (reading checkpoint {checkpoints.restore_from})",
            shard=task.shard,
            shards=task.shards,
        ) from exc


def _call(task: Task, method: str, fn: Callable[[], Any], metrics: StepMetrics) -> Any:
    start = time.perf_counter()
    try:
        return fn()
    except Exception as exc:
        raise _wrap(task, exc, f"{task.step.location}.{method}") from exc
    finally:
        metrics.busy_s += time.perf_counter() - start


_NO_ITEM: Any = object()


def _drain(
    task: Task,
    method: str,
    produce: Callable[..., Iterable[Any] | None],
    emitter: _Emitter,
    metrics: StepMetrics,
    between: Callable[[bool], None] | None = None,
    *,
    item: Any = _NO_ITEM,
) -> None:
    """Iterate an operator's outputs, timing only the operator's own code.

    ``produce`` is called with ``item`` when one is given (``process``), else with
    nothing (``finish``). ``between`` runs after each output (``True``) or
    :data:`~strata.engine.operator.IDLE` (``False``): a source's checkpoint gate.

    This runs once per item, so it stays lean: the error's location is only
    worked out when there is an error.
    """
    clock = time.perf_counter
    emit = emitter.emit
    start = clock()
    try:
        outputs = produce() if item is _NO_ITEM else produce(item)
        if outputs is not None:
            for output in outputs:
                metrics.busy_s += clock() - start
                emitted = output is not IDLE
                if emitted:
                    emit(output)  # raises StepError or Cancelled: not wrapped
                if between is not None:
                    between(emitted)
                start = clock()
    except (StepError, Cancelled):
        raise
    except Exception as exc:
        raise _wrap(task, exc, f"{task.step.location}.{method}") from exc
    metrics.busy_s += clock() - start


class _Emitter:
    """Resolve an output's port, count it, split it by key and hand it to outlets.

    A port whose items go to one unsharded consumer and are not collected (the
    common case) has a *direct* outlet: its items skip the routing loop.
    """

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
        self._single = len(task.step.ports) == 1
        self._direct: list[Outlet | None] = []
        for port, routes in enumerate(task.routes):
            direct = None
            collected = task.step.ports[port] in task.collect
            if len(routes) == 1 and not collected:
                route = routes[0]
                if route.shards == 1 or route.key is None:
                    direct = outlets.get((port, 0, 0))
            self._direct.append(direct)

    def emit(self, output: Any) -> None:
        if isinstance(output, Emit):
            index = self._ports.get(output.port)
            if index is None:
                ports = list(self._task.step.ports)
                raise _engine_error(
                    self._task, "port", f"one of {ports}", repr(output.port)
                )
            self.emit_to(index, output.item)
        elif self._single:
            self.emit_to(0, output)
        else:
            raise _engine_error(
                self._task,
                "output",
                f"Emit(port, item) with port in {list(self._task.step.ports)}",
                type(output).__qualname__,
                "a step with several ports must say where each item goes.",
            )

    def emit_to(self, port: int, item: Any) -> None:
        size = nbytes(item)
        metrics = self._metrics
        metrics.items_out += 1
        metrics.bytes_out += size
        direct = self._direct[port]
        if direct is not None:
            try:
                metrics.blocked_s += direct.put(item, size)
            except WireError as exc:
                raise _wrap(self._task, exc, "engine") from exc
            return
        task = self._task
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

    def barrier(self, checkpoint: int) -> None:
        for outlet in self._outlets.values():
            outlet.barrier(checkpoint)

    def _put(self, address: tuple[int, int, int], item: Any, size: int) -> None:
        self._metrics.blocked_s += self._outlets[address].put(item, size)


_WIRE_TYPES = (
    "an Arrow batch or table, numpy array, torch tensor, bytes, JSON scalar, "
    "or a dict, list or tuple of those"
)


def engine_failure(task: Task, exc: BaseException) -> StepError:
    """The error of an engine bug while running ``task`` (``exc`` chained).

    Every executor ends a run with it instead of losing the exception.
    """
    error = StepError.wrap(
        exc, step=task.step.id, location="engine", shard=task.shard, shards=task.shards
    )
    error.__cause__ = exc
    return error


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
