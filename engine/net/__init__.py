"""Engine networking: typed array messages and bounded one-way channels over zmq.

Nothing here knows about graphs: a message is a kind, a two-integer tag and a few
numpy arrays (:mod:`.frames`), carried by a PUSH/PULL :class:`Sender` /
:class:`Receiver` pair with a high-water mark (backpressure) and a deadline on
every call (:mod:`.channel`). Samplers streaming blocks to trainers use it, and so
can any worker mesh.

==========================  ===================================================
name                        what it is
==========================  ===================================================
:class:`Sender`             the pushing end; blocks when the queue is full
:class:`Receiver`           the pulling end; iterate it until the end marker
:class:`ChannelConfig`      queue bound (``hwm``), deadlines, message limits
:class:`ChannelTimeout`     a send or receive missed its deadline
:func:`encode`/:func:`decode`  one message to frames and back, no pickle
:class:`FrameError`         a malformed or oversized message
==========================  ===================================================

Examples:
    >>> import numpy as np
    >>> with Receiver() as inbox, Sender(inbox.endpoint) as outbox:
    ...     outbox.send((2, 5), [np.ones((2, 2), np.float32)])
    ...     message = inbox.recv()
    >>> message.tag, message.arrays[0].sum().item()
    ((2, 5), 4.0)
"""

from strata.engine.net.channel import (
    LOOPBACK,
    ChannelConfig,
    ChannelTimeout,
    Receiver,
    RecvCounters,
    SendCounters,
    Sender,
)
from strata.engine.net.frames import (
    FrameError,
    FrameLimits,
    Kind,
    Message,
    decode,
    encode,
)

__all__ = [
    "LOOPBACK",
    "ChannelConfig",
    "ChannelTimeout",
    "FrameError",
    "FrameLimits",
    "Kind",
    "Message",
    "Receiver",
    "RecvCounters",
    "SendCounters",
    "Sender",
    "decode",
    "encode",
]
