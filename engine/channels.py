"""Messages on channels, and the bounded in-process channel of the local executor.

A channel carries :class:`Delivery` messages (one data item with its size) and
*control* messages that travel in order with the data: :class:`EndOfStream` closes
one inbound link, and :class:`Barrier` is the seam for checkpoints (issue 7): a
source injects ``Barrier(n)``, each step forwards it once it arrived on every inbound
link (snapshotting a :class:`~engine.operator.Stateful` operator first), so a
snapshot reflects exactly the items before the barrier.

Control messages never wait for room: they carry no data and must get through a
full channel, or a slow consumer could never learn that its producers finished.

Examples:
    >>> channel = Channel(ChannelBounds(max_items=2, max_bytes=100))
    >>> channel.put(Delivery(0, 0, "a", 60), 60)
    0.0
    >>> channel.put_control(EndOfStream(0, 0))
    >>> channel.get().item, channel.get()
    ('a', EndOfStream(input=0, shard=0))
    >>> channel.peak_bytes
    60
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from engine.config import ChannelBounds


class Cancelled(Exception):
    """The run is stopping (another step failed); the task unwinds quietly."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One data item from producer shard ``shard`` on the consumer's input ``input``."""

    input: int
    shard: int
    item: Any
    nbytes: int


@dataclass(frozen=True, slots=True)
class EndOfStream:
    """The link from producer shard ``shard`` to input ``input`` has no more items."""

    input: int
    shard: int


@dataclass(frozen=True, slots=True)
class Barrier:
    """Checkpoint ``checkpoint`` passed this link (reserved for issue 7)."""

    input: int
    shard: int
    checkpoint: int


Message = Delivery | EndOfStream | Barrier


class Channel:
    """A bounded multi-producer queue: one per consuming task on the local executor.

    ``put`` blocks while the channel is full (see
    :class:`~engine.config.ChannelBounds`) and returns how long it waited, which the
    producer reports as ``blocked_s``. ``cancel`` wakes every waiter with
    :class:`Cancelled`.
    """

    def __init__(self, bounds: ChannelBounds) -> None:
        self.bounds = bounds
        self._queue: deque[tuple[Message, int]] = deque()
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._not_empty = threading.Condition(self._lock)
        self._items = 0
        self._bytes = 0
        self._cancelled = False
        self.peak_items = 0
        self.peak_bytes = 0

    def put(self, message: Message, nbytes: int) -> float:
        """Append a data message, waiting for room; return the seconds waited."""
        waited = 0.0
        with self._lock:
            while not self._cancelled and self._full(nbytes):
                start = time.perf_counter()
                self._not_full.wait()
                waited += time.perf_counter() - start
            if self._cancelled:
                raise Cancelled
            self._queue.append((message, nbytes))
            self._items += 1
            self._bytes += nbytes
            self.peak_items = max(self.peak_items, self._items)
            self.peak_bytes = max(self.peak_bytes, self._bytes)
            self._not_empty.notify()
        return waited

    def put_control(self, message: Message) -> None:
        """Append a control message; never waits."""
        with self._lock:
            if self._cancelled:
                raise Cancelled
            self._queue.append((message, 0))
            self._not_empty.notify()

    def get(self) -> Message:
        """Remove and return the oldest message, waiting for one."""
        with self._lock:
            while not self._queue and not self._cancelled:
                self._not_empty.wait()
            if self._cancelled:
                raise Cancelled
            message, nbytes = self._queue.popleft()
            if isinstance(message, Delivery):
                self._items -= 1
                self._bytes -= nbytes
                # Several producers may wait for different amounts of room.
                self._not_full.notify_all()
            return message

    def cancel(self) -> None:
        """Stop the channel: current and future waiters raise :class:`Cancelled`."""
        with self._lock:
            self._cancelled = True
            self._not_full.notify_all()
            self._not_empty.notify_all()

    def _full(self, nbytes: int) -> bool:
        if self._items == 0:  # an empty channel admits even an oversized item
            return False
        bounds = self.bounds
        return (
            self._items >= bounds.max_items or self._bytes + nbytes > bounds.max_bytes
        )
