"""One-way engine channels over zmq PUSH/PULL: bounded, with deadlines, no pickle.

A :class:`Sender` pushes :mod:`~strata.engine.net.frames` messages (a few numpy
arrays and a two-integer tag) to a :class:`Receiver`. Both ends bound their queue
with a high-water mark (``ChannelConfig.hwm`` messages each, ``SNDHWM`` and
``RCVHWM``): when the receiver falls behind, the queues fill and :meth:`Sender.send`
blocks, so a slow consumer slows its producer and memory stays bounded
(backpressure). The time a sender spends blocked is counted (``blocked_s``), as is
the time a receiver waits for a message (``wait_s``): together they say which side
was the bottleneck.

Every blocking call has a deadline (``ChannelConfig.timeout_s``): a send that
cannot queue in time, or a receive that gets nothing in time, raises
:class:`ChannelTimeout` naming the channel, its endpoint and the deadline, so a
dead peer never hangs its partner. :meth:`Sender.end` sends the end-of-stream
marker; iterating a :class:`Receiver` yields data messages until it arrives.

Either end may bind or connect; by default the receiver binds a free loopback TCP
port (``tcp://127.0.0.1:*``) and the sender connects to its ``endpoint``. ``ipc://``
endpoints work too.

Closing: zmq drops what a receiver has not yet read when its peer disconnects
(with a full receive queue, bytes still in the kernel are discarded). So after
:meth:`Sender.end`, :meth:`Sender.close` waits (up to ``linger_s``) until the
receiver has closed its end, which it does after reading the end marker, and so
after reading everything before it (a socket monitor reports the disconnect). A
producer that returns right after ``end()`` and ``close()`` loses nothing.

Examples:
    >>> import numpy as np
    >>> inbox = Receiver(name="demo")
    >>> outbox = Sender(inbox.endpoint)
    >>> outbox.send((0, 1), [np.arange(3)])
    >>> outbox.end()
    >>> [m.arrays[0].tolist() for m in inbox]
    [[0, 1, 2]]
    >>> inbox.close(); outbox.close()  # the receiver first: close() waits for it
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zmq
from zmq.utils.monitor import recv_monitor_message

from strata.engine.errors import format_where
from strata.engine.net.frames import FrameLimits, Kind, Message, decode, encode

#: Default endpoint of a binding end: a free port on the loopback interface.
LOOPBACK = "tcp://127.0.0.1:*"


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    """How a channel end queues, waits and checks messages.

    Attributes:
        hwm: Messages queued at this end before a sender blocks (>= 1).
        timeout_s: Deadline of every send and receive, in seconds.
        linger_s: How long :meth:`Sender.close`, after :meth:`Sender.end`, waits
            for the receiver to read everything and close its end.
        limits: Bounds on one message (arrays, dimensions, bytes).
    """

    hwm: int = 4
    timeout_s: float = 60.0
    linger_s: float = 10.0
    limits: FrameLimits = field(default_factory=FrameLimits)

    def __post_init__(self) -> None:
        if not isinstance(self.hwm, int) or self.hwm < 1:
            raise ValueError(
                format_where("hwm", "ChannelConfig", ">= 1", repr(self.hwm))
            )
        for name in ("timeout_s", "linger_s"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(
                    format_where(name, "ChannelConfig", "> 0 seconds", repr(value))
                )


class ChannelTimeout(TimeoutError):
    """A send or receive missed its deadline; names the channel and endpoint."""


@dataclass(slots=True)
class SendCounters:
    """What a :class:`Sender` has sent (end markers included).

    Attributes:
        messages: Messages sent.
        bytes: Bytes of every frame sent, headers included.
        blocked_s: Seconds spent waiting for room in a full queue.
    """

    messages: int = 0
    bytes: int = 0
    blocked_s: float = 0.0


@dataclass(slots=True)
class RecvCounters:
    """What a :class:`Receiver` has received (end markers included).

    Attributes:
        messages: Messages received.
        bytes: Bytes of every frame received, headers included.
        wait_s: Seconds spent waiting for a message to arrive.
    """

    messages: int = 0
    bytes: int = 0
    wait_s: float = 0.0


class _End:
    """One socket in its own context; the shared part of both ends."""

    def __init__(
        self, kind: int, endpoint: str, bind: bool, config: ChannelConfig, name: str
    ) -> None:
        self.config = config
        self._context = zmq.Context(io_threads=1)
        self._socket: Any = self._context.socket(kind)
        self._socket.setsockopt(
            zmq.SNDHWM if kind == zmq.PUSH else zmq.RCVHWM, config.hwm
        )
        self._socket.setsockopt(zmq.LINGER, 0)
        try:
            if bind:
                self._socket.bind(endpoint)
                endpoint = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
            else:
                self._socket.connect(endpoint)
        except zmq.ZMQError:
            self._socket.close(0)
            self._context.term()
            raise
        self.endpoint = endpoint
        self.name = name or endpoint
        self.closed = False

    def _timeout(self, what: str, timeout_s: float, hint: str) -> ChannelTimeout:
        return ChannelTimeout(
            format_where(
                what,
                f"channel '{self.name}' ({self.endpoint})",
                f"to complete within {timeout_s:g} s",
                "no progress by the deadline",
                hint,
            )
        )

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._socket.close(linger=0)
        self._context.term()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, endpoint={self.endpoint!r})"


class Sender(_End):
    """The pushing end of a channel (see the module docstring).

    Args:
        endpoint: Where to connect (or bind, with ``bind=True``).
        bind: Bind ``endpoint`` instead of connecting to it.
        config: Queue bound, deadlines and message limits.
        name: Names the channel in errors; the endpoint when empty.

    Attributes:
        endpoint: The endpoint, resolved (a bound ``*`` port becomes a number).
        counters: :class:`SendCounters`.
    """

    def __init__(
        self,
        endpoint: str = LOOPBACK,
        *,
        bind: bool = False,
        config: ChannelConfig = ChannelConfig(),
        name: str = "",
    ) -> None:
        super().__init__(zmq.PUSH, endpoint, bind, config, name)
        self.counters = SendCounters()
        self._ended = False
        # Reports the receiver closing its end (see the module docstring).
        self._monitor: Any = self._socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)

    def send(
        self,
        tag: tuple[int, int],
        arrays: Sequence[np.ndarray] = (),
        *,
        kind: Kind = Kind.DATA,
        timeout_s: float | None = None,
    ) -> None:
        """Queue one message; block while the queue is full, up to the deadline.

        The arrays are handed to zmq without a copy: do not write to them after.

        Raises:
            ChannelTimeout: No room in the queue within ``timeout_s`` (default
                ``config.timeout_s``): the receiver is gone or stuck.
            FrameError: The message breaks ``config.limits``.
        """
        frames = encode(kind, tag, arrays, self.config.limits)
        try:
            self._socket.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
        except zmq.Again:
            self._send_blocking(frames, timeout_s or self.config.timeout_s)
        self.counters.messages += 1
        self.counters.bytes += sum(memoryview(f).nbytes for f in frames)

    def _send_blocking(self, frames: list[Any], timeout_s: float) -> None:
        start = time.perf_counter()
        deadline = start + timeout_s
        try:
            while True:
                left_ms = max(0, int((deadline - time.perf_counter()) * 1000))
                if self._socket.poll(left_ms, zmq.POLLOUT):
                    try:
                        self._socket.send_multipart(
                            frames, flags=zmq.NOBLOCK, copy=False
                        )
                        return
                    except zmq.Again:  # room went to nobody else, but re-check
                        pass
                if time.perf_counter() >= deadline:
                    raise self._timeout(
                        "send",
                        timeout_s,
                        "the receiver stopped reading (dead, stuck, or never "
                        "connected); its side's error names it",
                    )
        finally:
            self.counters.blocked_s += time.perf_counter() - start

    def end(
        self, tag: tuple[int, int] = (0, 0), timeout_s: float | None = None
    ) -> None:
        """Send the end-of-stream marker (after the last data message)."""
        self.send(tag, kind=Kind.END, timeout_s=timeout_s)
        self._ended = True

    def close(self, linger_s: float | None = None) -> None:
        """Close (idempotent); after :meth:`end`, first wait for the receiver.

        Waits up to ``linger_s`` (default ``config.linger_s``) for the receiver
        to close its end, i.e. to have read everything; without an end marker
        sent, or with ``linger_s=0``, closes at once.

        Returns:
            Nothing; a receiver that does not close in time is not an error here
            (its own side times out or fails).
        """
        if self.closed:
            return
        linger_s = self.config.linger_s if linger_s is None else linger_s
        if self._ended and linger_s > 0:
            self._wait_for_disconnect(linger_s)
        self._socket.disable_monitor()
        self._monitor.close(0)
        self._close()

    def _wait_for_disconnect(self, linger_s: float) -> None:
        deadline = time.monotonic() + linger_s
        while (left := deadline - time.monotonic()) > 0:
            if not self._monitor.poll(int(left * 1000) + 1, zmq.POLLIN):
                return
            event = recv_monitor_message(self._monitor)
            if event["event"] == zmq.EVENT_DISCONNECTED:
                return

    def __enter__(self) -> Sender:
        return self

    def __exit__(self, *exc: object) -> None:
        # After an error, do not wait for a receiver that may be gone.
        self.close(None if exc[0] is None else 0.0)


class Receiver(_End):
    """The pulling end of a channel (see the module docstring).

    Args:
        endpoint: Where to bind (or connect, with ``bind=False``); by default a
            free loopback TCP port.
        bind: Bind ``endpoint`` (the default) instead of connecting to it.
        config: Queue bound, deadlines and message limits.
        name: Names the channel in errors; the endpoint when empty.

    Attributes:
        endpoint: The endpoint, resolved: give it to the sender.
        counters: :class:`RecvCounters`.
    """

    def __init__(
        self,
        endpoint: str = LOOPBACK,
        *,
        bind: bool = True,
        config: ChannelConfig = ChannelConfig(),
        name: str = "",
    ) -> None:
        super().__init__(zmq.PULL, endpoint, bind, config, name)
        # Oversized frames are dropped by zmq before they are buffered.
        limits = config.limits
        header = 24 + limits.max_arrays * (2 + 8 * limits.max_ndim)
        self._socket.setsockopt(zmq.MAXMSGSIZE, max(limits.max_bytes, header))
        self.counters = RecvCounters()

    def recv(self, timeout_s: float | None = None) -> Message:
        """Return the next message (data or the end marker).

        Raises:
            ChannelTimeout: Nothing arrived within ``timeout_s`` (default
                ``config.timeout_s``): the sender is gone or stuck.
            FrameError: The message is malformed or over ``config.limits``.
        """
        timeout_s = timeout_s or self.config.timeout_s
        start = time.perf_counter()
        try:
            ready = self._socket.poll(int(timeout_s * 1000), zmq.POLLIN)
        finally:
            self.counters.wait_s += time.perf_counter() - start
        if not ready:
            raise self._timeout(
                "recv",
                timeout_s,
                "the sender stopped sending (dead, stuck, or slower than the "
                "deadline allows); its side's error names it",
            )
        frames = self._socket.recv_multipart(copy=False)
        message = decode(frames, self.config.limits)
        self.counters.messages += 1
        self.counters.bytes += message.nbytes
        return message

    def __iter__(self) -> Iterator[Message]:
        """Yield data messages until the end marker (each with the deadline)."""
        while True:
            message = self.recv()
            if message.kind is Kind.END:
                return
            yield message

    def close(self) -> None:
        """Close at once, dropping anything still queued; idempotent."""
        self._close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
