"""The local executor: one thread per task, bounded in-process channels.

Every task (a step, or one shard of a keyed step) runs on its own thread; each task
with inputs owns one :class:`~strata.engine.channels.Channel`, bounded in items and
bytes, that all its producers put into, so a slow consumer blocks its producers
(backpressure) and memory stays bounded. torch, numpy, numba and pyarrow release the
GIL in their kernels, so threads overlap real work.

With checkpoints on, a :class:`_Hub` serialises the tasks' calls into the run's
:class:`~strata.engine.checkpoint.CheckpointCoordinator` and delivers what it decides:
triggers to the sources' deques, completion notices into the listeners' channels.

When a step fails, every channel is cancelled: tasks waiting on a channel raise
:class:`~strata.engine.channels.Cancelled` and unwind, and the driver joins every
thread. A thread busy inside user code stops at its next channel operation; the driver
waits ``RunConfig.stop_timeout_s`` for it (threads cannot be killed), and such a thread
is a daemon, so it cannot keep the interpreter alive.

Examples:
    >>> from strata.engine.executors import execute
    >>> from strata.engine.ops import Map
    >>> from strata.engine.pipeline import Pipeline
    >>> from strata.engine.testing import ListSink, ListSource
    >>> p = Pipeline("demo")
    >>> _ = p.step("numbers", ListSource([1, 2, 3]))
    >>> _ = p.step("text", Map(str), "numbers")
    >>> _ = p.step("sink", ListSink(), "text")
    >>> execute(p, LocalExecutor(), collect=("sink",)).collected
    {'sink': ['1', '2', '3']}
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from strata.engine.channels import (
    Barrier,
    Cancelled,
    Channel,
    CheckpointComplete,
    Delivery,
    EndOfStream,
    LinkMessage,
)
from strata.engine.checkpoint.coordinator import Actions, CheckpointCoordinator
from strata.engine.checkpoint.session import CheckpointSession, begin
from strata.engine.checkpoint.store import TaskEntry
from strata.engine.checkpoint.task import TaskCheckpoints
from strata.engine.config import RunConfig
from strata.engine.errors import StepError
from strata.engine.executors.base import Gathered, Outcome
from strata.engine.metrics import StepMetrics, Totals, merge
from strata.engine.pipeline import StepKind
from strata.engine.plan import Plan
from strata.engine.progress import Progress
from strata.engine.report import CheckpointReport
from strata.engine.runtime import Inbox, Outlet, engine_failure, run_task
from strata.engine.tasks import Task, expand, task_name

_TICK_S = 0.2


class LocalOutlet:
    """A link into a consumer task's channel, stamped with input and producer shard."""

    def __init__(self, channel: Channel, input: int, shard: int) -> None:
        self._channel = channel
        self._input = input
        self._shard = shard

    def put(self, item: Any, size: int) -> float:
        """Put one item, waiting for room; return the seconds waited."""
        return self._channel.put(Delivery(self._input, self._shard, item, size), size)

    def barrier(self, checkpoint: int) -> None:
        """Send a checkpoint barrier."""
        self._channel.put_control(Barrier(self._input, self._shard, checkpoint))

    def close(self) -> None:
        """Send end-of-stream."""
        self._channel.put_control(EndOfStream(self._input, self._shard))


class LocalExecutor:
    """Runs every task on a thread of this process (the default executor)."""

    name = "local"

    def run(self, plan: Plan, config: RunConfig, collect: tuple[str, ...]) -> Outcome:
        """Run the plan's tasks to completion or to the first failure."""
        start = time.perf_counter()
        tasks = expand(plan, collect=collect, seed=config.seed)
        run = _Run(tasks, config)
        if config.checkpoint is not None:
            session = begin(
                plan.name,
                tasks,
                config.checkpoint,
                resume=config.resume,
                gathered=run.gathered,
            )
            run.hub = _Hub(session, run.channels, tasks, run.wake)
        tick = _TICK_S
        if config.checkpoint is not None and config.checkpoint.interval_s is not None:
            tick = min(tick, config.checkpoint.interval_s / 4)
        progress = Progress(
            enabled=config.progress,
            steps=[s.id for s in plan.steps if s.kind is not StepKind.BATCH],
            sources=[s.id for s in plan.steps if s.kind is StepKind.SOURCE],
        )
        try:
            run.start()
            while not run.wait(tick):
                run.tick()
                progress.update(run.step_metrics())
            run.tick(final=True)  # the checkpoint the last tasks finished
        finally:
            run.stop(config.stop_timeout_s)
            progress.close()
        summary = run.hub.summary() if run.hub is not None else None
        return Outcome(
            run.metrics,
            run.gathered,
            run.error,
            time.perf_counter() - start,
            summary,
        )


class _Run:
    """The threads, channels and shared state of one local run."""

    def __init__(self, tasks: tuple[Task, ...], config: RunConfig) -> None:
        self.tasks = tasks
        self.channels = {
            t.name: Channel(config.channel, t.inbound_links) for t in tasks if t.inputs
        }
        self.metrics = {(t.step.id, t.shard): StepMetrics() for t in tasks}
        self.gathered: Gathered = {}
        self.error: StepError | None = None
        self.hub: _Hub | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._running = len(tasks)
        self._threads = [
            threading.Thread(
                target=self._work, args=(i, t), name=f"strata:{t.name}", daemon=True
            )
            for i, t in enumerate(tasks)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout``; return whether the run is over (done or failed)."""
        self._wake.wait(timeout)
        self._wake.clear()
        with self._lock:
            return self._running == 0 or self.error is not None

    def stop(self, timeout: float) -> None:
        """Cancel every channel if the run failed, then join the threads."""
        if self.error is not None or any(t.is_alive() for t in self._threads):
            for channel in self.channels.values():
                channel.cancel()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for task in self.tasks:
            if task.name in self.channels:
                metrics = self.metrics[(task.step.id, task.shard)]
                metrics.peak_items = self.channels[task.name].peak_items
                metrics.peak_bytes = self.channels[task.name].peak_bytes

    def wake(self) -> None:
        self._wake.set()

    def tick(self, *, final: bool = False) -> None:
        """Start a due checkpoint; complete the ready ones.

        ``final``: the run is over (done or failed); complete what is ready (a
        checkpoint every task finished with is valid even if the run failed after
        it) but start nothing.
        """
        if self.hub is not None and (final or self.error is None):
            try:
                self.hub.tick(start=not final)
            except Exception as exc:  # storage failed under the coordinator
                self._fail(
                    StepError.wrap(
                        exc, step=self.tasks[0].step.id, location="engine (checkpoint)"
                    )
                )

    def step_metrics(self) -> dict[str, StepMetrics]:
        steps: dict[str, list[StepMetrics]] = {}
        for (step_id, _), metrics in self.metrics.items():
            steps.setdefault(step_id, []).append(metrics)
        return {step_id: merge(parts) for step_id, parts in steps.items()}

    def _work(self, index: int, task: Task) -> None:
        try:
            task = _own_copy(task)
            channel = self.channels.get(task.name)
            if channel is None:
                inbox = Inbox(_nothing, task.inbound_links)
            else:
                inbox = Inbox(
                    channel.get,
                    task.inbound_links,
                    hold=channel.hold,
                    take=partial(_take, channel),
                )
            checkpoints = self.hub.task(index) if self.hub is not None else None
            run_task(
                task,
                inbox,
                self._outlets(task),
                self.metrics[(task.step.id, task.shard)],
                self._collector(task),
                checkpoints,
            )
            if self.hub is not None:
                totals = self.metrics[(task.step.id, task.shard)].totals()
                self.hub.finished(index, totals)
        except Cancelled:
            pass
        except StepError as exc:
            self._fail(exc)
        except BaseException as exc:  # an engine bug must still end the run
            self._fail(engine_failure(task, exc))
        finally:
            with self._lock:
                self._running -= 1
            self._wake.set()

    def _fail(self, error: StepError) -> None:
        with self._lock:
            if self.error is None:
                self.error = error
        for channel in self.channels.values():
            channel.cancel()
        self._wake.set()

    def _outlets(self, task: Task) -> dict[tuple[int, int, int], Outlet]:
        by_name = {t.name: t for t in self.tasks}
        outlets: dict[tuple[int, int, int], Outlet] = {}
        for port, routes in enumerate(task.routes):
            for r, route in enumerate(routes):
                for shard in range(route.shards):
                    consumer = by_name[task_name(route.consumer, shard, route.shards)]
                    channel = self.channels[consumer.name]
                    outlets[(port, r, shard)] = LocalOutlet(
                        channel, route.input, task.shard
                    )
        return outlets

    def _collector(self, task: Task) -> Callable[[str, Any], None] | None:
        if not task.collect:
            return None

        def gather(port: str, item: Any) -> None:
            self.gathered.setdefault((task.step.id, port, task.shard), []).append(item)

        return gather


class _Hub:
    """The coordinator behind a lock, and delivery of what it decides.

    Tasks record their parts and requests under the lock; the driver thread
    completes checkpoints in :meth:`tick`, doing the fsyncs outside the lock so no
    task waits for the disk.
    """

    def __init__(
        self,
        session: CheckpointSession,
        channels: dict[str, Channel],
        tasks: tuple[Task, ...],
        wake: Callable[[], None],
    ) -> None:
        self.session = session
        self.coordinator: CheckpointCoordinator = session.coordinator
        self.tasks = tasks
        self.channels = channels
        self.wake = wake
        self.links = [_LocalLink(self, i) for i in range(len(tasks))]
        self.listeners = set(session.listeners())
        self.done: set[int] = set()
        self.lock = threading.Lock()

    def task(self, index: int) -> TaskCheckpoints:
        task = self.tasks[index]
        return TaskCheckpoints.from_spec(
            self.session.spec(index, task),
            task.step.id,
            task.shard,
            task.shards,
            self.links[index],
        )

    def call(self, decide: Callable[[CheckpointCoordinator], Actions | None]) -> None:
        """Run a coordinator call for a task; wake the driver to complete."""
        with self.lock:
            actions = decide(self.coordinator)
            if actions is not None:
                self._deliver(actions)
        self.wake()

    def tick(self, *, start: bool = True) -> None:
        """Start a checkpoint that is due; complete the ready ones (driver)."""
        if start:
            with self.lock:
                self._deliver(self.coordinator.tick())
        while True:
            with self.lock:
                ready = self.coordinator.ready()
            if ready is None:
                return
            manifest = self.coordinator.commit(ready)  # the I/O, outside the lock
            with self.lock:
                self._deliver(self.coordinator.completed(manifest))

    def finished(self, index: int, totals: Totals) -> None:
        with self.lock:
            self.done.add(index)
        self.call(lambda c: c.finished(index, totals))

    def summary(self) -> CheckpointReport:
        with self.lock:
            return self.coordinator.summary()

    def _deliver(self, actions: Actions) -> None:
        # Notices first: a task hears of n before it is asked for n + 1.
        for checkpoint in actions.completed:
            for index in sorted(self.listeners - self.done):
                channel = self.channels.get(self.tasks[index].name)
                if channel is None:
                    self.links[index].notices.append(checkpoint)
                    continue
                with contextlib.suppress(Cancelled):  # the run is stopping
                    channel.put_control(CheckpointComplete(checkpoint))
        for index, checkpoint in actions.triggers:
            self.links[index].triggers.append(checkpoint)


class _LocalLink:
    """A task's line to the hub (see ``CoordinatorLink``)."""

    def __init__(self, hub: _Hub, index: int) -> None:
        self.hub = hub
        self.index = index
        self.triggers: deque[int] = deque()
        self.notices: deque[int] = deque()

    def request(self) -> None:
        self.hub.call(lambda c: c.request(self.index))

    def poll(self) -> None:
        pass  # deliveries land in the deques directly

    def report(self, checkpoint: int, entry: TaskEntry) -> None:
        self.hub.call(lambda c: c.report(self.index, checkpoint, entry))


def _take(channel: Channel, message: LinkMessage, held: bool) -> None:
    if held:
        channel.release(message)


def _own_copy(task: Task) -> Task:
    """Give each task its own operator object, as the process executor does."""
    if task.step.kind is StepKind.BATCH:
        return task
    return replace(task, step=replace(task.step, fn=copy.deepcopy(task.step.fn)))


def _nothing() -> Any:
    raise AssertionError("a task without inputs never receives")
