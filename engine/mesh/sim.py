"""``SimMesh``: P ranks on threads of one process, counting what a real mesh would send.

:meth:`SimMesh.group` makes ``size`` ends sharing one in-process hub, and
:func:`run_sim` runs an SPMD function on ``size`` threads, one end each. A round
is a rendezvous of all ranks: each rank posts its outgoing lists, waits for the
others, then takes what every peer posted for it. Arrays are handed over by
reference (read-only views, never copies), so P up to 256 stays cheap; the stats
count every message and byte as :class:`~strata.engine.mesh.zmq_mesh.ZmqMesh` would
send them (:mod:`strata.engine.mesh.wire`), so a modelled run and a real one report
the same traffic.

Neither side may write to an array after handing it over: the receiver's view
shares the sender's memory (copy before writing; received arrays are read-only).

A rank whose function raises fails the round every other rank is in (or enters
next) with a :class:`MeshError` naming it, and :func:`run_sim` raises a
``MeshError`` naming the first rank that failed, chained to its exception. A rank
that returns (or closes its end) while others still exchange fails their round the
same way: every rank must make the same rounds. A round that does not complete
within ``timeout_s`` fails, naming the ranks that did not arrive.

Examples:
    >>> import numpy as np
    >>> def shift(mesh, n):
    ...     out = [[] for _ in range(mesh.size)]
    ...     out[(mesh.rank + 1) % mesh.size] = [np.full(n, mesh.rank)]
    ...     got = mesh.exchange(out, Tag(0, 0))
    ...     total = mesh.allreduce(np.array([mesh.rank]), "sum", Tag(0, 1))
    ...     return [a.tolist() for arrays in got for a in arrays], int(total[0])
    >>> run_sim(shift, 3, 2)
    [([[2, 2]], 3), ([[0, 0]], 3), ([[1, 1]], 3)]
    >>> ends = SimMesh.group(1)
    >>> ends[0].exchange([[np.arange(2)]], Tag(0, 0))[0][0].tolist()
    [0, 1]
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from strata.engine.errors import format_where
from strata.engine.mesh.base import MeshError, MeshStats, Tag
from strata.engine.mesh.wire import (
    END_BYTES,
    ExchangeCollectives,
    check_outgoing,
    check_tag,
    round_cost,
)

#: Default deadline of one round, in seconds.
DEFAULT_TIMEOUT_S = 300.0


class _Hub:
    """The rendezvous shared by a group's ends: inboxes and a generation count.

    A sender appends ``(sender, arrays, messages, bytes)`` to each non-empty
    receiver's inbox, so a round costs every rank work in proportion to the
    peers it really talks to, not to P (empty messages are counted in bulk).
    """

    def __init__(self, size: int, timeout_s: float) -> None:
        self.size = size
        self.timeout_s = timeout_s
        # Two sets of inboxes alternate by round: a rank can be at most one
        # round ahead of the slowest reader (it cannot pass the next meeting
        # alone), and a reader empties its inbox before it arrives at the next.
        self.inboxes: list[list[list[tuple[int, list[np.ndarray], int, int]]]] = [
            [[] for _ in range(size)] for _ in range(2)
        ]
        self._cond = threading.Condition()
        self._arrived: list[int] = []
        self._tag: Tag | None = None
        self._generation = 0
        self._broken = False
        self.failure: tuple[int, str, BaseException | None] | None = None
        self.left: list[int] = []  # in the order the ranks left
        self.missing: list[int] = []  # who had not arrived when a round timed out

    def meet(self, rank: int, tag: Tag) -> bool:
        """Wait until every rank arrived; ``False`` if the group broke or timed out."""
        with self._cond:
            if self._broken:
                return False
            if not self._arrived:
                self._tag = tag
            elif tag != self._tag:
                first, used = self._arrived[0], tuple(self._tag or ())
                what = f"used tag {tuple(tag)} while rank {first} used {used}"
                self._fail(rank, what + " (every rank must make the same rounds)")
                return False
            generation = self._generation
            self._arrived.append(rank)
            if len(self._arrived) == self.size:
                self._arrived = []
                self._generation += 1
                self._cond.notify_all()
                return True
            self._cond.wait_for(
                lambda: self._generation != generation or self._broken,
                self.timeout_s,
            )
            if self._generation != generation:
                return True
            if not self._broken:  # the deadline passed: name who is missing
                here = set(self._arrived)
                self.missing = [r for r in range(self.size) if r not in here]
                self._broken = True
                self._cond.notify_all()
            return False

    def fail(self, rank: int, what: str, error: BaseException | None) -> None:
        """Record the first failure and break every round in progress or to come."""
        with self._cond:
            self._fail(rank, what, error)

    def _fail(self, rank: int, what: str, error: BaseException | None = None) -> None:
        if self.failure is None:
            self.failure = (rank, what, error)
        self._broken = True
        self._cond.notify_all()

    def leave(self, rank: int) -> None:
        """Rank ``rank`` makes no more rounds: a round waiting for it cannot end."""
        with self._cond:
            if rank not in self.left:
                self.left.append(rank)
            self._broken = True
            self._cond.notify_all()


class SimMesh(ExchangeCollectives):
    """One rank's end of an in-process mesh (see the module docstring).

    Build ends with :meth:`group`, or run a function with :func:`run_sim`.
    """

    def __init__(self, hub: _Hub, rank: int) -> None:
        self._hub = hub
        self._rank = rank
        self._stats = MeshStats()
        self._last: Tag | None = None
        self._rounds = 0
        self._closed = False

    @classmethod
    def group(cls, size: int, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[SimMesh]:
        """Return ``size`` ends sharing one hub, rank ``i`` at index ``i``.

        Args:
            size: Number of ranks (>= 1).
            timeout_s: Deadline of one round: a rank that does not arrive in time
                fails the round for all.
        """
        if not isinstance(size, int) or size < 1:
            raise ValueError(format_where("size", "SimMesh.group", ">= 1", repr(size)))
        if not timeout_s > 0:
            raise ValueError(
                format_where("timeout_s", "SimMesh.group", "> 0", repr(timeout_s))
            )
        hub = _Hub(size, timeout_s)
        return [cls(hub, rank) for rank in range(size)]

    @property
    def rank(self) -> int:
        """This rank."""
        return self._rank

    @property
    def size(self) -> int:
        """How many ranks the mesh has."""
        return self._hub.size

    @property
    def stats(self) -> MeshStats:
        """This rank's traffic so far (modelled as ZmqMesh would send it)."""
        return self._stats

    def exchange(
        self, outgoing: Sequence[Sequence[np.ndarray]], tag: Tag
    ) -> list[list[np.ndarray]]:
        """Send ``outgoing[p]`` to every rank ``p``; return ``incoming[p]`` by rank.

        Raises:
            MeshError: Another rank failed, left, or did not arrive in time.
        """
        tag = check_tag(tag, self._last, self._rank)
        check_outgoing(outgoing, self.size, self._rank, tag)
        if self._closed:
            raise self._error(tag, "an open mesh end", "this end was closed")
        self._last = tag
        hub, me, stats, size = self._hub, self._rank, self._stats, self.size
        inboxes = hub.inboxes[self._rounds & 1]
        self._rounds += 1
        talked = 0
        for peer, arrays in enumerate(outgoing):
            if arrays and peer != me:
                posted = list(arrays)
                messages, nbytes = round_cost(posted)
                inboxes[peer].append((me, posted, messages, nbytes))
                stats.frames_sent += messages
                stats.bytes_sent += nbytes
                stats.sent_to[peer] = stats.sent_to.get(peer, 0) + nbytes
                talked += 1
        # Every other peer gets a bare end-of-round marker.
        quiet = size - 1 - talked
        stats.frames_sent += quiet
        stats.bytes_sent += quiet * END_BYTES
        if quiet:
            for peer, arrays in enumerate(outgoing):
                if not arrays and peer != me:
                    stats.sent_to[peer] = stats.sent_to.get(peer, 0) + END_BYTES
        start = time.perf_counter()
        met = hub.meet(me, tag)
        stats.wait_s += time.perf_counter() - start
        stats.rounds += 1
        if not met:
            raise self._broken(tag)
        incoming: list[list[np.ndarray]] = [[] for _ in range(size)]
        incoming[me] = [_read_only(a) for a in outgoing[me]]
        inbox = inboxes[me]
        inboxes[me] = []
        for sender, posted, messages, nbytes in inbox:
            incoming[sender] = [_read_only(a) for a in posted]
            stats.frames_received += messages
            stats.bytes_received += nbytes
        quiet = size - 1 - len(inbox)
        stats.frames_received += quiet
        stats.bytes_received += quiet * END_BYTES
        return incoming

    def close(self) -> None:
        """Leave the group (idempotent): later rounds of the others fail."""
        if not self._closed:
            self._closed = True
            self._hub.leave(self._rank)

    def _broken(self, tag: Tag) -> MeshError:
        hub = self._hub
        if hub.failure is not None:
            rank, what, _ = hub.failure
            return self._error(tag, "every rank to complete it", f"rank {rank} {what}")
        if hub.left:
            first = next((r for r in hub.left if r != self._rank), hub.left[0])
            return self._error(
                tag,
                "every rank to join it",
                f"rank {first} returned or closed its end",
                "every rank must make the same rounds",
            )
        return self._error(
            tag,
            f"every rank within {hub.timeout_s:g} s",
            f"rank(s) {hub.missing} did not arrive",
        )

    def _error(self, tag: Tag, expected: str, got: str, hint: str = "") -> MeshError:
        where = f"SimMesh rank {self._rank} of {self.size}"
        return MeshError(
            format_where(f"round {tuple(tag)}", where, expected, got, hint or None)
        )

    def __repr__(self) -> str:
        return f"SimMesh(rank={self._rank}, size={self.size})"


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def run_sim(
    fn: Callable[..., Any],
    size: int,
    /,
    *args: Any,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    **kwargs: Any,
) -> list[Any]:
    """Run ``fn(mesh, *args, **kwargs)`` on ``size`` threads; results in rank order.

    Every thread is joined before this returns or raises.

    Args:
        fn: The SPMD function; gets its rank's :class:`SimMesh` first.
        size: Number of ranks (threads).
        *args: Positional arguments, the same objects for every rank.
        timeout_s: Deadline of one round.
        **kwargs: Keyword arguments for ``fn``.

    Raises:
        MeshError: A rank raised (named, with its exception as the cause) or a
            round failed.
    """
    ends = SimMesh.group(size, timeout_s=timeout_s)
    hub = ends[0]._hub
    results: list[Any] = [None] * size
    errors: list[BaseException | None] = [None] * size

    def work(mesh: SimMesh) -> None:
        try:
            results[mesh.rank] = fn(mesh, *args, **kwargs)
        except BaseException as exc:
            errors[mesh.rank] = exc
            if not isinstance(exc, MeshError):
                hub.fail(mesh.rank, f"raised {type(exc).__name__}: {exc}", exc)
        finally:
            mesh.close()

    name = getattr(fn, "__name__", "fn")
    threads = [
        threading.Thread(target=work, args=(end,), name=f"sim-mesh-{name}-{end.rank}")
        for end in ends
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if hub.failure is not None:
        rank, what, cause = hub.failure
        raise MeshError(
            format_where(
                f"rank {rank}",
                f"run_sim({name}, size={size})",
                "every rank to return",
                what,
            )
        ) from cause
    for error in errors:
        if error is not None:
            raise error
    return results
