"""A mesh of P ranks that exchange numpy arrays in rounds: the contract.

A :class:`Mesh` is one rank's end of a group of ``size`` ranks running the same
function (SPMD). The unit of communication is a *round*: every rank calls
:meth:`Mesh.exchange` with the arrays it has for each peer (possibly none) and
gets back what every peer had for it, in rank order. Rounds are tagged by
:class:`Tag` ``(superstep, round)``; every implementation ends a rank's frames to a
peer with an end-of-round marker carrying the frame count, keeps frames that
arrive early for a later round, and never blocks a send behind a receive (a
poller serves both), so a round cannot deadlock and arrival order never shows
in the results: ``incoming`` is always in sender-rank order.

Implementations (``strata.engine.mesh``): ``SimMesh`` (P logical ranks on
threads of one process; arrays are handed over, not copied, and every rank's
frames and bytes are counted: the cost model's mesh, P up to 256), ``ZmqMesh``
(one rank per process, pyzmq over loopback or TCP, typed frames of
:mod:`strata.engine.net.frames`, never pickle) and ``TorchMesh`` (the ranks of a
gang, over ``torch.distributed``). The engine knows nothing about graphs:
ranks, tags and arrays only.

Traffic to oneself (``outgoing[rank]``) is delivered without being counted:
:class:`MeshStats` counts what crosses between ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np

#: Reductions of :meth:`Mesh.allreduce`.
MeshOp = Literal["sum", "min", "max"]


class Tag(NamedTuple):
    """Names one round: ``(superstep, round)``; increasing, the same on every rank."""

    superstep: int
    round: int


@dataclass(slots=True)
class MeshStats:
    """What one rank sent and received between ranks (end markers included).

    Attributes:
        frames_sent: Messages (array groups and markers) sent to other ranks.
        bytes_sent: Their bytes, headers included.
        frames_received: Messages received from other ranks.
        bytes_received: Their bytes.
        rounds: Rounds this rank took part in (exchanges, allreduces, barriers).
        wait_s: Seconds spent waiting for peers.
        sent_to: Bytes sent to each peer, by peer rank.
    """

    frames_sent: int = 0
    bytes_sent: int = 0
    frames_received: int = 0
    bytes_received: int = 0
    rounds: int = 0
    wait_s: float = 0.0
    sent_to: dict[int, int] = field(default_factory=dict)


class MeshError(RuntimeError):
    """A round failed: a peer died, timed out, or sent a malformed frame.

    The message names this rank, the peer and the tag; a dead peer is an error
    within the mesh's timeout, never a hang.
    """


@runtime_checkable
class Mesh(Protocol):
    """One rank's end of a mesh (see the module docstring)."""

    @property
    def rank(self) -> int:
        """This rank, ``0 <= rank < size``."""
        ...

    @property
    def size(self) -> int:
        """How many ranks the mesh has."""
        ...

    @property
    def stats(self) -> MeshStats:
        """This rank's traffic so far."""
        ...

    def exchange(
        self, outgoing: Sequence[Sequence[np.ndarray]], tag: Tag
    ) -> list[list[np.ndarray]]:
        """Send ``outgoing[p]`` to every rank ``p``; return ``incoming[p]`` by rank.

        ``len(outgoing) == size``; each entry is a (possibly empty) list of arrays.
        The arrays from one peer arrive in the order the peer listed them.

        Raises:
            MeshError: A peer died, timed out, or broke the protocol.
        """
        ...

    def allreduce(self, value: np.ndarray, op: MeshOp, tag: Tag) -> np.ndarray:
        """Combine ``value`` (the same shape and dtype on every rank) over ranks.

        The result is identical on every rank and independent of arrival order
        (folded in rank order).
        """
        ...

    def barrier(self, tag: Tag) -> None:
        """Return once every rank reached the barrier ``tag``."""
        ...

    def close(self) -> None:
        """Release sockets and threads (idempotent)."""
        ...
