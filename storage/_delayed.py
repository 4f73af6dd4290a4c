"""A ROUTER serve loop whose replies leave at their delivery time.

Two servers model a network: the feature servers (``NetworkModel``, a latency and a
bandwidth per reply) and the geo region servers (the WAN shim, a FIFO per link).
Both answer a request at once but hold the reply until its delivery time, in a
heap, while they go on receiving. :class:`DelayedReplies` is that heap and
:func:`serve_router` the loop: poll until the next reply is due (or a request, or
a stop), drain a burst of requests, send what is due.

zmq polls in whole milliseconds. Rounding a wait up would send every held reply up
to 1 ms late (5 ms of modelled time at the geo default ``s = 0.2``); :func:`poll_ms`
rounds down and sleeps a wait under 1 ms instead.

Examples:
    >>> replies: DelayedReplies[str] = DelayedReplies()
    >>> replies.hold(2.0, "late")
    >>> replies.hold(1.0, "early")
    >>> replies.wait_s(now=0.5, tick_s=0.05), list(replies.pop_due(now=1.5))
    (0.05, ['early'])
    >>> len(replies), list(replies.pop_due(now=2.0))
    (1, ['late'])
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import zmq

__all__ = ["DelayedReplies", "poll_ms", "serve_router"]

T = TypeVar("T")

#: How often a serve loop with nothing due checks for stop (and parent death).
TICK_S = 0.05
#: Requests received in one go before due replies are sent.
BURST = 64


def poll_ms(wait_s: float) -> int:
    """A zmq poll timeout (whole ms, rounded down) for a wait of ``wait_s`` seconds.

    A wait under 1 ms is slept here (``time.sleep`` is precise to ~0.1 ms) and the
    poll then only peeks.

    >>> poll_ms(0.0257), poll_ms(-1.0)
    (25, 0)
    """
    if wait_s >= 0.001:
        return int(wait_s * 1000)
    if wait_s > 0:
        time.sleep(wait_s)
    return 0


class DelayedReplies(Generic[T]):
    """Replies held until their delivery time (``time.perf_counter`` seconds).

    Replies due at the same time leave in the order they were held.
    """

    def __init__(self) -> None:
        self._due: list[tuple[float, int, T]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._due)

    def hold(self, deliver_at: float, reply: T) -> None:
        """Keep ``reply`` until ``deliver_at``."""
        self._seq += 1
        heapq.heappush(self._due, (deliver_at, self._seq, reply))

    def wait_s(self, now: float | None = None, tick_s: float = TICK_S) -> float:
        """How long the loop may wait: until the next reply is due, <= ``tick_s``."""
        if not self._due:
            return tick_s
        now = time.perf_counter() if now is None else now
        return min(tick_s, max(0.0, self._due[0][0] - now))

    def pop_due(self, now: float | None = None) -> Iterator[T]:
        """The replies due by ``now`` (default: the current time), earliest first."""
        now = time.perf_counter() if now is None else now
        while self._due and self._due[0][0] <= now:
            yield heapq.heappop(self._due)[2]


def serve_router(
    sock: zmq.Socket[Any],
    answer: Callable[[list[zmq.Frame]], None],
    replies: DelayedReplies[T],
    send: Callable[[T], object],
    *,
    should_stop: Callable[[], bool],
    stop_fd: int | None = None,
) -> None:
    """Serve ``sock`` until ``should_stop()`` or a byte/EOF on ``stop_fd``.

    Args:
        sock: a bound ROUTER socket.
        answer: handles one request's frames (identity first); it sends the reply
            itself or holds it in ``replies``.
        replies: the held replies.
        send: sends one held reply once it is due.
        should_stop: checked at least every :data:`TICK_S` seconds.
        stop_fd: a file descriptor whose readability means stop (a parent's pipe).
    """
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    if stop_fd is not None:
        poller.register(stop_fd, zmq.POLLIN)
    while not should_stop():
        events = dict(poller.poll(poll_ms(replies.wait_s())))
        if stop_fd is not None and stop_fd in events:
            return
        if sock in events:
            for _ in range(BURST):  # drain a burst, then send what is due
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                answer(frames)
        for reply in replies.pop_due():
            send(reply)
