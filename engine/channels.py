"""Messages on channels, and the bounded in-process channel of the local executor.

A channel carries :class:`Delivery` messages (one data item with its size) and *control*
messages that travel in order with the data: :class:`EndOfStream` closes one inbound
link, and :class:`Barrier` carries checkpoints (:mod:`strata.engine.checkpoint`): a
source injects ``Barrier(n)``, each step forwards it once it arrived on every inbound
link (snapshotting a :class:`~strata.engine.operator.Stateful` operator first), so a
snapshot reflects exactly the items before the barrier. :class:`CheckpointComplete` is
not tied to a link: the driver tells a task that checkpoint ``n`` is durable.

Control messages never wait for room: they carry no data and must get through a
full channel, or a slow consumer could never learn that its producers finished.

While a task aligns a barrier it stops taking items from the links that already
delivered it; it moves their items aside (:meth:`Channel.hold`) so the other links
keep flowing, and a held link's producer waits once the link holds its share of the
channel's bounds, the same per-link credit the process executor grants.

Examples:
    >>> channel = Channel(ChannelBounds(max_items=2, max_bytes=100), links=1)
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

from strata.engine.config import ChannelBounds


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
    """Checkpoint ``checkpoint`` passed this link: the items before it belong to it."""

    input: int
    shard: int
    checkpoint: int


@dataclass(frozen=True, slots=True)
class CheckpointComplete:
    """Checkpoint ``checkpoint`` is complete and durable (from the driver)."""

    checkpoint: int


Message = Delivery | EndOfStream | Barrier | CheckpointComplete
LinkMessage = Delivery | EndOfStream | Barrier


class Channel:
    """A bounded multi-producer queue: one per consuming task on the local executor.

    ``put`` blocks while the channel is full (see
    :class:`~strata.engine.config.ChannelBounds`) and returns how long it waited, which
    the producer reports as ``blocked_s``. ``cancel`` wakes every waiter with
    :class:`Cancelled`.

    Every message passes under one plain lock; the conditions are signalled only
    when someone waits on them (the counts of waiting producers and consumers), so
    a message that finds room and a waiting-free consumer costs two uncontended
    lock round trips and no ``Condition.notify`` call. Producers waiting for room
    wake when the channel has drained to half its bounds (or is empty): one thread
    switch refills half a channel instead of one slot.
    """

    def __init__(self, bounds: ChannelBounds, links: int = 1) -> None:
        self.bounds = bounds
        self._max_items = bounds.max_items
        self._max_bytes = bounds.max_bytes
        # Waiting producers are woken once the channel has drained to half its
        # bounds (or is empty), not at every message taken: each wake-up is a
        # thread switch, and they refill it in one go.
        self._low_items = bounds.max_items // 2
        self._low_bytes = bounds.max_bytes // 2
        self._queue: deque[tuple[Message, int]] = deque()
        # Items moved aside while their link waits for a barrier, by link.
        self._held: dict[tuple[int, int], list[int]] = {}
        self._held_items = max(1, bounds.max_items // max(1, links))
        self._held_bytes = max(1, bounds.max_bytes // max(1, links))
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._not_empty = threading.Condition(self._lock)
        self._putters = 0  # producers waiting for room
        self._getters = 0  # consumers waiting for a message
        self._items = 0
        self._bytes = 0
        self._cancelled = False
        self.peak_items = 0
        self.peak_bytes = 0

    def put(self, message: Delivery, nbytes: int) -> float:
        """Append a data message, waiting for room; return the seconds waited."""
        waited = 0.0
        with self._lock:
            items = self._items
            full = items and (
                items >= self._max_items or self._bytes + nbytes > self._max_bytes
            )
            if full or (self._held and self._link_full(message)):
                waited = self._wait_for_room(message, nbytes)
            if self._cancelled:
                raise Cancelled
            self._queue.append((message, nbytes))
            items = self._items = self._items + 1
            size = self._bytes = self._bytes + nbytes
            if items > self.peak_items:
                self.peak_items = items
            if size > self.peak_bytes:
                self.peak_bytes = size
            if self._getters:
                self._not_empty.notify()
        return waited

    def put_control(self, message: Message) -> None:
        """Append a control message; never waits."""
        with self._lock:
            if self._cancelled:
                raise Cancelled
            self._queue.append((message, 0))
            if self._getters:
                self._not_empty.notify()

    def get(self) -> Message:
        """Remove and return the oldest message, waiting for one."""
        with self._lock:
            if not self._queue or self._cancelled:
                self._wait_for_message()
            message, nbytes = self._queue.popleft()
            if type(message) is Delivery:
                self._items -= 1
                self._bytes -= nbytes
                items = self._items
                if self._putters and (
                    not items
                    or (items <= self._low_items and self._bytes <= self._low_bytes)
                ):
                    # Several producers may wait for different amounts of room.
                    self._not_full.notify_all()
            return message

    def try_get(self) -> Message | None:
        """Remove and return the oldest message, or ``None`` when there is none."""
        with self._lock:
            if self._cancelled:
                raise Cancelled
            if not self._queue:
                return None
        return self.get()  # one consumer per channel: the message is still there

    def hold(self, message: Delivery | EndOfStream | Barrier) -> None:
        """The consumer moved ``message`` aside; count it against its link."""
        if isinstance(message, Delivery):
            with self._lock:
                held = self._held.setdefault((message.input, message.shard), [0, 0])
                held[0] += 1
                held[1] += message.nbytes

    def release(self, message: Delivery | EndOfStream | Barrier) -> None:
        """The consumer took a held ``message``: its link has room again."""
        if isinstance(message, Delivery):
            with self._lock:
                held = self._held[(message.input, message.shard)]
                held[0] -= 1
                held[1] -= message.nbytes
                if held[0] == 0:  # keep the put's fast path: no held links
                    del self._held[(message.input, message.shard)]
                if self._putters:
                    self._not_full.notify_all()

    def cancel(self) -> None:
        """Stop the channel: current and future waiters raise :class:`Cancelled`."""
        with self._lock:
            self._cancelled = True
            self._not_full.notify_all()
            self._not_empty.notify_all()

    def _wait_for_room(self, message: Delivery, nbytes: int) -> float:
        """Wait (the lock held) until ``message`` fits or the run stops."""
        waited = 0.0
        self._putters += 1
        try:
            while not self._cancelled and (
                self._full(nbytes) or self._link_full(message)
            ):
                start = time.perf_counter()
                self._not_full.wait()
                waited += time.perf_counter() - start
        finally:
            self._putters -= 1
        return waited

    def _wait_for_message(self) -> None:
        """Wait (the lock held) for a message; raise if the run stops."""
        self._getters += 1
        try:
            while not self._queue and not self._cancelled:
                self._not_empty.wait()
        finally:
            self._getters -= 1
        if self._cancelled:
            raise Cancelled

    def _link_full(self, message: Message) -> bool:
        if not isinstance(message, Delivery):
            return False
        held = self._held.get((message.input, message.shard))
        if held is None or held[0] == 0:
            return False
        return held[0] >= self._held_items or held[1] >= self._held_bytes

    def _full(self, nbytes: int) -> bool:
        if self._items == 0:  # an empty channel admits even an oversized item
            return False
        return self._items >= self._max_items or self._bytes + nbytes > self._max_bytes
