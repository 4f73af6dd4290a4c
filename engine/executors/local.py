"""The local executor: one thread per task, bounded in-process channels.

Every task (a step, or one shard of a keyed step) runs on its own thread; each task
with inputs owns one :class:`~engine.channels.Channel`, bounded in items and bytes,
that all its producers put into, so a slow consumer blocks its producers
(backpressure) and memory stays bounded. torch, numpy, numba and pyarrow release the
GIL in their kernels, so threads overlap real work.

When a step fails, every channel is cancelled: tasks waiting on a channel raise
:class:`~engine.channels.Cancelled` and unwind, and the driver joins every thread. A
thread busy inside user code stops at its next channel operation; the driver waits
``RunConfig.stop_timeout_s`` for it (threads cannot be killed), and such a thread is
a daemon, so it cannot keep the interpreter alive.

Examples:
    >>> from engine.executors import execute
    >>> from engine.ops import Map
    >>> from engine.pipeline import Pipeline
    >>> from engine.testing import ListSink, ListSource
    >>> p = Pipeline("demo")
    >>> _ = p.step("numbers", ListSource([1, 2, 3]))
    >>> _ = p.step("text", Map(str), "numbers")
    >>> _ = p.step("sink", ListSink(), "text")
    >>> execute(p, LocalExecutor(), collect=("sink",)).collected
    {'sink': ['1', '2', '3']}
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from engine.channels import Cancelled, Channel, Delivery, EndOfStream
from engine.config import RunConfig
from engine.errors import StepError
from engine.executors.base import Gathered, Outcome
from engine.metrics import StepMetrics, merge
from engine.pipeline import StepKind
from engine.plan import Plan
from engine.progress import Progress
from engine.runtime import Inbox, Outlet, run_task
from engine.tasks import Task, expand, task_name

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
        progress = Progress(
            enabled=config.progress,
            steps=[s.id for s in plan.steps if s.kind is not StepKind.BATCH],
            sources=[s.id for s in plan.steps if s.kind is StepKind.SOURCE],
        )
        try:
            run.start()
            while not run.wait(_TICK_S):
                progress.update(run.step_metrics())
        finally:
            run.stop(config.stop_timeout_s)
            progress.close()
        return Outcome(
            run.metrics, run.gathered, run.error, time.perf_counter() - start
        )


class _Run:
    """The threads, channels and shared state of one local run."""

    def __init__(self, tasks: tuple[Task, ...], config: RunConfig) -> None:
        self.tasks = tasks
        self.channels = {t.name: Channel(config.channel) for t in tasks if t.inputs}
        self.metrics = {(t.step.id, t.shard): StepMetrics() for t in tasks}
        self.gathered: Gathered = {}
        self.error: StepError | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._running = len(tasks)
        self._threads = [
            threading.Thread(
                target=self._work, args=(t,), name=f"strata:{t.name}", daemon=True
            )
            for t in tasks
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

    def step_metrics(self) -> dict[str, StepMetrics]:
        steps: dict[str, list[StepMetrics]] = {}
        for (step_id, _), metrics in self.metrics.items():
            steps.setdefault(step_id, []).append(metrics)
        return {step_id: merge(parts) for step_id, parts in steps.items()}

    def _work(self, task: Task) -> None:
        try:
            task = _own_copy(task)
            channel = self.channels.get(task.name)
            receive: Callable[[], Any] = channel.get if channel else _nothing
            inbox = Inbox(receive, task.inbound_links)
            run_task(
                task,
                inbox,
                self._outlets(task),
                self.metrics[(task.step.id, task.shard)],
                self._collector(task),
            )
        except Cancelled:
            pass
        except StepError as exc:
            self._fail(exc)
        except BaseException as exc:  # an engine bug must still end the run
            error = StepError.wrap(
                exc,
                step=task.step.id,
                location="engine",
                shard=task.shard,
                shards=task.shards,
            )
            error.__cause__ = exc
            self._fail(error)
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


def _own_copy(task: Task) -> Task:
    """Give each task its own operator object, as the process executor does."""
    if task.step.kind is StepKind.BATCH:
        return task
    return replace(task, step=replace(task.step, fn=copy.deepcopy(task.step.fn)))


def _nothing() -> Any:
    raise AssertionError("a task without inputs never receives")
