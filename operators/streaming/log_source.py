"""LogSource: a source step that reads an UpdateLog from an offset (replay and live).

The log is the buffer between producers and the pipeline (d3gnn.md §3.8). The
source emits, in log order, one ``updates`` item per stored record (sliced at its
start offset), tagged with the record's first offset and the wall time it was read.
Before the first update it emits the ``init`` item of its :class:`Setup`, if given.

* Replay (default): read what is committed now, then end.
* ``follow=True``: keep reading as the log grows (another process, such as
  ``ZmqIngest``, writes it); while idle, emit ``tick`` items (window caps need the
  clock) and yield :data:`strata.engine.operator.IDLE` so checkpoints still happen; end
  after ``idle_timeout_s`` without data, or at ``until_offset``.

It is ``Stateful``: the snapshot is the next offset to read (taken between items, so
it is the position *after* the item just yielded) and whether ``init`` was sent; on
resume it seeks there, so no row is emitted twice or skipped. With
``truncate=True`` it deletes sealed segments below its checkpointed offset once a
checkpoint is durable (when it can take the log's writer lock).

Examples:
    >>> import tempfile, numpy as np
    >>> from strata.storage import UpdateLog, edge_updates
    >>> path = tempfile.mkdtemp() + "/log"
    >>> with UpdateLog(path) as log:
    ...     _ = log.append(edge_updates([0, 1], [1, 2], event_time=0))
    ...     _ = log.append(edge_updates([2], [0], event_time=0))
    >>> source = LogSource(path, from_offset=1)
    >>> [(i["offset"], i["batch"].num_rows) for i in source.finish()]
    [(1, 1), (2, 1)]
    >>> source.snapshot()
    {'offset': 3, 'init_sent': False}
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from strata.engine.operator import IDLE, Operator, StepContext
from strata.operators.streaming.items import TICK, UPDATES
from strata.operators.streaming.offsets import LogPosition
from strata.operators.streaming.setup import Setup
from strata.operators.streaming.windows import wall_ms
from strata.storage import LogError, UpdateLog


class LogSource(LogPosition, Operator[None, dict[str, Any]]):
    """Emits the update log's records from an offset (see the module docstring).

    Args:
        path: The log directory.
        setup: Where the starting graph and model come from (an ``init`` item is
            sent first), or None.
        from_offset: First row to read (default: the log's start).
        follow: Keep reading as the log grows.
        idle_timeout_s: With ``follow``, end after this long without new rows.
        until_offset: End once this offset is reached.
        tick_ms: With ``follow``, emit a ``tick`` this often while idle.
        poll_s: With ``follow``, how often to look for new rows.
        truncate: Delete log segments below a durable checkpoint's offset.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        setup: Setup | None = None,
        from_offset: int | None = None,
        follow: bool = False,
        idle_timeout_s: float | None = None,
        until_offset: int | None = None,
        tick_ms: int = 100,
        poll_s: float = 0.01,
        truncate: bool = False,
    ) -> None:
        self.path = str(path)
        self.setup = setup
        self.from_offset = from_offset
        self.follow = follow
        self.idle_timeout_s = idle_timeout_s
        self.until_offset = until_offset
        self.tick_ms = tick_ms
        self.poll_s = poll_s
        self.truncate = truncate
        LogPosition.__init__(self, offset=-1)
        self._ctx: StepContext | None = None

    def open(self, ctx: StepContext) -> None:
        """Remember the context (counter: ``rows_read``)."""
        self._ctx = ctx

    def _done(self) -> bool:
        return self.until_offset is not None and self.offset >= self.until_offset

    def finish(self) -> Iterator[Any]:
        """Yield ``init`` (once), then ``updates`` items; see the module docstring."""
        yield from self.init_once(self.setup)
        log = UpdateLog(self.path, readonly=True)
        try:
            if self.offset < 0:
                self.offset = (
                    log.start_offset if self.from_offset is None else self.from_offset
                )
            yield from self._read(log)
        finally:
            log.close()

    def _read(self, log: UpdateLog) -> Iterator[Any]:
        idle_since = time.monotonic()
        last_tick = wall_ms()
        while not self._done():
            got = False
            for record in log.records(self.offset, self.until_offset):
                got = True
                rows = record.batch.num_rows
                first, self.offset = record.first_offset, record.first_offset + rows
                if self._ctx is not None:
                    self._ctx.metrics.counter("rows_read").inc(rows)
                yield {
                    "kind": UPDATES,
                    "batch": record.batch,
                    "offset": first,
                    "arrival_ms": wall_ms(),
                }
                if self._done():
                    return
            if not self.follow:
                return
            now = time.monotonic()
            if got:
                idle_since = now
            elif (
                self.idle_timeout_s is not None
                and now - idle_since >= self.idle_timeout_s
            ):
                return
            if wall_ms() - last_tick >= self.tick_ms:
                last_tick = wall_ms()
                yield {"kind": TICK, "now_ms": last_tick}
            yield IDLE
            time.sleep(self.poll_s)

    # ------------------------------------------------------------------ state
    def on_checkpoint_complete(self, checkpoint: int) -> None:
        """Free log segments that a resume from this checkpoint no longer needs."""
        offset = self.durable_offset()
        if not self.truncate or offset is None:
            return
        # LogError: another writer (the ingest step) holds the lock; it keeps all.
        with contextlib.suppress(LogError), UpdateLog(self.path) as writer:
            writer.truncate_before(offset)

    def __repr__(self) -> str:
        return f"LogSource({self.path!r}, offset={self.offset})"
