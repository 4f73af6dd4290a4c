"""Per-task counters: items and bytes in and out, busy, blocked and wall time.

Each task (a step, or one shard of a keyed step) owns one :class:`StepMetrics` that
only its own thread or process writes; the executor folds the shards of a step into
one report row with :func:`merge`. Operators add their own named counters through
``StepContext.metrics``.

A checkpoint keeps each task's :class:`Totals` (its work counters as the barrier
passed), and a resumed task starts from them, so after a resume a task's counters
cover the whole run: the work up to the checkpoint, then this run's (items replayed
after the checkpoint count once, as this run processes them). Wall time and channel
peaks are not carried over: they describe this run's processes.

Examples:
    >>> m = StepMetrics()
    >>> m.counter("edges").inc(3)
    >>> m.items_out += 2
    >>> merged = merge([m, m])
    >>> merged.items_out, merged.counters["edges"]
    (4, 6.0)
    >>> resumed = StepMetrics()
    >>> resumed.restore(m.totals())  # what a checkpoint saved
    >>> resumed.items_out += 1
    >>> resumed.items_out, resumed.counters["edges"]
    (3, 3.0)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

#: The work counters: summed over shards, and carried across a resume.
_FIELDS = ("items_in", "items_out", "bytes_in", "bytes_out", "busy_s", "blocked_s")


@dataclass(frozen=True, slots=True)
class Totals:
    """A task's work counters at one moment (see :class:`StepMetrics`).

    What a checkpoint stores for each task, and what a resumed task starts from.
    """

    items_in: int = 0
    items_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    busy_s: float = 0.0
    blocked_s: float = 0.0
    counters: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the totals as JSON-able data."""
        return {**asdict(self), "counters": dict(self.counters)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Totals:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)


@dataclass(slots=True)
class Counter:
    """A named, monotonically increasing counter of one task."""

    name: str
    _values: dict[str, float]

    def inc(self, amount: float = 1) -> None:
        """Add ``amount`` (default 1) to the counter."""
        self._values[self.name] = self._values.get(self.name, 0.0) + amount


@dataclass(slots=True)
class StepMetrics:
    """Counters of one task. ``blocked_s`` is time spent waiting for channel room.

    Attributes:
        items_in: Items received from all inputs.
        items_out: Items emitted (once per item, however many consumers read it).
        bytes_in: Sum of the received items' sizes.
        bytes_out: Sum of the emitted items' sizes.
        busy_s: Seconds spent inside the step's own code.
        blocked_s: Seconds a full downstream channel kept the step waiting.
        wall_s: Seconds from the task's start to its end.
        counters: The operator's own counters, by name.
        peak_items: Most items its inbound channel held at once.
        peak_bytes: Most bytes its inbound channel held at once.
    """

    items_in: int = 0
    items_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    busy_s: float = 0.0
    blocked_s: float = 0.0
    wall_s: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)
    peak_items: int = 0
    peak_bytes: int = 0

    def counter(self, name: str) -> Counter:
        """Return the counter ``name`` of this task (created at zero)."""
        return Counter(name, self.counters)

    def totals(self) -> Totals:
        """The work counters now (for a checkpoint)."""
        values = {name: getattr(self, name) for name in _FIELDS}
        return Totals(**values, counters=dict(self.counters))

    def restore(self, totals: Totals) -> None:
        """Add the counters a checkpoint saved (a resumed task, before it runs)."""
        for name in _FIELDS:
            setattr(self, name, getattr(self, name) + getattr(totals, name))
        for name, value in totals.counters.items():
            self.counters[name] = self.counters.get(name, 0.0) + value

    def to_dict(self) -> dict[str, Any]:
        """Return the metrics as JSON-able data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepMetrics:
        """Rebuild metrics sent as JSON by a worker process."""
        return cls(**data)


def merge(parts: Iterable[StepMetrics]) -> StepMetrics:
    """Fold the shards of one step: sums, except wall time and peaks take the max."""
    total = StepMetrics()
    for part in parts:
        for name in _FIELDS:
            setattr(total, name, getattr(total, name) + getattr(part, name))
        total.wall_s = max(total.wall_s, part.wall_s)
        total.peak_items = max(total.peak_items, part.peak_items)
        total.peak_bytes = max(total.peak_bytes, part.peak_bytes)
        for name, value in part.counters.items():
            total.counters[name] = total.counters.get(name, 0.0) + value
    return total
