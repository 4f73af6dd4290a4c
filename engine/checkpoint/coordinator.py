"""The driver's side of checkpoints: when to start one, and when one is complete.

One :class:`CheckpointCoordinator` per run, owned by the executor's driver (the
coordinator process, or the local executor under a lock). It decides when checkpoint
``n`` starts (a source asked after ``every_items`` items, or ``interval_s`` passed)
and which sources must inject barrier ``n`` (every source still running), collects
each task's :class:`~strata.engine.checkpoint.store.TaskEntry`, and completes ``n`` when
every task has either persisted ``n`` or finished without meeting its barrier (its
consumers waited for its end-of-stream before snapshotting, so they hold all it
sent; its entry keeps the final counters it reported on ending). Completing
(:meth:`~CheckpointCoordinator.ready`, ``commit``, ``completed``; the middle step
does all the I/O and needs no lock) fsyncs every state file, writes the manifest
and prunes old checkpoints; the executor then tells the listeners.

The items the driver collects are part of each checkpoint: when a task reports
``n``, everything it collected before barrier ``n`` has reached the driver (on the
process executor the same socket carries both, in order), so the coordinator notes
how many items each collected port had then and stores those prefixes with ``n``.

At most one checkpoint is in flight: a request that arrives meanwhile is kept and
served when the current one completes, so slow storage spaces checkpoints out
instead of piling them up.

Examples:
    >>> import tempfile
    >>> from strata.engine.checkpoint.store import STATELESS, CheckpointStore, TaskEntry
    >>> from strata.engine.metrics import Totals
    >>> store = CheckpointStore(tempfile.mkdtemp())
    >>> from strata.engine.pipeline import Pipeline
    >>> from strata.engine.tasks import expand
    >>> from strata.engine.testing import ListSink, ListSource
    >>> p = Pipeline("demo")
    >>> _ = p.step("numbers", ListSource([1, 2]))
    >>> _ = p.step("sink", ListSink(), "numbers")
    >>> c = CheckpointCoordinator("demo", expand(p.validate()), store, {},
    ...                           every_items=10, interval_s=None, keep=2)
    >>> c.request(0).triggers
    [(0, 1)]
    >>> c.report(0, 1, TaskEntry("numbers", 0, 1, STATELESS))
    >>> c.complete().completed  # the sink has not reported yet
    []
    >>> c.finished(1, Totals(items_in=2))  # its final counters
    >>> c.complete().completed, store.complete_ids()
    ([1], [1])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strata.engine.checkpoint.store import (
    DRIVER,
    FINISHED,
    CheckpointStore,
    Manifest,
    TaskEntry,
)
from strata.engine.errors import CheckpointError, WireError, format_error
from strata.engine.metrics import Totals
from strata.engine.pipeline import StepKind
from strata.engine.report import CheckpointReport
from strata.engine.tasks import Task
from strata.engine.wire import pack

#: Items the driver collected, by (step id, port, shard).
Gathered = dict[tuple[str, str, int], list[Any]]


@dataclass(slots=True)
class Actions:
    """What the executor must deliver after a coordinator call.

    Attributes:
        triggers: ``(task index, checkpoint)``: tell that source to inject.
        completed: Checkpoints now complete and durable, ascending.
    """

    triggers: list[tuple[int, int]] = field(default_factory=list)
    completed: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Ready:
    """A checkpoint every task is done with, to commit (see ``ready()``)."""

    checkpoint: int
    entries: tuple[TaskEntry, ...]
    rows: list[list[Any]] | None  # the driver's items: [step, port, shard, items]
    started: float


@dataclass(slots=True)
class _InFlight:
    started: float
    entries: dict[int, TaskEntry] = field(default_factory=dict)
    counts: dict[tuple[str, str, int], int] = field(default_factory=dict)
    committing: bool = False


class CheckpointCoordinator:
    """Starts and completes checkpoints for one run (see the module docstring).

    Args:
        pipeline: The pipeline's name (recorded in manifests).
        tasks: Every task of the run, in task order.
        store: Where checkpoints go.
        gathered: The driver's collected items (read, never changed, here).
        every_items: Start a checkpoint when a source asks (after this many items).
        interval_s: Start a checkpoint this long after the previous one started.
        keep: Complete checkpoints to keep.
        first_id: The id of this run's first checkpoint.
        resumed_from: The checkpoint this run resumed from, if any.
        resumes: Times the run has resumed, this run included (0: a fresh run).
        finished: Tasks that will not run (they had finished by ``resumed_from``),
            with the final counters that checkpoint kept for them.
        clock: Monotonic seconds (tests pass a fake).
    """

    def __init__(
        self,
        pipeline: str,
        tasks: Sequence[Task],
        store: CheckpointStore,
        gathered: Gathered,
        *,
        every_items: int | None,
        interval_s: float | None,
        keep: int,
        first_id: int = 1,
        resumed_from: int | None = None,
        resumes: int = 0,
        finished: Mapping[int, Totals | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pipeline = pipeline
        self.tasks = tuple(tasks)
        self.store = store
        self.gathered = gathered
        self.every_items = every_items
        self.interval_s = interval_s
        self.keep = keep
        self.resumed_from = resumed_from
        self.resumes = resumes
        self._clock = clock
        self._next_id = first_id
        self._finished: dict[int, Totals | None] = dict(finished or {})
        self._sources = [
            i for i, t in enumerate(self.tasks) if t.step.kind is StepKind.SOURCE
        ]
        self._in_flight: dict[int, _InFlight] = {}
        self._wanted = False
        self._last_start = clock()
        self._last: int | None = None
        self._count = 0
        self._bytes = 0
        self._seconds = 0.0
        self._latency = 0.0

    @property
    def live_sources(self) -> list[int]:
        """Sources still running (only they can inject barriers)."""
        return [i for i in self._sources if i not in self._finished]

    def request(self, task: int) -> Actions:
        """Source ``task`` emitted ``every_items`` items since its last barrier."""
        if any(task not in f.entries for f in self._in_flight.values()):
            return Actions()  # it still has a barrier to inject
        self._wanted = True
        return self._maybe_start()

    def tick(self) -> Actions:
        """Start a checkpoint if ``interval_s`` has passed (call it regularly)."""
        interval = self.interval_s
        if interval is not None and self._clock() - self._last_start >= interval:
            self._wanted = True
        return self._maybe_start()

    def report(self, task: int, checkpoint: int, entry: TaskEntry) -> None:
        """Task ``task`` stored its part of ``checkpoint``."""
        flight = self._in_flight.get(checkpoint)
        if flight is not None:
            flight.entries[task] = entry
            flight.counts.update(self._counts(task))

    def finished(self, task: int, totals: Totals) -> None:
        """Task ``task`` ended (closed every outlet) with these counters."""
        self._finished[task] = totals
        if not self.live_sources:
            self._wanted = False

    def ready(self) -> Ready | None:
        """The oldest checkpoint in flight, once every task is done with it.

        Call :meth:`commit` next (its I/O needs no lock), then :meth:`completed`.
        """
        if not self._in_flight:
            return None
        n = min(self._in_flight)
        flight = self._in_flight[n]
        tasks = range(len(self.tasks))
        if flight.committing or not all(
            i in flight.entries or i in self._finished for i in tasks
        ):
            return None
        flight.committing = True
        entries = []
        counts = dict(flight.counts)
        for i, task in enumerate(self.tasks):
            entry = flight.entries.get(i)
            if entry is None:  # it ended: all it collected has arrived
                entry = TaskEntry(
                    task.step.id,
                    task.shard,
                    task.shards,
                    FINISHED,
                    totals=self._finished[i],
                )
                counts.update(self._counts(i))
            entries.append(entry)
        rows = [
            [step, port, shard, self.gathered.get((step, port, shard), [])[:count]]
            for (step, port, shard), count in sorted(counts.items())
        ]
        return Ready(n, tuple(entries), rows if counts else None, flight.started)

    def commit(self, ready: Ready) -> Manifest:
        """Write the driver's items and the manifest durably; prune old ones.

        Raises:
            CheckpointError: Collected items the wire codec cannot encode.
            OSError: The store failed.
        """
        driver = None
        if ready.rows is not None:
            try:
                frames = pack({"step": DRIVER}, ready.rows)
            except WireError as exc:
                raise _gathered_error(ready.rows, exc) from exc
            driver = self.store.write_state(
                ready.checkpoint, DRIVER, 0, 1, "driver", frames
            )
        duration = self._clock() - ready.started
        manifest = Manifest(
            ready.checkpoint,
            self.pipeline,
            ready.entries,
            driver=driver,
            duration_s=duration,
            resumes=self.resumes,
        )
        self.store.commit(manifest)
        self.store.prune(self.keep)
        return manifest

    def completed(self, manifest: Manifest) -> Actions:
        """Checkpoint ``manifest.checkpoint`` is durable: notices, and what's next."""
        del self._in_flight[manifest.checkpoint]
        self._last = manifest.checkpoint
        self._count += 1
        self._bytes += manifest.nbytes
        self._seconds += sum(e.seconds for e in manifest.tasks)
        self._latency += manifest.duration_s
        return Actions(self._maybe_start().triggers, [manifest.checkpoint])

    def complete(self) -> Actions:
        """Complete every ready checkpoint (for a driver on a single thread)."""
        actions = Actions()
        while (ready := self.ready()) is not None:
            done = self.completed(self.commit(ready))
            actions.triggers += done.triggers
            actions.completed += done.completed
        return actions

    def summary(self) -> CheckpointReport:
        """The run report's ``checkpoint`` section."""
        return CheckpointReport(
            directory=str(self.store.directory),
            completed=self._count,
            last=self._last,
            resumed_from=self.resumed_from,
            resumes=self.resumes,
            bytes=self._bytes,
            seconds=round(self._seconds, 6),
            mean_latency_s=round(self._latency / self._count, 6) if self._count else 0,
        )

    def _counts(self, task: int) -> dict[tuple[str, str, int], int]:
        t = self.tasks[task]
        keys = [(t.step.id, port, t.shard) for port in t.collect]
        return {key: len(self.gathered.get(key, ())) for key in keys}

    def _maybe_start(self) -> Actions:
        sources = self.live_sources
        if not self._wanted or self._in_flight or not sources:
            return Actions()
        n = self._next_id
        self._next_id += 1
        self._wanted = False
        self._last_start = self._clock()
        self._in_flight[n] = _InFlight(self._last_start)
        return Actions(triggers=[(i, n) for i in sources])


def _gathered_error(rows: list[list[Any]], exc: WireError) -> CheckpointError:
    return CheckpointError(
        [
            format_error(
                "collected items",
                str(rows[0][0]),
                "items the wire codec encodes, to store with checkpoints",
                str(exc),
                "collect Arrow data, arrays, tensors or JSON values, or collect "
                "nothing from a checkpointed run.",
            )
        ]
    )
