"""A task's inputs: messages from every inbound link, checkpoint barriers aligned.

Executors hand a task an :class:`Inbox` over their own transport (a bounded channel, or
pyzmq sockets with credits); :func:`strata.engine.runtime.run_task` reads it. Alignment
is Chandy-Lamport as Flink does it: the snapshot for checkpoint ``n`` must reflect
exactly the items before barrier ``n`` on every link, so a link that delivered the
barrier is held until all others did.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from strata.engine.channels import (
    Barrier,
    CheckpointComplete,
    Delivery,
    EndOfStream,
    LinkMessage,
    Message,
)

#: Inbox hooks: a message was moved aside; a message was taken (``True``: held).
Hold = Callable[[LinkMessage], None]
Take = Callable[[LinkMessage, bool], None]


def _no_hold(message: LinkMessage) -> None:
    pass


def _no_take(message: LinkMessage, held: bool) -> None:
    pass


class Inbox:
    """A task's inputs, with checkpoint barriers aligned across inbound links.

    :meth:`next` returns data items, an aligned :class:`Barrier` (once barrier ``n``
    arrived on every link still open), and the driver's :class:`CheckpointComplete`
    notices, until every link has ended. A link that delivered barrier ``n`` is held
    until the others deliver it too: what arrives on it meanwhile is moved aside
    (``hold``) and taken after the barrier, in order. ``take`` runs when the task
    takes a link message: the process executor acknowledges it only then, so a held
    link's producer runs out of credit instead of filling memory, and the local
    executor gives the held link its room back.

    Args:
        receive: Returns the next message to arrive, from any link.
        open_links: How many links feed the task (each ends with end-of-stream).
        hold: Called when a message is moved aside.
        take: Called when the task takes a link message.

    Examples:
        >>> messages = iter([Delivery(0, 0, "a", 1), Barrier(0, 0, 1),
        ...                  Delivery(0, 0, "b", 1), Barrier(1, 0, 1),
        ...                  EndOfStream(0, 0), EndOfStream(1, 0)])
        >>> inbox = Inbox(lambda: next(messages), open_links=2)
        >>> inbox.next().item, inbox.next(), inbox.next().item, inbox.next()
        ('a', Barrier(input=-1, shard=-1, checkpoint=1), 'b', None)
    """

    def __init__(
        self,
        receive: Callable[[], Message],
        open_links: int,
        *,
        hold: Hold = _no_hold,
        take: Take = _no_take,
    ) -> None:
        self.receive = receive
        self.open_links = open_links
        self._hold = hold
        self._take = take
        self._pending: int | None = None  # the barrier being aligned
        self._blocked: set[tuple[int, int]] = set()
        self._parked: dict[tuple[int, int], deque[LinkMessage]] = {}
        self._ready: deque[LinkMessage] = deque()  # parked, released after a barrier

    def next(self) -> Delivery | Barrier | CheckpointComplete | None:
        """Return the next item, aligned barrier or notice; ``None`` at the end."""
        if not self._ready and not self._blocked and self.open_links:
            # The per-item path: no barrier is being aligned, so a data message
            # goes straight to the task.
            message = self.receive()
            if type(message) is Delivery:
                self._take(message, False)
                return message
            return self._next(message)
        return self._next(None)

    def _next(
        self, arrived: Message | None
    ) -> Delivery | Barrier | CheckpointComplete | None:
        """:meth:`next` for every case; ``arrived``: a message already received."""
        while True:
            message: Message
            if arrived is not None:
                message, held, arrived = arrived, False, None
            elif self._ready:
                message, held = self._ready.popleft(), True
            elif self.open_links == 0:
                return None
            else:
                message, held = self.receive(), False
            if isinstance(message, CheckpointComplete):
                return message
            link = (message.input, message.shard)
            if link in self._blocked:
                self._parked.setdefault(link, deque()).append(message)
                if not held:
                    self._hold(message)
                continue
            self._take(message, held)
            if isinstance(message, Delivery):
                return message
            if isinstance(message, EndOfStream):
                self.open_links -= 1
            else:
                self._block(link, message.checkpoint)
            if self._pending is not None and len(self._blocked) >= self.open_links:
                return self._aligned()

    def drain(self) -> None:
        """Take and drop every message until every link has ended."""
        while self.next() is not None:
            pass

    def _block(self, link: tuple[int, int], checkpoint: int) -> None:
        if self._pending is None:
            self._pending = checkpoint
        # Barriers are numbered in order and every live source injects each one,
        # so every link delivers the same sequence.
        assert checkpoint == self._pending, (link, checkpoint, self._pending)
        self._blocked.add(link)

    def _aligned(self) -> Barrier:
        checkpoint = self._pending
        assert checkpoint is not None
        self._pending = None
        self._blocked.clear()
        for parked in self._parked.values():
            self._ready.extend(parked)
        self._parked.clear()
        return Barrier(-1, -1, checkpoint)
