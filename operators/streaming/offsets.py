"""The checkpointed position of a source that emits an update log's rows.

Both sources of update batches,
:class:`~strata.operators.streaming.log_source.LogSource` (reads a log) and
:class:`~strata.operators.streaming.ingest.ZmqIngest` (writes one, then emits it),
checkpoint the same two facts: the next log offset to emit and whether the ``init`` item
went out. Each snapshot's offset is remembered so that, once the engine reports a
checkpoint durable, the source can free log segments below it.

Examples:
    >>> position = LogPosition(offset=0)
    >>> position.offset = 120
    >>> position.snapshot()
    {'offset': 120, 'init_sent': False}
    >>> position.durable_offset()
    120
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from strata.operators.streaming.setup import Setup, init_item

#: Snapshots whose offsets are remembered (checkpoints in flight at once).
KEEP = 4


class LogPosition:
    """``Stateful`` half of a log-emitting source: its offset and ``init`` flag."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.init_sent = False
        self._checkpointed: list[int] = []

    def snapshot(self) -> dict[str, Any]:
        """The next offset to emit, and whether ``init`` was sent."""
        self._checkpointed.append(self.offset)
        del self._checkpointed[:-KEEP]
        return {"offset": self.offset, "init_sent": self.init_sent}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a snapshot (the log's later rows are emitted again)."""
        self.offset = int(state["offset"])
        self.init_sent = bool(state["init_sent"])

    def durable_offset(self) -> int | None:
        """The offset of the latest snapshot (None before any, or below zero)."""
        if not self._checkpointed or self._checkpointed[-1] < 0:
            return None
        return self._checkpointed[-1]

    def init_once(self, setup: Setup | None) -> Iterator[dict[str, Any]]:
        """The ``init`` item of ``setup``, unless one was sent (or there is none)."""
        if setup is not None and not self.init_sent:
            item = init_item(setup.load())
            self.init_sent = True
            yield item
