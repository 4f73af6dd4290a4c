"""A task's side of checkpoints: when a source injects, what a task stores.

Each task of a checkpointed run gets a :class:`TaskCheckpoints`. For a source it
decides, between two items, whether to inject a barrier now (the coordinator
triggered one, or ``every_items`` items went by and the source asks for one). For
every task it encodes a snapshot with the wire codec, writes it to the store and
reports the entry to the coordinator, with the task's work counters as the barrier
passed; on resume it reads back the task's state and gives the task back its
counters, so they cover the whole run.

How a task talks to the coordinator differs per executor (a lock in one process, a
control socket between processes); :class:`CoordinatorLink` is that seam.

Examples:
    >>> import tempfile, time
    >>> from collections import deque
    >>> from strata.engine.checkpoint.store import CheckpointStore
    >>> class Link:  # what an executor provides
    ...     def __init__(self) -> None:
    ...         self.triggers, self.notices, self.reports = deque(), deque(), []
    ...     def request(self) -> None:
    ...         self.triggers.append(1)  # a coordinator would start checkpoint 1
    ...     def poll(self) -> None:
    ...         pass
    ...     def report(self, checkpoint: int, entry: TaskEntry) -> None:
    ...         self.reports.append((checkpoint, entry.status))
    >>> link = Link()
    >>> ckpt = TaskCheckpoints("numbers", 0, 1, CheckpointStore(tempfile.mkdtemp()),
    ...                        link, run="r0", every_items=2)
    >>> ckpt.due(emitted=True), ckpt.due(emitted=True)
    (None, 1)
    >>> ckpt.persist(1, ckpt.encode({"position": 2}), time.perf_counter(), Totals())
    >>> link.reports
    [(1, 'state')]
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Protocol

from strata.engine.checkpoint.store import STATELESS, CheckpointStore, TaskEntry
from strata.engine.errors import WireError
from strata.engine.metrics import StepMetrics, Totals
from strata.engine.wire import Buffer, pack

_POLL_EVERY_S = 0.002  # how often a busy source looks for triggers on its sockets


class CoordinatorLink(Protocol):
    """How one task reaches the checkpoint coordinator (one kind per executor).

    ``triggers`` receives the checkpoint ids a source must inject, ``notices`` the
    ids of completed checkpoints (for tasks without inputs; the others receive them
    in their inbox, in order with their items).
    """

    triggers: deque[int]
    notices: deque[int]

    def request(self) -> None:
        """Ask for a checkpoint (a source reached ``every_items``)."""
        ...

    def poll(self) -> None:
        """Let triggers and notices that arrived reach the deques (never blocks)."""
        ...

    def report(self, checkpoint: int, entry: TaskEntry) -> None:
        """Tell the coordinator this task's part of ``checkpoint`` is stored."""
        ...


@dataclass(frozen=True, slots=True)
class TaskCheckpointSpec:
    """What a task needs to take part in checkpoints (shipped to workers)."""

    directory: str
    run: str
    every_items: int | None = None
    restore_from: int | None = None
    entry: TaskEntry | None = None
    first_id: int = 1


class StateEncodeError(Exception):
    """A snapshot the wire codec cannot encode (the runtime names the step)."""


class TaskCheckpoints:
    """One task's checkpoint duties (see the module docstring).

    Args:
        step: The task's step id.
        shard: The task's shard.
        shards: The step's shard count.
        store: The run's checkpoint store.
        link: The line to the coordinator.
        run: This run's token (in state file names).
        every_items: A source asks for a checkpoint after this many items.
        restore_from: The checkpoint this run resumed from, if any.
        entry: This task's entry in that checkpoint, if any.
        first_id: The id of this run's first checkpoint.
    """

    def __init__(
        self,
        step: str,
        shard: int,
        shards: int,
        store: CheckpointStore,
        link: CoordinatorLink,
        *,
        run: str,
        every_items: int | None = None,
        restore_from: int | None = None,
        entry: TaskEntry | None = None,
        first_id: int = 1,
    ) -> None:
        self.step = step
        self.shard = shard
        self.shards = shards
        self.store = store
        self.link = link
        self.run = run
        self.every_items = every_items
        self.restore_from = restore_from
        self.entry = entry
        self.first_id = first_id
        self._notified = first_id - 1  # the newest checkpoint this task was told of
        self._count = 0
        self._asked = False
        self._last_poll = 0.0

    @classmethod
    def from_spec(
        cls,
        spec: TaskCheckpointSpec,
        step: str,
        shard: int,
        shards: int,
        link: CoordinatorLink,
    ) -> TaskCheckpoints:
        """Build a task's checkpoint duties from its spec."""
        return cls(
            step,
            shard,
            shards,
            CheckpointStore(spec.directory),
            link,
            run=spec.run,
            every_items=spec.every_items,
            restore_from=spec.restore_from,
            entry=spec.entry,
            first_id=spec.first_id,
        )

    @property
    def finished_before(self) -> bool:
        """Whether this task had finished by the resumed checkpoint (skip it)."""
        return self.entry is not None and self.entry.status == "finished"

    @property
    def has_state(self) -> bool:
        """Whether there is a saved state to restore."""
        return self.entry is not None and self.entry.status == "state"

    def restore_totals(self, metrics: StepMetrics) -> None:
        """Give a resumed task back the counters its entry saved (if any)."""
        if self.entry is not None and self.entry.totals is not None:
            metrics.restore(self.entry.totals)

    def load(self) -> Any:
        """Read this task's saved state (see :attr:`has_state`)."""
        assert self.entry is not None
        assert self.restore_from is not None
        return self.store.read_state(self.restore_from, self.entry)

    def due(self, *, emitted: bool) -> int | None:
        """For a source, between items: the checkpoint to inject now, if any."""
        if emitted:
            self._count += 1
        now = time.monotonic()
        if now - self._last_poll >= _POLL_EVERY_S:
            self._last_poll = now
            self.link.poll()
        every = self.every_items
        asks = every is not None and self._count >= every and not self._asked
        if asks and not self.link.triggers:
            self._asked = True
            self.link.request()
        if self.link.triggers:
            self._count = 0
            self._asked = False
            return self.link.triggers.popleft()
        return None

    def implied_notice(self, checkpoint: int) -> int | None:
        """Before the snapshot for ``checkpoint``: the notice it implies, if untold.

        One checkpoint is in flight at a time, so checkpoint ``n`` starting means
        ``n - 1`` (of this run) completed: the listener hears of it before its next
        snapshot even when the notice itself is still on its way (it is then
        dropped by :meth:`accept`).
        """
        previous = checkpoint - 1
        if previous >= self.first_id and previous > self._notified:
            self._notified = previous
            return previous
        return None

    def accept(self, checkpoint: int) -> bool:
        """Whether a notice is new (notices are told once each, in order)."""
        if checkpoint <= self._notified:
            return False
        self._notified = checkpoint
        return True

    def notices(self) -> list[int]:
        """Completed checkpoints to tell a task without inputs about."""
        done = list(self.link.notices)
        self.link.notices.clear()
        return done

    def encode(self, state: Any) -> list[Buffer]:
        """Encode a snapshot (taken now, written after the barrier moves on).

        Raises:
            StateEncodeError: The wire codec cannot encode ``state``.
        """
        try:
            return pack({"step": self.step, "shard": self.shard}, state)
        except WireError as exc:
            raise StateEncodeError(str(exc)) from exc

    def persist(
        self,
        checkpoint: int,
        frames: list[Buffer] | None,
        started: float,
        totals: Totals,
    ) -> None:
        """Write the encoded state (``None``: nothing to store) and report it.

        ``started`` is when the snapshot began (``time.perf_counter()``), so the
        entry's ``seconds`` covers taking, encoding and writing it; ``totals`` are
        the task's counters as the barrier passed.
        """
        if frames is None:
            entry = TaskEntry(self.step, self.shard, self.shards, STATELESS)
        else:
            entry = self.store.write_state(
                checkpoint, self.step, self.shard, self.shards, self.run, frames
            )
        entry = replace(entry, seconds=time.perf_counter() - started, totals=totals)
        self.link.report(checkpoint, entry)
