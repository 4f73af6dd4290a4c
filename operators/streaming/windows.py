"""Window policies: when a streaming layer flushes what it has buffered (§3.5).

A layer buffers incoming edge operations and input rows and applies them in one
flush, so repeated changes of a vertex are coalesced and the per-flush Python cost
is paid once per window, not per update. Policies (frozen configs, picklable):

* :class:`Immediate`: flush every input as it comes (no window).
* :class:`Count`: flush after exactly ``n`` updates; at layer 1 an update batch is
  cut at the boundary, so flush points depend on log offsets only (deterministic
  under replay).
* :class:`Tumbling`: global windows of ``size`` log offsets or event-time ms,
  aligned to multiples of ``size``.
* :class:`Session`: per vertex (an edge belongs to its destination, an input row to
  its node): a vertex flushes once no update touched it for ``gap_ms`` of event
  time.
* :class:`Adaptive`: a session whose gap adapts per vertex: ``max(min_gap_ms,
  horizon_ms / rate)``, with ``rate`` the vertex's recent update count from a
  decayed count-min sketch, so cold vertices wait long, hot ones flush on short
  pauses.

Every policy takes ``max_latency_ms`` (no buffered update waits longer, by the wall
clock) and ``max_pending`` (flush everything beyond this many buffered rows).
Gaps and windows use event time (stored in the log); only ``max_latency_ms`` reads
the wall clock. At quiescence every policy gives the same state (the flush algebra
does not depend on grouping), which the tests check.

Examples:
    >>> import numpy as np
    >>> from strata.storage import edge_updates
    >>> from strata.operators.streaming.delta import LayerDelta
    >>> def adds(src, dst):
    ...     return LayerDelta.from_updates(edge_updates(src, dst, event_time=0))
    >>> buf = WindowBuffer(Count(3))
    >>> buf.offer(adds([0, 1], [1, 2]), event_ms=0) == [], buf.pending_rows
    (True, 2)
    >>> flushed = buf.offer(adds([2], [0]), event_ms=1)
    >>> [f.num_edge_ops for f in flushed], buf.pending_rows
    ([3], 0)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from strata.operators.streaming.delta import Int64Array, LayerDelta
from strata.operators.streaming.sketch import DecayedCountMin

_NEVER = np.iinfo(np.int64).max


def wall_ms() -> int:
    """Wall-clock milliseconds (the default clock of :class:`WindowBuffer`)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Immediate:
    """Flush every input at once."""

    max_latency_ms: int | None = None
    max_pending: int | None = None


@dataclass(frozen=True, slots=True)
class Count:
    """Flush after exactly ``n`` updates (update rows at layer 1, records after)."""

    n: int
    max_latency_ms: int | None = None
    max_pending: int | None = None


@dataclass(frozen=True, slots=True)
class Tumbling:
    """Global windows of ``size`` log offsets (``on="offset"``) or event-time ms."""

    size: int
    on: str = "offset"
    max_latency_ms: int | None = None
    max_pending: int | None = None

    def __post_init__(self) -> None:
        if self.on not in ("offset", "event_time"):
            raise ValueError(
                f"Tumbling.on: expected offset or event_time, got {self.on!r}"
            )


@dataclass(frozen=True, slots=True)
class Session:
    """Per-vertex windows closed by ``gap_ms`` of event time without an update."""

    gap_ms: int
    max_latency_ms: int | None = None
    max_pending: int | None = None


@dataclass(frozen=True, slots=True)
class Adaptive:
    """Per-vertex sessions with gap ``max(min_gap_ms, horizon_ms / rate)``."""

    min_gap_ms: int
    horizon_ms: int
    max_latency_ms: int | None = None
    max_pending: int | None = None
    sketch_width: int = 1 << 12
    sketch_depth: int = 4


Window = Immediate | Count | Tumbling | Session | Adaptive


def parse_window(text: str) -> Window:
    """A window from text, as job parameters give it.

    Forms: ``immediate``, ``count:N``, ``tumbling:N`` (offsets),
    ``tumbling-time:MS``, ``session:GAP_MS``, ``adaptive:MIN_GAP_MS:HORIZON_MS``;
    append ``@MAX_LATENCY_MS`` for a latency cap.

    Examples:
        >>> parse_window("count:1000")
        Count(n=1000, max_latency_ms=None, max_pending=None)
        >>> parse_window("session:25@200")
        Session(gap_ms=25, max_latency_ms=200, max_pending=None)

    Raises:
        ValueError: for an unknown kind or a malformed number.
    """
    body, _, cap = text.strip().partition("@")
    kind, *args = body.split(":")
    numbers = [int(a) for a in args]
    latency = int(cap) if cap else None
    kind = kind.lower()
    if kind == "immediate" and not numbers:
        return Immediate(max_latency_ms=latency)
    if kind == "count" and len(numbers) == 1:
        return Count(numbers[0], max_latency_ms=latency)
    if kind in ("tumbling", "tumbling-time") and len(numbers) == 1:
        on = "offset" if kind == "tumbling" else "event_time"
        return Tumbling(numbers[0], on=on, max_latency_ms=latency)
    if kind == "session" and len(numbers) == 1:
        return Session(numbers[0], max_latency_ms=latency)
    if kind == "adaptive" and len(numbers) == 2:
        return Adaptive(numbers[0], numbers[1], max_latency_ms=latency)
    raise ValueError(
        f"window: expected immediate, count:N, tumbling:N, tumbling-time:MS, "
        f"session:GAP, adaptive:MIN:HORIZON (optionally @MAX_LATENCY_MS), got {text!r}"
    )


class WindowBuffer:
    """Buffers a layer's inputs and releases them as flushes (module docstring).

    Args:
        window: The policy.
        clock: Wall-clock milliseconds (tests pass a fake one).
    """

    def __init__(self, window: Window, clock: Callable[[], int] = wall_ms) -> None:
        self.window = window
        self.clock = clock
        self._pending = LayerDelta()
        self._rows = 0  # updates (layer 1) or records counted toward Count
        self._opened_ms = _NEVER  # wall time the oldest buffered input arrived
        self._window_id = -1  # Tumbling: the open window
        self._event = np.zeros(0, dtype=np.int64)  # per vertex: event deadline
        self._wall = np.zeros(0, dtype=np.int64)  # per vertex: wall deadline
        self._sketch = (
            DecayedCountMin(window.sketch_width, window.sketch_depth, window.horizon_ms)
            if isinstance(window, Adaptive)
            else None
        )

    @property
    def per_vertex(self) -> bool:
        """Whether vertices flush separately (Session, Adaptive)."""
        return isinstance(self.window, Session | Adaptive)

    @property
    def empty(self) -> bool:
        """Nothing buffered (no rows, and no update awaiting accounting)."""
        return self.pending_rows == 0 and self._rows == 0

    @property
    def pending_rows(self) -> int:
        """Buffered edge operations plus input rows."""
        return self._pending.num_edge_ops + self._pending.num_rows

    # ------------------------------------------------------------------ layer 1
    def cut_points(
        self, num_rows: int, first_offset: int, event_ms: Int64Array
    ) -> list[int]:
        """Row positions in an incoming update batch after which a window closes.

        Only :class:`Count` and :class:`Tumbling` cut batches; the positions are
        increasing and lie in ``(0, num_rows]``.
        """
        w = self.window
        if isinstance(w, Count):
            first = w.n - self._rows
            return list(range(first, num_rows + 1, w.n)) if first > 0 else []
        if isinstance(w, Tumbling) and w.on == "offset" and first_offset >= 0:
            start = (first_offset // w.size + 1) * w.size - first_offset
            return list(range(start, num_rows + 1, w.size))
        if isinstance(w, Tumbling) and w.on == "event_time" and num_rows:
            ids = np.maximum.accumulate(
                event_ms // w.size
            )  # late rows join the open one
            return (np.flatnonzero(np.diff(ids)) + 1).tolist()
        return []

    # ------------------------------------------------------------------ offering
    def offer(
        self, delta: LayerDelta, event_ms: int, *, close: bool = False
    ) -> list[LayerDelta]:
        """Buffer ``delta``; return what must flush now, in order.

        Args:
            delta: New inputs.
            event_ms: Their (latest) event time.
            close: The caller cut its batch at a window boundary right after
                ``delta`` (see :meth:`cut_points`): flush everything.
        """
        w = self.window
        out: list[LayerDelta] = []
        if isinstance(w, Tumbling) and w.on == "event_time":
            wid = event_ms // w.size
            if self._window_id >= 0 and wid > self._window_id and self.pending_rows:
                out.append(self.drain())
            self._window_id = max(self._window_id, wid)
        now = self.clock()
        if self._opened_ms == _NEVER and not delta.is_empty:
            self._opened_ms = now
        if self.per_vertex:
            self._touch(delta, event_ms, now)
        self._pending = LayerDelta.concat([self._pending, delta])
        self._rows += delta.updates if delta.updates else 1
        counted = isinstance(w, Count) and self._rows >= w.n
        if isinstance(w, Immediate) or close or counted:
            out.append(self.drain())
        else:
            out.extend(self.poll(event_ms))
        return [d for d in out if not d.is_empty or d.updates]

    def poll(self, event_ms: int | None = None) -> list[LayerDelta]:
        """Release what is due by the clocks (called on input and on idle ticks)."""
        w = self.window
        if self.pending_rows == 0:
            return []
        now = self.clock()
        if w.max_pending is not None and self.pending_rows > w.max_pending:
            return [self.drain()]
        if not self.per_vertex:
            late = (
                w.max_latency_ms is not None
                and now - self._opened_ms >= w.max_latency_ms
            )
            return [self.drain()] if late else []
        due = self._wall <= now
        if event_ms is not None:
            due |= self._event <= event_ms
        if not due.any():
            return []
        return [self._release(due)]

    def drain(self) -> LayerDelta:
        """Release everything buffered (end of stream, or a window closed)."""
        out = self._pending
        self._pending = LayerDelta(num_nodes=out.num_nodes)
        self._rows = 0
        self._opened_ms = _NEVER
        self._event[:] = _NEVER
        self._wall[:] = _NEVER
        return out

    # ------------------------------------------------------------------ per vertex
    def _grow(self, num_nodes: int) -> None:
        if num_nodes > self._event.shape[0]:
            capacity = max(num_nodes, 2 * self._event.shape[0])
            for name in ("_event", "_wall"):
                grown = np.full(capacity, _NEVER, dtype=np.int64)
                old = getattr(self, name)
                grown[: old.shape[0]] = old
                setattr(self, name, grown)

    def _touch(self, delta: LayerDelta, event_ms: int, now: int) -> None:
        keys = np.unique(np.concatenate([delta.dst, delta.nodes]))
        if keys.size == 0:
            return
        self._grow(int(keys[-1]) + 1)
        w = self.window
        if isinstance(w, Adaptive):
            assert self._sketch is not None
            counts = self._sketch.add(keys, event_ms)
            gap = np.maximum(w.min_gap_ms, (w.horizon_ms / np.maximum(counts, 1.0)))
            gaps = gap.astype(np.int64)
        else:
            assert isinstance(w, Session)
            gaps = np.full(keys.shape[0], w.gap_ms, dtype=np.int64)
        self._event[keys] = event_ms + gaps  # a touch moves the session deadline
        if w.max_latency_ms is not None:  # ... but never past first touch + cap
            first = self._wall[keys] == _NEVER
            self._wall[keys[first]] = now + w.max_latency_ms

    def _release(self, due: np.ndarray) -> LayerDelta:
        """Split off the buffered inputs of due vertices."""
        pending = self._pending
        mark = np.zeros(max(self._event.shape[0], pending.num_nodes), dtype=np.bool_)
        mark[: due.shape[0]] = due
        chosen, rest = pending.split(mark[pending.dst], mark[pending.nodes])
        self._pending = rest
        self._event[due] = _NEVER
        self._wall[due] = _NEVER
        if rest.is_empty:
            self._rows = 0
            self._opened_ms = _NEVER
            chosen = LayerDelta.concat([chosen, rest])  # bookkeeping goes with it
            self._pending = LayerDelta(num_nodes=pending.num_nodes)
        return chosen

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """Buffered inputs and timers, for a checkpoint (wall deadlines restart)."""
        state: dict[str, Any] = {
            "pending": self._pending.to_wire(),
            "rows": self._rows,
            "window_id": self._window_id,
            "event": self._event.copy(),
        }
        if self._sketch is not None:
            state["sketch"] = self._sketch.state()
        return state

    def restore(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state`; wall-clock caps count from now."""
        self._pending = LayerDelta.from_wire(state["pending"])
        self._rows = int(state["rows"])
        self._window_id = int(state["window_id"])
        self._event = np.array(state["event"], dtype=np.int64)
        self._wall = np.full(self._event.shape[0], _NEVER, dtype=np.int64)
        now = self.clock()
        cap = self.window.max_latency_ms
        if cap is not None:
            self._wall[self._event != _NEVER] = now + cap
        self._opened_ms = now if self.pending_rows else _NEVER
        if self._sketch is not None and "sketch" in state:
            self._sketch.restore(state["sketch"])
