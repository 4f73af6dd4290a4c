"""What a gang worker tells its parent: one small frozen dataclass per message.

A worker writes these, pickled, to its one-way pipe (:mod:`.worker`); the
supervisor (:mod:`.supervisor`) dispatches on the message's type. The result
itself travels pickled inside :class:`Done`, so a result the parent cannot
unpickle is reported as that rank's failure rather than breaking the channel.

Examples:
    >>> import pickle
    >>> pickle.loads(pickle.dumps(Ready(pid=7, device="cpu")))
    Ready(pid=7, device='cpu')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias


@dataclass(frozen=True, slots=True)
class Ready:
    """The rank joined the process group and is about to run the function.

    Attributes:
        pid: the worker's process id.
        device: the device it runs on (``cpu``, ``cuda:0``, ...).
    """

    pid: int
    device: str


@dataclass(frozen=True, slots=True)
class Beat:
    """A heartbeat, with what the rank is doing and its metrics so far.

    Attributes:
        progress: a short description of the work (None: unchanged).
        metrics: the rank's metrics (``WorkerMetrics.to_dict()``).
    """

    progress: str | None
    metrics: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Done:
    """The function returned.

    Attributes:
        payload: its result, pickled.
        metrics: the rank's metrics.
        stats: wall seconds, peak RSS and peak device bytes.
    """

    payload: bytes = field(repr=False)
    metrics: dict[str, Any]
    stats: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Failed:
    """The rank raised (in ``join``, before :class:`Ready`, or in ``run``).

    Attributes:
        type_name: the exception's qualified type name.
        text: its message.
        trace: the formatted traceback.
        metrics: the rank's metrics (empty before it joined).
        progress: its last progress note.
        phase: ``"join"`` (the parent may retry the gang) or ``"run"``.
    """

    type_name: str
    text: str
    trace: str
    metrics: dict[str, Any]
    progress: str | None
    phase: Literal["join", "run"]


#: Any message a worker sends.
WorkerMessage: TypeAlias = Ready | Beat | Done | Failed
